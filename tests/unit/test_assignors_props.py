"""Property tests: invariants, restart stability, permutation invariance, ordinal movement."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from functools import cmp_to_key

from hypothesis import given, settings
from hypothesis import strategies as st

from assignors import (
    Member,
    Partition,
    Plan,
    Strategy,
    check_plan,
    is_mixed,
    is_permutation_invariant,
    librdkafka_order,
    member_cmp,
    ordinal_plan,
    ordinal_plan_all,
    plan_by_instance_id,
    range_plan,
    roundrobin_plan,
)

TOPIC_NAMES = ["a", "b", "b.x", "c", "t-1", "t_0"]
# Legal group.instance.id / client.id characters, including '-' and '.', which sort below
# the digits and letters that follow the broker's "<id>-" member id prefix.
ID_CHARS = "ab01-._"

ids = st.text(ID_CHARS, min_size=1, max_size=5)
partition_counts = st.dictionaries(st.sampled_from(TOPIC_NAMES), st.integers(0, 12), min_size=1, max_size=5)


@st.composite
def groups(draw: st.DrawFn, kind: str = "any") -> tuple[list[Member], dict[str, int]]:
    """A random group: unique ids, subscriptions that may name a topic that does not exist."""
    counts = draw(partition_counts)
    size = draw(st.integers(1, 8))
    member_ids = draw(st.lists(ids, min_size=size, max_size=size, unique=True))
    instance_ids = draw(st.lists(ids, min_size=size, max_size=size, unique=True))
    subscribable = [*counts, "ghost"]
    members = []
    for member_id, instance_id in zip(member_ids, instance_ids, strict=True):
        static = kind == "static" or (kind == "any" and draw(st.booleans()))
        subscription = draw(st.frozensets(st.sampled_from(subscribable), min_size=1))
        members.append(Member(instance_id if static else None, member_id, subscription))
    return members, counts


def _total(counts: Mapping[str, int]) -> int:
    return sum(counts.values())


@given(groups())
def test_range_plans_satisfy_invariants(group: tuple[list[Member], dict[str, int]]) -> None:
    members, counts = group
    plan = range_plan(members, counts)
    assert set(plan) == {m.member_id for m in members}
    assert check_plan(Strategy.RANGE, members, counts, plan) == []


@given(groups())
def test_roundrobin_plans_satisfy_invariants(group: tuple[list[Member], dict[str, int]]) -> None:
    members, counts = group
    plan = roundrobin_plan(members, counts)
    assert set(plan) == {m.member_id for m in members}
    assert check_plan(Strategy.ROUNDROBIN, members, counts, plan) == []


@given(groups())
def test_roundrobin_balanced_when_subscriptions_are_identical(
    group: tuple[list[Member], dict[str, int]],
) -> None:
    members, counts = group
    same = [Member(m.instance_id, m.member_id, frozenset(counts)) for m in members]
    plan = roundrobin_plan(same, counts)
    sizes = [len(parts) for parts in plan.values()]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == _total(counts)


@given(groups(kind="static"), st.data())
def test_restart_with_new_member_ids_keeps_plan_by_instance_id(
    group: tuple[list[Member], dict[str, int]], data: st.DataObject
) -> None:
    # A restart gives every static member a fresh member id; the plan keyed by instance id
    # must not change (this is what static membership buys with range/roundrobin).
    members, counts = group
    fresh_ids = data.draw(st.lists(ids, min_size=len(members), max_size=len(members), unique=True))
    restarted = [
        Member(m.instance_id, new, m.subscription) for m, new in zip(members, fresh_ids, strict=True)
    ]
    for planner in (range_plan, roundrobin_plan):
        before = plan_by_instance_id(planner(members, counts), members)
        after = plan_by_instance_id(planner(restarted, counts), restarted)
        assert before == after


@given(groups(), st.randoms(use_true_random=False))
def test_plans_do_not_depend_on_input_order(
    group: tuple[list[Member], dict[str, int]], rnd: random.Random
) -> None:
    members, counts = group
    shuffled = list(members)
    rnd.shuffle(shuffled)
    for planner in (range_plan, roundrobin_plan):
        assert planner(shuffled, counts) == planner(members, counts)
        assert is_permutation_invariant(planner, members, counts)


def _sorted_with_librdkafka_cmp(members: Sequence[Member]) -> list[Member] | None:
    """Sort with the raw comparator; None when it is not a consistent order on this set."""
    result = sorted(members, key=cmp_to_key(member_cmp))
    consistent = all(member_cmp(x, y) < 0 for i, x in enumerate(result) for y in result[i + 1 :])
    return result if consistent else None


@given(groups())
def test_order_equals_librdkafka_comparator_sort_whenever_that_is_well_defined(
    group: tuple[list[Member], dict[str, int]],
) -> None:
    members, _ = group
    reference = _sorted_with_librdkafka_cmp(members)
    if reference is not None:
        assert librdkafka_order(members) == reference
    if not is_mixed(members):
        assert reference is not None  # all-static or all-dynamic: always a total order


def _roundrobin_reference(members: Sequence[Member], counts: Mapping[str, int]) -> dict[str, list[Partition]]:
    """librdkafka's loop taken literally: one cursor, advance until a subscriber is found."""
    order = librdkafka_order(members)
    result: dict[str, list[Partition]] = {m.member_id: [] for m in order}
    cursor = -1
    for topic in sorted(counts):
        if not any(topic in m.subscription for m in order):
            continue
        for p in range(counts[topic]):
            cursor = (cursor + 1) % len(order)
            while topic not in order[cursor].subscription:
                cursor = (cursor + 1) % len(order)
            result[order[cursor].member_id].append(Partition(topic, p))
    return result


