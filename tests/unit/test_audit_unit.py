"""The live audit's judgement, on described groups built by hand and on a recorded Kafka 4.3.1 answer."""

from __future__ import annotations

import json
from pathlib import Path

from static_consumer._base.records import TopicPartition
from static_consumer._kafka.describe import _from_describe_groups
from static_consumer._kafka.groups import GroupDescription, GroupMember
from static_consumer.admin.audit import audit_description, topics_of

RECORDED = json.loads((Path(__file__).parent / "data" / "describe_groups_mixed.json").read_text())


def tps(topic: str, *partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition(topic, p) for p in partitions)


def member(
    instance_id: str | None, member_id: str, *owned: TopicPartition, topics: tuple[str, ...] = ("t",)
) -> GroupMember:
    return GroupMember(member_id, instance_id, "rdkafka", "10.0.0.1", topics, tuple(owned))


def group(
    *members: GroupMember, assignor: str = "range", state: str = "Stable", kind: str = "classic"
) -> GroupDescription:
    return GroupDescription("orders", state, kind, assignor, tuple(members))


def test_range_assignment_by_instance_id_order_is_ok() -> None:
    # member ids sort the other way round: only the instance ids explain this assignment
    d = group(member("pod-0", "z-member", *tps("t", 0, 1)), member("pod-1", "a-member", *tps("t", 2)))
    audit = audit_description(d, {"t": 3})
    assert (audit.verdict, audit.ok, audit.model, audit.problems()) == ("ok", True, "range", ())
    assert audit.expected_by_member() == {"pod-0": tps("t", 0, 1), "pod-1": tps("t", 2)}


def test_partitions_added_but_not_assigned_are_reported_with_the_remedy() -> None:
    d = group(member("pod-0", "m0", *tps("t", 0)), member("pod-1", "m1", *tps("t", 1)))
    audit = audit_description(d, {"t": 4})
    assert audit.verdict == "problems" and not audit.ok
    assert audit.to_dict()["unassigned"] == {"t": [2, 3]}
    unowned = audit.problems()[0]
    assert "t[2], t[3]" in unowned and "remove-members orders --instance-id" in unowned
    # and the model says where they should be
    assert audit.expected_by_member() == {"pod-0": tps("t", 0, 1), "pod-1": tps("t", 2, 3)}


def test_a_member_holding_the_wrong_partitions_is_a_mismatch() -> None:
    d = group(member("pod-0", "m0", *tps("t", 2)), member("pod-1", "m1", *tps("t", 0, 1)))
    audit = audit_description(d, {"t": 3})
    mismatched = audit.to_dict()["mismatched"]
    assert [m["member"] for m in mismatched] == ["pod-0", "pod-1"]
    assert mismatched[0]["expected"] == {"t": [0, 1]} and mismatched[0]["actual"] == {"t": [2]}
    assert "pod-0 owns t[2] but the range model predicts t[0], t[1]" in audit.problems()


def test_doubly_owned_and_vanished_partitions_are_problems_even_for_unmodelled_assignors() -> None:
    d = group(
        member("pod-0", "m0", *tps("t", 0, 1, 7)),
        member("pod-1", "m1", *tps("t", 1, 2)),
        assignor="cooperative-sticky",
    )
    audit = audit_description(d, {"t": 3})
    report = audit.to_dict()
    assert audit.model is None and report["expected"] is None and report["mismatched"] == []
    assert report["doubly_assigned"] == [{"topic": "t", "partition": 1, "owners": ["pod-0", "pod-1"]}]
    assert report["unknown"] == {"t": [7]}
    assert any("not modelled" in w for w in audit.warnings)


def test_recorded_mixed_group_matches_the_model_and_is_flagged() -> None:
    d = _from_describe_groups("orders", RECORDED)
    audit = audit_description(d, {"orders": 3})
    assert audit.verdict == "ok", audit.problems()
    assert audit.report.mixed_membership
    (warning,) = [w for w in audit.warnings if w.startswith("mixed group")]
    assert "2 static and 1 dynamic" in warning and "group.instance.id" in warning


def test_rebalancing_and_empty_groups_are_not_ok() -> None:
    rebalancing = audit_description(group(member("pod-0", "m0"), state="PreparingRebalance"), {"t": 1})
    assert rebalancing.verdict == "rebalancing" and any("in flux" in w for w in rebalancing.warnings)
    empty = audit_description(group(state="Empty"), {"t": 2})
    assert empty.verdict == "empty" and empty.to_dict()["unassigned"] == {"t": [0, 1]}
    dead = audit_description(group(state="Dead"), {})
    assert dead.verdict == "empty" and any("does not exist" in w for w in dead.warnings)


def test_kip848_members_reconciling_are_reported_and_subscriptions_fall_back_to_assignments() -> None:
    moving = GroupMember("m0", "pod-0", "rdkafka", "h", None, tps("t", 0), target_assignment=tps("t", 0, 1))
    d = group(moving, assignor="uniform", kind="consumer")
    assert topics_of(d, ["u"]) == {"t", "u"}
    audit = audit_description(d, {"t": 2, "u": 1}, missing_topics=["gone"])
    assert audit.to_dict()["unassigned"] == {"t": [1], "u": [0]}
    assert any("target assignment: pod-0" in w for w in audit.warnings)
    assert any("do not exist: gone" in w for w in audit.warnings)
