"""Live audit: does a group's assignment match what librdkafka's assignor should have produced?

For a classic group using ``range`` or ``roundrobin`` the expected plan is predicted with the pure
models in :mod:`assignors` from the members the coordinator reports (instance ids, subscriptions) and
the topics' current partition counts. Whatever the assignor, the audit reports partitions nobody owns,
partitions owned twice, and partitions that no longer exist.

Unowned partitions matter most: nobody consumes them, and nothing complains. Under the classic protocol
librdkafka notices added partitions (and new topics matching a ``^regex``) only at its next metadata
refresh (``topic.metadata.refresh.interval.ms``, 5 min by default); every member then rejoins, and the
group rebalances. That holds after a static leader restarted too, although JoinGroup v5 does not tell
the new incarnation that it leads (KIP-814): the coordinator knows it by member id and rebalances when it
rejoins (``integration/test_static_leader_metadata.py``). So partitions unowned for longer than a refresh
interval are a fault, not a wait.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kafka.errors as kafka_errors

from assignors import AuditReport, Member, Partition, Plan, compare, range_plan, roundrobin_plan
from static_consumer._base.records import TopicPartition
from static_consumer._kafka import kafka_python
from static_consumer._kafka.describe import describe_with
from static_consumer._kafka.groups import GroupDescription, GroupMember, partitions_to_json
from static_consumer.settings import ConsumerSettings

MODELS = {"range": range_plan, "roundrobin": roundrobin_plan}
SETTLED_STATES = frozenset({"Stable", "Empty", "Dead"})


@dataclass(frozen=True, slots=True)
class GroupAudit:
    """The audit of one group. ``verdict``: ``ok``; ``empty`` (no members: nothing consumes, or the
    group does not exist); ``rebalancing`` (between generations: audit again); or ``problems`` (see
    :meth:`problems`). ``expected`` is the model's plan by member id, None when the assignor is not
    modelled."""

    description: GroupDescription
    partitions_per_topic: Mapping[str, int]
    missing_topics: tuple[str, ...]
    model: str | None
    expected: Plan | None
    report: AuditReport
    warnings: tuple[str, ...]

    @property
    def verdict(self) -> str:
        if not self.description.members:
            return "empty"
        if self.description.state not in SETTLED_STATES:
            return "rebalancing"
        return "ok" if self.report.ok else "problems"

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def _who(self, member_id: str) -> str:
        member = next((m for m in self.description.members if m.member_id == member_id), None)
        return member.instance_id if member is not None and member.instance_id else member_id

    def expected_by_member(self) -> dict[str, tuple[TopicPartition, ...]] | None:
        """The model's plan keyed by instance id (member id for dynamic members)."""
        if self.expected is None:
            return None
        return {self._who(k): tuple(TopicPartition(*tp) for tp in v) for k, v in self.expected.items()}

    def problems(self) -> tuple[str, ...]:
        """One readable line per difference, saying what to do where there is something to do."""
        group = self.description.group_id
        lines = []
        if self.report.unassigned:
            parts = ", ".join(_fmt(self.report.unassigned))
            lines.append(
                f"{len(self.report.unassigned)} partition(s) have no owner, so nobody consumes them: "
                f"{parts}. "
                "If partitions were added recently, the group has not rebalanced since: under the classic "
                "protocol librdkafka sees new partitions only at its next metadata refresh "
                "(topic.metadata.refresh.interval.ms, 5 min by default), then the group rebalances. Not to "
                f"wait: `static-consumer remove-members {group} --instance-id <a live member>` (it rejoins "
                "at once and the group reassigns everything)"
            )
        for overlap in self.report.doubly_assigned:
            owners = ", ".join(self._who(m) for m in overlap.member_ids)
            lines.append(f"{_fmt([overlap.partition])[0]} is owned by several members at once: {owners}")
        if self.report.unknown:
            lines.append(f"members own partitions that do not exist: {', '.join(_fmt(self.report.unknown))}")
        # In a mixed group librdkafka's member order depends on join order, so a mismatch says nothing
        # about a bug; it goes away once every member is static.
        why = "; in a mixed group that is arrival order, not a fault" if self.report.mixed_membership else ""
        for mm in self.report.mismatched:
            lines.append(
                f"{self._who(mm.member_id)} owns {', '.join(_fmt(mm.actual)) or 'nothing'} but the "
                f"{self.model} model predicts {', '.join(_fmt(mm.expected)) or 'nothing'}{why}"
            )
        return tuple(lines)

    def to_dict(self) -> dict[str, Any]:
        expected = self.expected_by_member()
        return {
            "group_id": self.description.group_id,
            "verdict": self.verdict,
            "ok": self.ok,
            "model": self.model,
            "partitions_per_topic": dict(sorted(self.partitions_per_topic.items())),
            "missing_topics": list(self.missing_topics),
            "expected": (
                {k: partitions_to_json(v) for k, v in expected.items()} if expected is not None else None
            ),
            "unassigned": partitions_to_json(_tps(self.report.unassigned)),
            "doubly_assigned": [
                {
                    "topic": o.partition.topic,
                    "partition": o.partition.partition,
                    "owners": [self._who(m) for m in o.member_ids],
                }
                for o in self.report.doubly_assigned
            ],
            "unknown": partitions_to_json(_tps(self.report.unknown)),
            "mismatched": [
                {
                    "member": self._who(mm.member_id),
                    "member_id": mm.member_id,
                    "expected": partitions_to_json(_tps(mm.expected)),
                    "actual": partitions_to_json(_tps(mm.actual)),
                }
                for mm in self.report.mismatched
            ],
            "mixed_membership": self.report.mixed_membership,
            "problems": list(self.problems()),
            "warnings": list(self.warnings),
        }


