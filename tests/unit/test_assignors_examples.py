"""Example tests: public surface, member ordering, ordinal planner, invariant checks, audits."""

from __future__ import annotations

import subprocess
import sys

import pytest

import assignors
from assignors import (
    Member,
    Partition,
    Strategy,
    ViolationKind,
    check_plan,
    compare,
    librdkafka_order,
    member_cmp,
    ordinal_plan,
    ordinal_plan_all,
    plan_by_instance_id,
    range_plan,
    roundrobin_plan,
)

T = frozenset({"t"})


def test_public_names() -> None:
    assert sorted(assignors.__all__) == [
        "AuditReport",
        "Member",
        "MemberMismatch",
        "Overlap",
        "Partition",
        "Plan",
        "Planner",
        "Strategy",
        "Violation",
        "ViolationKind",
        "check_plan",
        "compare",
        "is_mixed",
        "is_permutation_invariant",
        "librdkafka_order",
        "member_cmp",
        "ordinal_plan",
        "ordinal_plan_all",
        "plan_by_instance_id",
        "range_plan",
        "roundrobin_plan",
    ]


def test_package_is_pure() -> None:
    # assignors is the lower layer: importing it must not pull in the client or the library.
    code = (
        "import sys, assignors\n"
        "banned = {'static_consumer', 'confluent_kafka', 'kafka'}\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in banned]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_member_cmp_uses_instance_id_only_when_both_have_one() -> None:
    static_a = Member("a", "z-1", T)
    static_b = Member("b", "a-1", T)
    dynamic = Member(None, "m-1", T)
    assert member_cmp(static_a, static_b) < 0  # by instance id, although "z-1" > "a-1"
    assert member_cmp(static_a, dynamic) > 0  # by member id: "z-1" > "m-1"
    assert member_cmp(dynamic, static_b) > 0  # by member id: "m-1" > "a-1"
    assert member_cmp(static_a, static_a) == 0


def test_mixed_order_merges_static_and_dynamic_runs_by_member_id() -> None:
    # Statics by instance id: s1 ("a"), s2 ("b"). Dynamics by member id: d1 ("k"), d2 ("y").
    # Merge by member id: heads s1 "c" vs d1 "k" -> s1; s2 "x" vs d1 "k" -> d1; s2 "x" vs d2 "y" -> s2.
    s1, s2 = Member("a", "c", T), Member("b", "x", T)
    d1, d2 = Member(None, "k", T), Member(None, "y", T)
    expected = [s1, d1, s2, d2]
    assert librdkafka_order([d2, s2, d1, s1]) == expected
    assert librdkafka_order([s1, d1, d2, s2]) == expected


def test_cyclic_mixed_group_still_gets_one_deterministic_order() -> None:
    # A < B and B < C by member id, C < A by instance id: librdkafka's qsort result depends
    # on arrival order here; ours must not.
    a, b, c = Member("z", "a-1", T), Member(None, "m-1", T), Member("a", "z-1", T)
    orders = {tuple(m.member_id for m in librdkafka_order(p)) for p in ([a, b, c], [c, b, a], [b, c, a])}
    assert len(orders) == 1


def test_invalid_groups_are_rejected() -> None:
    with pytest.raises(ValueError, match="member_id"):
        Member("i", "", T)
    with pytest.raises(ValueError, match="duplicate member_id"):
        range_plan([Member(None, "m", T), Member("i", "m", T)], {"t": 1})
    with pytest.raises(ValueError, match="duplicate instance_id"):
        roundrobin_plan([Member("i", "m1", T), Member("i", "m2", T)], {"t": 1})
    with pytest.raises(ValueError, match="negative"):
        range_plan([Member(None, "m", T)], {"t": -1})


def test_member_accepts_any_iterable_subscription() -> None:
    member = Member("i", "m", ["t", "u"])  # type: ignore[arg-type]
    assert member.subscription == frozenset({"t", "u"})
    assert hash(member) == hash(Member("i", "m", frozenset({"t", "u"})))


def test_plan_by_instance_id_requires_static_members() -> None:
    static = [Member("i0", "i0-x", T), Member("i1", "i1-y", T)]
    plan = range_plan(static, {"t": 2})
    assert plan_by_instance_id(plan, static) == {"i0": (Partition("t", 0),), "i1": (Partition("t", 1),)}
    mixed = [*static, Member(None, "d", T)]
    with pytest.raises(ValueError, match="no instance id"):
        plan_by_instance_id(range_plan(mixed, {"t": 2}), mixed)


def test_ordinal_small_example() -> None:
    # Topic "t" (5 partitions). Pod keys frac(j * phi + h("t")) with h("t") = 0.8895...:
    # pod 0 .890, pod 1 .508, pod 2 .126, pod 3 .744, so extras go to pods in order 2, 1, 3, 0.
    # N=1: pod 0 holds 0-4.
    # N=2: 2 each, 1 extra -> pod 1 (ranks before pod 0). Pod 0 keeps [0, 1], hands over [2, 3, 4].
    # N=3: 1 each, 2 extras -> pods 2 and 1. Pod 0 keeps [0] and gives 1; pod 1 keeps [2, 3] and
    #      gives 4; pod 2 receives [1, 4]. Two moves, one above 5 // 3: pod 2 ranks first.
    # N=4: 1 each, 1 extra -> pod 2 keeps it; pod 1 drops its extra 3 to pod 3.
    counts = {"t": 5}
    expected: dict[int, dict[int, tuple[int, ...]]] = {
        1: {0: (0, 1, 2, 3, 4)},
        2: {0: (0, 1), 1: (2, 3, 4)},
        3: {0: (0,), 1: (2, 3), 2: (1, 4)},
        4: {0: (0,), 1: (2,), 2: (1, 4), 3: (3,)},
    }
    for replicas, pods in expected.items():
        plan = {k: tuple(Partition("t", p) for p in parts) for k, parts in pods.items()}
        assert ordinal_plan_all(replicas, counts) == plan
        assert {k: ordinal_plan(k, replicas, counts) for k in pods} == plan


def test_ordinal_topics_are_planned_independently() -> None:
    # A second topic, or a new partition count for it, must not move the first topic.
    alone = ordinal_plan_all(4, {"t": 5})
    with_other = ordinal_plan_all(4, {"t": 5, "u": 3})
    grown = ordinal_plan_all(4, {"t": 5, "u": 9})
    for k in range(4):
        assert tuple(tp for tp in with_other[k] if tp.topic == "t") == alone[k]
        assert tuple(tp for tp in grown[k] if tp.topic == "t") == alone[k]


def test_ordinal_more_pods_than_partitions() -> None:
    # Same topic "t" and ranking as above (pods 2, 1, 3, 0): with 2 partitions and 4 pods
    # the two top-ranked pods own one each. At N=2 pod 1 had [1] and pod 0 had [0]; at N=3
    # pod 2 ranks first and takes pod 0's partition, pod 1 keeps its own.
    assert ordinal_plan_all(4, {"t": 2}) == {0: (), 1: (Partition("t", 1),), 2: (Partition("t", 0),), 3: ()}
    assert ordinal_plan_all(2, {"t": 0}) == {0: (), 1: ()}
    assert ordinal_plan(0, 1, {}) == ()


@pytest.mark.parametrize(("ordinal", "replicas"), [(-1, 3), (3, 3), (0, 0)])
def test_ordinal_rejects_out_of_range(ordinal: int, replicas: int) -> None:
    with pytest.raises(ValueError):
        ordinal_plan(ordinal, replicas, {"t": 3})


def _kinds(violations: list[assignors.Violation]) -> list[ViolationKind]:
    return [v.kind for v in violations]


def test_check_plan_reports_each_broken_invariant() -> None:
    both = frozenset({"t", "u"})
    members = [Member("i0", "m0", both), Member("i1", "m1", frozenset({"t"}))]
    counts = {"t": 4, "u": 2}
    good = range_plan(members, counts)
    assert good == {
        "m0": (Partition("t", 0), Partition("t", 1), Partition("u", 0), Partition("u", 1)),
        "m1": (Partition("t", 2), Partition("t", 3)),
    }
    assert check_plan(Strategy.RANGE, members, counts, good) == []

    lost = {**good, "m0": good["m0"][2:]}  # t0 and t1 dropped: 0 vs 2 on topic t
    assert _kinds(check_plan(Strategy.RANGE, members, counts, lost)) == [
        ViolationKind.UNASSIGNED,
        ViolationKind.UNASSIGNED,
        ViolationKind.UNBALANCED,
    ]
    twice = {**good, "m1": good["m1"] + (Partition("t", 0),)}
    assert ViolationKind.DUPLICATE in _kinds(check_plan(Strategy.RANGE, members, counts, twice))
    stray = {**good, "m0": good["m0"][:3], "m1": good["m1"] + (Partition("u", 1),)}
    found = check_plan(Strategy.RANGE, members, counts, stray)
    assert [(v.kind, v.member_id) for v in found if v.kind is ViolationKind.NOT_SUBSCRIBED] == [
        (ViolationKind.NOT_SUBSCRIBED, "m1")
    ]
    ghost = {**good, "nobody": (), "m1": good["m1"] + (Partition("t", 9),)}
    assert _kinds(check_plan(Strategy.RANGE, members, counts, ghost)) == [
        ViolationKind.UNKNOWN_PARTITION,
        ViolationKind.UNKNOWN_MEMBER,
    ]


def test_check_plan_balance_depends_on_strategy() -> None:
    members = [Member(None, f"m{k}", frozenset({"a", "b"})) for k in range(2)]
    counts = {"a": 1, "b": 1}
    # Range gives both single-partition topics to m0: per-topic balance holds, overall does not.
    plan = range_plan(members, counts)
    assert plan == {"m0": (Partition("a", 0), Partition("b", 0)), "m1": ()}
    assert check_plan(Strategy.RANGE, members, counts, plan) == []
    assert check_plan(Strategy.ORDINAL, members, counts, plan) == []  # ordinal promises per topic too
    assert _kinds(check_plan(Strategy.ROUNDROBIN, members, counts, plan)) == [ViolationKind.UNBALANCED]


def test_compare_identical_is_ok_and_mixed_is_flagged() -> None:
    members = [Member("i0", "m0", T), Member(None, "m1", T)]
    plan = range_plan(members, {"t": 4})
    report = compare(plan, {k: list(v) for k, v in plan.items()}, {"t": 4}, members=members)
    assert report.ok
    assert report.mixed_membership
    assert not compare(plan, plan, {"t": 4}, members=members[:1]).mixed_membership


def test_compare_lists_every_difference() -> None:
    expected = {"m0": (Partition("t", 0), Partition("t", 1)), "m1": (Partition("t", 2),)}
    actual = {"m0": [("t", 0), ("t", 2)], "m2": [("t", 2), ("gone", 0)]}
    report = compare(expected, actual, {"t": 4})
    assert not report.ok
    assert [(m.member_id, m.missing, m.unexpected) for m in report.mismatched] == [
        ("m0", (Partition("t", 1),), (Partition("t", 2),)),
        ("m1", (Partition("t", 2),), ()),
        ("m2", (), (Partition("gone", 0), Partition("t", 2))),
    ]
    assert report.unassigned == (Partition("t", 1), Partition("t", 3))
    assert [(o.partition, o.member_ids) for o in report.doubly_assigned] == [
        (Partition("t", 2), ("m0", "m2"))
    ]
    assert report.unknown == (Partition("gone", 0),)
    assert not report.mixed_membership
