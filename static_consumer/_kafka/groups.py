"""What a consumer group looks like from outside: members, instance ids, hosts, assignments. Pure data.

Built by ``describe`` from the broker's DescribeGroups (classic groups) or
ConsumerGroupDescribe (KIP-848 groups) answers; read by ``admin``, ``audit`` and the CLI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from static_consumer._base.records import TopicPartition


def partitions_to_json(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """``{topic: [partition, ...]}``, sorted: the JSON form of a partition set used by the CLI."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member as the group coordinator describes it.

    ``subscription`` is None when the broker does not report it (KIP-848 groups described through
    confluent-kafka). ``target_assignment`` exists only for KIP-848 groups: while it differs from
    ``assignment`` the member is still reconciling.
    """

    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    subscription: tuple[str, ...] | None
    assignment: tuple[TopicPartition, ...]
    target_assignment: tuple[TopicPartition, ...] | None = None

    @property
    def static(self) -> bool:
        return self.instance_id is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "instance_id": self.instance_id,
            "client_id": self.client_id,
            "host": self.host,
            "subscription": list(self.subscription) if self.subscription is not None else None,
            "assignment": partitions_to_json(self.assignment),
            "target_assignment": (
                partitions_to_json(self.target_assignment) if self.target_assignment is not None else None
            ),
        }


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A group: ``state`` as the broker names it (Stable, PreparingRebalance, CompletingRebalance, Empty,
    Dead, Assigning, Reconciling), ``group_type`` ``classic`` or ``consumer`` (KIP-848), ``assignor`` the
    partition assignor in use (e.g. ``range``; None while the group has no protocol). Members are sorted
    by instance id, then member id (dynamic members last). ``coordinator`` is the coordinator's broker
    id where the answer carries it (ConsumerGroupDescribe)."""

    group_id: str
    state: str
    group_type: str
    assignor: str | None
    members: tuple[GroupMember, ...]
    coordinator: int | None = None

    def __post_init__(self) -> None:
        def key(m: GroupMember) -> tuple[bool, str, str]:
            return (m.instance_id is None, m.instance_id or "", m.member_id)

        object.__setattr__(self, "members", tuple(sorted(self.members, key=key)))

    @property
    def exists(self) -> bool:
        """False when the coordinator knows nothing about the group (state Dead, no members)."""
        return not (self.state == "Dead" and not self.members)

    @property
    def instance_ids(self) -> frozenset[str]:
        return frozenset(m.instance_id for m in self.members if m.instance_id is not None)

    @property
    def static_members(self) -> tuple[GroupMember, ...]:
        return tuple(m for m in self.members if m.static)

    @property
    def dynamic_members(self) -> tuple[GroupMember, ...]:
        return tuple(m for m in self.members if not m.static)

    @property
    def mixed(self) -> bool:
        """Static and dynamic members at once: restarts of the dynamic ones still rebalance the group,
        and librdkafka's member order (hence the assignment) can depend on arrival order."""
        return bool(self.static_members) and bool(self.dynamic_members)

    def member(self, instance_id: str) -> GroupMember | None:
        return next((m for m in self.members if m.instance_id == instance_id), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "state": self.state,
            "type": self.group_type,
            "assignor": self.assignor,
            "exists": self.exists,
            "mixed": self.mixed,
            "members": [m.to_dict() for m in self.members],
        }


@dataclass(frozen=True, slots=True)
class RemovalFailure:
    """A member the broker refused to remove, with the broker's error name."""

    instance_id: str
    error: str
    retriable: bool


@dataclass(frozen=True, slots=True)
class RemovalResult:
    """Outcome of a LeaveGroup-by-instance-id batch.

    ``removed``: gone from the group now. ``absent``: not (or no longer) in the group, nothing to do.
    ``failed``: refused by the broker; ``ok`` is False when there is any.
    """

    group_id: str
    removed: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    failed: tuple[RemovalFailure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "ok": self.ok,
            "removed": list(self.removed),
            "absent": list(self.absent),
            "failed": [
                {"instance_id": f.instance_id, "error": f.error, "retriable": f.retriable}
                for f in self.failed
            ],
        }


__all__ = ["GroupDescription", "GroupMember", "RemovalFailure", "RemovalResult", "partitions_to_json"]
