"""Membership events: one frozen dataclass per event, delivered to :class:`MembershipListener` objects.

Listeners override only the methods they need. An exception raised by a listener is never swallowed:
the dispatcher keeps delivering the event to the other listeners, then the consumer re-raises the first
exception from the call that produced the event (``poll()``, ``close()``, ...), after librdkafka's
callback has returned, because raising inside librdkafka's callback would leave the rebalance half done.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from static_consumer._base.records import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class MembershipEvent:
    """Fields every event carries.

    ``generation`` is what librdkafka held when the event happened: the group generation under the
    classic protocol (during a revoke still the old one, during an assign the new one), the member epoch
    under the consumer protocol; None before the first join or when the client does not expose it.
    """

    group_id: str
    instance_id: str | None
    member_id: str | None
    generation: int | None = None
    at: float = field(default_factory=time.time)

    # The MembershipListener method for this event (every concrete event names its own).
    hook: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class HeldAssignment:
    """What the group coordinator held for this member's instance id just before it joined.

    ``held`` False: the broker did not know the instance id (first start, session expired, removed), so
    the join makes the group rebalance. ``partitions`` is the assignment the broker kept for it.
    """

    held: bool
    partitions: tuple[TopicPartition, ...] = ()
    group_state: str = ""


def _unknown() -> HeldAssignment | None:
    return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Joining(MembershipEvent):
    """A new client is about to join the group (at start, and again if the client had to be replaced).

    ``lookup_held()`` asks the group coordinator once (the answer is cached) what it still holds for this
    instance id; None for a dynamic member or when the broker could not be asked. The call does I/O
    (up to ``connect_timeout_s``) and must happen inside ``on_joining``: afterwards the join has begun.
    """

    protocol: str
    lookup_held: Callable[[], HeldAssignment | None] = field(default=_unknown, repr=False, compare=False)

    hook: ClassVar[str] = "on_joining"


@dataclass(frozen=True, kw_only=True, slots=True)
class Assigned(MembershipEvent):
    """Partitions were added to this member's assignment."""

    partitions: tuple[TopicPartition, ...]

    hook: ClassVar[str] = "on_assigned"


@dataclass(frozen=True, kw_only=True, slots=True)
class Revoked(MembershipEvent):
    """Partitions are being taken away in an orderly rebalance; once listeners return, the consumer
    commits the processed offsets of these partitions (listeners may still call mark_processed)."""

    partitions: tuple[TopicPartition, ...]

    hook: ClassVar[str] = "on_revoked"


@dataclass(frozen=True, kw_only=True, slots=True)
class Lost(MembershipEvent):
    """Partitions were lost (session timeout, max.poll.interval exceeded): nothing was committed, and
    records processed since the last commit will be delivered again, possibly to another member."""

    partitions: tuple[TopicPartition, ...]

    hook: ClassVar[str] = "on_lost"


@dataclass(frozen=True, kw_only=True, slots=True)
class Fenced(MembershipEvent):
    """Another process joined with this group.instance.id; this consumer is dead and must exit."""

    error: str

    hook: ClassVar[str] = "on_fenced"


@dataclass(frozen=True, kw_only=True, slots=True)
class StandingBy(MembershipEvent):
    """A live process holds this member's group.instance.id (``duplicate_policy='wait'``): this consumer
    has no client and owns nothing, and joins once the id is free. A readiness probe should fail now."""

    reason: str

    hook: ClassVar[str] = "on_standing_by"


@dataclass(frozen=True, kw_only=True, slots=True)
class FatalError(MembershipEvent):
    """librdkafka raised a fatal error other than fencing; this consumer is dead."""

    error: str

    hook: ClassVar[str] = "on_fatal"


