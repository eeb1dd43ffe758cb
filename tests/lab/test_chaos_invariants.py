"""The chaos invariants on made-up evidence: each holds on a clean run, and each fails on the violation
planted for it (and only that one)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from static_consumer_lab.chaos.evidence import Done, Evidence, Exit, Handled, Sample
from static_consumer_lab.chaos.invariants import (
    Limits,
    check,
    commit_lag,
    lag_ages,
)

BEGAN = 1000.0
SESSION_S, GRACE_S = 10.0, 5.0


def clean() -> Evidence:
    """Two partitions of 100 records, one per member (pids 11 and 22), handled at 10/s from BEGAN, each
    committed 0.05 s after its handling; a kill of app-1 at +50 s (back at +51 s) that the run rode out
    without a copy; samples every second."""
    handled = []
    for p, (member, pid) in enumerate([("app-0", 11), ("app-1", 22)]):
        handled += [Handled(p, o, member, pid, BEGAN + o / 10) for o in range(100)]
    samples = [Sample(BEGAN + s + 0.5, {0: (s + 1) * 10, 1: (s + 1) * 10}) for s in range(10)]
    kill = Done(0, "kill", ("app-1",), BEGAN + 50, BEGAN + 51, (22,))
    return Evidence(
        acked={(p, o) for p in (0, 1) for o in range(100)},
        handled=handled,
        faults=[kill],
        exits=[Exit("app-1", 22, -9, BEGAN + 50.01), Exit("app-0", 11, 0, BEGAN + 200)],
        samples=samples,
        committed={0: 100, 1: 100},
        log_end={0: 100, 1: 100},
        rebalances=[("generation", 1, BEGAN - 5)],
        began=BEGAN,
        stopped=BEGAN + 199,
        session_s=SESSION_S,
        grace_s=GRACE_S,
    )


def violated(ev: Evidence) -> dict[str, list[str]]:
    return {name: found for name, found in check(ev, Limits(min_lag_samples=5)).items() if found}


def test_a_clean_run_holds_every_invariant() -> None:
    assert violated(clean()) == {}


def test_a_record_acknowledged_and_never_handled_is_lost() -> None:
    ev = clean()
    ev.handled = [h for h in ev.handled if (h.partition, h.offset) != (1, 99)]
    ev.handled.append(Handled(1, 99, "app-1", 22, BEGAN + 9.9))  # keep the order intact
    ev.acked.add((1, 100))
    assert list(violated(ev)) == ["nothing lost"]
    assert "partition 1 offset 100" in violated(ev)["nothing lost"][0]


def test_a_copy_outside_every_duplicating_window_is_reported_and_one_inside_is_not() -> None:
    ev = clean()
    inside = Handled(1, 5, "app-1", 33, BEGAN + 60)  # a new process of app-1, within the kill's window
    ev.handled.append(inside)
    assert violated(ev) == {}
    ev.handled.append(Handled(0, 5, "app-0", 44, BEGAN + 150))
    found = violated(ev)
    assert list(found) == ["duplicates inside a window"]
    assert "partition 0 offset 5" in found["duplicates inside a window"][0]


def test_a_window_ends_one_session_and_the_grace_after_the_fault_ended() -> None:
    ev = clean()
    ev.handled.append(Handled(1, 5, "app-1", 33, BEGAN + 51 + SESSION_S + GRACE_S - 0.1))
    assert violated(ev) == {}
    ev.handled[-1] = replace(ev.handled[-1], at=BEGAN + 51 + SESSION_S + GRACE_S + 0.1)
    assert list(violated(ev)) == ["duplicates inside a window"]


def test_a_pause_under_the_session_excuses_no_copy() -> None:
    ev = clean()
    ev.faults.append(Done(1, "pause", ("app-0",), BEGAN + 100, BEGAN + 103, (11,)))
    ev.handled.append(Handled(0, 5, "app-0", 44, BEGAN + 101))
    assert "duplicates inside a window" in violated(ev)


def test_committed_short_of_the_log_end_is_reported() -> None:
    ev = clean()
    ev.committed = {0: 100, 1: 99}
    assert violated(ev) == {"committed at the end": ["partition 1: committed 99, log end 100"]}


def test_an_exit_no_fault_explains_is_reported() -> None:
    ev = clean()
    ev.exits.append(Exit("app-0", 11, 70, BEGAN + 120))
    assert list(violated(ev)) == ["exits from the faults sent"]
    ev = clean()
    ev.exits[0] = Exit("app-1", 22, 0, BEGAN + 50.01)  # the killed process "exited 0": not a kill
    assert list(violated(ev)) == ["exits from the faults sent"]
    ev = clean()
    ev.exits[1] = Exit("app-0", 11, 70, BEGAN + 200)  # after the final SIGTERM, but not 0
    assert list(violated(ev)) == ["exits from the faults sent"]


def test_a_78_inside_a_revoked_acl_window_is_explained() -> None:
    ev = clean()
    ev.faults.append(Done(1, "acl", ("group",), BEGAN + 100, BEGAN + 108))
    ev.exits.append(Exit("app-0", 11, 78, BEGAN + 101))
    assert violated(ev) == {}
    ev.exits.append(Exit("app-0", 12, 78, BEGAN + 140))  # after the window
    assert list(violated(ev)) == ["exits from the faults sent"]


def test_a_step_back_outside_a_window_and_a_skip_nobody_covered_break_the_order() -> None:
    ev = clean()
    ev.handled.insert(50, Handled(0, 3, "app-0", 11, BEGAN + 5.0))  # app-0 hands offset 3 again at once
    found = violated(ev)
    assert "order per partition" in found and "went back on partition 0" in found["order per partition"][0]

    ev = clean()
    ev.handled = [h for h in ev.handled if not (h.partition == 0 and 40 <= h.offset < 45)]
    ev.handled.append(Handled(0, 42, "app-x", 99, BEGAN + 4.3))  # another process handled only 42
    ev.acked -= {(0, o) for o in (40, 41, 43, 44)}
    ev.log_end = ev.committed = {0: 100, 1: 100}
    found = violated(ev)
    assert list(found) == ["order per partition"]
    assert found["order per partition"] == ["pid 11 skipped partition 0 offsets 40..44"]


def test_a_skip_over_offsets_another_process_handled_is_a_hand_over() -> None:
    ev = clean()
    moved = [h for h in ev.handled if h.partition == 0 and 40 <= h.offset < 45]
    ev.handled = [h for h in ev.handled if h not in moved]
    ev.handled += [replace(h, member="app-1", pid=22) for h in moved]
    assert violated(ev) == {}


def test_a_paused_process_handing_out_what_another_handled_is_stale() -> None:
    ev = clean()
    pause = Done(1, "long_pause", ("app-0",), BEGAN + 100, BEGAN + 114, (11,))
    ev.faults.append(pause)
    ev.acked |= {(0, o) for o in range(100, 110)}
    ev.log_end = ev.committed = {0: 110, 1: 100}
    ev.handled += [Handled(0, o, "app-1", 22, BEGAN + 112 + o / 100) for o in range(100, 110)]  # took over
    assert violated(ev) == {}
    ev.handled.append(Handled(0, 105, "app-0", 11, BEGAN + 114.5))  # the paused one's old buffer
    found = violated(ev)
    assert list(found) == ["no stale records"]
    assert "partition 0 offset 105" in found["no stale records"][0]


def test_a_rebalance_outside_every_window_is_reported() -> None:
    ev = clean()
    ev.rebalances.append(("generation", 2, BEGAN + 55))  # inside the kill's window
    assert violated(ev) == {}
    ev.rebalances.append(("generation", 3, BEGAN + 150))
    assert list(violated(ev)) == ["rebalances inside windows"]


def test_lag_age_is_how_long_the_oldest_handled_uncommitted_record_waited() -> None:
    ev = clean()
    ev.samples = [Sample(BEGAN + 3.05, {0: 25, 1: 31})]
    ages = {s.partition: s.age_s for s in lag_ages(ev)}
    # partition 0: offsets 25..30 handled by 3.05 s (25 at 2.5 s); partition 1: 31 not yet handled.
    assert ages == {0: pytest.approx(0.55), 1: 0.0}


def test_the_commit_lag_fails_a_phase_where_too_many_samples_lag() -> None:
    ev = clean()
    ev.faults.append(Done(1, "broker_kill", ("2",), BEGAN + 20, BEGAN + 25, coordinator=True))
    # Before the coordinator fault each sample sees everything handled committed; after it, all caught up.
    ev.samples = [Sample(BEGAN + t + 0.5, {0: 10 * t + 5, 1: 10 * t + 5}) for t in range(1, 10)]
    ev.samples += [Sample(BEGAN + t, {0: 100, 1: 100}) for t in range(70, 110)]
    limits = Limits(lag_age_s=0.1, lag_fraction=0.1, min_lag_samples=5)
    assert commit_lag(ev, limits) == []
    # After it, partition 0's last five records are left uncommitted in every other sample.
    ev.samples[9:] = [Sample(BEGAN + t, {0: 100 - (t % 2) * 5, 1: 100}) for t in range(70, 110)]
    found = commit_lag(ev, limits)
    assert len(found) == 1 and found[0].startswith("after the first coordinator fault: 20 of 80"), found
    assert commit_lag(ev, replace(limits, lag_fraction=0.3)) == []
