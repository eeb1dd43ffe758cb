"""How a consumer gets its partitions: as a member of its group, or by StatefulSet ordinal.

A :class:`Mode` is one interface for the four places where the two differ: joining (subscribe, or plan
and assign), the poll path, recovering from a fatal error, leaving, and what a refused commit means. The
consumer calls the mode and never asks which one it has. :class:`GroupMode` is here; the ordinal mode is
in ``ordinal``.

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
from typing import Protocol

from static_consumer._core import ownership
from static_consumer._core.failures import commit_error
from static_consumer._core.join import held_lookup
from static_consumer._core.ordinal import OrdinalMode
from static_consumer._core.rejoin import wait_for_release
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError, close_bounded
from static_consumer._core.session import Session, State
from static_consumer._core.stall import threshold_s as stall_threshold_s
from static_consumer._core.topics import TopicWatch
from static_consumer._kafka.codes import ErrorKind
from static_consumer.errors import StaticConsumerError
from static_consumer.events import Joining
from static_consumer.settings import ConsumerSettings
from static_consumer.types import Record, TopicPartition

log = logging.getLogger(__name__)

LEAVE_POLLS = 40
LEAVE_POLL_S = 0.05  # serve the revoke of unsubscribe() for at most LEAVE_POLLS * LEAVE_POLL_S = 2 s


class Mode(Protocol):
    """What differs between group membership and ordinal assignment."""

    def join(self, session: Session) -> None:
        """Create the client and start consuming: subscribe (-> JOINING) or assign (-> RUNNING)."""
        ...

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        """Work on the poll path after each client call (ordinal: follow partition count changes)."""
        ...

    def recover(self, session: Session, error: PollError, handle: Callable[[PollError], object]) -> bool:
        """Try to recover from a fatal ``error`` by replacing the client; True when it did."""
        ...

    def close(self, session: Session, adapter: ConsumerAdapter, *, leave: bool, timeout_s: float) -> bool:
        """Close ``adapter`` within ``timeout_s`` (leaving the group if ``leave``); True when the member
        is known to be gone from the group."""
        ...

    def commit_error(self, error: PollError, offsets: Mapping[TopicPartition, int]) -> StaticConsumerError:
        """The exception for a commit the broker refused (not fatally)."""
        ...


class GroupMode:
    """Membership of the consumer group: subscribe, follow rebalances, rejoin a held id, leave."""

    def __init__(self) -> None:
        self.topics: TopicWatch | None = None  # from the first join on, across client replacements

    def join(self, session: Session) -> None:
        if self.topics is None:
            settings = session.settings
            self.topics = TopicWatch(settings.topics, settings.missing_topic_timeout_s, session.clock)
        adapter = session.new_client()
        # Announced before subscribe(): a listener may ask the broker what it holds for this id.
        lookup = held_lookup(session.settings, session.instance_id)
        protocol = session.settings.protocol
        session.dispatch.emit(Joining(**session.event_fields(), protocol=protocol, lookup_held=lookup))
        adapter.subscribe(
            session.settings.topics,
            on_assign=partial(ownership.assigned, session),
            on_revoke=partial(ownership.revoked, session),
            on_lost=partial(ownership.lost, session),
        )
        session.adapter = adapter
        session.stall.threshold_s = stall_threshold_s(session)  # a group session: gaps are checked
        if session.state is State.NEW:
            session.move(State.JOINING)

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        if self.topics is not None:
            self.topics.check(session, adapter)  # a subscription to a missing topic must not run forever

    def recover(self, session: Session, error: PollError, handle: Callable[[PollError], object]) -> bool:
        if session.instance_id is None:
            return False
        if error.kind is ErrorKind.UNRELEASED and session.state in (State.JOINING, State.REJOINING):
            # Only a static member that was never assigned waits: afterwards the same refusal means
            # that another process took the id while this one was away, which is fencing.
            wait_for_release(session, error, partial(self._replace_client, session), handle)
            return True
        if error.kind is ErrorKind.FENCED and self._fenced_by_itself(session):
            self._rejoin_after_lost_session(session, error)
            return True
        return False

    @staticmethod
    def _fenced_by_itself(session: Session) -> bool:
        """Classic protocol: a fence that only says this client lost its own session.

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
        return (
            session.settings.protocol == "classic"
            and session.state is State.RUNNING
            and adapter is not None
            and not adapter.member_id()
        )

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

    def _replace_client(self, session: Session) -> ConsumerAdapter:
        old, session.adapter = session.adapter, None
        if old is not None:
            close_bounded(old, session.settings.shutdown_timeout_s, log)
        self.join(session)
        assert session.adapter is not None  # join() set it
        return session.adapter

    def close(self, session: Session, adapter: ConsumerAdapter, *, leave: bool, timeout_s: float) -> bool:
        static, protocol = session.instance_id is not None, session.settings.protocol
        # A fenced member's instance id belongs to the process that fenced it: never remove that one.
        leaving = leave and static and session.usable
        if leaving:
            _BEFORE_CLOSE[protocol](session, adapter)
        close_bounded(adapter, timeout_s, log)
        if not static:
            return True  # librdkafka's close() sends LeaveGroup for a dynamic member
        return leaving and _AFTER_CLOSE[protocol](session)

    def commit_error(self, error: PollError, offsets: Mapping[TopicPartition, int]) -> StaticConsumerError:
        return commit_error(error, offsets)


def _serve_revoke_of_unsubscribe(session: Session, adapter: ConsumerAdapter) -> None:
    """Classic protocol: unsubscribe, then poll until the revoke ran (nothing owned any more)."""
    adapter.unsubscribe()
    for _ in range(LEAVE_POLLS):
        if isinstance(adapter.poll(LEAVE_POLL_S), Record):
            log.debug("dropping a record fetched before the revoke; it was not processed")
        if not session.offsets.owned:
            return


def _left_by_unsubscribe(session: Session) -> bool:
    return True  # classic: unsubscribe() sent the LeaveGroup before close()


def _remove_by_instance_id(session: Session) -> bool:
    """Consumer protocol: admin removal after close. False (logged) when it failed."""
    instance_id = session.instance_id
    assert instance_id is not None  # only static members get here
    try:
        session.remove_member(session.settings, instance_id)
    except (AdapterError, StaticConsumerError) as exc:
        log.warning("could not remove %r (%s); it expires after the session timeout", instance_id, exc)
        return False
    return True


def _nothing_before_close(session: Session, adapter: ConsumerAdapter) -> None:
    return None


_BEFORE_CLOSE: Mapping[str, Callable[[Session, ConsumerAdapter], None]] = {
    "classic": _serve_revoke_of_unsubscribe,
    "consumer": _nothing_before_close,
}
_AFTER_CLOSE: Mapping[str, Callable[[Session], bool]] = {
    "classic": _left_by_unsubscribe,
    "consumer": _remove_by_instance_id,
}


def remove_static_member(settings: ConsumerSettings, instance_id: str) -> bool:
    """The default member remover: an admin LeaveGroup by instance id (``static_consumer._kafka.members``),
    imported only when a consumer-protocol member leaves its group."""
    from static_consumer._kafka.members import remove_static_member as remove

    return remove(settings, instance_id)


def mode_for(settings: ConsumerSettings) -> Mode:
    """The mode ``settings.assignment_mode`` asks for."""
    modes: Mapping[str, Callable[[], Mode]] = {"group": GroupMode, "ordinal": OrdinalMode}
    return modes[settings.assignment_mode]()


__all__ = ["GroupMode", "Mode", "mode_for", "remove_static_member"]
