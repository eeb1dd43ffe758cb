"""The chaos schedule is a pure function of its seed, deals every kind before repeating one, and draws
targets and durations within the documented bounds; the windows are as docs/chaos.md defines them."""

from __future__ import annotations

import pytest

from static_consumer_lab.chaos.evidence import Done
from static_consumer_lab.chaos.schedule import BROKER_KINDS, KINDS, Fault, plan
from static_consumer_lab.chaos.windows import containing, window

MEMBERS = ["app-0", "app-1", "app-2", "pool-0"]


def schedule(seed: int, count: int = 40, **options: object) -> tuple[Fault, ...]:
    return plan(seed, members=MEMBERS, session_s=45.0, count=count, **options)  # type: ignore[arg-type]


def test_one_seed_gives_one_schedule_and_another_seed_another() -> None:
    assert schedule(7) == schedule(7)
    assert schedule(7) != schedule(8)
    assert [Fault.from_json(f.to_json()) for f in schedule(7)] == list(schedule(7))


def test_every_kind_comes_once_before_any_comes_twice() -> None:
    faults = schedule(3, count=len(KINDS) * 3)
    for deal in range(3):
        kinds = [f.kind for f in faults[deal * len(KINDS) : (deal + 1) * len(KINDS)]]
        assert sorted(kinds) == sorted(KINDS)


def test_targets_and_durations_stay_within_their_bounds() -> None:
    for fault in schedule(11, count=400):
        if fault.kind in ("kill", "term", "pause", "long_pause"):
            assert len(fault.targets) == 1 and fault.targets[0] in MEMBERS
        if fault.kind == "term2":
            assert len(set(fault.targets)) == 2 and set(fault.targets) <= set(MEMBERS)
        if fault.kind == "pause":
            assert 0.2 * 45 - 0.1 <= fault.duration_s <= 0.6 * 45 + 0.1
        if fault.kind == "long_pause":
            assert 1.3 * 45 - 0.1 <= fault.duration_s <= 1.6 * 45 + 0.1
        if fault.kind in BROKER_KINDS:
            assert fault.targets[0] in ("coordinator", "1", "2", "3") and 2 <= fault.duration_s <= 8
        if fault.kind == "acl":
            assert fault.targets[0] in ("group", "topic") and 5 <= fault.duration_s <= 12
        assert 5 <= fault.gap_s <= 15


def test_a_schedule_of_some_kinds_only_and_unknown_kinds_refused() -> None:
    assert {f.kind for f in schedule(5, kinds=("kill", "acl"))} == {"kill", "acl"}
    with pytest.raises(ValueError, match="unknown fault kinds"):
        schedule(5, kinds=("kill", "reboot"))
    with pytest.raises(ValueError, match="term2 needs two members"):
        plan(1, members=["app-0"], session_s=10, count=3, kinds=("term2",))


def test_a_window_lasts_one_session_past_a_lingering_fault_and_the_grace_past_the_others() -> None:
    kill = Done(0, "kill", ("app-0",), 100.0, 101.0, (7,))
    pause = Done(1, "pause", ("app-0",), 200.0, 210.0, (8,))
    assert window(kill, 45.0, 15.0) == (100.0, 161.0)
    assert window(pause, 45.0, 15.0) == (200.0, 225.0)
    faults = [kill, pause]
    assert containing(160.9, faults, 45.0, 15.0) is kill
    assert containing(161.1, faults, 45.0, 15.0) is None
    assert containing(205.0, faults, 45.0, 15.0, kinds=("kill",)) is None
