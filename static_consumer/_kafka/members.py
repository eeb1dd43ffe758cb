"""Removing static members by ``group.instance.id`` (LeaveGroup v3+, through kafka-python): the
consumer's own member when a KIP-848 member leaves its group (``leave_group()``), and the operator
tools' removals (``static_consumer.admin``).

librdkafka has no API to remove members by instance id, and a static member's ``close()`` sends no
LeaveGroup, so these calls are how a static member leaves at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import MemberToRemove

from static_consumer._base.errors import CapabilityError, RetriableError
from static_consumer._kafka import kafka_python
from static_consumer._kafka.groups import RemovalFailure
from static_consumer.settings._views import Cluster


def leave(
    admin: Any, group_id: str, instance_ids: Iterable[str], reason: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[RemovalFailure, ...]]:
    """One LeaveGroup (v3+) batch removing ``instance_ids``: ``(removed, absent, failed)``."""
    ids = list(instance_ids)
    if not ids:
        return (), (), ()
    try:
        outcome = admin.remove_group_members(
            group_id, [MemberToRemove(group_instance_id=i, reason=reason) for i in ids]
        )
    except kafka_errors.UnsupportedVersionError:
        raise CapabilityError(
            "removing members by group.instance.id needs LeaveGroup v3 (Kafka 2.3+), which the broker "
            "lacks; wait for the session timeout instead, or upgrade the brokers"
        ) from None
    removed, absent, failed = [], [], []
    for instance_id in ids:
        error = outcome.get(instance_id, kafka_errors.NoError)
        if error is kafka_errors.NoError:
            removed.append(instance_id)
        elif error is kafka_errors.UnknownMemberIdError:
            absent.append(instance_id)  # left (or expired) between the describe and the removal
        else:
            retriable = bool(getattr(error, "retriable", False))
            failed.append(RemovalFailure(instance_id, error.__name__, retriable))
    return tuple(removed), tuple(absent), tuple(failed)


def remove_static_member(settings: Cluster, instance_id: str) -> bool:
    """Remove this consumer's own static member (one LeaveGroup v3+ by instance id). True if it was
    removed, False if the broker no longer knew it; raises StaticConsumerError when refused or unreachable."""
    group = settings.group_id
    with kafka_python.kafka_admin(
        settings, f"remove {instance_id!r} from group {group!r}", reads_group=True
    ) as admin:
        removed, _, failed = leave(admin, group, [instance_id], "static_consumer leave_group()")
    if failed:
        raise RetriableError(
            f"the broker refused to remove {instance_id!r} from group {group!r}: {failed[0].error}"
        )
    return bool(removed)


__all__ = ["leave", "remove_static_member"]
