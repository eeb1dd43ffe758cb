"""Joining again while the broker still holds this instance id (KIP-848, UNRELEASED_INSTANCE_ID).

Under protocol='consumer' a static member that crashed (no static leave) keeps its instance id until its
session times out, and a restart that joins meanwhile is refused with UNRELEASED_INSTANCE_ID, a *fatal*
librdkafka error: that client is dead, so every try needs a new one. What the group coordinator does
(Kafka 4.3, ``GroupMetadataManager``), which this wait rests on:

- a refused join changes nothing for the holder of the id; each heartbeat the holder sends restarts its
  session timer, which fires one session after the last heartbeat (measured 0.00 s late);
- a coordinator that loads the group (failover, broker restart) restarts every member's timer;
- the timer is armed with the group's session in force at that moment (its ``consumer.session.timeout.ms``
  override, else the broker's ``group.consumer.session.timeout.ms``); changing the override later does
  not re-arm it;
- ConsumerGroupDescribe lists the holder, with its assignment, until the timer fires; it does not say
  when the holder last heartbeated, and librdkafka drops the broker's message naming the holder.

So instead of retrying blind, the wait watches the group through the session's ``group_watch`` seam
(``static_consumer._kafka.watch`` by default) and decides from what it sees:

- holder gone: join at once with a new client. Refused again means another process got the id first;
  it is the new holder, with a clock of its own.
- The holder's timer was last restarted before this process first saw it, so a dead holder is gone by
  first sight + session. One still listed ``release_margin_s`` later has heartbeated since: it is alive,
  another process runs with this id. UnreleasedInstanceIdError (exit 75). Times are taken when a look is
  *sent*, so a slow answer (a loaded broker) can only make the verdict later, never earlier.
- The session is the largest the wait read: at ``start()`` (the probe), when the join is refused, and
  after each coordinator change (whose reload re-arms the timers with the session then in force). An
  override lowered after the old member's last heartbeat must not shorten its hold; one raised only makes
  the verdict later.
- The committed offsets of the holder's partitions advance between two looks: only their owner commits
  them, so the holder is alive and working. A duplicate, found in seconds: FencedInstanceError (82).
- A look unanswered, or a new coordinator: the timers may have restarted, so every clock restarts, and
  joins are tried blind every ``BLIND_ATTEMPT_S``. ``release_max_wait_s`` bounds the whole wait, but never
  below session + margin, and never before a holder seen before it ran out had its session + margin: the
  bound ends waits that cannot see the group or whose coordinator keeps moving, not a slow release.

Only a static member that was never assigned waits (``ConsumerMode.recover``): afterwards the same refusal
means it was replaced while it was away, which is fencing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from static_consumer._base.errors import (
    FencedInstanceError,
    StaticConsumerError,
    UnreleasedInstanceIdError,
)
from static_consumer._base.records import TopicPartition
from static_consumer._core.events import Fenced
from static_consumer._core.failures import unreleased_error
from static_consumer._core.gate import GateFields
from static_consumer._core.policy import MembershipPolicy
from static_consumer._core.seam import ConsumerAdapter, GroupWatch, PollError
from static_consumer._core.session import Session, State
from static_consumer._core.standby import TRY_S, join_attempt, joined_again, stand_by
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.groups import GroupMember

log = logging.getLogger(__name__)

# Kafka's default group.consumer.max.session.timeout.ms: no group's session can be longer, so it is the
# safe bound when neither the group's nor the broker's session could be read.
KAFKA_MAX_CONSUMER_SESSION_MS = 60000
KAFKA_HEARTBEAT_INTERVAL_MS = 5000  # Kafka's default group.consumer.heartbeat.interval.ms
LOOK_S = 0.25  # between looks at the group: the release is seen this soon after the expiry
PROOF_S = 1.0  # at most one OffsetFetch per second for the proof of life
BLIND_ATTEMPT_S = 5.0  # a join every 5 s while the group cannot be described


@dataclass(frozen=True)
class ReleaseBudget:
    """How long a held id may take: the group's session, the margin, the bound of the whole wait."""

    session_s: float
    margin_s: float
    heartbeat_s: float
    max_wait_setting_s: float | None = None  # release_max_wait_s as set

    @property
    def holder_bound_s(self) -> float:
        """A holder listed this long after it was first seen is alive."""
        return self.session_s + self.margin_s

    @property
    def max_wait_s(self) -> float:
        """The bound of the whole wait: ``release_max_wait_s``, else 3 x :attr:`holder_bound_s`; never
        below :attr:`holder_bound_s`, since a dead holder can still be listed until then (``start()``
        refuses a smaller setting; this covers a session read longer after the refusal)."""
        if self.max_wait_setting_s is None:
            return 3 * self.holder_bound_s
        return max(self.max_wait_setting_s, self.holder_bound_s)

    def with_session(self, session_ms: int | None) -> ReleaseBudget:
        """The budget with the group's session read again: the longest reading counts (module docstring)."""
        if session_ms is None or session_ms / 1000 <= self.session_s:
            return self
        return replace(self, session_s=session_ms / 1000)


