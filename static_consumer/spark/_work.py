"""The batch in flight: turned into a DataFrame and handed to ``fn`` (with retries) on a worker thread.

The worker never touches the consumer: polling, rebalance callbacks and commits all stay on the thread
that runs the runner (librdkafka serves callbacks there, and the consumer's bookkeeping is not locked).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from static_consumer._base.records import TopicPartition
from static_consumer.spark._batch import OffsetRange
from static_consumer.spark._errors import SparkSessionStoppedError, session_stopped
from static_consumer.spark._ledger import BatchKey, Plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchInfo:
    """What ``fn`` is told about its batch. ``batch_id`` counts from 0 per runner (for logs);
    ``offsets`` are the first and last offset per partition. ``key`` (with a checkpoint, else None) is
    the batch's identity across restarts: a batch replayed after a crash has the same records and the
    same key (see :class:`~static_consumer.spark.MicroBatchRunner`'s ``checkpoint``), the
    ``txnAppId``/``txnVersion`` of an idempotent Delta write. ``attempt`` is 1, or higher when a
    :class:`FailurePolicy` retries the batch."""

    batch_id: int
    records: int
    bytes: int
    offsets: dict[TopicPartition, OffsetRange]
    instance_id: str | None
    collect_s: float
    attempt: int = 1
    key: BatchKey | None = None


@dataclass(frozen=True)
class FailurePolicy:
    """What happens when ``fn`` raises: ``retries`` more calls with the same DataFrame (exponential
    ``backoff_s`` up to ``max_backoff_s``), then the settings' ``failure_action``: ``stop`` (the runner
    re-raises; nothing of the batch is committed), ``dead_letter`` or ``skip`` (every record of the batch;
    docs/failures.md). Retries also stop when the next one would start past ``max_poll_interval_ms``.
    Without one, the runner takes the settings' ``failure_retries`` and back-off."""

    retries: int = 0
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(f"FailurePolicy values must be >= 0, got {self}")

    @classmethod
    def from_settings(cls, settings: ConsumerSettings) -> FailurePolicy:
        """The settings' ``failure_retries``, ``failure_backoff_s`` and ``failure_max_backoff_s``."""
        return cls(settings.failure_retries, settings.failure_backoff_s, settings.failure_max_backoff_s)

    def wait_s(self, attempt: int) -> float:
        """Pause after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))


class InFlight:
    """One batch being processed by ``work`` on a daemon thread (daemon: a hung ``fn`` cannot keep a
    pod from exiting once the runner gave up on it). ``plan`` is its checkpoint entry, if any."""

    def __init__(
        self,
        info: BatchInfo,
        work: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        plan: Plan | None = None,
    ):
        self.info = info
        self.plan = plan
        self.partitions = frozenset(info.offsets)
        self.error: BaseException | None = None
        self.seconds = 0.0
        self._work = work
        self._clock = clock
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"static-consumer-batch-{info.batch_id}", daemon=True
        )

    def start(self) -> InFlight:
        self._thread.start()
        return self

    def _run(self) -> None:
        begun = self._clock()
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - handed to the runner's thread, which re-raises it
            self.error = exc
        finally:
            self.seconds = self._clock() - begun
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float) -> bool:
        """True once the work finished (successfully or not) within ``timeout_s``."""
        return self._done.wait(timeout_s)


class Attempts:
    """Calls ``fn`` on a batch, again after a failure while the :class:`FailurePolicy` allows it (worker
    thread). The batch's Spark jobs carry a tag, so the runner can cancel them when it gives up on the
    batch; a failure on a session that stopped becomes :class:`SparkSessionStoppedError`, never retried."""

    def __init__(
        self,
        fn: Callable[[DataFrame, BatchInfo], object],
        spark: Any,
        failure: FailurePolicy,
        budget_s: float,
        stopping: Callable[[], bool],
        sleep: Callable[[float], object],
        clock: Callable[[], float],
    ) -> None:
        self._fn, self._spark, self._failure, self._budget_s = fn, spark, failure, budget_s
        self._stopping, self._sleep, self._clock = stopping, sleep, clock
        self.run_tag = f"static-consumer-{uuid.uuid4().hex[:8]}"
        self.failed_after: dict[int, int] = {}  # batch id -> attempts made, for a batch that kept failing

    def tag(self, info: BatchInfo) -> str:
        return f"{self.run_tag}-batch-{info.batch_id}"

    def __call__(self, df: DataFrame, info: BatchInfo, begun: float) -> None:
        tagging = callable(getattr(self._spark, "addTag", None))
        if tagging:
            self._spark.addTag(self.tag(info))  # thread-local: only this batch's jobs carry it
        try:
            self._attempt(df, info, begun)
        finally:
            if tagging:
                self._spark.removeTag(self.tag(info))

    def cancel(self, info: BatchInfo) -> None:
        """Interrupt the Spark jobs ``fn`` started for the batch (the runner gave up on it)."""
        interrupt = getattr(self._spark, "interruptTag", None)
        if callable(interrupt):
            try:
                interrupt(self.tag(info))
            except Exception as exc:  # noqa: BLE001 - best effort on the way out
                log.debug("could not interrupt batch %d's jobs: %r", info.batch_id, exc)

    def stopped(self, info: BatchInfo, error: BaseException) -> SparkSessionStoppedError | None:
        """The error to raise instead of ``error`` when the session is gone, else None."""
        if not session_stopped(self._spark, error):
            return None
        return SparkSessionStoppedError(
            f"the Spark session stopped during batch {info.batch_id} ({info.records} records; nothing of "
            f"it was committed): {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        )

    def _attempt(self, df: DataFrame, info: BatchInfo, begun: float) -> None:
        attempt = 1
        while True:
            try:
                self._fn(df, replace(info, attempt=attempt))
                return
            except Exception as exc:
                dead = self.stopped(info, exc)
                if dead is not None:
                    raise dead from exc
                wait = self._failure.wait_s(attempt)
                why = self._give_up(attempt, self._clock() - begun + wait)
                if why is not None:
                    self.failed_after[info.batch_id] = attempt
                    exc.add_note(
                        f"static_consumer.spark: batch {info.batch_id} ({info.records} records) failed on "
                        f"attempt {attempt}{why}; nothing of it was committed"
                    )
                    raise
                log.warning(
                    "batch %d failed (attempt %d): %r; retrying in %.1fs", info.batch_id, attempt, exc, wait
                )
                self._sleep(wait)
                attempt += 1

    def _give_up(self, attempt: int, elapsed_after_wait: float) -> str | None:
        """Why no retry follows failed attempt ``attempt`` ("" when retries are used up), or None."""
        if attempt > self._failure.retries:
            return ""
        if elapsed_after_wait > self._budget_s:
            return " (another attempt would start past max_poll_interval_ms)"
        if self._stopping():
            return " (stopping)"
        return None


__all__ = ["Attempts", "BatchInfo", "FailurePolicy", "InFlight"]
