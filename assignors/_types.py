"""Value types shared by every planner: partitions, members, plans, strategies."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple, TypeAlias


class Partition(NamedTuple):
    """One topic partition.

    A NamedTuple rather than a frozen dataclass: plans at 100,000 partitions are built and
    sorted in well under a second only because construction, hashing and ordering run in C.
    It also compares equal to a plain ``(topic, partition)`` tuple, so callers may pass
    tuples (or anything converted to them) to :func:`compare`.
    """

    topic: str
    partition: int


Plan: TypeAlias = Mapping[str, tuple[Partition, ...]]
"""member_id -> that member's partitions, sorted by (topic, partition). Every member is a key."""


class Strategy(StrEnum):
    """How a plan was made; values match ``partition.assignment.strategy`` where one exists."""

    RANGE = "range"
    ROUNDROBIN = "roundrobin"
    ORDINAL = "ordinal"


@dataclass(frozen=True, slots=True)
class Member:
    """A group member as the group leader sees it in the JoinGroup response.

    ``instance_id`` is ``group.instance.id`` (``None`` for a dynamic member); ``subscription``
    holds resolved topic names (regex subscriptions are not modelled).
    """

    instance_id: str | None
    member_id: str
    subscription: frozenset[str]

    def __post_init__(self) -> None:
        if not self.member_id:
            raise ValueError("member_id must be a non-empty string")
        if not isinstance(self.subscription, frozenset):
            # Accept any iterable of names at runtime; the stored value stays hashable.
            object.__setattr__(self, "subscription", frozenset(self.subscription))


def validate_members(members: Iterable[Member]) -> list[Member]:
    """Return ``members`` as a list, rejecting groups no broker could produce."""
    result = list(members)
    member_ids = [m.member_id for m in result]
    if len(set(member_ids)) != len(member_ids):
        raise ValueError("duplicate member_id in members")
    instance_ids = [m.instance_id for m in result if m.instance_id is not None]
    if len(set(instance_ids)) != len(instance_ids):
        # The coordinator keeps one member per group.instance.id and fences the rest.
        raise ValueError("duplicate instance_id in members")
    return result


def validate_partition_counts(partitions_per_topic: Mapping[str, int]) -> None:
    """Reject negative partition counts (zero means the topic has no partitions yet)."""
    for topic, count in partitions_per_topic.items():
        if count < 0:
            raise ValueError(f"topic {topic!r} has a negative partition count ({count})")


def plan_by_instance_id(plan: Plan, members: Iterable[Member]) -> dict[str, tuple[Partition, ...]]:
    """Re-key ``plan`` by instance id: the view that survives restarts (member ids change).

    Raises ``ValueError`` when a member in the plan has no instance id.
    """
    instance_of = {m.member_id: m.instance_id for m in members}
    result: dict[str, tuple[Partition, ...]] = {}
    for member_id, partitions in plan.items():
        instance_id = instance_of.get(member_id)
        if instance_id is None:
            raise ValueError(f"member {member_id!r} has no instance id")
        result[instance_id] = partitions
    return result
