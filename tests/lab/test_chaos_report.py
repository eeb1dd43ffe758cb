"""A chaos run's figures: copies and rebalances counted against the fault whose window holds them, and
how long after a fault the records flowed again where it struck."""

from __future__ import annotations

from test_chaos_invariants import BEGAN, clean

from static_consumer_lab.chaos.evidence import Handled
from static_consumer_lab.chaos.report import costs, figures, render


def test_copies_and_rebalances_count_for_the_fault_whose_window_holds_them() -> None:
    ev = clean()
    ev.handled += [Handled(1, o, "app-1", 33, BEGAN + 52 + o / 100) for o in range(90, 100)]  # replayed
    ev.rebalances.append(("generation", 2, BEGAN + 55))
    fig = figures(ev)
    [kill] = fig["faults"]
    assert (kill["handled_twice"], kill["rebalances"]) == (10, 1)
    assert kill["back_after_s"] == 2.9  # the new process's first record, 52.9 s in, 50 s being the kill
    assert fig["extra_copies"] == 10 and fig["extra_copies_outside_windows"] == 0
    assert kill["back_after_end_s"] == 1.9  # the restart came 1 s after the kill
    assert fig["kinds"]["kill"] == {
        "faults": 1,
        "handled_twice": [10],
        "back_after_s": [2.9],
        "back_after_end_s": [1.9],
        "rebalances": 1,
    }
    assert all(found == [] for found in fig["invariants"].values())
    assert "HELD: nothing lost" in render(fig)


def _fault(
    kind: str, twice: int, back: float | None, lasted: float, coordinator: int | None = None
) -> dict[str, object]:
    return {
        "kind": kind,
        "coordinator": coordinator,
        "handled_twice": twice,
        "rebalances": 1 if kind == "long_pause" else 0,
        "back_after_s": back,
        "back_after_end_s": None if back is None else back - lasted,
    }


def test_costs_gives_each_kind_over_several_runs_its_median_and_range() -> None:
    runs = [
        {"faults": [_fault("kill", 12, 2.5, 1.0), _fault("broker_kill", 0, None, 9.0, coordinator=2)]},
        {"faults": [_fault("kill", 0, 2.0, 1.0), _fault("long_pause", 40, 70.0, 66.0)]},
        {"faults": [_fault("kill", 30, 3.25, 1.0), _fault("broker_kill", 0, None, 7.0)]},
    ]
    table = costs(runs).splitlines()
    assert table[2:] == [
        "| `kill` | 3 | 12 [0-30] | 2.5 [2-3.2] | 1.5 [1-2.2] | 0 |",
        "| `long_pause` | 1 | 40 | 70 | 4 | 1 |",
        "| `broker_kill` | 1 | 0 | - | - | 0 |",
        "| `broker_kill` (coordinator) | 1 | 0 | - | - | 0 |",
    ]