def _tps(parts: Iterable[tuple[str, int]]) -> list[TopicPartition]:
    return [TopicPartition(t, p) for t, p in parts]


def _fmt(parts: Iterable[tuple[str, int]]) -> list[str]:
    return [str(tp) for tp in sorted(_tps(parts))]


def _subscription(member: GroupMember) -> frozenset[str]:
    if member.subscription is not None:
        return frozenset(member.subscription)
    return frozenset(tp.topic for tp in member.assignment)  # KIP-848: best available


def topics_of(description: GroupDescription, extra: Iterable[str] = ()) -> frozenset[str]:
    """The topics an audit must count partitions for: subscriptions, assignments and ``extra``."""
    topics = set(extra)
    for m in description.members:
        topics |= _subscription(m)
        topics |= {tp.topic for tp in m.assignment}
    return frozenset(topics)


def audit_description(
    description: GroupDescription,
    partitions_per_topic: Mapping[str, int],
    missing_topics: Iterable[str] = (),
) -> GroupAudit:
    """Audit a described group against the topics' partition counts. Pure."""
    members = [Member(m.instance_id, m.member_id, _subscription(m)) for m in description.members]
    actual = {m.member_id: [(tp.topic, tp.partition) for tp in m.assignment] for m in description.members}
    planner = MODELS.get(description.assignor or "") if description.group_type == "classic" else None
    model = description.assignor if planner is not None else None
    expected = (
        planner(members, partitions_per_topic)
        if planner is not None
        else {k: tuple(Partition(*tp) for tp in v) for k, v in actual.items()}
    )
    report = compare(expected, actual, partitions_per_topic, members=members)
    return GroupAudit(
        description=description,
        partitions_per_topic=dict(partitions_per_topic),
        missing_topics=tuple(sorted(missing_topics)),
        model=model,
        expected=expected if planner is not None else None,
        report=report,
        warnings=tuple(_warnings(description, model, missing_topics)),
    )


def _warnings(description: GroupDescription, model: str | None, missing: Iterable[str]) -> list[str]:
    out = []
    if not description.exists:
        out.append(f"group {description.group_id!r} does not exist (no members, no state)")
    elif not description.members:
        out.append(f"group {description.group_id!r} has no members: nothing consumes its topics")
    if description.state not in SETTLED_STATES:
        out.append(
            f"the group is {description.state}: its assignment is in flux; audit again once it is Stable"
        )
    if description.mixed:
        dynamic = ", ".join(m.member_id for m in description.dynamic_members)
        out.append(
            f"mixed group: {len(description.static_members)} static and {len(description.dynamic_members)} "
            f"dynamic member(s) ({dynamic}). Dynamic members rejoin under a new member id on every restart, "
            "which rebalances the whole group, and librdkafka orders a static and a dynamic member by "
            "member id (new on every join), so the assignment depends on arrival order. Normal midway "
            "through a migration to static membership: finish the rollout soon (docs/migration.md). "
            "Otherwise give every consumer a group.instance.id"
        )
    if model is None and description.members:
        out.append(
            f"the {description.group_type} group's assignor {description.assignor!r} is not modelled: only "
            "ownership (unowned, doubly owned, unknown partitions) is checked"
        )
    reconciling = [
        m.instance_id or m.member_id
        for m in description.members
        if m.target_assignment is not None and set(m.target_assignment) != set(m.assignment)
    ]
    if reconciling:
        out.append(f"members still moving to their target assignment: {', '.join(reconciling)}")
    if missing := sorted(missing):
        out.append(f"subscribed topics that do not exist: {', '.join(missing)}")
    return out


def audit_group(
    settings: ConsumerSettings, group_id: str | None = None, *, topics: Iterable[str] = ()
) -> GroupAudit:
    """Describe the group, read the partition counts of its topics and audit (see module docs).

    ``topics`` adds topics the group should consume (their unowned partitions are then reported even
    when no member subscribes); literal names in ``settings.topics`` are added too.
    """
    group = group_id or settings.group_id
    # Regex subscriptions cannot be resolved here; the members' own subscriptions cover them.
    literal = [t for t in settings.topics if not t.startswith("^")]
    with kafka_python.kafka_admin(settings, f"audit group {group}") as admin:
        description = describe_with(admin, settings, group)
        counts, missing = partition_counts(admin, topics_of(description, [*topics, *literal]))
    return audit_description(description, counts, missing)


def partition_counts(admin: Any, topics: Iterable[str]) -> tuple[dict[str, int], tuple[str, ...]]:
    """``({topic: partition count}, missing topics)`` for ``topics`` (never auto-creates)."""
    names = sorted(set(topics))
    if not names:
        return {}, ()
    counts: dict[str, int] = {}
    missing: list[str] = []
    for topic in admin.describe_topics(names):
        error = kafka_errors.for_code(topic["error_code"])
        if error is kafka_errors.NoError:
            counts[topic["name"]] = len(topic["partitions"])
        elif error is kafka_errors.UnknownTopicOrPartitionError:
            missing.append(topic["name"])
        else:
            raise error(f"describe topic {topic['name']}")
    return counts, tuple(sorted(missing))


__all__ = ["MODELS", "GroupAudit", "audit_description", "audit_group", "topics_of"]
