"""Group membership: the :class:`~static_consumer._core.session.Mode` of a member of its group, one class
per group protocol. Everything the classic and the consumer (KIP-848) protocol do differently for a
member is here, and only here: the session the stall guard measures against, how a lost client is
recovered, how the member leaves, and what a refused protocol means.

Leaving at once (scale-down) takes a different path per group protocol (observed with librdkafka 2.16 on
Kafka 4.3), because a static member's ``close()`` deliberately sends no LeaveGroup:

- classic: ``unsubscribe()`` sends LeaveGroup, but only once the application has served the revoke it
  starts; closing right after unsubscribe() skips it. So poll until the partitions are gone.
- consumer (KIP-848): ``unsubscribe()`` only sends a static leave (member epoch -2) and the broker keeps
  the member until its session times out, so remove it by instance id with an admin LeaveGroup (v3+).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import ClassVar

from static_consumer._base.codes import ErrorKind
from static_consumer._base.errors import StaticConsumerError
from static_consumer._base.records import Record, TopicPartition
from static_consumer._core import ownership
from static_consumer._core.events import Joining
from static_consumer._core.failures import commit_error, protocol_mismatch_error
from static_consumer._core.join import Connect, JoinPlan, Prober, held_lookup, plan_membership
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError, close_bounded
from static_consumer._core.session import Session, State
from static_consumer._core.stall import UNKNOWN_SESSION_MS, threshold_s
from static_consumer._core.standby import TRY_S, standing_by
from static_consumer._core.topics import TopicWatch
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)

LEAVE_POLLS = 40
LEAVE_POLL_S = 0.05  # serve the revoke of unsubscribe() for at most LEAVE_POLLS * LEAVE_POLL_S = 2 s


class GroupMode:
    """Membership of the consumer group: subscribe, follow rebalances, leave. What differs by protocol is
    left to :class:`ClassicMode` and :class:`ConsumerMode`."""

    protocol: ClassVar[str]
    refusal: ClassVar[str]  # why a group refuses a member of this protocol, and what to change

    def __init__(self) -> None:
        self.topics: TopicWatch | None = None  # from the first join on, across client replacements

    def plan(
        self,
        settings: ConsumerSettings,
        env: Mapping[str, str],
        probe: Prober,
        connect: Connect | None = None,
    ) -> JoinPlan:
        return plan_membership(settings, env, probe, connect)

    def join(self, session: Session) -> None:
        if self.topics is None:
            settings = session.settings
            self.topics = TopicWatch(settings.topics, settings.missing_topic_timeout_s, session.clock)
        adapter = session.new_client()
        # Announced before subscribe(): a listener may ask the broker what it holds for this id.
        lookup = held_lookup(session.settings, session.instance_id)
        session.dispatch.emit(Joining(**session.event_fields(), protocol=self.protocol, lookup_held=lookup))
        adapter.subscribe(
            session.settings.topics,
            on_assign=partial(ownership.assigned, session),
            on_revoke=partial(ownership.revoked, session),
            on_lost=partial(ownership.lost, session),
        )
        session.adapter = adapter
        # The first look for missing topics, now: no Fetch is in flight yet. At the first poll it waited
        # behind the long-poll Fetch on the broker's connection (the broker answers one request of a
        # connection at a time), up to fetch.wait.max.ms (500 ms) before the first records were handed out.
        self.topics.check(session, adapter)
        session.stall.threshold_s = threshold_s(*self.session_timing(session))  # a group session: checked
        if session.state is State.NEW:
            session.move(State.JOINING)

    def session_timing(self, session: Session) -> tuple[float, int | None]:
        """The group session's timeout and the heartbeat interval (None when the client does not know
        it), in ms: what the stall guard measures a gap against."""
        raise NotImplementedError

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        if self.topics is not None:
            self.topics.check(session, adapter)  # a subscription to a missing topic must not run forever

    def recover(self, session: Session, error: PollError, handle: Callable[[PollError], object]) -> bool:
        return False

    def refused(self, session: Session, error: PollError) -> StaticConsumerError:
        group_id = session.settings.group_id
        return protocol_mismatch_error(error, group_id=group_id, protocol=self.protocol, why=self.refusal)

    def _replace_client(self, session: Session) -> ConsumerAdapter:
        old, session.adapter = session.adapter, None
        if old is not None:
            close_bounded(old, session.settings.shutdown_timeout_s, log)
        self.join(session)
        assert session.adapter is not None  # join() set it
        return session.adapter

    def close(self, session: Session, adapter: ConsumerAdapter, *, leave: bool, timeout_s: float) -> bool:
        static = session.instance_id is not None
        # A fenced member's instance id belongs to the process that fenced it: never remove that one.
        leaving = leave and static and session.usable
        if leaving:
            self.before_close(session, adapter)
        close_bounded(adapter, timeout_s, log)
        if not static:
            return True  # librdkafka's close() sends LeaveGroup for a dynamic member
        return leaving and self.after_close(session)

    def before_close(self, session: Session, adapter: ConsumerAdapter) -> None:
        """What a static member that leaves does before the client closes."""

    def after_close(self, session: Session) -> bool:
        """What a static member that leaves does after the client closed; True when it is gone."""
        raise NotImplementedError

    def commit_error(self, error: PollError, offsets: Mapping[TopicPartition, int]) -> StaticConsumerError:
        return commit_error(error, offsets)


class ClassicMode(GroupMode):
    """A member under the classic protocol (JoinGroup/SyncGroup, the client's own assignor)."""

    protocol = "classic"
    refusal = (
        "the group is a consumer-protocol (KIP-848) group with live members and the brokers' "
        "group.consumer.migration.policy is 'disabled', which refuses classic members (set it to "
        "'downgrade' or 'bidirectional', or migrate offline: stop every member, then start them with "
        "protocol='classic'), or the members share no assignor with this one"
    )

    def session_timing(self, session: Session) -> tuple[float, int | None]:
        assert session.plan is not None  # a member joins after its plan exists
        heartbeat = session.plan.config.get("heartbeat.interval.ms")
        return session.settings.session_timeout_ms, heartbeat if isinstance(heartbeat, int) else None

    def recover(self, session: Session, error: PollError, handle: Callable[[PollError], object]) -> bool:
        if session.instance_id is None or error.kind is not ErrorKind.FENCED:
            return False
        if not self._fenced_by_itself(session):
            # A live process took the id: under duplicate_policy='wait' this one stands by instead of
            # exiting, since a restarted pod would take the id back and fence the other (standby.py).
            # No join while the id is listed: a classic join takes the id from a live holder.
            return standing_by(
                session, error, partial(self._replace_client, session), handle, try_every_s=None
            )
        self._rejoin_after_lost_session(session, error)
        return True

    @staticmethod
    def _fenced_by_itself(session: Session) -> bool:
        """A fence that only says this client lost its own session.

        When librdkafka finds its session expired (its heartbeats starved: a long GC, SIGSTOP, a loaded
        node) it resets its member id to "" before rejoining. A commit sent in that window carries the
        instance id without a member id, and the coordinator, which still holds the instance id for this
        process's own earlier member id, answers FENCED_INSTANCE_ID, which librdkafka makes fatal. Seen in
        a real-broker run: "Request memberId= for static member ... is fenced by existing memberId=<its
        own>". A real duplicate replaces the member id while this client still has one, so an empty member
        id tells the two apart. Under KIP-848 the client keeps its member id and a lost session is
        answered UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH, never this.
        """
        adapter = session.adapter
        return session.state is State.RUNNING and adapter is not None and not adapter.member_id()

    def _rejoin_after_lost_session(self, session: Session, error: PollError) -> None:
        log.warning(
            "the client lost its group session (its member id was reset) and a request sent meanwhile "
            "was refused as fenced by this process's own earlier member (%s); no other process holds "
            "group.instance.id %r, so a new client rejoins with it. Records processed since the last "
            "commit will be delivered again",
            error.reason,
            session.instance_id,
        )
        ownership.lost(session, sorted(session.offsets.owned))
        session.move(State.JOINING)
        self._replace_client(session)

    def before_close(self, session: Session, adapter: ConsumerAdapter) -> None:
        """Unsubscribe, then poll until the revoke ran (nothing owned any more): that sends LeaveGroup."""
        adapter.unsubscribe()
        for _ in range(LEAVE_POLLS):
            if isinstance(adapter.poll(LEAVE_POLL_S), Record):
                log.debug("dropping a record fetched before the revoke; it was not processed")
            if not session.offsets.owned:
                return

    def after_close(self, session: Session) -> bool:
        return True  # unsubscribe() sent the LeaveGroup before close()


class ConsumerMode(GroupMode):
    """A member under the consumer protocol (KIP-848: heartbeats, the broker's assignor)."""

    protocol = "consumer"
    refusal = (
        "the group is a classic group with live members, and the brokers' "
        "group.consumer.migration.policy ('disabled' or 'downgrade') forbids converting it online "
        "(or the group id belongs to a share or streams group). Set the policy to 'upgrade' or "
        "'bidirectional' on every broker, or migrate offline: stop every member, then start them with "
        "protocol='consumer'"
    )

    def session_timing(self, session: Session) -> tuple[float, int | None]:
        assert session.plan is not None  # a member joins after its plan exists
        # The broker's session timeout, group override included (read by the probe); the client does not
        # know the heartbeat interval the broker hands out.
        return session.plan.capabilities.consumer_session_timeout_ms or UNKNOWN_SESSION_MS, None

    def recover(self, session: Session, error: PollError, handle: Callable[[PollError], object]) -> bool:
        if session.instance_id is None or error.kind is not ErrorKind.UNRELEASED:
            return False
        if session.state not in (State.JOINING, State.REJOINING):
            # Only a static member that was never assigned waits for a release: afterwards the same
            # refusal means that another process took the id while this one was away, which is fencing
            # (or, under duplicate_policy='wait', standing by until that process is gone; a KIP-848 join
            # the broker refuses is harmless, so it is tried every TRY_S too).
            return standing_by(
                session, error, partial(self._replace_client, session), handle, try_every_s=TRY_S
            )
        from static_consumer._core.rejoin import wait_for_release  # only a refused join waits: loaded then

        wait_for_release(session, error, partial(self._replace_client, session), handle)
        return True

    def after_close(self, session: Session) -> bool:
        """Admin removal by instance id after close. False (logged) when it failed."""
        instance_id = session.instance_id
        assert instance_id is not None  # only static members get here
        try:
            session.remove_member(session.settings, instance_id)
        except (AdapterError, StaticConsumerError) as exc:
            log.warning("could not remove %r (%s); it expires after the session timeout", instance_id, exc)
            return False
        return True


def remove_static_member(settings: ConsumerSettings, instance_id: str) -> bool:
    """The default member remover: an admin LeaveGroup by instance id (``static_consumer._kafka.members``),
    imported only when a consumer-protocol member leaves its group."""
    from static_consumer._kafka.members import remove_static_member as remove

    return remove(settings, instance_id)


__all__ = [
    "LEAVE_POLLS",
    "LEAVE_POLL_S",
    "ClassicMode",
    "ConsumerMode",
    "GroupMode",
    "remove_static_member",
]
