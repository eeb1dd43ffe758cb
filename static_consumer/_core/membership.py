"""Group membership: the :class:`~static_consumer._core.session.Mode` of a member of its group, one class
per group protocol. Everything the classic and the consumer (KIP-848) protocol do differently for a
member is here, and only here: the client keys of the protocol, what the broker is asked and the gate
that decides from its answer, the session the stall guard measures against, how a lost client is
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
from collections.abc import Mapping
from functools import partial
from typing import ClassVar

from static_consumer._base.codes import ErrorKind
from static_consumer._base.errors import StaticConsumerError
from static_consumer._base.records import Record, TopicPartition
from static_consumer._core import gate, ownership
from static_consumer._core.events import Joining
from static_consumer._core.failures import commit_error
from static_consumer._core.gate import StaticDecision
from static_consumer._core.identity import Identity
from static_consumer._core.join import JoinPlan, held_lookup, prepare
from static_consumer._core.policy import MembershipPolicy
from static_consumer._core.predecessor import Predecessor
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError, close_bounded
from static_consumer._core.session import Session, State
from static_consumer._core.stall import UNKNOWN_SESSION_MS, threshold_s
from static_consumer._core.standby import TRY_S, standing_by
from static_consumer._core.topics import TopicWatch
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import ConfigValue, consumer_config

log = logging.getLogger(__name__)

LEAVE_POLLS = 40
LEAVE_POLL_S = 0.05  # serve the revoke of unsubscribe() for at most LEAVE_POLLS * LEAVE_POLL_S = 2 s
LIBRDKAFKA_HEARTBEAT_MS = 3000  # librdkafka's heartbeat.interval.ms, unless the session is too short for it


class GroupMode:
    """Membership of the consumer group: subscribe, follow rebalances, leave. What differs by protocol is
    left to :class:`ClassicMode` and :class:`ConsumerMode`."""

    protocol: ClassVar[str]
    refusal: ClassVar[str]  # why a group refuses a member of this protocol, and what to change
    group_overrides: ClassVar[bool] = False  # whether the probe reads the group's own session settings
    one_process_per_pod: ClassVar[bool] = False

    def __init__(self) -> None:
        self.topics: TopicWatch | None = None  # from the first join on, across client replacements

    def group_config(self, settings: ConsumerSettings) -> dict[str, ConfigValue]:
        """The client keys of this group protocol."""
        raise NotImplementedError

    def client_config(self, settings: ConsumerSettings, instance_id: str | None) -> dict[str, ConfigValue]:
        """The consumer's librdkafka config for ``instance_id`` (None: a dynamic member)."""
        return consumer_config(settings, instance_id, self.group_config(settings))

    def decide(self, settings: ConsumerSettings, caps: BrokerCapabilities) -> StaticDecision:
        """The capability gate of this protocol (``_core/gate.py``)."""
        raise NotImplementedError

    def plan(self, session: Session) -> JoinPlan:
        """The gate's static decision and the client config with (or without) the instance id. Logs the
        gate's warnings. The client of the likely plan (static when the pod has an identity and the
        policy allows it) is built while the gate asks the broker, and kept when the gate agrees."""
        settings = session.settings
        policy = MembershipPolicy.of(settings)
        likely: list[tuple[bool, dict[str, ConfigValue]]] = []

        def early(identity: Identity | None) -> None:
            static = identity is not None and policy.static
            config = self.client_config(settings, identity.instance_id if identity and static else None)
            likely.append((static, config))
            session.connect(config)

        identity, caps = prepare(
            settings,
            session.env,
            session.probe,
            identity_optional=not policy.static,  # a dynamic member needs no instance id
            group_overrides=self.group_overrides,
            early=early,
        )
        decision = self.decide(settings, caps)
        for warning in decision.warnings:
            log.warning("%s", warning)
        static = decision.static and identity is not None
        instance_id = identity.instance_id if static and identity is not None else None
        log.info(
            "joining group %r as %s (protocol=%s; %s)",
            settings.group_id,
            f"static member {instance_id!r}" if instance_id else "a dynamic member",
            self.protocol,
            "; ".join(decision.reasons),
        )
        # The config of the early client when the gate agreed with the likely plan (the usual case).
        agreed = likely and likely[0][0] == static
        config = likely[0][1] if agreed else self.client_config(settings, instance_id)
        return JoinPlan(identity, caps, decision, config)

    def join(self, session: Session) -> None:
        if self.topics is None:
            settings = session.settings
            self.topics = TopicWatch(settings.topics, settings.missing_topic_timeout_s, session.clock)
        adapter = session.new_client()
        self.before_subscribe(session, adapter)
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

    def before_subscribe(self, session: Session, adapter: ConsumerAdapter) -> None:
        """What this protocol does with a new client before it subscribes."""

    def session_timing(self, session: Session) -> tuple[float, int | None]:
        """The group session's timeout and the heartbeat interval (None when the client does not know
        it), in ms: what the stall guard measures a gap against."""
        raise NotImplementedError

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        if self.topics is not None:
            self.topics.check(session, adapter)  # a subscription to a missing topic must not run forever

    def recover(self, session: Session, error: PollError) -> bool:
        return False

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
        self.client_closed(session, in_time=close_bounded(adapter, timeout_s, log))
        if not static:
            return True  # librdkafka's close() sends LeaveGroup for a dynamic member
        return leaving and self.after_close(session)

    def before_close(self, session: Session, adapter: ConsumerAdapter) -> None:
        """What a static member that leaves does before the client closes."""

    def client_closed(self, session: Session, *, in_time: bool) -> None:
        """The client closed (``in_time``: within its bound), the member still in the state it closed in."""

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

    def group_config(self, settings: ConsumerSettings) -> dict[str, ConfigValue]:
        return {
            "group.protocol": "classic",
            "partition.assignment.strategy": settings.assignment_strategy,
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": settings.heartbeat_interval_ms
            or max(1, min(LIBRDKAFKA_HEARTBEAT_MS, settings.session_timeout_ms // 3)),
        }

    def decide(self, settings: ConsumerSettings, caps: BrokerCapabilities) -> StaticDecision:
        return gate.classic(settings, caps)

    def session_timing(self, session: Session) -> tuple[float, int | None]:
        assert session.plan is not None  # a member joins after its plan exists
        heartbeat = session.plan.config.get("heartbeat.interval.ms")
        return session.settings.session_timeout_ms, heartbeat if isinstance(heartbeat, int) else None

    def recover(self, session: Session, error: PollError) -> bool:
        if session.instance_id is None or error.kind is not ErrorKind.FENCED:
            return False
        if not self._fenced_by_itself(session):
            # A live process took the id: under duplicate_policy='wait' this one stands by instead of
            # exiting, since a restarted pod would take the id back and fence the other (standby.py).
            # No join while the id is listed: a classic join takes the id from a live holder.
            return standing_by(session, error, partial(self._replace_client, session), try_every_s=None)
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
    group_overrides = True  # the session of a KIP-848 group may be the group's own override

    def __init__(self) -> None:
        super().__init__()
        self.predecessor = Predecessor()  # a crash restart releases its dead predecessor's hold

    def group_config(self, settings: ConsumerSettings) -> dict[str, ConfigValue]:
        keys: dict[str, ConfigValue] = {"group.protocol": "consumer"}
        if settings.remote_assignor is not None:
            keys["group.remote.assignor"] = settings.remote_assignor
        return keys

    def decide(self, settings: ConsumerSettings, caps: BrokerCapabilities) -> StaticDecision:
        return gate.consumer(settings, caps)

    def session_timing(self, session: Session) -> tuple[float, int | None]:
        assert session.plan is not None  # a member joins after its plan exists
        # The broker's session timeout, group override included (read by the probe); the client does not
        # know the heartbeat interval the broker hands out.
        return session.plan.capabilities.consumer_session_timeout_ms or UNKNOWN_SESSION_MS, None

    def before_subscribe(self, session: Session, adapter: ConsumerAdapter) -> None:
        # Released before the join, recorded before the client can join (_core/predecessor.py).
        self.predecessor.before_subscribe(session, adapter)

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        super().on_poll(session, adapter)
        if self.predecessor.unrecorded is not None:
            self.predecessor.after_poll(adapter)

    def client_closed(self, session: Session, *, in_time: bool) -> None:
        self.predecessor.client_closed(session, in_time=in_time)

    def recover(self, session: Session, error: PollError) -> bool:
        if session.instance_id is None or error.kind is not ErrorKind.UNRELEASED:
            return False
        if session.state not in (State.JOINING, State.REJOINING):
            # Only a static member that was never assigned waits for a release: afterwards the same
            # refusal means that another process took the id while this one was away, which is fencing
            # (or, under duplicate_policy='wait', standing by until that process is gone; a KIP-848 join
            # the broker refuses is harmless, so it is tried every TRY_S too).
            return standing_by(session, error, partial(self._replace_client, session), try_every_s=TRY_S)
        from static_consumer._core.rejoin import wait_for_release  # only a refused join waits: loaded then

        wait_for_release(session, error, partial(self._replace_client, session))
        return True

    def commit_error(self, error: PollError, offsets: Mapping[TopicPartition, int]) -> StaticConsumerError:
        if error.kind is not ErrorKind.MEMBER_GONE:
            return super().commit_error(error, offsets)
        # UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH: the client keeps its member id under KIP-848, so the
        # broker dropped this member: its session expired, or its restart released it (predecessor.py) and
        # runs. The client's rejoin at the next poll tells which: refused, that is fencing (exit 82).
        return commit_error(
            error,
            offsets,
            refused_because=(
                "the broker no longer knows this member: its session ended (a pause longer than the "
                "session), or a restart of this static member took over its instance id. The client "
                "rejoins at the next poll, and if another process holds the id, that poll raises "
                "FencedInstanceError (exit 82). The uncommitted records will be delivered again"
            ),
        )

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


__all__ = [
    "LEAVE_POLLS",
    "LEAVE_POLL_S",
    "ClassicMode",
    "ConsumerMode",
    "GroupMode",
    "LIBRDKAFKA_HEARTBEAT_MS",
]
