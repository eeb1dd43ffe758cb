"""Reading a group: one :func:`describe_group` (members, instance ids, hosts, assignments as the
coordinator sees them now), for the operator tools and the consumer's held-assignment look-up.

kafka-python's DescribeGroups goes first because librdkafka's group description leaves out each
member's subscription, which the audit needs. The classic DescribeGroups API refuses KIP-848 groups, so
those are described through confluent-kafka's ``describe_consumer_groups`` (ConsumerGroupDescribe),
which the wait for a held instance id (``watch``) asks too (:func:`ask_consumer_group`). Every client is
closed before returning, and every broker error leaves as a :mod:`static_consumer._base.errors` class.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Mapping
from typing import Any

from static_consumer._base.errors import BrokerUnavailableError
from static_consumer._base.records import TopicPartition
from static_consumer._kafka import kafka_python
from static_consumer._kafka.admin_client import error_for, kafka_exception, librdkafka_admin
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
    return describe_consumer_protocol(settings, group_id)


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


def describe_consumer_protocol(settings: Cluster, group_id: str) -> GroupDescription:
    """Describe a group through confluent-kafka (ConsumerGroupDescribe for KIP-848 groups)."""
    from confluent_kafka import KafkaException

    doing = f"describe group {group_id}"
    timeout = settings.connect_timeout_s
    client = librdkafka_admin(settings, doing)
    try:
        return ask_consumer_group(client, group_id, timeout)
    except concurrent.futures.TimeoutError:
        raise BrokerUnavailableError(
            f"{doing}: no answer from {settings.bootstrap_servers} within {timeout:g}s"
        ) from None
    except KafkaException as exc:
        raise error_for(*kafka_exception(exc), settings, doing) from None


def ask_consumer_group(client: Any, group_id: str, timeout_s: float) -> GroupDescription:
    """One ConsumerGroupDescribe of ``group_id`` through the confluent-kafka AdminClient ``client``,
    bounded by ``timeout_s``; raises ``KafkaException`` or ``concurrent.futures.TimeoutError``."""
    future = client.describe_consumer_groups([group_id], request_timeout=timeout_s)[group_id]
    return consumer_group(group_id, future.result(timeout=timeout_s))


def consumer_group(group_id: str, desc: Any) -> GroupDescription:
    """A confluent-kafka ``ConsumerGroupDescription`` as a :class:`GroupDescription`."""
    members = tuple(
        GroupMember(
            member_id=m.member_id,
            instance_id=m.group_instance_id or None,
            client_id=m.client_id or "",
            host=str(m.host or "").lstrip("/"),
            subscription=None,
            assignment=_partitions(m.assignment),
            target_assignment=_partitions(m.target_assignment) if m.target_assignment else None,
        )
        for m in desc.members
    )
    coordinator = getattr(desc, "coordinator", None)
    return GroupDescription(
        group_id=group_id,
        state=_camel(getattr(desc.state, "name", str(desc.state))),
        group_type=getattr(desc.type, "name", str(desc.type)).lower(),
        assignor=desc.partition_assignor or None,
        members=members,
        coordinator=getattr(coordinator, "id", None),
    )


def _partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    parts = getattr(assignment, "topic_partitions", None) or ()
    return tuple(sorted(TopicPartition(tp.topic, tp.partition) for tp in parts))


def _camel(enum_name: str) -> str:
    """``PREPARING_REBALANCE`` -> ``PreparingRebalance``: the broker's own spelling of group states."""
    return "".join(word.capitalize() for word in enum_name.split("_"))


__all__ = [
    "ask_consumer_group",
    "consumer_group",
    "describe_consumer_protocol",
    "describe_group",
    "describe_with",
]
