"""Reading a group: one :func:`describe_group` (members, instance ids, hosts, assignments as the
coordinator sees them now), for the operator tools and the consumer's held-assignment look-up.

Both requests go through kafka-python. DescribeGroups goes first because it carries each member's
subscription, which the audit needs. The classic DescribeGroups API refuses KIP-848 groups, so those are
described with ConsumerGroupDescribe (api key 69), which kafka-python lists but ships no schema for: its
field list is in ``schemas/``, as for the static leave (``release``). It is not asked through
librdkafka's admin client: that client aborts or crashes the process that made a coordinator-bound
request when the coordinator goes away while it is under way (an assertion ``eonce->refcnt > 0``, a
NULL dereference on NOT_COORDINATOR; librdkafka 2.16), and a consumer process must not die of a look at
its own group (docs/semantics.md). The wait for a held instance id (``watch``) asks it too
(:func:`ask_consumer_group`). Every client is closed before returning, and every broker error leaves as
a :mod:`static_consumer._base.errors` class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import kafka.errors as kafka_errors
from kafka.protocol.api_message import ApiMessage

from static_consumer._base.codes import GROUP_ID_NOT_FOUND
from static_consumer._base.records import TopicPartition
from static_consumer._kafka import kafka_python, schemas
from static_consumer._kafka.admin_client import error_for
from static_consumer._kafka.groups import GroupDescription, GroupMember
from static_consumer.settings._views import Cluster


def describe_group(settings: Cluster, group_id: str | None = None) -> GroupDescription:
    """Members, instance ids, hosts and assignments of the group, as the coordinator sees them now."""
    group = group_id or settings.group_id
    with kafka_python.kafka_admin(settings, f"describe group {group}") as admin:
        return describe_with(admin, settings, group)


def describe_with(admin: Any, settings: Cluster, group_id: str) -> GroupDescription:
    """Describe ``group_id`` through an open kafka-python ``admin`` session (which the caller goes on
    using, e.g. to remove members): DescribeGroups first (it carries subscriptions), ConsumerGroupDescribe
    for KIP-848 groups, which the classic API answers with GROUP_ID_NOT_FOUND."""
    raw = admin.describe_groups([group_id])[group_id]
    if raw.get("error") is None or raw.get("members"):
        return _from_describe_groups(group_id, raw)
    error = str(raw["error"])
    if "GroupIdNotFound" not in error:
        raise error_for(kafka_python.kind_of_text(error), error, settings, f"describe group {group_id}")
    # Either no such group or a KIP-848 group; ConsumerGroupDescribe tells them apart (Dead = unknown).
    return ask_consumer_group(admin, group_id)


def ask_group(admin: Any, group_id: str) -> GroupDescription:
    """Describe ``group_id`` through an open kafka-python ``admin`` session as :func:`describe_with` does
    (DescribeGroups, then ConsumerGroupDescribe for a KIP-848 group), at the coordinator found now, and
    name that coordinator. Raises kafka-python errors; for the waits of a consumer (``watch``)."""
    forget_coordinator(admin, group_id)
    coordinator = admin._manager.run(admin._find_coordinator_id, group_id)
    raw = admin.describe_groups([group_id], group_coordinator_id=coordinator)[group_id]
    if raw.get("error") is None or raw.get("members"):
        return replace(_from_describe_groups(group_id, raw), coordinator=coordinator)
    if "GroupIdNotFound" not in str(raw["error"]):
        raise kafka_errors.KafkaError(str(raw["error"]))
    return ask_consumer_group(admin, group_id)


def _from_describe_groups(group_id: str, raw: Mapping[str, Any]) -> GroupDescription:
    members = []
    for m in raw.get("members") or ():
        metadata, assignment = m.get("member_metadata"), m.get("member_assignment")
        subscription = tuple(sorted(metadata["topics"])) if isinstance(metadata, dict) else None
        owned: list[TopicPartition] = []
        if isinstance(assignment, dict):
            for entry in assignment.get("assigned_partitions") or ():
                owned.extend(TopicPartition(entry["topic"], int(p)) for p in entry["partitions"])
        members.append(
            GroupMember(
                member_id=m["member_id"],
                instance_id=m.get("group_instance_id") or None,
                client_id=m.get("client_id", ""),
                host=str(m.get("client_host", "")).lstrip("/"),
                subscription=subscription,
                assignment=tuple(sorted(owned)),
            )
        )
    return GroupDescription(
        group_id=group_id,
        state=raw.get("group_state") or "Unknown",
        group_type="classic",
        assignor=raw.get("protocol_data") or None,
        members=tuple(members),
    )


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    """KIP-848's ConsumerGroupDescribe request (api key 69)."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    """Its response. Defining the class registers kafka-python's decoder for api key 69 (the registry
    holds a weak reference: the class lives as long as this module)."""


def describe_consumer_protocol(settings: Cluster, group_id: str) -> GroupDescription:
    """Describe a group with ConsumerGroupDescribe (a KIP-848 group; ``Dead`` when there is none)."""
    doing = f"describe group {group_id}"
    with kafka_python.kafka_admin(settings, doing) as admin:
        return ask_consumer_group(admin, group_id)


def ask_consumer_group(admin: Any, group_id: str) -> GroupDescription:
    """One ConsumerGroupDescribe of ``group_id`` through an open kafka-python ``admin`` session, sent to
    the coordinator found now (a coordinator found earlier may have moved); a group the coordinator does
    not know is ``Dead``. Raises kafka-python errors (the answer's own error code as its class)."""
    forget_coordinator(admin, group_id)
    coordinator, response = admin._manager.run(_describe, admin, group_id)
    (group,) = response.groups
    if group.error_code == GROUP_ID_NOT_FOUND:
        return GroupDescription(group_id, "Dead", "consumer", None, (), coordinator=coordinator)
    if group.error_code:
        raise kafka_errors.for_code(group.error_code)(group.error_message or group_id)
    members = tuple(
        GroupMember(
            member_id=m.member_id,
            instance_id=m.instance_id or None,
            client_id=m.client_id or "",
            host=str(m.client_host or "").lstrip("/"),
            subscription=None,
            assignment=_partitions(m.assignment),
            target_assignment=_partitions(m.target_assignment),
        )
        for m in group.members
    )
    return GroupDescription(
        group_id=group_id,
        state=group.group_state or "Unknown",
        group_type="consumer",
        assignor=group.assignor_name or None,
        members=members,
        coordinator=coordinator,
    )


async def _describe(admin: Any, group_id: str) -> tuple[int, Any]:
    coordinator = await admin._find_coordinator_id(group_id)
    request = ConsumerGroupDescribeRequest(group_ids=[group_id], include_authorized_operations=False)
    return coordinator, await admin._manager.send(request, node_id=coordinator)


def forget_coordinator(admin: Any, group_id: str) -> None:
    """Make the next request about ``group_id`` find its coordinator again: kafka-python keeps the one it
    found, and after a coordinator moved it would go on asking the old one (NOT_COORDINATOR) for minutes."""
    coordinators = admin._manager.cluster._coordinators
    for key in [k for k in coordinators if k[1] == group_id]:
        del coordinators[key]


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    parts = getattr(assignment, "topic_partitions", None) or ()
    return tuple(sorted(TopicPartition(tp.topic_name, p) for tp in parts for p in tp.partitions))


__all__ = [
    "ask_consumer_group",
    "ask_group",
    "describe_consumer_protocol",
    "forget_coordinator",
    "describe_group",
    "describe_with",
]
