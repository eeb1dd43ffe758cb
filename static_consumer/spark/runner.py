"""Feed Spark from a static consumer in micro-batches, committing each batch only after it was processed.

The runner's thread collects a bounded batch with ``StaticConsumer.consume``; a worker thread turns the
previous batch into a pyarrow Table with the schema of Spark's Kafka source, ``createDataFrame``\\ s it
and calls ``fn(df, info)``. Collecting and processing overlap (at most one batch in each state), which
keeps the consumer polling while Spark works. Only the runner's thread touches the consumer: it commits
a batch once ``fn`` returned, and rebalance callbacks run there too (inside ``consume``). When partitions
are revoked, records of them still being collected are dropped (uncommitted, so their next owner reads
them), and if the batch in flight holds any of them the callback waits for it and commits it before the
partitions go. Lost partitions cannot be committed any more: their in-flight records may be read twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from static_consumer.consumer import StaticConsumer
from static_consumer.errors import CommitFailedError, RetriableError
from static_consumer.events import Fenced, Lost, MembershipListener, Revoked
from static_consumer.retry import RetryPolicy
from static_consumer.settings import ConsumerSettings
from static_consumer.spark._batch import BatchLimits, BatchSizer, PendingBatch, commit_offsets
from static_consumer.spark._handoff import FrameMaker, Handoff, SessionLike
from static_consumer.spark._schema import batches_to_table
from static_consumer.spark._work import BatchInfo, FailurePolicy, InFlight
from static_consumer.types import TopicPartition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunSummary:
    """Batches handed to ``fn`` and their records, and how long :meth:`MicroBatchRunner.run` took."""

    batches: int
    records: int
    seconds: float


BatchFn = Callable[["DataFrame", BatchInfo], object]
ConsumerFactory = Callable[[ConsumerSettings, Sequence[MembershipListener]], StaticConsumer]


def _static_consumer(settings: ConsumerSettings, listeners: Sequence[MembershipListener]) -> StaticConsumer:
    return StaticConsumer(settings, listeners=listeners)


class _Guard(MembershipListener):
    """Keeps batches away from partitions this member gives up (runs first among the listeners)."""

    def __init__(self, runner: MicroBatchRunner) -> None:
        self._runner = runner

    def on_revoked(self, event: Revoked) -> None:
        self._runner._revoked(event.partitions)

    def on_lost(self, event: Lost) -> None:
        self._runner._drop(event.partitions, "lost")

    def on_fenced(self, event: Fenced) -> None:
        self._runner._drop(None, "fenced")


class MicroBatchRunner:
    """Runs ``fn(df, info)`` on micro-batches from a :class:`StaticConsumer` built from ``settings``.

    ``spark`` is a SparkSession (see :func:`static_consumer.spark.spark_session`); ``handoff`` says how
    batches reach it (see :mod:`static_consumer.spark._handoff`: ``auto`` writes a local session's
    batches to short-lived Parquet files, else uses ``createDataFrame``). ``listeners`` go to the
    consumer; ``consumer_factory``, ``sleep`` and ``clock`` are seams for tests. Up to two batches are
    in memory at once: one being processed and one being collected.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        fn: BatchFn,
        *,
        spark: SessionLike,
        limits: BatchLimits | None = None,
        handoff: Handoff = "auto",
        failure: FailurePolicy | None = None,
        listeners: Sequence[MembershipListener] = (),
        consumer_factory: ConsumerFactory | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fn = fn
        self._frames = FrameMaker(spark, handoff)
        self._limits = limits or BatchLimits()
        self._failure = failure or FailurePolicy()
        self._budget_s = settings.max_poll_interval_ms / 1000.0
        self._shutdown_s = settings.shutdown_timeout_s
        self._sizer = BatchSizer(self._limits, self._budget_s)
        self._stopped = threading.Event()
        self._sleep = sleep or self._stopped.wait
        self._clock = clock
        self._pending = PendingBatch()
        self._inflight: InFlight | None = None
        self._next_id = 0
        factory = consumer_factory or _static_consumer
        self._consumer = factory(settings, [_Guard(self), *listeners])

    @property
    def consumer(self) -> StaticConsumer:
        return self._consumer

    @property
    def max_records(self) -> int:
        """The current record limit per batch (lower than configured after slow batches)."""
        return self._sizer.max_records

    def stop(self) -> None:
        """Finish and commit the batch in flight, then return from :meth:`run`; records collected for the
        next batch are left uncommitted (read again after a restart). Signal-safe (no I/O)."""
        self._stopped.set()
        self._consumer.stop()

    def _stopping(self) -> bool:
        return self._stopped.is_set() or self._consumer.stopping

    def run(self, *, max_batches: int | None = None, idle_timeout_s: float | None = None) -> RunSummary:
        """Start the consumer and process batches until :meth:`stop`, ``max_batches`` batches, or no
        record for ``idle_timeout_s``; then close the consumer (a static member stays in the group).

        Exceptions from ``fn`` (after the failure policy gave up) and consumer errors such as
        FencedInstanceError propagate, after the consumer was closed without committing the batch.
        """
        started = self._clock()
        batches = records = 0
        finished = False
        self._consumer.start()
        try:
            idle_since = self._clock()
            while not self._stopping() and (max_batches is None or batches < max_batches):
                collect_started = self._clock()
                self._collect(collect_started)
                collect_s = self._clock() - collect_started
                if self._stopping():
                    break  # the partial batch was never processed: leave it uncommitted
                if not self._pending:
                    self._settle(wait=False)
                    if idle_timeout_s is not None and self._clock() - idle_since >= idle_timeout_s:
                        break
                    continue
                self._settle(wait=True)
                if self._stopping():
                    break
                records += self._launch(collect_s)
                batches += 1
                idle_since = self._clock()
            self._settle(wait=True)
            finished = True
        finally:
            self._pending = PendingBatch()
            if not finished:
                self._abandon()
            try:
                self._consumer.close()
            finally:
                self._frames.close()
        return RunSummary(batches, records, self._clock() - started)

    # -- collecting (runner thread) -------------------------------------------------------------------

    def _collect(self, started: float) -> None:
        """Fill the pending batch until a limit is reached, the wait is over, or a stop is requested;
        meanwhile commit the batch in flight as soon as it is done."""
        limits, deadline = self._limits, started + self._limits.max_wait_s
        while not self._pending.full(self._sizer.max_records, limits.max_bytes) and not self._stopping():
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            wanted = min(limits.poll_records, self._sizer.max_records - len(self._pending))
            got = self._consumer.consume_batch(wanted, timeout=min(remaining, 1.0))
            # Revocations served inside consume() already pruned the batch; keep only records of
            # partitions still owned, in case a record of a just-revoked partition came back with them.
            self._pending.add(got, self._consumer.assignment)
            self._settle(wait=False)

    def _revoked(self, partitions: Sequence[TopicPartition]) -> None:
        self._drop(partitions, "revoked")
        flight = self._inflight
        if flight is not None and not flight.partitions.isdisjoint(partitions):
            # Eager rebalance: once this callback returns the partitions may go to another member, so
            # the batch holding their records must be finished and committed first.
            log.info(
                "batch %d holds revoked partitions: finishing and committing it first", flight.info.batch_id
            )
            self._settle(wait=True)

    def _drop(self, partitions: Sequence[TopicPartition] | None, why: str) -> None:
        if partitions is None:
            dropped = len(self._pending)
            self._pending = PendingBatch()
        else:
            dropped = self._pending.drop(partitions)
        if dropped:
            log.info("dropped %d uncommitted records of %s partitions from the next batch", dropped, why)

    # -- processing (worker thread) -------------------------------------------------------------------

    def _launch(self, collect_s: float) -> int:
        batch, self._pending = self._pending, PendingBatch()
        info = BatchInfo(
            batch_id=self._next_id,
            records=len(batch),
            bytes=batch.bytes,
            offsets=batch.offsets(),
            instance_id=self._consumer.instance_id,
            collect_s=collect_s,
        )
        self._next_id += 1
        # Built here rather than on the worker: it holds the GIL either way, and this leaves the worker
        # with work that mostly runs without it (the Parquet write, Spark), alongside the next collect.
        table = batches_to_table(batch.chunks)

        def work() -> None:
            begun = self._clock()
            df, cleanup = self._frames(table)
            try:
                self._call(df, info, begun)
            finally:
                cleanup()

        self._inflight = InFlight(info, work, self._clock).start()
        return len(batch)

    def _call(self, df: DataFrame, info: BatchInfo, begun: float) -> None:
        attempt = 1
        while True:
            try:
                self._fn(df, replace(info, attempt=attempt))
                return
            except Exception as exc:
                wait = self._failure.wait_s(attempt)
                why = self._give_up(attempt, self._clock() - begun + wait)
                if why is not None:
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

    # -- committing (runner thread) -------------------------------------------------------------------

    def _settle(self, *, wait: bool) -> None:
        """Commit the batch in flight once it is done (waiting for it if ``wait``); re-raise its error."""
        flight = self._inflight
        if flight is None or not (wait or flight.done):
            return
        waited = 0.0
        while not flight.wait(self._sizer.slow_s):  # ends when fn returns: user code, not ours to cut
            waited += self._sizer.slow_s
            log.warning(
                "batch %d is still running after %.0fs without polling; past max_poll_interval_ms (%.0fs) "
                "the member leaves the group",
                flight.info.batch_id,
                waited,
                self._budget_s,
            )
        self._inflight = None
        if flight.error is not None:
            raise flight.error
        self._commit(commit_offsets(flight.info.offsets, self._consumer.assignment), flight.info)
        warning = self._sizer.observe(flight.info.records, flight.seconds)
        if warning:
            log.warning("batch %d: %s", flight.info.batch_id, warning)

    def _commit(self, offsets: dict[TopicPartition, int], info: BatchInfo) -> None:
        if not offsets:
            return
        policy = RetryPolicy(deadline_s=min(10.0, self._budget_s / 2), max_attempts=3)
        try:
            policy.call(lambda: self._consumer.commit(offsets), sleep=self._sleep, what="commit")
        except (CommitFailedError, RetriableError) as exc:
            # At-least-once: the batch was processed but its records will be delivered again.
            log.warning("batch %d was processed but not committed: %s", info.batch_id, exc)

    def _abandon(self) -> None:
        """The run is ending with an error: let the batch in flight finish (bounded), never commit it."""
        flight, self._inflight = self._inflight, None
        if flight is None:
            return
        if not flight.wait(self._shutdown_s):
            log.error(
                "batch %d still running after %.0fs; abandoning it", flight.info.batch_id, self._shutdown_s
            )
        else:
            log.warning(
                "batch %d finished but is not committed: the run ended with an error", flight.info.batch_id
            )


__all__ = [
    "BatchFn",
    "BatchInfo",
    "ConsumerFactory",
    "FailurePolicy",
    "MicroBatchRunner",
    "RunSummary",
]
