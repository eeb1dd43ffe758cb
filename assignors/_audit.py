"""Compare a predicted plan with the assignment a group actually holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from assignors._order import is_mixed
from assignors._types import Member, Partition, Plan


class MemberMismatch(NamedTuple):
    """A member whose actual partitions differ from the expected ones (all sorted)."""

    member_id: str
    expected: tuple[Partition, ...]
    actual: tuple[Partition, ...]
    missing: tuple[Partition, ...]
    unexpected: tuple[Partition, ...]


class Overlap(NamedTuple):
    """A partition held by more than one member at once."""

    partition: Partition
    member_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuditReport:
    """Differences between expected and actual assignment; ``ok`` when there are none.

    ``mixed_membership`` is a warning, not a difference: with static and dynamic members in
    one group librdkafka's member order can depend on arrival order, so a mismatch may be
    librdkafka's nondeterminism rather than a bug (see ``assignors._order``).
    """

    mismatched: tuple[MemberMismatch, ...]
    unassigned: tuple[Partition, ...]
    doubly_assigned: tuple[Overlap, ...]
    unknown: tuple[Partition, ...]
    mixed_membership: bool

    @property
    def ok(self) -> bool:
        return not (self.mismatched or self.unassigned or self.doubly_assigned or self.unknown)


def compare(
    expected: Plan,
    actual: Mapping[str, Iterable[tuple[str, int]]],
    partitions_per_topic: Mapping[str, int],
    *,
    members: Iterable[Member] = (),
) -> AuditReport:
    """Audit ``actual`` (member_id -> held ``(topic, partition)`` pairs) against ``expected``.

    ``partitions_per_topic`` should list the topics the group consumes: their partitions that
    nobody holds are ``unassigned``; held partitions outside it are ``unknown``. A member
    present on one side only is a mismatch against an empty assignment. Pass ``members``
    (as described by the broker) to get ``mixed_membership``.
    """
    held = {member_id: tuple(sorted({Partition(*tp) for tp in parts})) for member_id, parts in actual.items()}
    mismatched = []
    for member_id in sorted(set(expected) | set(held)):
        want = tuple(sorted(expected.get(member_id, ())))
        got = held.get(member_id, ())
        if want != got:
            missing = tuple(sorted(set(want) - set(got)))
            unexpected = tuple(sorted(set(got) - set(want)))
            mismatched.append(MemberMismatch(member_id, want, got, missing, unexpected))
    owners: dict[Partition, list[str]] = {}
    for member_id in sorted(held):
        for tp in held[member_id]:
            owners.setdefault(tp, []).append(member_id)
    existing = {Partition(t, p) for t, count in partitions_per_topic.items() for p in range(count)}
    return AuditReport(
        mismatched=tuple(mismatched),
        unassigned=tuple(sorted(existing - owners.keys())),
        doubly_assigned=tuple(Overlap(tp, tuple(ids)) for tp, ids in sorted(owners.items()) if len(ids) > 1),
        unknown=tuple(sorted(owners.keys() - existing)),
        mixed_membership=is_mixed(members),
    )
