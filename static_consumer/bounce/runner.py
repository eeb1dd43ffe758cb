"""Deprecated: moved to :mod:`static_consumer.demo.runner`."""

from static_consumer._moved import warn_moved
from static_consumer.demo.runner import *  # noqa: F403 - re-export the moved module's public names

warn_moved("static_consumer.bounce.runner", "static_consumer.demo.runner")
