"""The membership tracker: what one member concludes from its events (joins, rebalances, failures).

Event sequences follow what librdkafka 2.16 delivered on Kafka 4.3 (checked by hand): classic eager
rebalances revoke everything, then assign with a new generation; a static member restarted within the
session timeout gets its old partitions at the group's current generation and nobody else sees a
callback; close() revokes the member's partitions; the consumer protocol delivers revoke/assign pairs
per reconciliation step, sometimes with nothing moving.
"""

from __future__ import annotations

from typing import Any

from static_consumer._base.records import TopicPartition
from static_consumer._core.events import (
    Assigned,
    Closed,
    FatalError,
    Fenced,
    HeldAssignment,
    Joining,
    Lost,
    MembershipEvent,
    Revoked,
)
from static_consumer.telemetry import (
    Failed,
    Interrupted,
    Join,
    MembershipTracker,
    Outcome,
    Rebalance,
    Released,
)

G = "orders"


def tps(*partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition("t", p) for p in partitions)


def fields(at: float, generation: int | None = None, instance: str | None = "app-1") -> dict[str, Any]:
    return {"group_id": G, "instance_id": instance, "member_id": "m", "generation": generation, "at": at}


def joining(at: float, held: HeldAssignment | None, instance: str | None = "app-1") -> Joining:
    return Joining(**fields(at, instance=instance), protocol="classic", lookup_held=lambda: held)


def feed(tracker: MembershipTracker, *events: MembershipEvent) -> list[Outcome]:
    return [outcome for event in events for outcome in tracker.observe(event)]


def joined(held_parts: tuple[TopicPartition, ...] = tps(2, 3), generation: int = 2) -> MembershipTracker:
    tracker = MembershipTracker()
    feed(
        tracker,
        joining(0.0, HeldAssignment(True, held_parts, "Stable")),
        Assigned(**fields(1.0, generation), partitions=held_parts),
    )
    return tracker


# -- joins ---------------------------------------------------------------------------------------------


def test_restart_that_gets_the_held_partitions_back_is_a_static_rejoin() -> None:
    tracker = MembershipTracker()
    out = feed(
        tracker,
        joining(10.0, HeldAssignment(True, tps(2, 3), "Stable")),
        Assigned(**fields(10.25, 2), partitions=tps(3, 2)),
    )
    assert out == [Join("static_rejoin", 10.0, 10.25, frozenset(tps(2, 3)), 2)]
    assert isinstance(out[0], Join) and out[0].duration_s == 0.25
    assert tracker.last_rebalance_at is None, "a static rejoin is not a rebalance"


def test_join_of_an_instance_id_the_broker_no_longer_held_rebalanced_the_group() -> None:
    out = feed(
        MembershipTracker(),
        joining(0.0, HeldAssignment(False, (), "Stable")),
        Assigned(**fields(4.0, 4), partitions=tps(2, 3)),
    )
    assert [o.kind for o in out if isinstance(o, Join)] == ["static_join"]


def test_held_id_that_came_back_with_other_partitions_is_not_a_rejoin() -> None:
    out = feed(
        MembershipTracker(),
        joining(0.0, HeldAssignment(True, tps(2, 3), "PreparingRebalance")),
        Assigned(**fields(1.0, 5), partitions=tps(1, 2)),
    )
    assert [o.kind for o in out if isinstance(o, Join)] == ["static_join"]


def test_dynamic_unknown_and_manual_joins() -> None:
    dynamic = feed(
        MembershipTracker(), joining(0, None, instance=None), Assigned(**fields(1, 3), partitions=tps(0))
    )
    unknown = feed(MembershipTracker(), joining(0, None), Assigned(**fields(1, 3), partitions=tps(0)))
    manual = feed(MembershipTracker(), Assigned(**fields(1), partitions=tps(0)))
    assert [o.kind for o in dynamic + unknown + manual if isinstance(o, Join)] == [
        "dynamic_join",
        "unknown",
        "manual",
    ]


def test_without_look_up_the_broker_is_not_asked() -> None:
    asked: list[int] = []

    def lookup() -> HeldAssignment:
        asked.append(1)
        return HeldAssignment(True, tps(0), "Stable")

    event = Joining(**fields(0), protocol="classic", lookup_held=lookup)
    out = feed(MembershipTracker(look_up_held=False), event, Assigned(**fields(1, 2), partitions=tps(0)))
    assert asked == []
    assert [o.kind for o in out if isinstance(o, Join)] == ["unknown"]


# -- rebalances ----------------------------------------------------------------------------------------


def test_eager_rebalance_revokes_then_assigns_a_new_generation() -> None:
    tracker = joined(tps(2, 3), generation=2)
    out = feed(
        tracker,
        Revoked(**fields(20.0, 2), partitions=tps(2, 3)),
        Assigned(**fields(20.5, 3), partitions=tps(1, 2)),
    )
    assert out == [Rebalance(20.0, 20.5, frozenset(tps(2, 3)), frozenset(tps(1, 2)), 2, 3, revoked=2, lost=0)]
    assert isinstance(out[0], Rebalance) and out[0].moved == 2  # gained 1, gave up 3
    assert tracker.last_rebalance_at == 20.5
    assert tracker.owned == set(tps(1, 2))