@dataclass(frozen=True, kw_only=True, slots=True)
class Closed(MembershipEvent):
    """The consumer closed. ``left_group`` is False for a normal static close (the broker keeps the
    member until the session timeout, so a restart gets the same partitions without a rebalance)."""

    left_group: bool

    hook: ClassVar[str] = "on_closed"


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchProgress(MembershipEvent):
    """A micro-batch of the Spark bridge was processed (like a Structured Streaming query's progress).

    ``records`` went to ``fn`` in ``process_s`` after ``collect_s`` of collecting; ``commit_s`` is the
    checkpoint write and the Kafka commit, ``committed`` whether the Kafka commit succeeded.
    ``input_rows_per_s`` is the arrival rate (records over the time since the previous batch was
    handed over), ``processing_rows_per_s`` is ``records / process_s``. ``lag`` is how many records of
    the batch's partitions were still behind it (end offsets less positions, looked up at most every
    few seconds; None when unknown). ``version`` is the batch's restart-stable identity when the runner
    has a checkpoint.
    """

    batch_id: int
    records: int
    bytes: int
    collect_s: float
    process_s: float
    commit_s: float
    input_rows_per_s: float
    processing_rows_per_s: float
    lag: int | None
    committed: bool
    version: int | None = None

    hook: ClassVar[str] = "on_batch"


@dataclass(frozen=True, kw_only=True, slots=True)
class CommitRefused(MembershipEvent):
    """The broker refused a commit of ``offsets`` (``commit()``, and so the batch loops): the partitions
    moved, or this member's session or generation ended (a lost session, a handler blocked past
    ``max_poll_interval_ms``). Nothing was committed; the records come again, to whoever owns the
    partitions now (at-least-once). The consumer goes on: the client rejoins by itself, and the loops
    the library offers (``run_until_sigterm``, the asyncio runner, the Spark runner) keep consuming.

    ``error`` is Kafka's name for the refusal (``UNKNOWN_MEMBER_ID``, ``ILLEGAL_GENERATION``,
    ``REBALANCE_IN_PROGRESS``, ``FENCED_MEMBER_EPOCH``, ``STALE_MEMBER_EPOCH``; ``FENCED_INSTANCE_ID``
    when a classic client had lost its own session), ``reason`` the client's text.
    """

    offsets: tuple[tuple[TopicPartition, int], ...]
    error: str
    reason: str = ""

    @property
    def partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(tp for tp, _offset in self.offsets)

    hook: ClassVar[str] = "on_commit_refused"


