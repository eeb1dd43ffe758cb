"""Deprecated: the rolling-bounce experiment moved to :mod:`static_consumer.demo`."""