def test_new_generation_with_the_same_partitions_is_still_a_rebalance() -> None:
    out = feed(
        joined(),
        Revoked(**fields(5, 2), partitions=tps(2, 3)),
        Assigned(**fields(6, 3), partitions=tps(2, 3)),
    )
    assert len(out) == 1 and isinstance(out[0], Rebalance) and out[0].moved == 0


def test_member_without_partitions_still_takes_part_in_a_rebalance() -> None:
    tracker = MembershipTracker()
    feed(tracker, joining(0, HeldAssignment(False, (), "Stable")), Assigned(**fields(1, 2), partitions=()))
    out = feed(tracker, Revoked(**fields(5, 2), partitions=()), Assigned(**fields(6, 3), partitions=()))
    assert len(out) == 1 and isinstance(out[0], Rebalance)


def test_reconciliation_that_moves_nothing_is_not_a_rebalance() -> None:
    tracker = joined()
    out = feed(tracker, Revoked(**fields(5, 2), partitions=()), Assigned(**fields(6, 2), partitions=()))
    assert out == []
    assert tracker.last_rebalance_at is None


def test_incremental_assignment_without_revoke_is_a_rebalance() -> None:
    out = feed(joined(tps(2, 3), 7), Assigned(**fields(9, 7), partitions=tps(4)))
    assert len(out) == 1 and isinstance(out[0], Rebalance)
    assert (out[0].before, out[0].after, out[0].moved) == (frozenset(tps(2, 3)), frozenset(tps(2, 3, 4)), 1)


def test_without_generations_a_revoke_assign_round_counts() -> None:
    tracker = MembershipTracker()
    feed(tracker, joining(0, None, instance=None), Assigned(**fields(1), partitions=tps(0, 1)))
    out = feed(
        tracker, Revoked(**fields(2), partitions=tps(0, 1)), Assigned(**fields(3), partitions=tps(0, 1))
    )
    assert len(out) == 1 and isinstance(out[0], Rebalance)


def test_manual_assignment_changes_are_not_rebalances() -> None:
    tracker = MembershipTracker()
    feed(tracker, Assigned(**fields(1), partitions=tps(0)))
    assert feed(tracker, Assigned(**fields(2), partitions=tps(1))) == []


# -- close, loss, fencing --------------------------------------------------------------------------------


def test_partitions_revoked_by_close_are_released_not_rebalanced() -> None:
    tracker = joined(tps(2, 3))
    out = feed(
        tracker,
        Revoked(**fields(30, 2), partitions=tps(2, 3)),
        Closed(**fields(30.1, 2), left_group=False),
    )
    assert out == [Released(30.1, 2)]
    assert tracker.last_rebalance_at is None
    assert tracker.closed and not tracker.owned


def test_lost_partitions_fail_the_rebalance_and_the_rejoin_completes_one() -> None:
    tracker = joined(tps(2, 3), 2)
    out = feed(
        tracker,
        Lost(**fields(40, 2), partitions=tps(2, 3)),
        Lost(**fields(40.1, 2), partitions=()),
        Assigned(**fields(45, 4), partitions=tps(2)),
    )
    assert out[0] == Failed(40, "lost")
    assert len(out) == 2, "one failure per round, however many losses"
    assert isinstance(out[1], Rebalance) and (out[1].lost, out[1].started_at) == (2, 40)


def test_fence_during_a_rebalance_fails_and_interrupts_it() -> None:
    out = feed(
        joined(), Revoked(**fields(5, 2), partitions=tps(2, 3)), Fenced(**fields(6, 2), error="fenced")
    )
    assert out == [Failed(6, "fenced"), Interrupted("rebalance", 5, 6, "fenced", revoked=2)]


def test_fence_of_a_steady_member_is_not_a_failed_rebalance() -> None:
    assert feed(joined(), Fenced(**fields(6, 2), error="fenced")) == []


def test_fatal_error_before_the_first_assignment_interrupts_the_join() -> None:
    tracker = MembershipTracker()
    out = feed(tracker, joining(0, None), FatalError(**fields(3), error="boom"))
    assert out == [Failed(3, "fatal"), Interrupted("join", 0, 3, "fatal")]
    assert feed(tracker, Closed(**fields(4), left_group=False)) == []


def test_close_before_the_first_assignment_interrupts_the_join() -> None:
    out = feed(MembershipTracker(), joining(0, None), Closed(**fields(2), left_group=False))
    assert out == [Interrupted("join", 0, 2, "closed")]


def test_a_replaced_client_joins_again() -> None:
    tracker = joined(tps(2, 3))
    out = feed(
        tracker,
        joining(50, HeldAssignment(False, (), "Stable")),
        Assigned(**fields(60, 9), partitions=tps(1)),
    )
    assert [o.kind for o in out if isinstance(o, Join)] == ["static_join"]
    assert tracker.owned == set(tps(1))
