"""A scripted fake of the consumer adapter, for unit tests only (integration tests use the real client).

It mimics the librdkafka behaviours the core relies on, as observed on a real broker: rebalance
callbacks run inside poll/consume/close; fencing arrives as a ``_FATAL`` error event (not as an
exception); after a fatal error polls return None and commits raise ``_FATAL``; close() of a member
that still owns partitions runs the revoke callback first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from static_consumer._base.codes import (
    FATAL,
    FENCED_INSTANCE_ID,
    MAX_POLL_EXCEEDED,
    TRANSPORT,
    UNRELEASED_INSTANCE_ID,
)
from static_consumer._base.records import Record, RecordBatch, RecordList, TopicPartition
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import FatalError, MembershipEvent, MembershipListener
from static_consumer._core.seam import AdapterError, CommitResult, PollError, RebalanceCallback
from static_consumer._core.seams import Seams
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.groups import GroupDescription, GroupMember
from static_consumer.settings import ConsumerSettings
from static_consumer.telemetry import EventLog

FENCED_TEXT = (
    "Fatal error: Broker: Static consumer fenced by other consumer with same group.instance.id: "
    "Fatal consumer error: Broker: Static consumer fenced by other consumer with same group.instance.id"
)
UNRELEASED_TEXT = (
    "Fatal error: Broker: The instance ID is still used by another member in the consumer group: "
    "ConsumerGroupHeartbeat fatal error: Broker: The instance ID is still used by another member in "
    "the consumer group"
)
FENCED = PollError(FATAL, "_FATAL", FENCED_TEXT, fatal=True, retriable=False, cause=FENCED_INSTANCE_ID)
UNRELEASED = PollError(
    FATAL, "_FATAL", UNRELEASED_TEXT, fatal=True, retriable=False, cause=UNRELEASED_INSTANCE_ID
)
TRANSPORT_ERROR = PollError(
    TRANSPORT, "_TRANSPORT", "127.0.0.1:19092/1: Connection refused", fatal=False, retriable=True
)
UNKNOWN_MEMBER = PollError(25, "UNKNOWN_MEMBER_ID", "Commit failed: Broker: Unknown member", False, False)
MAX_POLL = PollError(
    MAX_POLL_EXCEEDED,
    "_MAX_POLL_EXCEEDED",
    "Application maximum poll interval (7000ms) exceeded by 72ms",
    False,
    False,
)

# Kafka 4.3-like capabilities (JoinGroup v9, LeaveGroup v5, ConsumerGroupHeartbeat present).
MODERN = BrokerCapabilities(
    api_versions={11: (0, 9), 13: (0, 5), 68: (0, 1)},
    group_min_session_timeout_ms=1000,
    group_max_session_timeout_ms=1800000,
    group_initial_rebalance_delay_ms=0,
    consumer_session_timeout_ms=45000,
    broker_version="4.3",
)
# Kafka 2.2-like: JoinGroup v4 (no group.instance.id), no KIP-848.
OLD = BrokerCapabilities(
    api_versions={11: (0, 4), 13: (0, 2)},
    group_min_session_timeout_ms=6000,
    group_max_session_timeout_ms=300000,
    broker_version="2.2",
)


class FakeClock:
    """A monotonic clock that moves only when told (``advance``), e.g. by a ``Freeze`` step."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def tp(partition: int, topic: str = "t") -> TopicPartition:
    return TopicPartition(topic, partition)


def rec(partition: int, offset: int, topic: str = "t", value: bytes = b"v") -> Record:
    return Record(topic, partition, offset, None, value, 1_700_000_000_000, 1)


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Revoke:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Lose:
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class Freeze:
    """The process stops for ``seconds`` inside this call (SIGSTOP, a GC pause): advances the clock."""

    seconds: float


@dataclass(frozen=True)
class OutOfBand:
    """An error reported through error_cb rather than as a message."""

    error: PollError


@dataclass(frozen=True)
class CommitEnds:
    """The broker's answer to the commit in flight arrives and this call serves it (on_commit)."""


Step = Assign | Revoke | Lose | Freeze | OutOfBand | CommitEnds | Record | PollError | None


