"""Deprecated: moved to :mod:`static_consumer.admin.cli`."""

from static_consumer._moved import warn_moved
from static_consumer.admin.cli import *  # noqa: F403 - re-export the moved module's public names

warn_moved("static_consumer.cli", "static_consumer.admin.cli")

if __name__ == "__main__":
    from static_consumer.admin.cli import main

    raise SystemExit(main())
