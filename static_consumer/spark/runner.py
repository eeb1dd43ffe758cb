"""Feed Spark from a static consumer in micro-batches, committing each batch only after it was processed.

The runner's thread collects a bounded batch with ``StaticConsumer.consume``; a worker thread turns the
previous batch into a pyarrow Table with the schema of Spark's Kafka source, ``createDataFrame``\\ s it
and calls ``fn(df, info)``. Collecting and processing overlap (at most one batch in each state), which
keeps the consumer polling while Spark works. Only the runner's thread touches the consumer: it commits
a batch once ``fn`` returned, and rebalance callbacks run there too (inside ``consume``). When partitions
are revoked, records of them still being collected are dropped (uncommitted, so their next owner reads
them), and if the batch in flight holds any of them the callback waits for it and commits it before the
partitions go. Lost partitions cannot be committed any more: their in-flight records may be read twice.

With a ``checkpoint`` (see :mod:`static_consumer.spark._ledger`) each batch is recorded before ``fn``
sees it and again once ``fn`` returned, which gives every batch a key that survives restarts and
replays an unfinished batch with the same records after a crash: exactly-once with a sink that skips a
key it holds. :meth:`MicroBatchRunner.stop` is bounded by ``shutdown_timeout_s``: a batch still running
then is abandoned uncommitted (its Spark jobs cancelled) and the consumer closes without leaving.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from static_consumer._base.errors import CommitFailedError, RetriableError
from static_consumer._base.records import TopicPartition
from static_consumer._base.retry import RetryPolicy
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import Dispatcher, Fenced, Lost, MembershipListener, Revoked
from static_consumer._core.recovery.runner import DeadLettersFactory
from static_consumer.settings import ConsumerSettings
from static_consumer.spark._batch import BatchLimits, BatchSizer, PendingBatch, commit_offsets
from static_consumer.spark._failures import BatchRecovery
from static_consumer.spark._handoff import FrameMaker, Handoff, SessionLike
from static_consumer.spark._ledger import BatchKey, Ledger, Plan
from static_consumer.spark._progress import LagProbe, progress
from static_consumer.spark._schema import batches_to_table
from static_consumer.spark._work import Attempts, BatchInfo, FailurePolicy, InFlight

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
        self._runner._forget(event.partitions)

    def on_fenced(self, event: Fenced) -> None:
        self._runner._drop(None, "fenced")


class MicroBatchRunner:
    """Runs ``fn(df, info)`` on micro-batches from a :class:`StaticConsumer` built from ``settings``.

    ``spark`` is a SparkSession (see :func:`static_consumer.spark.spark_session`); ``handoff`` says how
    batches reach it (see :mod:`static_consumer.spark._handoff`; ``handoff_dir`` is a directory every
    executor reads, needed for Parquet files with a cluster or Spark Connect). ``checkpoint`` is a
    directory on durable storage (one per group and instance id below it) that makes ``info.key``
    restart-stable and replays an unfinished batch after a crash; ``listeners`` go to the consumer
    and also get a :class:`~static_consumer._core.events.BatchProgress` per batch, with the lag looked up at
    most every ``lag_interval_s`` (None: never). ``failure`` overrides the settings' retries of a failing
    ``fn``; after them the settings' ``failure_action`` applies to the whole batch (docs/failures.md).
    ``consumer_factory``, ``dead_letters``, ``sleep`` and ``clock`` are seams for tests. Up to two
    batches are in memory at once: one being processed and one being collected.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        fn: BatchFn,
        *,
        spark: SessionLike,
        limits: BatchLimits | None = None,
        handoff: Handoff = "auto",
        handoff_dir: str | None = None,
        checkpoint: str | os.PathLike[str] | None = None,
        failure: FailurePolicy | None = None,
        listeners: Sequence[MembershipListener] = (),
        lag_interval_s: float | None = 10.0,
        consumer_factory: ConsumerFactory | None = None,
        dead_letters: DeadLettersFactory | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._frames = FrameMaker(spark, handoff, handoff_dir)
        self._limits = limits or BatchLimits()
        self._budget_s = settings.max_poll_interval_ms / 1000.0
        self._shutdown_s = settings.shutdown_timeout_s
        self._sizer = BatchSizer(self._limits, self._budget_s)
        self._stopped = threading.Event()
        self._stop_at: float | None = None
        self._sleep = sleep or self._stopped.wait
        self._clock = clock
        self._attempts = Attempts(
            fn,
            spark,
            failure or FailurePolicy.from_settings(settings),
            self._budget_s,
            self._stopping,
            self._sleep,
            clock,
        )
        self._pending = PendingBatch()
        self._inflight: InFlight | None = None
        self._refused = False  # a batch's commit was refused since run() last cleared it
        self._next_id = 0
        self._checkpoint = checkpoint
        self._ledger: Ledger | None = None
        # A batch to replay waits this long for the rest of its records (e.g. compacted away meanwhile).
        self._patience_s = max(30.0, 10 * self._limits.max_wait_s)
        self._events = Dispatcher(listeners)
        self._lag = LagProbe(settings, lag_interval_s, clock)
        self._last_launch: float | None = None
        self._since_previous: float | None = None
        factory = consumer_factory or _static_consumer
        self._consumer = factory(settings, [_Guard(self), *listeners])
        self._recovery = BatchRecovery(self._consumer, dead_letters)
        self._collected: PendingBatch | None = None  # the records of the batch in flight

    @property
    def consumer(self) -> StaticConsumer:
        return self._consumer

    @property
    def max_records(self) -> int:
        """The current record limit per batch (lower than configured after slow batches)."""
        return self._sizer.max_records

    def stop(self) -> None:
        """Finish and commit the batch in flight, then return from :meth:`run`; records collected for the
        next batch are left uncommitted (read again after a restart). Bounded by ``shutdown_timeout_s``
        from this call: a batch still running then is abandoned uncommitted and its Spark jobs are
        cancelled, and the consumer closes without leaving the group. Python cannot stop a thread: an
        abandoned ``fn`` keeps running on its daemon thread after :meth:`run` returned, until it returns
        or the process exits. Signal-safe (no I/O)."""
        if self._stop_at is None:
            self._stop_at = self._clock()
        self._stopped.set()
        self._consumer.stop()

    def _stopping(self) -> bool:
        return self._stopped.is_set() or self._consumer.stopping

    def _deadline(self, reserve_for_close: bool = True) -> float | None:
        """When the stop budget runs out (None before stop()); with ``reserve_for_close`` a part of it
        is kept for closing the consumer."""
        if self._stop_at is None:
            return None
        reserve = min(2.0, self._shutdown_s / 4) if reserve_for_close else 0.0
        return self._stop_at + self._shutdown_s - reserve

    def run(self, *, max_batches: int | None = None, idle_timeout_s: float | None = None) -> RunSummary:
        """Start the consumer and process batches until :meth:`stop`, ``max_batches`` batches, or no
        record for ``idle_timeout_s``; then close the consumer (a static member stays in the group).

        Exceptions from ``fn`` (after the retries, with ``failure_action='stop'``), consumer errors such as
        FencedInstanceError, and :class:`~static_consumer.spark.SparkSessionStoppedError` when the
        Spark session died propagate, after the consumer was closed without committing the batch.
        """
        started = self._clock()
        batches = records = 0
        finished = False
        self._recovery.prepare()  # failure_action='dead_letter': its topics checked before joining
        self._consumer.start()
        self._lag.prepare()
        try:
            if self._checkpoint is not None:
                group, instance = self._settings.group_id, self._consumer.instance_id
                self._ledger = Ledger(self._checkpoint, group, instance, clock=self._clock)
            idle_since = self._clock()
            while not self._stopping() and (max_batches is None or batches < max_batches):
                collect_started = self._clock()
                self._collect(collect_started)
                collect_s = self._clock() - collect_started
                if self._stopping():
                    break  # the partial batch was never processed: leave it uncommitted
                batch = self._next_batch()
                if batch is None:
                    self._settle(wait=False)
                    if idle_timeout_s is not None and self._clock() - idle_since >= idle_timeout_s:
                        break
                    continue
                self._refused = False
                self._settle(wait=True)
                if self._stopping():
                    break
                if self._refused and batch[1] is None:
                    # The batch in flight outlived this member's session: its commit was refused and
                    # the next poll reports the partitions lost. The next batch was collected before:
                    # put it back and poll once, so the loss prunes it before anything is launched.
                    self._pending = batch[0]
                    self._serve_callbacks()
                    continue
                records += self._launch(*batch, collect_s)
                batches += 1
                idle_since = self._clock()
            self._settle(wait=True)
            finished = True
        finally:
            self._pending = PendingBatch()
            if not finished:
                self._abandon()
            try:
                self._close()
            finally:
                self._recovery.close()
                self._frames.close()
                self._lag.close()
                if self._ledger is not None:
                    self._ledger.close()
        return RunSummary(batches, records, self._clock() - started)

    def _close(self) -> None:
        deadline = self._deadline(reserve_for_close=False)
        if deadline is None:
            self._consumer.close()
        else:  # what is left of the stop budget, and a moment to tell the broker nothing at all
            self._consumer.close(timeout_s=max(0.5, deadline - self._clock()))

    # -- collecting (runner thread) -------------------------------------------------------------------

    def _collect(self, started: float) -> None:
        """Fill the pending batch until a limit is reached, the wait is over, or a stop is requested;
        meanwhile commit the batch in flight as soon as it is done. While a batch is being replayed,
        collect until it is complete (newer records wait in the pending batch)."""
        limits, deadline, ledger = self._limits, started + self._limits.max_wait_s, self._ledger
        while not self._stopping():
            replaying = ledger is not None and ledger.replaying
            if replaying and self._replay_due():
                break
            if not replaying and self._pending.full(self._sizer.max_records, limits.max_bytes):
                break
            remaining = deadline - self._clock()
            if remaining <= 0:
                break
            room = max(1, self._sizer.max_records - len(self._pending))
            wanted = limits.poll_records if replaying else min(limits.poll_records, room)
            got = self._consumer.consume_batch(wanted, timeout=min(remaining, 1.0))
            if ledger is not None:
                got = ledger.admit(got)
            # Revocations served inside consume() already pruned the batch; keep only records of
            # partitions still owned, in case a record of a just-revoked partition came back with them.
            self._pending.add(got, self._consumer.assignment)
            self._settle(wait=False)

    def _serve_callbacks(self) -> None:
        """One poll: membership callbacks run (a loss prunes the pending batch), and what it returns
        joins the pending batch for the partitions still owned."""
        got = self._consumer.consume_batch(self._limits.poll_records, timeout=0.2)
        if self._ledger is not None:
            got = self._ledger.admit(got)
        self._pending.add(got, self._consumer.assignment)

    def _replay_due(self) -> bool:
        assert self._ledger is not None
        return self._ledger.replay_due(self._consumer.assignment, self._patience_s)

    def _next_batch(self) -> tuple[PendingBatch, tuple[BatchKey, Plan] | None] | None:
        """The batch to hand over next: the one being replayed once it is complete (before anything
        newer), else the pending batch; None when there is nothing to hand over yet."""
        ledger = self._ledger
        if ledger is not None and ledger.replaying:
            if not self._replay_due():
                return None
            taken = ledger.take_replay(self._sizer.max_records, self._limits.max_bytes)
            if taken is None:
                return None
            batch, key, plan, rest = taken
            self._pending.prepend(rest)  # older than what waits there: each partition stays in order
            return batch, (key, plan)
        if not self._pending:
            return None
        # Within the limits even when more was collected (records that waited for a replay to complete,
        # a poll larger than the room left, a limit shrunk after slow batches): the rest waits.
        return self._pending.take(self._sizer.max_records, self._limits.max_bytes), None

    def _revoked(self, partitions: Sequence[TopicPartition]) -> None:
        self._drop(partitions, "revoked")
        self._forget(partitions)
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

    def _forget(self, partitions: Sequence[TopicPartition]) -> None:
        if self._ledger is not None:
            self._ledger.forget(partitions)

    # -- processing (worker thread) -------------------------------------------------------------------

    def _launch(self, batch: PendingBatch, replay: tuple[BatchKey, Plan] | None, collect_s: float) -> int:
        ranges = batch.offsets()
        key: BatchKey | None = None
        plan: Plan | None = None
        if replay is not None:
            key, plan = replay
        elif self._ledger is not None:
            key, plan = self._ledger.plan(ranges)
        if self._ledger is not None and self._ledger.skipped:
            log.info(
                "skipped %d records the sink already holds (read again after a restart)", self._ledger.skipped
            )
            self._ledger.skipped = 0
        info = BatchInfo(
            batch_id=self._next_id,
            records=len(batch),
            bytes=batch.bytes,
            offsets=ranges,
            instance_id=self._consumer.instance_id,
            collect_s=collect_s,
            key=key,
        )
        self._next_id += 1
        self._collected = batch
        # Built here rather than on the worker: it holds the GIL either way, and this leaves the worker
        # with work that mostly runs without it (the Parquet write, Spark), alongside the next collect.
        table = batches_to_table(batch.chunks)

        def work() -> None:
            begun = self._clock()
            try:
                df, cleanup = self._frames(table)
            except Exception as exc:
                dead = self._attempts.stopped(info, exc)
                if dead is not None:
                    raise dead from exc
                raise
            try:
                self._attempts(df, info, begun)
            finally:
                cleanup()

        now = self._clock()
        self._inflight = InFlight(info, work, self._clock, plan=plan).start()
        self._since_previous = None if self._last_launch is None else now - self._last_launch
        self._last_launch = now
        return len(batch)

    # -- committing (runner thread) -------------------------------------------------------------------

    def _settle(self, *, wait: bool) -> None:
        """Commit the batch in flight once it is done (waiting for it if ``wait``, within the stop
        budget once stopping); re-raise its error."""
        flight = self._inflight
        if flight is None or not (wait or flight.done):
            return
        waited = 0.0
        while not flight.wait(min(0.5, self._sizer.slow_s)):  # fn is user code: wait, or give up on it
            deadline = self._deadline()
            if deadline is not None and self._clock() >= deadline:
                self._inflight = None
                self._give_up(flight, f"stop() was called {self._shutdown_s:.0f} s ago (shutdown_timeout_s)")
                return
            waited += min(0.5, self._sizer.slow_s)
            if deadline is None and waited % self._sizer.slow_s < 0.5:
                log.warning(
                    "batch %d is still running after %.0fs without polling; past max_poll_interval_ms "
                    "(%.0fs) the member leaves the group",
                    flight.info.batch_id,
                    waited,
                    self._budget_s,
                )
        self._inflight = None
        collected, self._collected = self._collected, None
        if flight.error is not None:
            attempts = self._attempts.failed_after.pop(flight.info.batch_id, flight.info.attempt)
            if collected is None or not self._recovery.settle_batch(collected, flight.error, attempts):
                raise flight.error
        begun = self._clock()
        if self._ledger is not None and flight.plan is not None:
            self._ledger.done(flight.plan)
        committed = self._commit(commit_offsets(flight.info.offsets, self._consumer.assignment), flight.info)
        self._report(flight, self._clock() - begun, committed)
        warning = self._sizer.observe(flight.info.records, flight.seconds)
        if warning:
            log.warning("batch %d: %s", flight.info.batch_id, warning)

    def _commit(self, offsets: dict[TopicPartition, int], info: BatchInfo) -> bool:
        if not offsets:
            return True
        deadline_s = min(10.0, self._budget_s / 2)
        stop_deadline = self._deadline()
        if stop_deadline is not None:
            deadline_s = max(0.1, min(deadline_s, stop_deadline - self._clock()))
        policy = RetryPolicy(deadline_s=deadline_s, max_attempts=3)
        try:
            # Waited for: the batch's progress reports the broker's answer, and the policy retries it.
            policy.call(
                lambda: self._consumer.commit(offsets, asynchronous=False), sleep=self._sleep, what="commit"
            )
        except (CommitFailedError, RetriableError) as exc:
            self._refused = self._refused or isinstance(exc, CommitFailedError)
            # At-least-once: the batch was processed but its records will be delivered again (with a
            # checkpoint they are recognised then and skipped).
            log.warning("batch %d was processed but not committed: %s", info.batch_id, exc)
            return False
        return True

    def _report(self, flight: InFlight, commit_s: float, committed: bool) -> None:
        info = flight.info
        positions = {tp: r.next_offset for tp, r in info.offsets.items()}
        fields: dict[str, Any] = {
            "group_id": self._settings.group_id,
            "instance_id": self._consumer.instance_id,
            "member_id": self._consumer.member_id,
            "generation": self._consumer.generation,
        }
        event = progress(
            fields,
            batch_id=info.batch_id,
            records=info.records,
            size=info.bytes,
            collect_s=info.collect_s,
            process_s=flight.seconds,
            commit_s=commit_s,
            since_previous_s=self._since_previous,
            lag=self._lag.lag(positions),
            committed=committed,
            version=info.key.version if info.key is not None else None,
        )
        self._events.emit(event)
        self._events.raise_pending()

    def _give_up(self, flight: InFlight, why: str) -> None:
        """Abandon the batch in flight: never commit it, and cancel the Spark jobs it started."""
        log.error(
            "batch %d still running: %s; abandoning it uncommitted (read again after a restart)",
            flight.info.batch_id,
            why,
        )
        self._attempts.cancel(flight.info)

    def _abandon(self) -> None:
        """The run is ending with an error: let the batch in flight finish (bounded), never commit it."""
        flight, self._inflight = self._inflight, None
        if flight is None:
            return
        deadline = self._deadline()
        budget = self._shutdown_s if deadline is None else max(0.0, deadline - self._clock())
        if not flight.wait(budget):
            self._give_up(flight, f"the run is ending with an error and {budget:.0f} s passed")
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