def release_budget(settings: GateFields, caps: BrokerCapabilities | None) -> ReleaseBudget:
    """The budget from the probed session (the group's override, else the broker's, else the broker's
    maximum, which bounds every override) and the settings."""
    session_ms = KAFKA_MAX_CONSUMER_SESSION_MS
    heartbeat_ms = KAFKA_HEARTBEAT_INTERVAL_MS
    if caps is not None:
        session_ms = caps.consumer_session_timeout_ms or caps.consumer_max_session_timeout_ms or session_ms
        heartbeat_ms = caps.consumer_heartbeat_interval_ms or heartbeat_ms
    return ReleaseBudget(
        session_ms / 1000, settings.release_margin_s, heartbeat_ms / 1000, settings.release_max_wait_s
    )


@dataclass
class _Seen:
    """What the wait has seen of the holders of the id since the clocks last restarted."""

    coordinator: int | None = None
    first_seen: dict[str, float] = field(default_factory=dict)  # holder member id -> first sight
    offsets: dict[str, Mapping[TopicPartition, int]] = field(default_factory=dict)
    next_proof: float = 0.0
    looks: int = 0
    refusals: int = 1  # the refusal that started the wait

    def refused(self) -> None:
        self.refusals += 1

    def committed_moved(self, holder: GroupMember, now: Mapping[TopicPartition, int] | None) -> bool:
        """Whether the holder's committed offsets advanced since the last reading (then it is alive)."""
        if now is None:
            return False
        before = self.offsets.get(holder.member_id)
        self.offsets[holder.member_id] = now
        return before is not None and any(now.get(tp, -1) > offset for tp, offset in before.items())


def wait_for_release(
    session: Session,
    first: PollError,
    rejoin: Callable[[], ConsumerAdapter],
) -> None:
    """Watch the group until the holder of this instance id is gone, then join with a new client
    (``rejoin``). Raises FencedInstanceError for a proven duplicate and UnreleasedInstanceIdError when
    the holder outlives its session or the wait its bound, unless a stop was requested meanwhile (then
    the session just ends FAILED).

    Records that arrive while a join is watched are kept in the session's buffer; any other error the
    watched client reports is handled as on the poll path (raised if it is fatal).
    """
    settings, instance_id = session.settings, session.instance_id
    assert instance_id is not None  # only static members wait
    session.move(State.REJOINING)
    log.debug("join refused: %s", first.reason)
    seen = _Seen()
    started = session.clock()
    watch = session.group_watch(settings)
    alive: StaticConsumerError | None = None
    try:
        # The group's session as it is now counts too: it may have been raised since start() (never
        # lowered: the longer reading wins, see the module docstring).
        probed = release_budget(settings, session.plan.capabilities if session.plan else None)
        budget = probed.with_session(watch.session_ms())
        log.warning(
            "group.instance.id %r is still held by another member of group %r (UNRELEASED_INSTANCE_ID); "
            "joining as soon as it is released. A crashed member is released within the group's session "
            "timeout (%gs); its partitions are reassigned within about one heartbeat interval (%gs) after "
            "that",
            instance_id,
            settings.group_id,
            budget.session_s,
            budget.heartbeat_s,
        )
        attempt = join_attempt(session, rejoin, seen.refused)
        alive = _watch(session, watch, budget, seen, attempt, first)
        stands_by = MembershipPolicy.of(settings).stands_by
        if alive is not None and (not stands_by or session.stop.is_set()):
            raise alive
    except StaticConsumerError as exc:
        _end(session, exc)
        if isinstance(exc, UnreleasedInstanceIdError) and session.stop.is_set():
            log.info("stopped while waiting for the instance id to be released")
            return  # a requested shutdown is not an error; later calls raise it
        raise
    finally:
        watch.close()
    if alive is not None:  # a live holder, under duplicate_policy='wait': stand by until it is gone
        stand_by(session, str(alive), attempt, try_every_s=TRY_S)  # a KIP-848 join refused is harmless
        return
    joined_again(session, "was released", started, f"{seen.refusals} refused joins, {seen.looks} looks")


