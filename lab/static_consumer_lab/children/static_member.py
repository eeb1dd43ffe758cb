"""The ``static`` mode of the child consumer: the user loop, :func:`static_consumer.run_until_sigterm`, on a
StaticConsumer whose membership events and commits are streamed. Tests, benchmarks and the demo run what
a pod's main runs: no switch here changes what the library does.

With a ``workload`` (the demo's stateful handler) the loop is the one a user writes for a handler that
returns before it processed everything it was handed (a partition's records wait while its state is
rebuilt): the library's pieces (``install_sigterm_handler``, ``consume``, a ``BatchCommitter``, ``close``)
committing only the records processed, as ``run_until_sigterm``, which commits each batch its handler
returned from, cannot."""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from static_consumer import (
    Assigned,
    Closed,
    CommitRefused,
    ConsumerSettings,
    FatalError,
    Fenced,
    Joining,
    Lost,
    MembershipListener,
    Record,
    RetriableError,
    Revoked,
    Stalled,
    StaticConsumer,
    StaticConsumerError,
    TopicPartition,
    exit_code_for,
    install_sigterm_handler,
    run_until_sigterm,
)
from static_consumer._core.consumer import Commitable
from static_consumer._core.shutdown import BatchCommitter, consume_until_stopped
from static_consumer_lab.children.workload import Workload

Emit = Callable[..., None]
POLL_S = 0.2  # the loop's poll timeout: short, so a stop request is seen soon


def _tps(partitions: tuple[TopicPartition, ...]) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in partitions)


class _Streamer(MembershipListener):
    """Streams membership events; ``generation`` is the group generation (classic) or member epoch.
    With ``ready_on_join``, the first ``Joining`` is streamed as ``ready`` (start() passed the identity and
    capability checks and the client is subscribing)."""

    def __init__(self, emit: Emit, work: Workload | None, *, ready_on_join: bool = True) -> None:
        self.emit = emit
        self.work = work
        self.ready = not ready_on_join

    def on_joining(self, event: Joining) -> None:
        if not self.ready:
            self.ready = True
            self.emit("ready", instance_id=event.instance_id, static=event.instance_id is not None)

    def on_assigned(self, event: Assigned) -> None:
        self.emit(
            "assigned",
            partitions=_tps(event.partitions),
            member_id=event.member_id,
            generation=event.generation,
        )
        if self.work is not None:
            self.work.assigned((tp.topic, tp.partition) for tp in event.partitions)

    def on_revoked(self, event: Revoked) -> None:
        self.emit("revoked", partitions=_tps(event.partitions), generation=event.generation)
        if self.work is not None:
            self.work.revoked((tp.topic, tp.partition) for tp in event.partitions)

    def on_lost(self, event: Lost) -> None:
        self.emit("lost", partitions=_tps(event.partitions), generation=event.generation)
        if self.work is not None:
            self.work.revoked((tp.topic, tp.partition) for tp in event.partitions)

    def on_fenced(self, event: Fenced) -> None:
        self.emit("fenced", error=event.error)

    def on_fatal(self, event: FatalError) -> None:
        self.emit("fatal", error=event.error)

    def on_closed(self, event: Closed) -> None:
        self.emit("closed", left_group=event.left_group)

    def on_commit_refused(self, event: CommitRefused) -> None:
        # The records come again (at-least-once); the user loop goes on.
        offsets = sorted([tp.topic, tp.partition, o] for tp, o in event.offsets)
        self.emit("commit_refused", error=event.error, reason=event.reason, offsets=offsets)

    def on_stalled(self, event: Stalled) -> None:
        rewound = sorted([tp.topic, tp.partition, offset] for tp, offset in event.rewound)
        self.emit(
            "stalled",
            gap_s=event.gap_s,
            verdict=event.verdict,
            dropped=event.dropped,
            threshold_s=event.threshold_s,
            rewound=rewound,
            waited_s=event.waited_s,
            member_id=event.member_id,
        )


