"""Errors of the Spark bridge, in the tree of :mod:`static_consumer._base.errors`.

::

    StaticConsumerError
    ├── ConfigurationError
    │   └── CheckpointError          the checkpoint cannot be used as it is (exit 78)
    ├── RetriableError
    │   └── SinkConflictError        other writers kept the sink busy; the batch was not written (exit 75)
    └── SparkSessionStoppedError     the SparkSession (or its Spark Connect server) is gone (exit 75)
"""

from __future__ import annotations

import logging
from typing import Any

from static_consumer._base.errors import (
    EXIT_TEMPFAIL,
    ConfigurationError,
    RetriableError,
    StaticConsumerError,
)

log = logging.getLogger(__name__)


class SparkSessionStoppedError(StaticConsumerError):
    """The SparkSession stopped (its SparkContext was shut down, the driver JVM died, or the Spark
    Connect server went away) while the runner still needed it; the batch in flight was not committed.

    Not retriable in this process: every later batch would meet the same dead session. Exit and let
    the pod restart (exit 75): the restarted runner builds a new session and reads the batch again.
    """

    exit_code = EXIT_TEMPFAIL


class CheckpointError(ConfigurationError):
    """The runner's checkpoint belongs to something else, or cannot be read or written."""


class SinkConflictError(RetriableError):
    """An exactly-once sink could not take the batch: other writers held its lock too long or kept
    publishing the same partitions first (Parquet), or Delta kept refusing the commit for concurrent
    ones, more often than the sink's attempts allow. Nothing of the batch was written or committed;
    the runner's :class:`~static_consumer.spark.FailurePolicy` may call ``fn`` again."""


def session_stopped(spark: Any, error: BaseException | None = None) -> bool:
    """True when ``spark`` can no longer run anything: a classic session whose SparkContext stopped or
    whose JVM is unreachable, or a Spark Connect session that was stopped or whose server stopped
    answering (``error``, what the batch raised, ran out of the client's retries or names a closed
    session). A classic session is asked (one call to the JVM); a session that cannot be asked counts
    as stopped. A Spark Connect server is not asked again: its client retries for minutes.
    """
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return bool(getattr(spark, "is_stopped", False)) or _server_gone(error)
    context = getattr(spark, "sparkContext", None)
    if context is None:
        return False  # a stand-in without a context (unit tests): nothing to ask
    try:
        jsc = getattr(context, "_jsc", None)
        return jsc is None or bool(jsc.sc().isStopped())
    except Exception as exc:  # noqa: BLE001 - any failure to ask is the answer
        log.debug("the Spark driver did not answer: %r", exc)
        return True


# What a Spark Connect client raises once its server is gone: its retries ran out on an unavailable
# server, or the server no longer knows the session (it restarted).
_GONE = ("RetriesExceeded", "SESSION_CLOSED", "SESSION_NOT_FOUND", "StatusCode.UNAVAILABLE", "UNAVAILABLE")


def _server_gone(error: BaseException | None) -> bool:
    seen = 0
    while error is not None and seen < 10:
        text = f"{type(error).__name__} {error}"
        if any(mark in text for mark in _GONE):
            return True
        error, seen = error.__cause__ or error.__context__, seen + 1
    return False


__all__ = ["CheckpointError", "SinkConflictError", "SparkSessionStoppedError", "session_stopped"]
