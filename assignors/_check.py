"""Invariant checks for plans: ownership, subscriptions and each strategy's balance promise."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from assignors._types import Member, Partition, Plan, Strategy, validate_members


class ViolationKind(StrEnum):
    """What a :class:`Violation` is about."""

    UNKNOWN_MEMBER = "unknown_member"
    UNKNOWN_PARTITION = "unknown_partition"
    NOT_SUBSCRIBED = "not_subscribed"
    UNASSIGNED = "unassigned"
    DUPLICATE = "duplicate"
    UNBALANCED = "unbalanced"


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant; ``member_id``/``partition`` say where, when that applies."""

    kind: ViolationKind
    message: str
    member_id: str | None = None
    partition: Partition | None = None


def check_plan(
    strategy: Strategy,
    members: Iterable[Member],
    partitions_per_topic: Mapping[str, int],
    plan: Plan,
) -> list[Violation]:
    """Every invariant ``plan`` breaks, in a deterministic order; empty means valid.

    Ownership: each partition of a topic that exists and has a subscriber is owned by
    exactly one member, and only by a member subscribed to its topic. Balance:

    * ``range`` and ``ordinal``: per topic, subscribers' counts differ by at most one;
    * ``roundrobin``: overall counts differ by at most one, checked only when all members
      subscribe to the same existing topics (librdkafka promises nothing otherwise).

    A member missing from ``plan`` counts as owning nothing.
    """
    group = validate_members(members)
    by_id = {m.member_id: m for m in group}
    violations: list[Violation] = []
    owners: dict[Partition, list[str]] = {}
    for member_id in sorted(plan):
        member = by_id.get(member_id)
        if member is None:
            violations.append(
                Violation(ViolationKind.UNKNOWN_MEMBER, f"{member_id!r} is not a member", member_id)
            )
            continue
        for tp in plan[member_id]:
            violations.extend(_check_owned(member, Partition(*tp), partitions_per_topic))
            owners.setdefault(Partition(*tp), []).append(member_id)
    violations.extend(_check_coverage(group, partitions_per_topic, owners))
    counts = {m.member_id: len(plan.get(m.member_id, ())) for m in group}
    violations.extend(_check_balance(strategy, group, partitions_per_topic, plan, counts))
    return violations


def _check_owned(member: Member, tp: Partition, partitions_per_topic: Mapping[str, int]) -> list[Violation]:
    count = partitions_per_topic.get(tp.topic)
    if count is None or not 0 <= tp.partition < count:
        return [Violation(ViolationKind.UNKNOWN_PARTITION, f"{tp} does not exist", member.member_id, tp)]
    if tp.topic not in member.subscription:
        msg = f"{member.member_id!r} owns {tp} but does not subscribe to {tp.topic!r}"
        return [Violation(ViolationKind.NOT_SUBSCRIBED, msg, member.member_id, tp)]
    return []


def _check_coverage(
    group: list[Member], partitions_per_topic: Mapping[str, int], owners: Mapping[Partition, list[str]]
) -> list[Violation]:
    subscribed = set().union(*(m.subscription for m in group)) if group else set()
    violations: list[Violation] = []
    for topic in sorted(set(partitions_per_topic) & subscribed):
        for p in range(partitions_per_topic[topic]):
            tp = Partition(topic, p)
            held_by = owners.get(tp, [])
            if not held_by:
                violations.append(Violation(ViolationKind.UNASSIGNED, f"{tp} has no owner", None, tp))
            elif len(held_by) > 1:
                msg = f"{tp} is owned {len(held_by)} times, by {sorted(held_by)}"
                violations.append(Violation(ViolationKind.DUPLICATE, msg, None, tp))
    return violations


def _check_balance(
    strategy: Strategy,
    group: list[Member],
    partitions_per_topic: Mapping[str, int],
    plan: Plan,
    counts: Mapping[str, int],
) -> list[Violation]:
    if strategy is not Strategy.ROUNDROBIN:
        per_topic = Counter((member_id, tp[0]) for member_id, parts in plan.items() for tp in parts)
        violations = []
        for topic in sorted(partitions_per_topic):
            subscribers = {
                m.member_id: per_topic[m.member_id, topic] for m in group if topic in m.subscription
            }
            violations.extend(_spread(subscribers, f"topic {topic!r}"))
        return violations
    existing = set(partitions_per_topic)
    if len({m.subscription & existing for m in group}) > 1:
        return []
    return _spread(counts, "overall")


def _spread(counts: Mapping[str, int], scope: str) -> list[Violation]:
    if not counts or max(counts.values()) - min(counts.values()) <= 1:
        return []
    most = max(counts, key=lambda k: (counts[k], k))
    least = min(counts, key=lambda k: (counts[k], k))
    msg = f"{scope}: {most!r} owns {counts[most]} partitions but {least!r} owns {counts[least]}"
    return [Violation(ViolationKind.UNBALANCED, msg, most)]


Planner = Callable[[Sequence[Member], Mapping[str, int]], Plan]


def is_permutation_invariant(
    planner: Planner, members: Sequence[Member], partitions_per_topic: Mapping[str, int]
) -> bool:
    """True when ``planner`` gives the same plan for reordered members and topics.

    Tries reversed, rotated and interleaved member orders and a reversed topic order; a
    planner that sorts its input (as librdkafka does) passes, one that trusts input order
    does not.
    """
    baseline = dict(planner(members, partitions_per_topic))
    half = len(members) // 2
    orders = [
        list(reversed(members)),
        list(members[half:]) + list(members[:half]),
        list(members[1::2]) + list(members[::2]),
    ]
    reversed_topics = dict(reversed(list(partitions_per_topic.items())))
    candidates = [planner(order, partitions_per_topic) for order in orders]
    candidates.append(planner(members, reversed_topics))
    return all(dict(candidate) == baseline for candidate in candidates)