class _Unfinished(MembershipListener):
    """What the handler handed its workload and the workload has not processed yet, in order per partition,
    so that what the workload finished (:meth:`Workload.take_done`, the next offset per partition) is
    committed as the Records the consumer handed out: by the loop (``commit(records)``) and, for
    partitions being revoked, by the revoke (``mark_processed`` in ``on_revoked``, which the library
    commits before the partitions go). Listed after :class:`_Streamer`, whose revoke finishes what waits."""

    def __init__(self, work: Workload) -> None:
        self.work = work
        self.mark: Callable[[Record], None] = lambda _record: None  # consumer.mark_processed, once it exists
        self._records: dict[tuple[str, int], deque[Record]] = {}

    def handed_out(self, records: list[Record]) -> None:
        for record in records:
            self._records.setdefault((record.topic, record.partition), deque()).append(record)

    def finished(self, partitions: Iterable[tuple[str, int]] | None = None) -> list[Record]:
        """Per partition, the last record the workload processed since the last call (one marks all
        before it: a partition's records are processed in order)."""
        done = []
        for key, next_offset in self.work.take_done(partitions).items():
            waiting, last = self._records.get(key), None
            while waiting and waiting[0].offset < next_offset:
                last = waiting.popleft()
            if last is not None:
                done.append(last)
        return done

    def on_revoked(self, event: Revoked) -> None:
        gone = [(tp.topic, tp.partition) for tp in event.partitions]
        for record in self.finished(gone):  # still ours: the revoke commits them
            self.mark(record)
        self._forget(gone)

    def on_lost(self, event: Lost) -> None:
        gone = [(tp.topic, tp.partition) for tp in event.partitions]
        self.finished(gone)  # another member may own them: nothing is committed for them
        self._forget(gone)

    def _forget(self, partitions: list[tuple[str, int]]) -> None:
        for key in partitions:
            self._records.pop(key, None)


def block_if_asked(trigger: str | None, emit: Emit) -> None:
    """A handler that blocks when told: when the file ``trigger`` exists, read "SECONDS" or
    "SECONDS MAX_SECONDS" from it, remove it and block between handing the batch out and committing it:
    SECONDS, or with MAX_SECONDS at least SECONDS and until a file ``trigger + ".release"`` appears (at
    most MAX_SECONDS), so a test can hold the handler until what it waits for happened."""
    if not trigger or not os.path.exists(trigger):
        return
    least, *most = (float(word) for word in Path(trigger).read_text().split())
    os.unlink(trigger)
    emit("blocking", seconds=least)
    began = time.monotonic()
    time.sleep(least)
    release = Path(trigger + ".release")
    while most and not release.exists() and time.monotonic() - began < most[0]:
        time.sleep(0.05)
    release.unlink(missing_ok=True)
    emit("unblocked")


class _Reporting(StaticConsumer):
    """A StaticConsumer whose commits are also streamed (``committed`` with the offsets sent, or owed to
    the commit in flight, by the library's default commit, which does not wait for the broker; with
    ``asynchronous=False`` the offsets the broker took; ``commit_deferred`` for a transient failure).
    Observation only: the loop that calls commit() is the library's own (:func:`run_until_sigterm`'s
    BatchCommitter), with the library's default; a refused commit is streamed from its ``CommitRefused``
    event (``_Streamer``)."""

    def __init__(self, settings: ConsumerSettings, emit: Emit, **kwargs: Any) -> None:
        super().__init__(settings, **kwargs)
        self._emit = emit

    def commit(self, what: Commitable = None, *, asynchronous: bool = True) -> dict[TopicPartition, int]:
        called = time.time()
        try:
            sent = super().commit(what, asynchronous=asynchronous)
        except RetriableError:
            self._emit("commit_deferred")  # BatchCommitter keeps the offsets for the next commit
            raise
        self._emit(
            "committed", offsets=sorted([tp.topic, tp.partition, o] for tp, o in sent.items()), called=called
        )
        return sent


def _handler(
    spec: dict[str, Any], emit: Emit, consumer: StaticConsumer, work: Workload | None
) -> Callable[[list[Record]], None]:
    """What the child does with a batch inside the user loop: stream it (or run the workload on it),
    take ``process_s``, block when told, and stop the consumer after ``max_records``."""
    max_records = spec.get("max_records")
    seen = 0

    def handle(records: list[Record]) -> None:
        nonlocal seen
        returned = time.time()  # handed out now: a freeze may come before the records event
        # When the library's stall guard checked them (its clock, in wall time): a freeze can also fall
        # between that check and the hand-over. Read after ``returned``, so a freeze between the two
        # reads dates the check earlier, never later, than a batch handed out before the freeze.
        checked = returned - (time.monotonic() - consumer.checked_at)
        seen += len(records)
        if work is not None:
            work.settle()
            work.process([(r.topic, r.partition, r.offset, r.timestamp_ms) for r in records])
        else:
            emit(
                "records",
                records=[[r.topic, r.partition, r.offset] for r in records],
                returned=returned,
                checked=checked,
            )
        time.sleep(float(spec.get("process_s", 0)))
        block_if_asked(spec.get("block"), emit)
        if max_records is not None and seen >= max_records:
            consumer.stop()  # the batch is still committed, then the loop closes

    return handle