@dataclass
class FakeAdapter:
    """Serves its script one step per poll; rebalance steps run the callbacks and continue."""

    config: dict[str, Any]
    script: deque[Step] = field(default_factory=deque)
    calls: list[str] = field(default_factory=list)
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    commit_failures: deque[PollError] = field(default_factory=deque)
    owned: set[TopicPartition] = field(default_factory=set)
    dead: bool = False
    member: str | None = "member-1"
    gen: int | None = None  # what generation() reports (librdkafka: generation or member epoch)
    # Manual assignment (ordinal mode): metadata, the group's committed offsets, assign() calls.
    partition_count: dict[str, int | None] = field(default_factory=dict)
    stored: dict[TopicPartition, int] = field(default_factory=dict)
    metadata_failures: deque[PollError] = field(default_factory=deque)
    starts: list[dict[TopicPartition, int | None]] = field(default_factory=list)
    # Subscription entries (names or patterns) the cluster has no topic for; unmatched() reports them.
    missing_topics: set[str] = field(default_factory=set)
    topic_reads: int = 0
    topic_read_failures: deque[PollError] = field(default_factory=deque)
    seeks: list[tuple[TopicPartition, int]] = field(default_factory=list)
    freeze: Callable[[float], object] | None = None  # what a Freeze step does (advance a fake clock)
    # Commits that do not wait (begin_commit): what was begun, and whether one stays in flight until
    # end_commit() (hold_commits: the real client serves its result in a later poll/consume).
    begun: list[dict[TopicPartition, int]] = field(default_factory=list)
    hold_commits: bool = False
    _in_flight: dict[TopicPartition, int] | None = None
    _result: CommitResult | None = None
    _callbacks: dict[str, RebalanceCallback] = field(default_factory=dict)
    _errors: list[PollError] = field(default_factory=list)

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        on_assign: RebalanceCallback,
        on_revoke: RebalanceCallback,
        on_lost: RebalanceCallback,
    ) -> None:
        self.calls.append(f"subscribe {','.join(topics)}")
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}

    def assign(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        self.calls.append("assign")
        self.starts.append(dict(partitions))
        self.owned = set(partitions)

    def incremental_assign(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        self.calls.append("incremental_assign")
        self.starts.append(dict(partitions))
        self.owned.update(partitions)

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None:
        self.calls.append("incremental_unassign")
        self.owned.difference_update(partitions)

    def partition_counts(self, topics: Sequence[str], timeout: float) -> dict[str, int | None]:
        self.calls.append("metadata")
        if self.metadata_failures:
            raise AdapterError(self.metadata_failures.popleft())
        return {t: self.partition_count.get(t) for t in topics}

    def unmatched(self, subscription: Sequence[str], timeout: float) -> list[str]:
        self.topic_reads += 1
        if self.topic_read_failures:
            raise AdapterError(self.topic_read_failures.popleft())
        return [entry for entry in subscription if entry in self.missing_topics]

    def _step(self) -> Record | PollError | None:
        while self.script and not self.dead:
            step = self.script.popleft()
            if isinstance(step, Assign):
                self.owned.update(step.partitions)
                self._callbacks["assign"](list(step.partitions))
            elif isinstance(step, Revoke):
                self._callbacks["revoke"](list(step.partitions))
                self.owned.difference_update(step.partitions)
            elif isinstance(step, Lose):
                self._callbacks["lost"](list(step.partitions))
                self.owned.difference_update(step.partitions)
            elif isinstance(step, Freeze):
                assert self.freeze is not None, "a Freeze step needs FakeFactory(freeze=...)"
                self.freeze(step.seconds)
            elif isinstance(step, CommitEnds):
                self.end_commit()
            elif isinstance(step, OutOfBand):
                self._errors.append(step.error)
                return None
            else:
                if isinstance(step, PollError) and step.fatal:
                    self.dead = True
                return step
        return None

    def poll(self, timeout: float) -> Record | PollError | None:
        self.calls.append("poll")
        return self._step()

    def consume(self, max_records: int, timeout: float) -> list[Record | PollError]:
        self.calls.append("consume")
        out: list[Record | PollError] = []
        while len(out) < max_records and self.script and not self.dead:
            item = self._step()
            if item is None:
                break  # a None step ends the batch, like consume()'s timeout
            out.append(item)
            if isinstance(item, PollError):
                break
        if all(isinstance(item, Record) for item in out):
            return RecordList(out)  # type: ignore[arg-type, return-value]  # like the confluent adapter
        return out

    def consume_batch(self, max_records: int, timeout: float) -> RecordBatch | list[Record | PollError]:
        # Like the confluent adapter: columns when the batch is all records, else the items.
        items = self.consume(max_records, timeout)
        if items and all(isinstance(item, Record) for item in items):
            return RecordBatch.from_records([item for item in items if isinstance(item, Record)])
        return items

    def commit(self, offsets: Mapping[TopicPartition, int] | None) -> None:
        self.calls.append("commit")
        if self.dead:
            raise AdapterError(PollError(FATAL, "_FATAL", "Commit failed: Local: Fatal error", True, False))
        if self.commit_failures:
            raise AdapterError(self.commit_failures.popleft())
        self.commits.append(dict(offsets or {}))

    def begin_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commits at once (a commit that ends before anyone looks), unless ``hold_commits``: then it
        stays in flight until :meth:`end_commit`."""
        assert self._in_flight is None and self._result is None, "a second commit in flight"
        self.begun.append(dict(offsets))
        self._in_flight = dict(offsets)
        if not self.hold_commits:
            self.end_commit()

    def end_commit(self) -> None:
        """The commit in flight reaches the broker and its answer comes back."""
        assert self._in_flight is not None, "no commit in flight"
        offsets, self._in_flight = self._in_flight, None
        try:
            self.commit(offsets)
        except AdapterError as exc:
            self._result = CommitResult(offsets, exc.error)
        else:
            self._result = CommitResult(offsets, None)

    def commit_result(self) -> CommitResult | None:
        result, self._result = self._result, None
        return result

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float
    ) -> dict[TopicPartition, int | None]:
        return {p: self.stored.get(p) for p in partitions}

    def position(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        return {p: None for p in partitions}

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.calls.append("seek")
        self.seeks.append((partition, offset))

    def assignment(self) -> list[TopicPartition]:
        return sorted(self.owned)

    def member_id(self) -> str | None:
        return self.member

    def generation(self) -> int | None:
        return self.gen

    def take_errors(self) -> list[PollError]:
        errors, self._errors = self._errors, []
        return errors

    def unsubscribe(self) -> None:
        self.calls.append("unsubscribe")
        # Like librdkafka: the revoke runs on the next poll.
        self.script.appendleft(Revoke(tuple(sorted(self.owned))))

    def close(self) -> None:
        self.calls.append("close")
        if self.owned and not self.dead and "revoke" in self._callbacks:  # manual assignment: no callback
            self._callbacks["revoke"](sorted(self.owned))
            self.owned.clear()


class FakeFactory:
    """adapter_factory for StaticConsumer: one scripted FakeAdapter per call, in order."""

    def __init__(self, *scripts: Iterable[Step], freeze: Callable[[float], object] | None = None) -> None:
        self._scripts = deque(deque(s) for s in scripts)
        self._freeze = freeze
        self.adapters: list[FakeAdapter] = []

    def __call__(self, config: dict[str, Any]) -> FakeAdapter:
        script = self._scripts.popleft() if self._scripts else deque()
        adapter = FakeAdapter(dict(config), script, freeze=self._freeze)
        self.adapters.append(adapter)
        return adapter

    @property
    def last(self) -> FakeAdapter:
        return self.adapters[-1]


def holder(
    member_id: str = "dead-1",
    partitions: Iterable[int] = (0,),
    instance_id: str = "orders-2",
    host: str = "10.0.0.7",
) -> GroupMember:
    """A member holding ``instance_id``, as ConsumerGroupDescribe lists it."""
    return GroupMember(member_id, instance_id, "rdkafka", host, None, tuple(tp(p) for p in partitions))


def group_look(*members: GroupMember, coordinator: int | None = 1) -> GroupDescription:
    return GroupDescription("g", "Stable", "consumer", "uniform", members, coordinator=coordinator)


@dataclass
class FakeGroupWatch:
    """The wait's broker look-ups as functions of the (fake) time: ``looks(now)`` is the group, or None
    for an unanswered look; ``offsets(now)`` the committed offsets; ``session(now)`` the group's session
    override. Also its own factory."""

    clock: Callable[[], float]
    looks: Callable[[float], GroupDescription | None]
    offsets: Callable[[float], Mapping[TopicPartition, int] | None] = lambda now: {}
    session: Callable[[float], int | None] = lambda now: None
    look_times: list[float] = field(default_factory=list)
    session_reads: list[float] = field(default_factory=list)
    opened: int = 0
    closed: int = 0

    def __call__(self, settings: Any) -> FakeGroupWatch:
        self.opened += 1
        return self

    def look(self) -> GroupDescription | None:
        self.look_times.append(self.clock())
        return self.looks(self.clock())

    def committed(self, partitions: Sequence[TopicPartition]) -> Mapping[TopicPartition, int] | None:
        offsets = self.offsets(self.clock())
        return None if offsets is None else {p: offsets.get(p, -1) for p in partitions}

    def session_ms(self) -> int | None:
        self.session_reads.append(self.clock())
        return self.session(self.clock())

    def close(self) -> None:
        self.closed += 1


class FakeTime:
    """An instant clock: sleeps only move it forward."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class FatalEvents(MembershipListener):
    """The FatalError events a consumer emitted."""

    def __init__(self) -> None:
        self.events: list[FatalError] = []

    def on_fatal(self, event: FatalError) -> None:
        self.events.append(event)


@contextmanager
def logged_consumer(
    settings: ConsumerSettings, factory: FakeFactory, event_log: Path
) -> Iterator[tuple[StaticConsumer, FatalEvents]]:
    """A started StaticConsumer (pod ``orders-0``, modern brokers) over ``factory``, writing the JSONL
    event log to ``event_log``, with its FatalError events collected; closed after the block."""
    fatal = FatalEvents()
    with EventLog(event_log, look_up_held=False) as log_listener:
        consumer = StaticConsumer(
            settings,
            listeners=[fatal, log_listener],
            env={"POD_NAME": "orders-0"},
            seams=Seams(adapter_factory=factory, probe=lambda _s, **_: MODERN),
        )
        with consumer:
            yield consumer, fatal


class Recorder(MembershipListener):
    """Every membership event a consumer delivered, in order; ``of(kind)`` those of one type."""

    def __init__(self) -> None:
        self.events: list[MembershipEvent] = []

    def on_event(self, event: MembershipEvent) -> None:
        self.events.append(event)

    def of(self, kind: type[MembershipEvent]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]
