"""The demo's sweep without a broker: the grid of the demo's own options maps to the configurations the
demo would run (clean: one graceful round; hard: one kill round), a sweep keeps the runs a directory
already holds and stops before a run that would not end within its budget, and the summary gives per
strategy the median and min-max over the runs, says which cells were not measured, and leaves out a run
whose recount disagreed with its table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from static_consumer_lab.demo.main import main as demo_main
from static_consumer_lab.demo.strategies import DemoConfig
from static_consumer_lab.demo.sweep import Cell, grid, summary, sweep

BASE = DemoConfig()


def _doc(p99: dict[str, int], wall_s: float = 60.0, differs: bool = False) -> dict[str, Any]:
    def metrics(value: int) -> dict[str, Any]:
        return {
            "latency_p99_ms": value,
            "unowned_s": value / 100,
            "rebuilds": 0 if value < 1000 else 4,
            "duplicated": 0,
        }

    return {
        "meta": {"wall_s": wall_s, "broker_profile": "stock"},
        "strategies": {name: metrics(v) for name, v in p99.items()},
        "recount_differences": {name: (["x"] if differs else []) for name in p99},
    }


def _save(directory: Path, doc: dict[str, Any]) -> None:
    directory.mkdir(parents=True)
    (directory / "bounce.json").write_text(json.dumps(doc))


def test_the_grid_maps_to_the_demos_own_configurations() -> None:
    cells = grid([6, 24], [0.0, 30.0], [0.0, 1.0], ["clean", "hard"])
    assert len(cells) == 16 and len({c.name for c in cells}) == 16
    hard = Cell(24, 30.0, 1.0, "hard").config(BASE)
    assert (hard.members, hard.partitions, hard.rounds, hard.kill, hard.restart_delay_s) == (
        24,
        48,
        0,
        True,
        30.0,
    )
    clean = Cell(6, 0.0, 0.0, "clean").config(BASE)
    assert (clean.rounds, clean.kill, clean.state_warmup_s, clean.lab) == (1, False, 0.0, False)
    with pytest.raises(ValueError, match="clean and/or hard"):
        grid([6], [0.0], [0.0], ["soft"])


def test_a_sweep_keeps_what_is_there_and_stops_before_the_budget_runs_out(tmp_path: Path) -> None:
    cell, other = Cell(6, 0.0, 0.0, "clean"), Cell(6, 10.0, 0.0, "clean")
    _save(tmp_path / cell.name / "run1", _doc({"static": 100}, wall_s=50.0))
    now = [0.0]
    ran: list[Path] = []

    def run_one(cfg: DemoConfig, target: Path) -> None:
        ran.append(target)
        now[0] += 50.0
        _save(target, _doc({"static": 200}, wall_s=50.0))

    left = sweep(tmp_path, [cell, other], BASE, 3, 120.0, run_one, lambda _line: None, clock=lambda: now[0])
    # run1 was there; runs 2 and 3 fit (50 s each, the cell's own completed run); the next cell's first
    # run (estimated by the formula) no longer does.
    assert ran == [tmp_path / cell.name / "run2", tmp_path / cell.name / "run3"] and left == [other.name]
    text = summary(tmp_path, [cell, other])
    assert f"{cell.name}: 3 run(s), broker stock" in text and "p99 ms 200 (100-200)" in text
    assert f"{other.name}: not measured" in text


def test_the_summary_names_the_best_and_leaves_out_a_run_whose_recount_disagreed(tmp_path: Path) -> None:
    cell = Cell(6, 2.0, 1.0, "clean")
    _save(tmp_path / cell.name / "run1", _doc({"cooperative": 4000, "static": 900}))
    _save(tmp_path / cell.name / "run2", _doc({"cooperative": 5000, "static": 800}))
    _save(tmp_path / cell.name / "run3", _doc({"cooperative": 1, "static": 99999}, differs=True))
    text = summary(tmp_path, [cell])
    assert f"{cell.name}: 2 run(s)" in text and "99999" not in text
    assert "lowest median p99: static" in text and "no rebuild in any run: static" in text


def test_a_zero_budget_only_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sweep", str(tmp_path), "--sweep-members", "6", "--sweep-delays", "0", "--sweep-warmups", "0"]
    assert demo_main([*argv, "--sweep-restarts", "clean", "--budget-min", "0"]) == 0
    assert "m6-d0-w0-clean: not measured" in capsys.readouterr().out
