"""Membership events: one frozen dataclass per event, delivered to :class:`MembershipListener` objects.

Listeners override only the methods they need. An exception raised by a listener is never swallowed:
the dispatcher keeps delivering the event to the other listeners, then the consumer re-raises the first
exception from the call that produced the event (``poll()``, ``close()``, ...), after librdkafka's
callback has returned, because raising inside librdkafka's callback would leave the rebalance half done.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from static_consumer.types import TopicPartition

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class MembershipEvent:
    """Fields every event carries. ``generation`` is None when the client does not expose it."""

    group_id: str
    instance_id: str | None
    member_id: str | None
    generation: int | None = None
    at: float = field(default_factory=time.time)

    def deliver(self, listener: MembershipListener) -> None:
        raise NotImplementedError  # every concrete event overrides this


@dataclass(frozen=True, kw_only=True, slots=True)
class Assigned(MembershipEvent):
    """Partitions were added to this member's assignment."""

    partitions: tuple[TopicPartition, ...]

    def deliver(self, listener: MembershipListener) -> None:
        listener.on_assigned(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Revoked(MembershipEvent):
    """Partitions are being taken away in an orderly rebalance; once listeners return, the consumer
    commits the processed offsets of these partitions (listeners may still call mark_processed)."""

    partitions: tuple[TopicPartition, ...]

    def deliver(self, listener: MembershipListener) -> None:
        listener.on_revoked(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Lost(MembershipEvent):
    """Partitions were lost (session timeout, max.poll.interval exceeded): nothing was committed, and
    records processed since the last commit will be delivered again, possibly to another member."""

    partitions: tuple[TopicPartition, ...]

    def deliver(self, listener: MembershipListener) -> None:
        listener.on_lost(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fenced(MembershipEvent):
    """Another process joined with this group.instance.id; this consumer is dead and must exit."""

    error: str

    def deliver(self, listener: MembershipListener) -> None:
        listener.on_fenced(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class FatalError(MembershipEvent):
    """librdkafka raised a fatal error other than fencing; this consumer is dead."""

    error: str

    def deliver(self, listener: MembershipListener) -> None:
        listener.on_fatal(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Closed(MembershipEvent):
    """The consumer closed. ``left_group`` is False for a normal static close (the broker keeps the
    member until the session timeout, so a restart gets the same partitions without a rebalance)."""

    left_group: bool

    def deliver(self, listener: MembershipListener) -> None:
        listener.on_closed(self)


class MembershipListener:
    """Base class for listeners; every method is an optional no-op."""

    def on_assigned(self, event: Assigned) -> None:
        """Partitions were assigned."""

    def on_revoked(self, event: Revoked) -> None:
        """Partitions are being revoked (called before the consumer commits processed offsets, so a
        listener can flush its own state and call ``mark_processed``)."""

    def on_lost(self, event: Lost) -> None:
        """Partitions were lost without a chance to commit."""

    def on_fenced(self, event: Fenced) -> None:
        """This member was fenced."""

    def on_fatal(self, event: FatalError) -> None:
        """A fatal error killed the consumer."""

    def on_closed(self, event: Closed) -> None:
        """The consumer closed."""


class Dispatcher:
    """Delivers events to listeners, collecting their exceptions for the caller to re-raise."""

    def __init__(self, listeners: Sequence[MembershipListener]) -> None:
        self._listeners = tuple(listeners)
        self._pending: list[Exception] = []

    def emit(self, event: MembershipEvent) -> None:
        for listener in self._listeners:
            try:
                event.deliver(listener)
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
    "Closed",
    "Dispatcher",
    "FatalError",
    "Fenced",
    "Lost",
    "MembershipEvent",
    "MembershipListener",
    "Revoked",
]
