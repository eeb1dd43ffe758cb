"""assignment_mode='ordinal': a StatefulSet pod consumes its own slice of the partitions, never joining.

Pod ``k`` of ``replicas`` takes ``assignors.ordinal_plan(k, replicas, partition counts)`` with
``assign()``. It sends no JoinGroup or heartbeat, so no rebalance can ever happen, and it still commits
under ``group.id``. Checked on Kafka 4.3 with librdkafka 2.16:

- The broker accepts a commit from a non-member (generation -1) while the group has no members, and a
  group used only by ordinal pods never has any: describe shows it EMPTY with no members.
- While any consumer is subscribed with the same group id, those commits are refused
  (UNKNOWN_MEMBER_ID); with a ``group.instance.id`` that a member also uses, they are fenced (fatal).
  That is why the join plan of this mode carries no instance id.
- ``max.poll.interval.ms`` does not apply to a consumer that only assigns.

The price is liveness: nothing reassigns a dead pod's partitions, they wait until the pod with that
ordinal runs again (docs/ordinal.md). Every pod must also agree on ``replicas``.

Partition counts are re-read every ``topic.metadata.refresh.interval.ms`` (librdkafka's own setting,
default 5 minutes; -1 turns the check off), from the poll path. When a topic grows, the plan of the same
ordinal can move existing partitions too, so pods re-planning at different moments may briefly share a
partition or leave one unconsumed; commits stay at-least-once because each pod commits only offsets it
processed from a committed start.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from assignors import ordinal_plan
from static_consumer._base.codes import BY_NAME, ErrorKind
from static_consumer._base.errors import (
    ConfigurationError,
    FatalConsumerError,
    RetriableError,
    StaticConsumerError,
)
from static_consumer._base.records import TopicPartition
from static_consumer._base.retry import RetryPolicy
from static_consumer._core import ownership
from static_consumer._core.failures import commit_error, is_transient
from static_consumer._core.gate import StaticDecision
from static_consumer._core.identity import Identity, ordinal_of
from static_consumer._core.join import JoinPlan, prepare
from static_consumer._core.membership import GroupMode
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError, close_bounded
from static_consumer._core.session import Session, State
from static_consumer._core.topics import TopicWatch
from static_consumer._kafka.acls import authorization_error
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)

REFRESH_KEY = "topic.metadata.refresh.interval.ms"
DEFAULT_REFRESH_MS = 300_000  # librdkafka's default for REFRESH_KEY
_CALL_TIMEOUT_S = 5.0  # per metadata/offset read; the refresh runs inside poll(), so keep it short
_RETRY_S = 10.0  # a failed refresh is tried again this soon, however long the interval
T = TypeVar("T")


def refresh_interval_s(settings: ConsumerSettings) -> float | None:
    """How often to re-read partition counts, from librdkafka's metadata refresh interval; None: never."""
    raw = settings.librdkafka.get(REFRESH_KEY, DEFAULT_REFRESH_MS)
    try:
        ms = int(raw)
    except ValueError:
        raise ConfigurationError(
            f"librdkafka[{REFRESH_KEY!r}] must be an integer (ms), got {raw!r}"
        ) from None
    return None if ms < 0 else max(ms, 1000) / 1000.0


def pod_ordinal(settings: ConsumerSettings, identity: Identity | None) -> tuple[int, int]:
    """``(ordinal, replicas)`` of this pod; ConfigurationError when they cannot make a plan."""
    if identity is None:
        raise ConfigurationError("assignment_mode='ordinal' needs the pod name (POD_NAME or HOSTNAME)")
    ordinal, replicas = ordinal_of(identity), settings.replicas
    if replicas is None:  # settings refuse this already; kept for type narrowing
        raise ConfigurationError("assignment_mode='ordinal' needs replicas (the StatefulSet replica count)")
    if ordinal >= replicas:
        # Most likely `kubectl scale` without changing replicas: fail loudly rather than guess a plan
        # that overlaps with the other pods'.
        raise ConfigurationError(
            f"pod {identity.pod!r} has ordinal {ordinal}, but replicas={replicas}: set replicas "
            "(STATIC_CONSUMER_REPLICAS) to the StatefulSet's replica count, the same for every pod"
        )
    return ordinal, replicas


