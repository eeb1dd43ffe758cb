"""The rolling-bounce numbers are computed from observed events exactly as the table labels say."""

from __future__ import annotations

from static_consumer.demo.metrics import (
    MemberRun,
    delivery,
    live_revocations,
    ownership,
    partition_moves,
    rebalances,
    stall_seconds,
)

T = "t"


def ev(kind: str, ts: float, *parts: int) -> dict[str, object]:
    return {"kind": kind, "ts": ts, "partitions": [[T, p] for p in parts]}


def _eager_bounce() -> list[MemberRun]:
    """a holds 0,1 and b holds 2,3; b restarts at t=10 (dynamic): a is revoked and gets 0..3, then
    the new b joins and the partitions are split the other way round (a: 2,3; b: 0,1)."""
    a = MemberRun(
        "a",
        [
            ev("assigned", 1, 0, 1),
            ev("revoked", 10.1, 0, 1),
            ev("assigned", 10.5, 0, 1, 2, 3),
            ev("revoked", 12.0, 0, 1, 2, 3),
            ev("assigned", 12.4, 2, 3),
        ],
        None,
        20,
    )
    b_old = MemberRun("b", [ev("assigned", 1, 2, 3), ev("revoked", 10.05, 2, 3)], 10.0, 10.2)
    b_new = MemberRun("b", [ev("assigned", 12.4, 0, 1)], None, 20)
    return [a, b_old, b_new]


def test_revocations_count_only_members_that_were_not_stopping() -> None:
    runs = _eager_bounce()
    assert live_revocations(runs, since=5) == 2  # a's two revocations; b's own shutdown revoke is excluded
    assert live_revocations(runs, since=11) == 1
    assert live_revocations(runs, since=5, until=11) == 1


def test_stall_is_the_gap_between_a_live_revocation_and_the_next_assignment() -> None:
    assert abs(stall_seconds(_eager_bounce(), since=5) - (0.4 + 0.4)) < 1e-9


def test_ownership_intervals_and_partition_moves() -> None:
    intervals = ownership(_eager_bounce())
    owners_of_0 = [(i.owner, i.start, i.end) for i in intervals if i.partition == 0]
    assert owners_of_0 == [("a", 1, 10.1), ("a", 10.5, 12.0), ("b", 12.4, 20)]
    # partition 0 and 1 moved a -> b; 2 and 3 moved b -> a (at 10.5) and stayed with a afterwards.
    assert partition_moves(intervals, since=5) == 4


def test_a_static_restart_is_no_move_and_no_revocation() -> None:
    a = MemberRun("a", [ev("assigned", 1, 0, 1)], None, 20)
    b_old = MemberRun("b", [ev("assigned", 1, 2, 3), ev("revoked", 10.05, 2, 3)], 10.0, 10.2)
    b_new = MemberRun("b", [ev("assigned", 11.0, 2, 3)], None, 20)
    runs = [a, b_old, b_new]
    assert live_revocations(runs, since=5) == 0
    assert stall_seconds(runs, since=5) == 0
    assert partition_moves(ownership(runs), since=5) == 0


def test_incremental_assignments_accumulate() -> None:
    run = MemberRun("a", [ev("assigned", 1, 0), ev("assigned", 2, 1), ev("revoked", 3, 0)], None, 9)
    assert [(i.partition, i.start, i.end) for i in ownership([run])] == [(0, 1, 3), (1, 2, 9)]


def test_delivery_counts_duplicates_and_losses() -> None:
    got = delivery(5, [(T, 0, 0), (T, 0, 1), (T, 0, 1), (T, 1, 0)])
    assert (got.distinct, got.duplicated, got.lost) == (3, 1, 2)


def test_rebalances_are_generations_within_the_window_or_unknown() -> None:
    assert rebalances([1, 2, 3, 4, 5, 6], before=3, through=5) == 2
    assert rebalances([], before=0, through=0) is None
