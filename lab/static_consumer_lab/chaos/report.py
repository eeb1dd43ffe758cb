"""A chaos run's figures from its evidence: per fault, per kind, the commit lag per phase, the verdicts.

``figures(ev)`` is plain data (``figures.json``); ``render(figures)`` the text printed after a run.
``python -m static_consumer_lab.chaos.report RUN_DIR`` recomputes both from a saved run directory;
``... report --costs RUN_DIR...`` prints what each kind of fault cost over several runs of one protocol
(``costs``: the table of docs/semantics.md).
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from static_consumer_lab.chaos.evidence import Done, Evidence, load
from static_consumer_lab.chaos.invariants import Limits, check, copies, lag_ages
from static_consumer_lab.chaos.windows import containing, window


def _of(member: str, pod: str) -> bool:
    """Whether static member ``member`` runs in pod ``pod`` (itself, or a pool worker ``pod-k``)."""
    return member == pod or (member.startswith(pod + "-") and member[len(pod) + 1 :].isdigit())


def _back_after(ev: Evidence, fault: Done, born: dict[tuple[str, int], float]) -> float | None:
    """Seconds from a fault's start until the records flowed again where it struck: a new process of
    each killed or SIGTERMed pod handled one (the last of two for ``term2``), the paused process
    handled one after SIGCONT, any process handled one after the ACL came back. None for broker faults
    (nothing of the members was struck) or when it never happened."""
    if fault.kind in ("kill", "term", "term2"):
        firsts = []
        for pod in fault.targets:
            new = [at for (member, _pid), at in born.items() if _of(member, pod) and at > fault.start]
            if not new:
                return None
            firsts.append(min(new))
        return round(max(firsts) - fault.start, 2)
    if fault.kind in ("pause", "long_pause"):
        later = [h.at for h in ev.handled if h.pid in fault.pids and h.at > fault.end]
    elif fault.kind == "acl":
        later = [h.at for h in ev.handled if h.at > fault.end]
    else:
        return None
    return round(min(later) - fault.start, 2) if later else None


def figures(ev: Evidence, limits: Limits | None = None) -> dict[str, Any]:
    limits = limits or Limits()
    extra: Counter[int] = Counter()  # extra copies per fault index (-1: outside every window)
    for handlings in copies(ev).values():
        for h in handlings[1:]:
            fault = containing(h.at, ev.faults, ev.session_s, ev.grace_s)
            extra[fault.index if fault else -1] += 1
    rebalanced: Counter[int] = Counter()
    for _kind, _value, ts in ev.rebalances:
        if ev.began <= ts < ev.stopped:
            fault = containing(ts, ev.faults, ev.session_s, ev.grace_s)
            rebalanced[fault.index if fault else -1] += 1
    born: dict[tuple[str, int], float] = {}
    for h in ev.handled:
        key = (h.member, h.pid)
        born[key] = min(born.get(key, h.at), h.at)
    faults = []
    for f in ev.faults:
        start, end = window(f, ev.session_s, ev.grace_s)
        back = _back_after(ev, f, born)
        faults.append(
            {
                "index": f.index,
                "kind": f.kind,
                "targets": list(f.targets),
                "at_s": round(f.start - ev.began, 1),
                "lasted_s": round(f.end - f.start, 1),
                "window_s": round(end - start, 1),
                "coordinator": f.coordinator,
                "handled_twice": extra[f.index],
                "rebalances": rebalanced[f.index],
                "back_after_s": back,
                "back_after_end_s": None if back is None else round(back - (f.end - f.start), 2),
            }
        )
    per_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for f, row in zip(ev.faults, faults, strict=True):
        per_kind[f.kind].append(row)
    kinds = {
        kind: {
            "faults": len(rows),
            "handled_twice": [r["handled_twice"] for r in rows],
            "back_after_s": [r["back_after_s"] for r in rows],
            "back_after_end_s": [r["back_after_end_s"] for r in rows],
            "rebalances": sum(r["rebalances"] for r in rows),
        }
        for kind, rows in sorted(per_kind.items())
    }
    ages = lag_ages(ev)
    lag = {}
    for phase in ("before", "after"):
        quiet = [s.age_s for s in ages if s.phase == phase and not s.disturbed]
        lagging = [a for a in quiet if a > limits.lag_age_s]
        lag[phase] = {
            "samples": len(quiet),
            "lagging": len(lagging),
            "share": round(len(lagging) / len(quiet), 4) if quiet else None,
            "median_age_s": round(statistics.median(lagging), 3) if lagging else None,
            "max_age_s": round(max(lagging), 3) if lagging else None,
        }
    twice = copies(ev)
    return {
        "acknowledged": len(ev.acked),
        "handled": len(ev.handled),
        "records_handled_twice_or_more": len(twice),
        "extra_copies": sum(len(v) - 1 for v in twice.values()),
        "extra_copies_outside_windows": extra[-1],
        "rebalances_in_faults_phase": sum(rebalanced.values()),
        "faults_phase_s": round(ev.stopped - ev.began, 1),
        "faults": faults,
        "kinds": kinds,
        "lag": lag,
        "lag_limits": {"age_s": limits.lag_age_s, "share": limits.lag_fraction},
        "invariants": check(ev, limits),
    }


def render(fig: dict[str, Any]) -> str:
    lines = [
        f"{fig['acknowledged']} acknowledged, {fig['handled']} handled; "
        f"{fig['records_handled_twice_or_more']} records handled more than once "
        f"({fig['extra_copies']} extra copies, {fig['extra_copies_outside_windows']} outside the windows); "
        f"{fig['rebalances_in_faults_phase']} rebalances in {fig['faults_phase_s']} s of faults",
        "faults (at s, lasted s, window s, handled twice, rebalances, back after s):",
    ]
    for f in fig["faults"]:
        coordinator = " (coordinator)" if f["coordinator"] else ""
        lines.append(
            f"  {f['index']:3d} {f['kind']:<11} {','.join(f['targets']):<14}{coordinator:<14} "
            f"{f['at_s']:7.1f} "
            f"{f['lasted_s']:6.1f} {f['window_s']:6.1f} {f['handled_twice']:5d} {f['rebalances']:3d} "
            f"{f['back_after_s'] if f['back_after_s'] is not None else '-'}"
        )
    limits = fig["lag_limits"]
    for phase, row in fig["lag"].items():
        share = "-" if row["share"] is None else f"{row['share']:.1%}"
        lines.append(
            f"commit lag {phase} the first coordinator fault: {row['lagging']} of {row['samples']} "
            f"undisturbed samples ({share}) older than {limits['age_s']:g} s; "
            f"median age {row['median_age_s']} s, max {row['max_age_s']} s"
        )
    for name, found in fig["invariants"].items():
        lines.append(f"{'HELD' if not found else 'VIOLATED'}: {name}")
        lines.extend(f"    {line}" for line in found)
    return "\n".join(lines)


KIND_ORDER = ("kill", "term", "term2", "pause", "long_pause", "broker_kill", "broker_term", "acl")


def _spread(values: list[float], digits: int = 0) -> str:
    """``median [min-max]`` rounded to ``digits`` (one value alone; ``-`` for none)."""
    if not values:
        return "-"
    low, mid, high = (round(v, digits) + 0.0 for v in (min(values), statistics.median(values), max(values)))
    return f"{low:g}" if low == high else f"{mid:g} [{low:g}-{high:g}]"


def costs(figs: list[dict[str, Any]]) -> str:
    """A markdown table: per kind of fault (a broker fault on the coordinator apart) over the runs'
    figures, how many faults, the records handled twice per fault, the seconds from the fault's start
    and from its end until records flowed again where it struck, and the rebalances."""
    rows: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for fig in figs:
        for f in fig["faults"]:
            row = rows[f["kind"] + (" (coordinator)" if f["coordinator"] else "")]
            row["twice"].append(f["handled_twice"])
            row["rebalances"].append(f["rebalances"])
            if f["back_after_s"] is not None:
                row["back"].append(f["back_after_s"])
                row["back_end"].append(f["back_after_end_s"])
    lines = [
        "| fault | faults | records handled twice, per fault | back after the start (s) "
        "| back after the end (s) | rebalances |",
        "|---|---|---|---|---|---|",
    ]
    for kind in KIND_ORDER:
        for name in (kind, f"{kind} (coordinator)"):
            if name in rows:
                row = rows[name]
                back, back_end, rebalances = (
                    _spread(row["back"], 1),
                    _spread(row["back_end"], 1),
                    sum(row["rebalances"]),
                )
                lines.append(
                    f"| `{kind}`{name[len(kind) :]} | {len(row['twice'])} | {_spread(row['twice'])} | "
                    f"{back} | {back_end} | {rebalances:g} |"
                )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--costs"]:
        print(costs([json.loads((Path(d) / "figures.json").read_text()) for d in argv[1:]]))
        return 0
    run_dir = Path(argv[0])
    fig = figures(load(run_dir))
    saved = run_dir / "figures.json"
    if saved.exists():  # what the run itself said about itself (command, date, load) is kept
        fig = {**fig, **{k: v for k, v in json.loads(saved.read_text()).items() if k == "run"}}
    saved.write_text(json.dumps(fig, indent=1))
    print(render(fig))
    return 1 if any(fig["invariants"].values()) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