StallVerdict = Literal["ok", "lost", "gone", "unknown", "expired"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Stalled(MembershipEvent):
    """The consumer went ``gap_s`` between two returns from the client, more than ``threshold_s`` (half
    the session timeout): a GC pause, SIGSTOP, a frozen node, or slow processing. Its session may have
    expired meanwhile, and records fetched before the gap may belong to another member now, so it
    checked before handing any out. ``verdict``:

    - ``ok``: the broker accepted a commit of offsets already processed: still the owner, nothing dropped.
    - ``lost``: the client reported the partitions lost in the same call; their records were dropped.
    - ``gone``: the broker refused that commit (unknown member, old generation or epoch): the records of
      the partitions it owned were dropped, and the client was given time to report the loss.
    - ``unknown``: no answer either way (nothing committed yet, coordinator unreachable): after a short
      wait for the client to report a loss, the records of partitions still owned were handed out.
    - ``expired``: partitions the broker had disowned were not reported lost within a session timeout,
      so their dropped records are read again (``rewound``).

    ``dropped``: records not handed out; ``rewound``: (partition, offset) pairs the client was sent back
    to so that no dropped record of a partition still owned is skipped; ``waited_s``: time the check took.
    """

    gap_s: float
    threshold_s: float
    verdict: StallVerdict
    dropped: int = 0
    rewound: tuple[tuple[TopicPartition, int], ...] = ()
    waited_s: float = 0.0

    hook: ClassVar[str] = "on_stalled"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordsRetried(MembershipEvent):
    """The batch handler raised, and the runner calls it again with the same ``records`` records after
    ``wait_s`` (docs/failures.md). ``partition`` and ``offset`` are the record the handler named with
    ``RecordFailedError``, else the first record of the call; ``attempt`` counts the failed attempts so
    far; ``error`` is the handler's exception as ``Type: message`` (secrets masked)."""

    partition: TopicPartition
    offset: int
    records: int
    attempt: int
    wait_s: float
    error: str

    hook: ClassVar[str] = "on_records_retried"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordDeadLettered(MembershipEvent):
    """The record at ``partition`` / ``offset`` kept failing after ``attempts`` attempts and was written
    to ``dead_letter`` (topic, partition, offset), acknowledged; its source offset is committed after
    this event (``failure_action='dead_letter'``)."""

    partition: TopicPartition
    offset: int
    attempts: int
    error: str
    dead_letter: tuple[str, int, int]

    hook: ClassVar[str] = "on_record_dead_lettered"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordSkipped(MembershipEvent):
    """The record at ``partition`` / ``offset`` kept failing after ``attempts`` attempts and was left
    unhandled; its offset is committed after this event (``failure_action='skip'``)."""

    partition: TopicPartition
    offset: int
    attempts: int
    error: str

    hook: ClassVar[str] = "on_record_skipped"


class MembershipListener:
    """Base class for listeners; every method is an optional no-op.

    The consumer hands every event to :meth:`on_event`, which calls the event's own method (``on_assigned``
    for :class:`Assigned`, ...: the event's ``hook``). Override the methods of the events you care about,
    or :meth:`on_event` to see every event in one place (an event log, a bridge to another thread).
    """

    def on_event(self, event: MembershipEvent) -> None:
        """Every event, whatever its type; by default, the event's own method."""
        getattr(self, event.hook)(event)

    def on_joining(self, event: Joining) -> None:
        """A client is about to join the group."""

    def on_assigned(self, event: Assigned) -> None:
        """Partitions were assigned."""

    def on_revoked(self, event: Revoked) -> None:
        """Partitions are being revoked (called before the consumer commits processed offsets, so a
        listener can flush its own state and call ``mark_processed``)."""

    def on_lost(self, event: Lost) -> None:
        """Partitions were lost without a chance to commit."""

    def on_fenced(self, event: Fenced) -> None:
        """This member was fenced."""

    def on_standing_by(self, event: StandingBy) -> None:
        """A live process holds the instance id; this member stands by until it is free."""

    def on_fatal(self, event: FatalError) -> None:
        """A fatal error killed the consumer."""

    def on_closed(self, event: Closed) -> None:
        """The consumer closed."""

    def on_batch(self, event: BatchProgress) -> None:
        """A micro-batch of :class:`~static_consumer.spark.MicroBatchRunner` was processed."""

    def on_stalled(self, event: Stalled) -> None:
        """A gap longer than half the session timeout was checked before records were handed out."""

    def on_commit_refused(self, event: CommitRefused) -> None:
        """The broker refused a commit (the partitions moved, or the session ended); the records come
        again, and the consumer goes on."""

    def on_records_retried(self, event: RecordsRetried) -> None:
        """The batch handler raised; the runner calls it again after a wait."""

    def on_record_dead_lettered(self, event: RecordDeadLettered) -> None:
        """A record that kept failing was written to its dead-letter topic (acknowledged)."""

    def on_record_skipped(self, event: RecordSkipped) -> None:
        """A record that kept failing was skipped."""


class Dispatcher:
    """Delivers events to listeners, collecting their exceptions for the caller to re-raise."""

    def __init__(self, listeners: Sequence[MembershipListener]) -> None:
        self._listeners = tuple(listeners)
        self._pending: list[Exception] = []

    def emit(self, event: MembershipEvent) -> None:
        for listener in self._listeners:
            try:
                listener.on_event(event)
            except Exception as exc:  # noqa: BLE001 - kept and re-raised by raise_pending()
                self._pending.append(exc)

    def take(self) -> list[Exception]:
        """The collected exceptions, oldest first; clears them."""
        pending, self._pending = self._pending, []
        return pending

    def raise_pending(self) -> None:
        """Raise the first collected listener exception, noting any later ones on it."""
        pending = self.take()
        if not pending:
            return
        first = pending[0]
        for other in pending[1:]:
            first.add_note(f"another listener also raised: {other!r}")
            log.error("membership listener raised", exc_info=other)
        raise first


__all__ = [
    "Assigned",
    "BatchProgress",
    "Closed",
    "CommitRefused",
    "Dispatcher",
    "FatalError",
    "Fenced",
    "HeldAssignment",
    "Joining",
    "Lost",
    "MembershipEvent",
    "MembershipListener",
    "RecordDeadLettered",
    "RecordSkipped",
    "RecordsRetried",
    "Revoked",
    "StallVerdict",
    "Stalled",
    "StandingBy",
]
