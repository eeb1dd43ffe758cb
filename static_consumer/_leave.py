"""How a static member leaves its group at once (scale-down), per protocol.

A static member's ``close()`` deliberately sends no LeaveGroup. Leaving now, so the broker rebalances
without waiting for the session timeout, takes a different path per protocol (observed with librdkafka
2.16 on Kafka 4.3):

- classic: ``unsubscribe()`` sends LeaveGroup, but only once the application has served the revoke it
  starts; closing right after unsubscribe() skips it. So poll until the partitions are gone.
- consumer (KIP-848): ``unsubscribe()`` only sends a static leave (member epoch -2) and the broker keeps
  the member until its session times out, so remove it by instance id with an admin LeaveGroup (v3+).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from static_consumer import _admin_io
from static_consumer._seam import AdapterError, ConsumerAdapter
from static_consumer.errors import RetriableError, StaticConsumerError
from static_consumer.settings import ConsumerSettings
from static_consumer.types import Record, TopicPartition

log = logging.getLogger("static_consumer.consumer")

MemberRemover = Callable[[ConsumerSettings, str], bool]
LEAVE_POLLS = 40
LEAVE_POLL_S = 0.05  # serve the revoke of unsubscribe() for at most LEAVE_POLLS * LEAVE_POLL_S = 2 s


def unsubscribe_and_serve_revoke(
    adapter: ConsumerAdapter, owned: Callable[[], frozenset[TopicPartition]]
) -> None:
    """Classic protocol: unsubscribe, then poll until the revoke ran (``owned()`` is empty)."""
    adapter.unsubscribe()
    for _ in range(LEAVE_POLLS):
        if isinstance(adapter.poll(LEAVE_POLL_S), Record):
            log.debug("dropping a record fetched before the revoke; it was not processed")
        if not owned():
            return


def remove_static_member(settings: ConsumerSettings, instance_id: str) -> bool:
    """The default MemberRemover: one admin LeaveGroup (v3+) by instance id. True if it was removed,
    False if the broker no longer knew it; raises StaticConsumerError when refused or unreachable."""
    group = settings.group_id
    with _admin_io.kafka_admin(settings, f"remove {instance_id!r} from group {group!r}") as admin:
        removed, _, failed = _admin_io.leave(admin, group, [instance_id], "static_consumer leave_group()")
    if failed:
        raise RetriableError(
            f"the broker refused to remove {instance_id!r} from group {group!r}: {failed[0].error}"
        )
    return bool(removed)


def left_after_close(
    settings: ConsumerSettings,
    instance_id: str | None,
    remove: MemberRemover,
    leave: bool,
    running: bool,
    ordinal: bool,
) -> bool:
    """After close(): whether the member is known to be gone (removing it first when it must leave)."""
    if ordinal:
        return False  # never a member: nothing to leave, and nobody takes over the partitions
    if instance_id is None:
        return True  # librdkafka's close() sends LeaveGroup for a dynamic member
    # A fenced member's instance id belongs to the process that fenced it: never remove that one.
    if not leave or not running:
        return False
    if settings.protocol == "classic":
        return True  # unsubscribe() sent the LeaveGroup before close()
    return remove_by_instance_id(remove, settings, instance_id)


def remove_by_instance_id(remove: MemberRemover, settings: ConsumerSettings, instance_id: str) -> bool:
    """Consumer protocol: admin removal after close. False (logged) when it failed."""
    try:
        remove(settings, instance_id)
    except (AdapterError, StaticConsumerError) as exc:
        log.warning("could not remove %r (%s); it expires after the session timeout", instance_id, exc)
        return False
    return True


__all__ = [
    "MemberRemover",
    "left_after_close",
    "remove_by_instance_id",
    "remove_static_member",
    "unsubscribe_and_serve_revoke",
]