class OrdinalAssignment:
    """This pod's slice, kept in line with the topics' partition counts."""

    def __init__(self, session: Session) -> None:
        settings = session.settings
        self.ordinal, self.replicas = pod_ordinal(settings, session.plan.identity if session.plan else None)
        self._topics = settings.topics
        self._deadline_s = settings.connect_timeout_s
        self._session = session
        self._clock, self._sleep, self._should_stop = session.clock, session.sleep, session.stop.is_set
        self._interval = refresh_interval_s(settings)
        self._counts: dict[str, int] = {}
        self._owned: frozenset[TopicPartition] = frozenset()
        self._due = 0.0

    def start(self, adapter: ConsumerAdapter) -> None:
        """Plan from fresh metadata, read the committed offsets and assign. Transient client errors are
        retried for connect_timeout_s (a new cluster answers NOT_COORDINATOR for a while), then raised
        as RetriableError; others raise FatalConsumerError."""
        what = f"the partition counts of {list(self._topics)}"
        counts = self._call(what, lambda: adapter.partition_counts(self._topics, _CALL_TIMEOUT_S))
        missing = sorted(t for t, n in counts.items() if n is None)
        if missing:
            log.warning("topics %s do not exist (yet); their partitions are planned once they do", missing)
        self._counts = {t: n or 0 for t, n in counts.items()}
        plan = self._plan(self._counts)
        starts = self._call("the group's committed offsets", lambda: self._starts(adapter, plan))
        adapter.assign(starts)
        self._owned = plan
        self._due = self._after(self._interval)
        if not plan:
            log.info("ordinal %d of %d owns no partitions of %s", self.ordinal, self.replicas, self._counts)
        ownership.assigned(self._session, sorted(plan))

    def refresh(self, adapter: ConsumerAdapter) -> None:
        """When the refresh interval has passed, re-read partition counts and move partitions if the
        plan changed. Never raises a client error: a failed check is logged and retried soon."""
        if self._interval is None or self._clock() < self._due:
            return
        self._due = self._after(min(self._interval, _RETRY_S))  # pushed back below once it succeeds
        try:
            counts = adapter.partition_counts(self._topics, _CALL_TIMEOUT_S)
        except AdapterError as exc:
            log.warning("could not re-read partition counts (%s); keeping the current assignment", exc)
            return
        # A topic the broker momentarily does not report keeps its last known count.
        merged = {**self._counts, **{t: n for t, n in counts.items() if n is not None}}
        if merged == self._counts:
            self._due = self._after(self._interval)
            return
        plan = self._plan(merged)
        added, removed = sorted(plan - self._owned), sorted(self._owned - plan)
        try:
            starts = self._starts(adapter, added)
        except AdapterError as exc:
            log.warning("could not read committed offsets for %s (%s); retrying soon", added, exc)
            return
        self._due = self._after(self._interval)
        log.warning(
            "partition counts changed %s -> %s: ordinal %d of %d now owns %d partitions (+%d, -%d). Until "
            "every pod has re-read the metadata a partition may be consumed by two pods, or by none",
            self._counts,
            merged,
            self.ordinal,
            self.replicas,
            len(plan),
            len(added),
            len(removed),
        )
        self._counts = merged
        if removed:
            ownership.revoked(self._session, removed)  # commits what was processed while still ours
            adapter.incremental_unassign(removed)
        if added:
            adapter.incremental_assign(starts)
            ownership.assigned(self._session, added)
        self._owned = plan

    def _plan(self, counts: Mapping[str, int]) -> frozenset[TopicPartition]:
        return frozenset(
            TopicPartition(p.topic, p.partition) for p in ordinal_plan(self.ordinal, self.replicas, counts)
        )

    def _starts(
        self, adapter: ConsumerAdapter, partitions: Sequence[TopicPartition] | frozenset[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The group's committed offset per partition; None lets the client apply auto_offset_reset."""
        if not partitions:
            return {}
        starts = adapter.committed(sorted(partitions), _CALL_TIMEOUT_S)
        resumed = {tp: o for tp, o in starts.items() if o is not None}
        fresh = sorted(tp for tp, o in starts.items() if o is None)
        log.info(
            "ordinal %d of %d: resuming %s; starting %s from auto_offset_reset",
            self.ordinal,
            self.replicas,
            ", ".join(f"{tp}@{o}" for tp, o in sorted(resumed.items())) or "nothing",
            ", ".join(map(str, fresh)) or "nothing",
        )
        return {tp: starts.get(tp) for tp in sorted(partitions)}

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        def attempt() -> T:
            try:
                return fn()
            except AdapterError as exc:
                problem = f"could not read {what} ({exc.error.name}: {exc.error.reason})"
                if is_transient(exc.error):
                    raise RetriableError(problem) from None
                if exc.error.kind is ErrorKind.AUTHORIZATION:
                    error = exc.error
                    settings = self._session.settings
                    raise authorization_error(
                        settings, error.code, error.reason, f"ordinal consumer of group {settings.group_id!r}"
                    ) from None
                raise FatalConsumerError(f"{problem}; check the topics") from None

        policy = RetryPolicy(deadline_s=self._deadline_s, initial_wait_s=0.2, max_wait_s=2.0, jitter_s=0.2)
        return policy.call(
            attempt,
            sleep=self._sleep,
            clock=self._clock,
            should_stop=self._should_stop,
            what=f"reading {what}",
        )

    def _after(self, interval: float | None) -> float:
        return self._clock() + interval if interval is not None else float("inf")


class OrdinalMode:
    """:class:`~static_consumer._core.session.Mode` for ``assignment_mode='ordinal'``: assign this pod's
    slice, never join, never leave (there is no membership to leave)."""

    one_process_per_pod = True  # slices are planned per StatefulSet ordinal, not per worker
    refusal = None  # never joins: no group refuses it

    def __init__(self, group: GroupMode) -> None:
        self.group = group  # the group protocol's client keys (the consumer commits under group.id)
        self.assignment: OrdinalAssignment | None = None
        self.topics: TopicWatch | None = None

    def plan(self, session: Session) -> JoinPlan:
        """No group membership at all, so nothing static to decide and no session bounds to check. No
        group.instance.id either: an OffsetCommit carrying one is fenced (fatally) whenever a member with
        that id is in the group, and a non-member has no use for it. The pod name must give an ordinal.
        The config is known before the probe, so its client is built while the probe runs."""
        settings = session.settings
        config = self.group.client_config(settings, None)
        identity, caps = prepare(
            settings,
            session.env,
            session.probe,
            identity_optional=False,
            early=lambda _identity: session.connect(config),
        )
        decision = StaticDecision(False, ("assignment_mode='ordinal': manual assignment, no group join",))
        log.info("consuming for group %r by ordinal, without joining it", settings.group_id)
        return JoinPlan(identity, caps, decision, config)

    def join(self, session: Session) -> None:
        """Plan and assign this pod's slice on a new client; a failed start closes the client (bounded),
        so it leaves nothing behind."""
        settings = session.settings
        self.topics = TopicWatch(settings.topics, settings.missing_topic_timeout_s, session.clock)
        adapter = session.new_client()
        try:
            self.topics.check(session, adapter)  # before any Fetch is in flight (see Membership.join)
            assignment = OrdinalAssignment(session)
            assignment.start(adapter)
        except BaseException:
            close_bounded(adapter, session.settings.shutdown_timeout_s, log)
            raise
        self.assignment, session.adapter = assignment, adapter
        session.move(State.RUNNING)

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        if self.topics is not None:
            self.topics.check(session, adapter)  # a missing topic is planned once it exists, or fails
        if self.assignment is not None:
            self.assignment.refresh(adapter)  # picks up partitions added to the topics

    def recover(self, session: Session, error: PollError) -> bool:
        return False  # nothing to rejoin: the pod never joined

    def close(self, session: Session, adapter: ConsumerAdapter, *, leave: bool, timeout_s: float) -> bool:
        close_bounded(adapter, timeout_s, log)
        return False  # never a member: nothing to leave, and nobody takes over the partitions

    def commit_error(self, error: PollError, offsets: Mapping[TopicPartition, int]) -> StaticConsumerError:
        refused = None
        if error.code == _UNKNOWN_MEMBER_ID:
            # Checked on Kafka 4.3: a commit from a non-member is accepted only while the group is empty.
            refused = (
                "the group has members. An ordinal consumer commits without joining, which the broker "
                "allows only while no consumer is subscribed with this group id. Give the ordinal consumers "
                "a group id of their own, or remove the old members (static members stay until their "
                "session times out: 'static-consumer remove-members')"
            )
        return commit_error(error, offsets, refused_because=refused)


_UNKNOWN_MEMBER_ID = BY_NAME["UNKNOWN_MEMBER_ID"].code

__all__ = [
    "DEFAULT_REFRESH_MS",
    "REFRESH_KEY",
    "OrdinalAssignment",
    "OrdinalMode",
    "pod_ordinal",
    "refresh_interval_s",
]