def _watch(
    session: Session,
    watch: GroupWatch,
    budget: ReleaseBudget,
    seen: _Seen,
    attempt: Callable[[], bool],
    first: PollError,
) -> StaticConsumerError | None:
    """The loop of :func:`wait_for_release`: returns None once a join was not refused, the verdict
    (FencedInstanceError, UnreleasedInstanceIdError) when the holder is alive, else raises.

    ``release_max_wait_s`` (``budget.max_wait_s``) ends the wait only while no holder can be judged: the
    group is not described, nobody is listed, or a holder was first seen after the bound ran out (the
    coordinator kept moving). A holder first seen before it ran out keeps its full session + margin, so
    the wait ends at the latest ``max_wait_s`` + session + margin after it began.
    """
    clock, instance_id = session.clock, session.instance_id
    assert instance_id is not None
    started = clock()
    next_blind = started + BLIND_ATTEMPT_S
    while True:
        if session.stop.is_set():
            raise unreleased_error(first, group_id=session.settings.group_id, instance_id=instance_id)
        asked = clock()  # a holder listed in the answer was listed at some time after this
        look = watch.look()
        seen.looks += 1
        coordinator = look.coordinator if look is not None else None
        if look is None or coordinator != seen.coordinator:
            # Unanswered or a new coordinator: a reload restarts every session timer, so ours too, armed
            # with the group's session then in force, which is read again.
            if seen.looks > 1 and look is not None:
                budget = budget.with_session(watch.session_ms())
            seen.first_seen.clear()
            seen.coordinator = coordinator
        out_of_time = asked - started > budget.max_wait_s
        if look is None:
            if out_of_time:
                raise _not_released(session, budget)
            if asked >= next_blind:
                next_blind = asked + BLIND_ATTEMPT_S
                if attempt():
                    return None
            session.sleep(LOOK_S)
            continue
        holder = look.member(instance_id)
        if holder is None:
            if attempt():
                return None
            if out_of_time:
                raise _not_released(session, budget)
            session.sleep(LOOK_S)  # refused: another process was faster; the next look shows it
            continue
        if holder.member_id not in seen.first_seen:
            if out_of_time:
                raise _not_released(session, budget)
            log.info(
                "group.instance.id %r is held by member %s (client id %r, host %s, partitions %s)",
                instance_id,
                holder.member_id,
                holder.client_id,
                holder.host,
                ", ".join(map(str, holder.assignment)) or "none",
            )
        since = seen.first_seen.setdefault(holder.member_id, asked)
        if holder.assignment and asked >= seen.next_proof:
            seen.next_proof = asked + PROOF_S
            if seen.committed_moved(holder, watch.committed(holder.assignment)):
                return _duplicate(session, holder)
        if asked - since > budget.holder_bound_s:
            return _outlived(session, holder, asked - since, budget)
        session.sleep(LOOK_S)


def _end(session: Session, exc: StaticConsumerError) -> None:
    if not session.usable:
        return
    fenced = isinstance(exc, FencedInstanceError)
    session.end(State.FENCED if fenced else State.FAILED, exc)
    if fenced:
        log.error("%s", exc)
        session.dispatch.emit(Fenced(**session.event_fields(), error=str(exc)))


def _holder(holder: GroupMember) -> str:
    return f"member {holder.member_id} (client id {holder.client_id!r}, host {holder.host})"


def _duplicate(session: Session, holder: GroupMember) -> FencedInstanceError:
    # Same verdict and exit code as a classic fence: two processes use one id. Under KIP-848 the member
    # already in the group keeps it, so the newcomer is the one that stops, without ever joining.
    return FencedInstanceError(
        f"group.instance.id {session.instance_id!r} of group {session.settings.group_id!r} is held by "
        f"{_holder(holder)}, which is alive: it keeps committing offsets. Another process runs with this "
        "instance id; under protocol='consumer' the member already in the group keeps it and this one must "
        "exit. Make sure only one replica uses this id (two pods with the same name, a copied Deployment, "
        "an old pod that is still running)."
    )


def _outlived(
    session: Session, holder: GroupMember, held_s: float, budget: ReleaseBudget
) -> UnreleasedInstanceIdError:
    return UnreleasedInstanceIdError(
        f"group.instance.id {session.instance_id!r} of group {session.settings.group_id!r} is still held by "
        f"{_holder(holder)} {held_s:.0f}s after this process first saw it, longer than the group's session "
        f"timeout ({budget.session_s:g}s) + release_margin_s ({budget.margin_s:g}s): that member is alive, "
        "so another process most likely runs with this instance id. Look for it at that host; if the "
        "brokers are too loaded to expire members on time, raise release_margin_s."
    )


def _not_released(session: Session, budget: ReleaseBudget) -> UnreleasedInstanceIdError:
    return UnreleasedInstanceIdError(
        f"group.instance.id {session.instance_id!r} of group {session.settings.group_id!r} was not released "
        f"within {budget.max_wait_s:g}s (release_max_wait_s): the group could not be described, or its "
        "coordinator kept moving (each move restarts the old member's session). Check that the principal "
        "may describe the group, then restart."
    )


__all__ = [
    "ReleaseBudget",
    "release_budget",
    "wait_for_release",
]