def _leave_after(consumer: StaticConsumer, handle: Callable[[list[Record]], None], batch: int) -> None:
    """A scale-down pod (``leave_on_exit``): run_until_sigterm's loop and signal handler, then
    ``leave_group()`` where run_until_sigterm closes."""
    handler = install_sigterm_handler(consumer)
    try:
        consume_until_stopped(consumer, handle, max_records=batch, poll_timeout_s=POLL_S)
        consumer.leave_group()
    finally:
        consumer.close()
        handler.restore()


def _run_stateful(
    consumer: StaticConsumer,
    handle: Callable[[list[Record]], None],
    unfinished: _Unfinished,
    batch: int,
    *,
    leave: bool,
) -> None:
    """run_until_sigterm's loop, signal handler and close (or ``leave_group()`` with ``leave``), committing
    after each poll what the workload processed (records a rebuild held back once they were processed,
    also when no new record came), never a record still waiting: a SIGKILL leaves those to the
    partition's next owner."""
    handler = install_sigterm_handler(consumer)
    committer = BatchCommitter(consumer)
    try:
        consumer.start()
        while not consumer.stopping:
            records = consumer.consume(batch, POLL_S)
            if records:
                unfinished.handed_out(records)
                handle(records)
            done = unfinished.finished()
            if done:
                committer.commit(done)
        if leave:
            consumer.leave_group()
    finally:
        try:
            consumer.close(timeout_s=handler.close_timeout(consumer.settings.shutdown_timeout_s))
        finally:
            handler.restore()


def run_static(
    spec: dict[str, Any], emit: Emit, should_stop: Callable[[], bool], **consumer_options: Any
) -> int:
    """Run the user loop, :func:`run_until_sigterm` (SIGTERM stops it, as in a pod), streaming what
    happens; ``max_runtime_s`` and ``max_records`` stop it as a SIGTERM would. The exit code is
    :func:`exit_code_for`'s, as in README's pod main. With a ``workload``: :func:`_run_stateful`.
    ``consumer_options`` go to the StaticConsumer (unit tests: a fake adapter and probe)."""
    settings = ConsumerSettings(**spec["settings"])
    # Records waiting for a rebuild are finished before their partition is revoked (at a rebalance, or at
    # close) and committed by the revoke; a SIGKILL leaves them uncommitted (_run_stateful).
    work = (
        Workload(spec["workload"], emit, finish_on_revoke=True) if spec.get("workload") is not None else None
    )
    unfinished = _Unfinished(work) if work is not None else None
    listeners: list[MembershipListener] = [_Streamer(emit, work)]
    if unfinished is not None:
        listeners.append(unfinished)
    if spec.get("event_log"):  # a JSONL membership event log at this path (appended to)
        from static_consumer.telemetry import EventLog

        listeners.append(EventLog(spec["event_log"]))
    if spec.get("otel"):  # OpenTelemetry metrics, streamed as "metrics" events
        from static_consumer_lab.children.otel_totals import otel_listeners

        listeners.extend(otel_listeners(emit))
    consumer = _Reporting(settings, emit, listeners=listeners, env=spec.get("env", {}), **consumer_options)
    handle = _handler(spec, emit, consumer, work)
    if unfinished is not None:
        unfinished.mark = consumer.mark_processed
    batch = int(spec.get("batch", 500))
    done = threading.Event()
    timer = threading.Timer(float(spec.get("max_runtime_s", 300)), consumer.stop)  # every run ends
    timer.daemon = True
    timer.start()
    if work is not None:  # liveness ticks, also while no record comes
        threading.Thread(target=_tick, args=(work, done), daemon=True).start()
    if should_stop():  # SIGTERM before the loop's own handler was installed
        consumer.stop()
    try:
        if unfinished is not None:
            _run_stateful(consumer, handle, unfinished, batch, leave=bool(spec.get("leave_on_exit")))
        elif spec.get("leave_on_exit"):
            _leave_after(consumer, handle, batch)
        else:
            run_until_sigterm(consumer, handle, max_records=batch, poll_timeout_s=POLL_S)
        return 0
    except StaticConsumerError as exc:  # README's pod main: the exit code says what happened
        emit("error", kind_of=type(exc).__name__, reason=str(exc), exit_code=exc.exit_code)
        return exit_code_for(exc)
    finally:
        done.set()
        timer.cancel()


def _tick(work: Workload, done: threading.Event) -> None:
    while not done.wait(0.2):
        work.tick()
