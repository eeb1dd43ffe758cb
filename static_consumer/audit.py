"""Deprecated: moved to :mod:`static_consumer.admin.audit`."""

from static_consumer._moved import warn_moved
from static_consumer.admin.audit import *  # noqa: F403 - re-export the moved module's public names

warn_moved("static_consumer.audit", "static_consumer.admin.audit")
