"""How the lab dates what a paused child handed out (``static_consumer_lab.children.pauses``): by the stall
guard's check (``checked``), so a freeze inside ``consume()`` after the check is the window no client can
close, while a batch checked after the wake-up of a partition another member owned is still counted."""

from __future__ import annotations

from typing import Any

from static_consumer_lab.children.pauses import checked_before, refused_batches, stale_records

T = "t"
FROZEN, THAWED = 100.0, 110.0


class Proc:
    """The events of one child process, as ``ConsumerProcess.events`` gives them."""

    def __init__(self, *events: dict[str, Any]) -> None:
        self._events = list(events)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self._events if kind is None or e["kind"] == kind]


def batch(checked: float | None, returned: float, partition: int) -> dict[str, Any]:
    event = {"kind": "records", "ts": returned, "returned": returned, "records": [[T, partition, 7]]}
    if checked is not None:
        event["checked"] = checked
    return event


ASSIGNED = {"kind": "assigned", "ts": 1.0, "partitions": [[T, 3]]}
OTHER = Proc({"kind": "assigned", "ts": 105.0, "partitions": [[T, 3]]})  # took p3 during the freeze
LOST = {"kind": "lost", "ts": 110.5, "partitions": [[T, 3]]}
REFUSED = {"kind": "commit_refused", "ts": 110.4, "offsets": [[T, 3, 8]]}


def test_a_batch_checked_before_the_freeze_and_handed_out_after_it_is_not_stale() -> None:
    inside = batch(FROZEN - 0.001, THAWED + 0.3, 3)  # the CI failure of stop 35
    victim = Proc(ASSIGNED, inside, REFUSED, LOST)
    assert stale_records(victim, [OTHER], THAWED) == []
    assert refused_batches(victim) == [(FROZEN - 0.001, 1)]
    assert checked_before(victim, FROZEN) == [(FROZEN - 0.001, THAWED + 0.3, 1)]


def test_a_batch_checked_after_the_wake_up_of_a_partition_another_member_owns_is_stale() -> None:
    late = batch(THAWED + 0.3, THAWED + 0.3, 3)
    assert stale_records(Proc(ASSIGNED, late, LOST), [OTHER], THAWED) == [(T, 3, 7)]
    assert checked_before(Proc(ASSIGNED, late, LOST), FROZEN) == []


def test_events_without_a_check_time_are_dated_by_their_hand_over() -> None:
    plain = batch(None, THAWED + 0.3, 3)  # a plain librdkafka child (bench_stall's control)
    assert stale_records(Proc(ASSIGNED, plain, LOST), [OTHER], THAWED) == [(T, 3, 7)]