@given(groups())
def test_roundrobin_fast_path_matches_literal_algorithm(group: tuple[list[Member], dict[str, int]]) -> None:
    members, counts = group
    expected = {k: tuple(v) for k, v in _roundrobin_reference(members, counts).items()}
    assert roundrobin_plan(members, counts) == expected


def _owners(plan: Mapping[int, tuple[Partition, ...]]) -> dict[Partition, int]:
    return {tp: ordinal for ordinal, parts in plan.items() for tp in parts}


def _pods(replicas: int, counts: Mapping[str, int]) -> list[Member]:
    return [Member(str(k), str(k), frozenset(counts)) for k in range(replicas)]


@given(partition_counts, st.integers(1, 12))
def test_ordinal_plans_cover_everything_once_and_balance(counts: dict[str, int], replicas: int) -> None:
    plan = ordinal_plan_all(replicas, counts)
    as_plan: Plan = {str(k): parts for k, parts in plan.items()}
    assert check_plan(Strategy.ORDINAL, _pods(replicas, counts), counts, as_plan) == []
    assert all(ordinal_plan(k, replicas, counts) == plan[k] for k in range(replicas))


@settings(max_examples=200)
@given(partition_counts, st.integers(1, 12))
def test_ordinal_scale_up_moves_only_the_new_pods_share(counts: dict[str, int], replicas: int) -> None:
    before = _owners(ordinal_plan_all(replicas, counts))
    after_plan = ordinal_plan_all(replicas + 1, counts)
    after = _owners(after_plan)
    moved = [tp for tp in before if before[tp] != after[tp]]
    # Old pods only shrink, so every moved partition lands on the new pod and the new pod
    # holds nothing else; scale-down of the highest ordinal is this pair read backwards.
    assert all(after[tp] == replicas for tp in moved)
    assert len(moved) == len(after_plan[replicas])
    # Per topic the new pod gets P_t // (N + 1), plus one if it ranks among the extras.
    for topic, count in counts.items():
        moved_here = sum(1 for tp in moved if tp.topic == topic)
        assert count // (replicas + 1) <= moved_here <= -(-count // (replicas + 1))
    topics_with_partitions = sum(1 for c in counts.values() if c)
    assert len(moved) <= _total(counts) // (replicas + 1) + topics_with_partitions
    assert len(moved) <= math.ceil(_total(counts) / replicas) + len(counts)


@given(partition_counts, st.integers(1, 12))
def test_ordinal_overall_counts_differ_by_at_most_the_topic_count(
    counts: dict[str, int], replicas: int
) -> None:
    sizes = [len(parts) for parts in ordinal_plan_all(replicas, counts).values()]
    assert max(sizes) - min(sizes) <= len(counts)


def _moves(before: Mapping[Partition, object], after: Mapping[Partition, object]) -> int:
    return sum(1 for tp, owner in before.items() if after[tp] != owner)


def test_ordinal_movement_beats_contiguous_blocks() -> None:
    # 3 topics x 64 partitions, 7 -> 8 pods: 64 // 8 = 8 per topic with no remainder, so the
    # ordinal plan moves exactly the new pod's 24 partitions.
    # range (contiguous blocks per topic, pods as static members) shifts every block boundary.
    counts = {"a": 64, "b": 64, "c": 64}
    ordinal_moves = _moves(_owners(ordinal_plan_all(7, counts)), _owners(ordinal_plan_all(8, counts)))
    assert ordinal_moves == 24

    def range_owners(n: int) -> dict[Partition, str]:
        plan = plan_by_instance_id(range_plan(_pods(n, counts), counts), _pods(n, counts))
        return {tp: pod for pod, parts in plan.items() for tp in parts}

    assert _moves(range_owners(7), range_owners(8)) > 3 * ordinal_moves  # 105 here
