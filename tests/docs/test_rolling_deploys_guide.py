"""The decision guide's summary tables (docs/rolling-deploys.md) say what the cell tables below them
say. The cell tables are the measurements (median (min-max) over each cell's runs, as the demo's sweep
printed them); the summaries are rendered here from them, so a cell measured again cannot leave a
summary behind. On a mismatch the assertion shows the text the summary should hold."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "rolling-deploys.md"

GROUPS = ("cooperative-sticky", "KIP-848 dynamic", "static (classic)", "static (KIP-848)")
SHORT = {"cooperative-sticky": "C", "KIP-848 dynamic": "K", "static (classic)": "S", "static (KIP-848)": "SK"}
STATIC = ("static (classic)", "static (KIP-848)")
# The grid the guide covers: the sweep's default (6 and 24 members), plus the 2 and 5 s cells of 6 members.
DELAYS = {6: (0, 2, 5, 10, 30, 60), 24: (0, 10, 30, 60)}
_CELL = re.compile(
    r"^\| m(\d+)-d(\d+)-w([01])-(clean|hard) \((\d+) runs\) \|(.*)\n\|---.*\n((?:\|.*\n)+)", re.M
)


@dataclass(frozen=True)
class Cell:
    members: int
    delay_s: int
    stateful: bool
    kind: str  # clean | hard
    runs: int
    rows: dict[str, dict[str, str]]  # row label -> group -> "median (min-max)" as printed

    def median(self, row: str, group: str) -> float:
        return float(self.rows[row][group].split(" (")[0].replace(",", ""))

    def spread(self, row: str, group: str) -> tuple[float, float]:
        text = self.rows[row][group]
        if " (" not in text:
            value = self.median(row, group)
            return value, value
        low, high = text.split(" (")[1].rstrip(")").replace(",", "").split("-")
        return float(low), float(high)

    def p99(self, group: str) -> float:
        return self.median("end-to-end latency p99, ms", group)

    def lowest_p99(self) -> list[str]:
        best = min(self.p99(g) for g in GROUPS)
        return [g for g in GROUPS if self.p99(g) == best]

    def lower_in_every_run(self, group: str) -> bool:
        """Whether group's p99 range lies below every other group's (the tables keep no per-run pairing)."""
        row = "end-to-end latency p99, ms"
        return all(self.spread(row, group)[1] < self.spread(row, g)[0] for g in GROUPS if g != group)

    def unmoved(self) -> list[str]:
        return [g for g in GROUPS if self.rows["partition moves"][g] == "0"]


def cells(text: str) -> dict[tuple[int, int, bool, str], Cell]:
    found: dict[tuple[int, int, bool, str], Cell] = {}
    for m in _CELL.finditer(text):
        members, delay, warm, kind, runs, head, body = m.groups()
        groups = [g.strip() for g in head.strip(" |").split("|")]
        rows = {}
        for line in body.splitlines():
            label, *values = (p.strip() for p in line.strip(" |").split("|"))
            rows[label] = dict(zip(groups, values, strict=True))
        key = (int(members), int(delay), warm == "1", kind)
        assert key not in found, f"two tables for {key}"
        found[key] = Cell(int(members), int(delay), warm == "1", kind, int(runs), rows)
    return found


def seconds(ms: float) -> str:
    s = ms / 1000
    return f"{s:.2f}" if s < 10 else f"{s:.1f}" if s < 100 else f"{s:,.0f}"


def _order(cell: Cell) -> tuple[int, int, bool]:
    return cell.members, cell.delay_s, not cell.stateful


def guide_table(grid: dict[tuple[int, int, bool, str], Cell], kind: str) -> str:
    lines = [
        f"| {kind} restarts: members, back after, handler | "
        + " | ".join(GROUPS)
        + " | fewest partition-s with no owner | no partition moved in any run |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for cell in sorted((c for c in grid.values() if c.kind == kind), key=_order):
        lowest = cell.lowest_p99()
        p99 = []
        for g in GROUPS:
            shown = seconds(cell.p99(g))
            if g in lowest:
                shown = f"**{shown}**" + ("" if cell.lower_in_every_run(g) else " ~")
            p99.append(shown)
        unowned = {g: cell.median("partition-s with no owner", g) for g in GROUPS}
        fewest = min(unowned.values())
        who = ", ".join(SHORT[g] for g in GROUPS if unowned[g] == fewest)
        unmoved = ", ".join(SHORT[g] for g in cell.unmoved()) or "none"
        handler = "stateful" if cell.stateful else "stateless"
        lines.append(
            f"| {cell.members}, {cell.delay_s} s, {handler} | "
            + " | ".join(p99)
            + f" | {who} {fewest:,.1f} | {unmoved} |"
        )
    return "\n".join(lines) + "\n"


def short_table(grid: dict[tuple[int, int, bool, str], Cell]) -> str:
    """README's version: per cell the group with the lowest median p99, and the best of the other kind."""

    def entry(cell: Cell | None) -> str:
        if cell is None:
            return "not measured"
        winner = cell.lowest_p99()
        other = [g for g in GROUPS if (g in STATIC) != (winner[0] in STATIC)]
        best_other = min(other, key=cell.p99)
        names = "/".join(SHORT[g] for g in winner)
        return f"{names} {seconds(cell.p99(winner[0]))} ({SHORT[best_other]} {seconds(cell.p99(best_other))})"

    lines = [
        "| back after | clean, stateful: 6 / 24 members | clean, stateless: 6 / 24 | hard, stateful: 6 / 24 "
        "| hard, stateless: 6 / 24 |",
        "|---|---|---|---|---|",
    ]
    for delay in DELAYS[6]:
        row = []
        for kind, stateful in (("clean", True), ("clean", False), ("hard", True), ("hard", False)):
            six, big = grid.get((6, delay, stateful, kind)), grid.get((24, delay, stateful, kind))
            row.append(entry(six) + " / " + entry(big))
        lines.append(f"| {delay} s | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def test_every_cell_of_the_grid_has_one_table_of_three_runs() -> None:
    grid = cells(GUIDE.read_text())
    wanted = {
        (members, delay, stateful, kind)
        for members, delays in DELAYS.items()
        for delay in delays
        for stateful in (True, False)
        for kind in ("clean", "hard")
    }
    assert sorted(wanted - set(grid)) == [], "cells the guide claims but has no table for"
    assert sorted(set(grid) - wanted) == [], "tables outside the grid"
    assert {c.runs for c in grid.values()} == {3}
    for cell in grid.values():
        assert set(cell.rows["end-to-end latency p99, ms"]) == set(GROUPS), cell


def test_the_guide_summary_is_rendered_from_the_cell_tables() -> None:
    text = GUIDE.read_text()
    grid = cells(text)
    for kind in ("clean", "hard"):
        expected = guide_table(grid, kind)
        assert expected in text, f"docs/rolling-deploys.md should hold:\n{expected}"


def test_the_short_guide_is_rendered_from_the_cell_tables() -> None:
    expected = short_table(cells(GUIDE.read_text()))
    assert expected in GUIDE.read_text(), f"docs/rolling-deploys.md should hold:\n{expected}"


def test_the_renderer_reads_a_table_as_printed() -> None:
    """The parser itself, on a table in the sweep's format (not the docs' numbers)."""
    table = (
        "| m6-d2-w1-clean (3 runs) | " + " | ".join(GROUPS) + " |\n|---|---|---|---|---|\n"
        "| end-to-end latency p99, ms | 4,570 (4,470-4,636) | 5,041 "
        "| 2,292 (2,282-2,328) | 2,300 (2,250-2,315) |\n"
        "| partition-s with no owner | 49.4 | 49.6 | 25.6 (25.6-25.9) | 25.6 |\n"
        "| partition moves | 24 (20-24) | 20 | 0 | 0 (0-1) |\n"
    )
    cell = cells(table)[(6, 2, True, "clean")]
    assert cell.lowest_p99() == ["static (classic)"]
    assert not cell.lower_in_every_run("static (classic)")  # static (KIP-848)'s range reaches below it
    assert cell.unmoved() == ["static (classic)"]
    row = guide_table({(6, 2, True, "clean"): cell}, "clean").splitlines()[2]
    assert row == "| 6, 2 s, stateful | 4.57 | 5.04 | **2.29** ~ | 2.30 | S, SK 25.6 | S |"
