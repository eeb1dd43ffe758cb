"""The long sweep behind the decision guide: ``static-consumer demo --sweep DIR``.

Runs the demo (the same runner, the same table, the same recount) over a grid of its own options:
restart delay, group size, stateless or stateful handlers, clean (SIGTERM) or hard (SIGKILL) restarts,
``--runs`` times each (3 by default), on one broker, and prints per cell and strategy the median and the
min-max of what the guide compares: end-to-end p99 latency, partition-seconds without an owner, state
rebuilds, records processed twice.

Every run is saved (``DIR/<cell>/run<n>/bounce.json`` and its raw ``events/``) and a later invocation
skips the runs already there, so a sweep can be spread over several short sessions: ``--budget-min``
stops before a run that would not end in time (the estimate is the cell's completed runs, else a formula).
``--budget-min 0`` only prints the summary of what ``DIR`` holds. Each run's recount from its events must
agree with its own table, or the run is reported and left out.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from static_consumer_lab.demo.metrics import Metrics
from static_consumer_lab.demo.strategies import DemoConfig

Progress = Callable[[str], None]
# (field, label, format) of what the summary compares, per strategy: median (min-max) over the runs.
COMPARED: tuple[tuple[str, str], ...] = (
    ("latency_p99_ms", "p99 ms"),
    ("unowned_s", "unowned partition-s"),
    ("rebuilds", "rebuilds"),
    ("duplicated", "processed twice"),
)


@dataclass(frozen=True)
class Cell:
    members: int
    restart_delay_s: float
    state_warmup_s: float
    restart: str  # "clean" (SIGTERM, one graceful round) or "hard" (SIGKILL, one kill round)

    @property
    def name(self) -> str:
        return f"m{self.members}-d{self.restart_delay_s:g}-w{self.state_warmup_s:g}-{self.restart}"

    def config(self, base: DemoConfig) -> DemoConfig:
        hard = self.restart == "hard"
        return replace(
            base,
            members=self.members,
            partitions=2 * self.members,
            restart_delay_s=self.restart_delay_s,
            state_warmup_s=self.state_warmup_s,
            rounds=0 if hard else 1,
            kill=hard,
        )

    def estimate_s(self, base: DemoConfig) -> float:
        """A first run's wall time before any was measured (broker excluded): formation, then per member
        the delay and a settle; a hard restart waits out the longest session timeout."""
        per_member = self.restart_delay_s + 10.0 + (base.longest_session_s if self.restart == "hard" else 0.0)
        return 40.0 + 2.0 * self.members + self.members * per_member


def grid(
    members: Sequence[int], delays: Sequence[float], warmups: Sequence[float], restarts: Sequence[str]
) -> list[Cell]:
    for restart in restarts:
        if restart not in ("clean", "hard"):
            raise ValueError(f"--sweep-restarts takes clean and/or hard (got {restart!r})")
    return [Cell(m, d, w, r) for r in restarts for w in warmups for m in members for d in delays]


def _runs(directory: Path) -> Iterator[dict[str, Any]]:
    for report in sorted(directory.glob("run*/bounce.json")):
        doc = json.loads(report.read_text())
        if not any(doc.get("recount_differences", {}).values()):
            yield doc


def sweep(
    out: Path,
    cells: Sequence[Cell],
    base: DemoConfig,
    runs: int,
    budget_s: float,
    run_one: Callable[[DemoConfig, Path], None],
    progress: Progress,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """Run what is missing (``runs`` per cell) while it fits in ``budget_s``; the cells left unfinished."""
    ends = clock() + budget_s
    unfinished = []
    for cell in cells:
        directory = out / cell.name
        for n in range(1, runs + 1):
            target = directory / f"run{n}"
            if (target / "bounce.json").exists():
                continue
            walls = [float(doc["meta"]["wall_s"]) for doc in _runs(directory)]
            estimate = statistics.median(walls) if walls else cell.estimate_s(base)
            if clock() + estimate > ends:
                progress(
                    f"{cell.name}: run {n} needs about {estimate:.0f} s, past the budget: left for later"
                )
                unfinished.append(cell.name)
                break
            progress(f"{cell.name}: run {n}/{runs} (about {estimate:.0f} s)")
            run_one(cell.config(base), target)
    return unfinished


def _spread(values: Sequence[float]) -> str:
    if not values:
        return "n/a"

    def text(value: float) -> str:
        return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:.1f}"

    median, low, high = statistics.median(values), min(values), max(values)
    return text(median) if low == high else f"{text(median)} ({text(low)}-{text(high)})"


def summary(out: Path, cells: Sequence[Cell] | None = None) -> str:
    """Per cell found in ``out`` (or the given ones), per strategy: median (min-max) of each compared
    number over the cell's runs, how many runs, and which strategy is best on each."""
    names = (
        [c.name for c in cells] if cells is not None else sorted(p.name for p in out.iterdir() if p.is_dir())
    )
    lines = []
    for name in names:
        docs = list(_runs(out / name))
        if not docs:
            lines.append(f"{name}: not measured")
            continue
        profile = {doc["meta"].get("broker_profile", "unknown") for doc in docs}
        lines.append(f"{name}: {len(docs)} run(s), broker {'/'.join(sorted(profile))}")
        strategies = list(docs[0]["strategies"])
        by: dict[str, dict[str, list[float]]] = {
            s: {
                field: [
                    float(d["strategies"][s][field]) for d in docs if d["strategies"][s][field] is not None
                ]
                for field, _label in COMPARED
            }
            for s in strategies
        }
        width = max(len(s) for s in strategies)
        for s in strategies:
            cols = ", ".join(f"{label} {_spread(by[s][field])}" for field, label in COMPARED)
            lines.append(f"  {s.ljust(width)}  {cols}")
        lines.append("  " + _best(by))
    return "\n".join(lines)


def _best(by: Mapping[str, Mapping[str, list[float]]]) -> str:
    def median(s: str, field: str) -> float:
        values = by[s][field]
        return statistics.median(values) if values else float("inf")

    p99 = min(by, key=lambda s: median(s, "latency_p99_ms"))
    unowned = min(by, key=lambda s: median(s, "unowned_s"))
    no_rebuilds = [s for s in by if by[s]["rebuilds"] and max(by[s]["rebuilds"]) == 0]
    return (
        f"lowest median p99: {p99}; fewest median unowned partition-s: {unowned}; "
        f"no rebuild in any run: {', '.join(no_rebuilds) or 'none'}"
    )


def to_metrics(doc: Mapping[str, Any]) -> dict[str, Metrics]:
    return {name: Metrics.from_json(m) for name, m in doc["strategies"].items()}
