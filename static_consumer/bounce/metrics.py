"""Deprecated: moved to :mod:`static_consumer.demo.metrics`."""

from static_consumer._moved import warn_moved
from static_consumer.demo.metrics import *  # noqa: F403 - re-export the moved module's public names

warn_moved("static_consumer.bounce.metrics", "static_consumer.demo.metrics")
