"""The invariants of a chaos run, each a pure function of the evidence returning its violations.

- **nothing lost**: every acknowledged record was handled; nothing was handled that was not acknowledged.
- **duplicates inside a window**: every copy of a record after its first handling is handled inside the
  window (``windows.py``) of a fault that may duplicate (kill, long_pause, acl).
- **committed at the end**: every partition's committed offset equals its log end offset.
- **exits from the faults sent**: every process exit is one the harness caused: SIGKILL (-9) of a
  killed process, 0 after a SIGTERM sent to it, 78 inside the window of a revoked ACL, or 0 after the
  final SIGTERM.
- **order per partition**: each process hands a partition's offsets out one after the other; it moves
  forward past offsets only when other processes handled them, and back only inside a duplicating window.
- **no stale records**: after a pause, the paused process hands out no record, within the pause's
  window, that another process also handled within it (records it no longer owned).
- **rebalances inside windows**: every rebalance the broker logged during the faults phase (classic
  generation, KIP-848 group epoch) falls in some fault's window.
- **the commit lag**: sampled every second by a separate client, "handled but not yet committed"
  (:func:`lag_ages`); outside the faults' windows, at most ``lag_fraction`` of the (sample, partition)
  pairs may have a handled record older than ``lag_age_s`` not yet committed, in each phase (before the
  first coordinator fault, and after it).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from static_consumer_lab.chaos.evidence import Done, Evidence, Exit, Handled
from static_consumer_lab.chaos.windows import DUPLICATING, containing, window

SHOWN = 5  # violations listed per invariant (the count is always given)


@dataclass(frozen=True)
class Limits:
    """``lag_age_s``: a handled record not committed for longer lags; ``lag_fraction``: the share of
    undisturbed (sample, partition) pairs allowed to lag, per phase; ``min_lag_samples``: fewer pairs
    in a phase than this are not judged."""

    lag_age_s: float = 0.1
    lag_fraction: float = 0.1
    min_lag_samples: int = 30


@dataclass(frozen=True)
class LagSample:
    at: float
    partition: int
    age_s: float  # of the oldest handled record not yet committed; 0 when none
    phase: str  # "before" or "after" the first coordinator fault
    disturbed: bool  # inside some fault's window


def _cut(found: list[str], what: str) -> list[str]:
    return found if len(found) <= SHOWN else [*found[:SHOWN], f"... {len(found)} {what} in all"]


def _inside(ev: Evidence, at: float, kinds: frozenset[str] | None = None) -> Done | None:
    return containing(at, ev.faults, ev.session_s, ev.grace_s, kinds)


def lost(ev: Evidence) -> list[str]:
    handled = {(h.partition, h.offset) for h in ev.handled}
    missing = sorted(ev.acked - handled)
    phantom = sorted(handled - ev.acked)
    found = [f"acknowledged, never handled: partition {p} offset {o}" for p, o in missing]
    found += [f"handled, never acknowledged: partition {p} offset {o}" for p, o in phantom]
    return _cut(found, "records")


def copies(ev: Evidence) -> dict[tuple[int, int], list[Handled]]:
    """Records handled more than once: every handling, in time order."""
    by_record: dict[tuple[int, int], list[Handled]] = defaultdict(list)
    for h in ev.handled:
        by_record[(h.partition, h.offset)].append(h)
    return {k: sorted(v, key=lambda h: h.at) for k, v in by_record.items() if len(v) > 1}


def duplicates_outside_windows(ev: Evidence) -> list[str]:
    found = [
        f"partition {h.partition} offset {h.offset} handled again by {h.member} (pid {h.pid}) at "
        f"{h.at - ev.began:.1f} s, outside any kill/long_pause/acl window"
        for handlings in copies(ev).values()
        for h in handlings[1:]
        if _inside(ev, h.at, DUPLICATING) is None
    ]
    return _cut(found, "copies")


def committed_short_of_log_end(ev: Evidence) -> list[str]:
    return [
        f"partition {p}: committed {ev.committed.get(p)}, log end {end}"
        for p, end in sorted(ev.log_end.items())
        if ev.committed.get(p) != end
    ]


def _explains(fault: Done, ended: Exit, ev: Evidence) -> bool:
    hit = ended.member in fault.targets and ended.pid in fault.pids
    if fault.kind == "kill":
        return hit and ended.code == -9
    if fault.kind in ("term", "term2"):
        return hit and ended.code == 0
    if fault.kind == "acl":
        start, end = window(fault, ev.session_s, ev.grace_s)
        return ended.code == 78 and start <= ended.at <= end
    return False


def unexplained_exits(ev: Evidence) -> list[str]:
    found = []
    for e in ev.exits:
        if e.at >= ev.stopped:
            if e.code != 0:
                found.append(f"{e.member} (pid {e.pid}) ended with {e.code} after the final SIGTERM")
        elif not any(_explains(f, e, ev) for f in ev.faults):
            found.append(f"{e.member} (pid {e.pid}) ended with {e.code} at {e.at - ev.began:.1f} s: no fault")
    return _cut(found, "exits")


def out_of_order(ev: Evidence) -> list[str]:
    # A process is its member and its pid: the machine may give a pid again, hardly to the same member.
    runs: dict[tuple[str, int, int], list[Handled]] = defaultdict(list)
    handlers: dict[tuple[int, int], set[tuple[str, int]]] = defaultdict(set)
    for h in ev.handled:  # each process's records in its handling order
        runs[(h.member, h.pid, h.partition)].append(h)
        handlers[(h.partition, h.offset)].add((h.member, h.pid))
    found = []
    for (member, pid, p), run in runs.items():
        for prev, cur in pairwise(run):
            if cur.offset == prev.offset + 1:
                continue
            if cur.offset > prev.offset + 1:
                alone = [
                    o for o in range(prev.offset + 1, cur.offset) if not handlers[(p, o)] - {(member, pid)}
                ]
                if alone:
                    found.append(f"pid {pid} skipped partition {p} offsets {alone[0]}..{alone[-1]}")
            elif _inside(ev, cur.at, DUPLICATING) is None:
                found.append(
                    f"pid {pid} went back on partition {p} from {prev.offset} to {cur.offset} at "
                    f"{cur.at - ev.began:.1f} s, outside any kill/long_pause/acl window"
                )
    return _cut(found, "breaks")


def stale_records(ev: Evidence) -> list[str]:
    found = []
    for fault in ev.faults:
        if fault.kind not in ("pause", "long_pause"):
            continue
        start, end = window(fault, ev.session_s, ev.grace_s)
        paused = set(fault.pids)
        after = {(h.partition, h.offset) for h in ev.handled if h.pid in paused and fault.end < h.at <= end}
        others = {(h.partition, h.offset) for h in ev.handled if h.pid not in paused and start <= h.at <= end}
        found += [
            f"fault {fault.index} ({fault.kind} of {fault.targets[0]}): partition {p} offset {o} handled "
            "after the pause by the paused process and by another"
            for p, o in sorted(after & others)
        ]
    return _cut(found, "records")


def rebalances_outside_windows(ev: Evidence) -> list[str]:
    found = [
        f"{kind} {value} at {ts - ev.began:.1f} s, outside every fault's window"
        for kind, value, ts in ev.rebalances
        if ev.began <= ts < ev.stopped and _inside(ev, ts) is None
    ]
    return _cut(found, "rebalances")


def first_coordinator_fault(ev: Evidence) -> float:
    starts = [f.start for f in ev.faults if f.coordinator]
    return min(starts, default=math.inf)


def lag_ages(ev: Evidence) -> list[LagSample]:
    """Per sample and partition: how long the oldest record handled at or before the sample (its first
    handling) and at or above the committed offset the sample read had waited for its commit."""
    first: dict[int, dict[int, float]] = defaultdict(dict)
    for h in ev.handled:
        seen = first[h.partition]
        seen[h.offset] = min(seen.get(h.offset, math.inf), h.at)
    suffix_min: dict[int, list[float]] = {}
    for p, seen in first.items():
        size = max(seen) + 1
        mins = [math.inf] * (size + 1)
        for o in range(size - 1, -1, -1):
            mins[o] = min(mins[o + 1], seen.get(o, math.inf))
        suffix_min[p] = mins
    coordinator_at = first_coordinator_fault(ev)
    out = []
    for sample in ev.samples:
        if not ev.began <= sample.at < ev.stopped:
            continue
        disturbed = _inside(ev, sample.at) is not None
        phase = "before" if sample.at < coordinator_at else "after"
        for p, mins in suffix_min.items():
            committed = sample.committed.get(p, 0)
            oldest = mins[min(committed, len(mins) - 1)]
            age = sample.at - oldest if oldest <= sample.at else 0.0
            out.append(LagSample(sample.at, p, age, phase, disturbed))
    return out


def commit_lag(ev: Evidence, limits: Limits) -> list[str]:
    found = []
    ages = lag_ages(ev)
    for phase in ("before", "after"):
        quiet = [s for s in ages if s.phase == phase and not s.disturbed]
        if len(quiet) < limits.min_lag_samples:
            continue
        lagging = sum(1 for s in quiet if s.age_s > limits.lag_age_s)
        if lagging > limits.lag_fraction * len(quiet):
            found.append(
                f"{phase} the first coordinator fault: {lagging} of {len(quiet)} undisturbed samples "
                f"({lagging / len(quiet):.1%}) had a record handled more than {limits.lag_age_s:g} s "
                f"earlier not yet committed (at most {limits.lag_fraction:.0%} allowed)"
            )
    return found


INVARIANTS: dict[str, Callable[[Evidence], list[str]]] = {
    "nothing lost": lost,
    "duplicates inside a window": duplicates_outside_windows,
    "committed at the end": committed_short_of_log_end,
    "exits from the faults sent": unexplained_exits,
    "order per partition": out_of_order,
    "no stale records": stale_records,
    "rebalances inside windows": rebalances_outside_windows,
}


def check(ev: Evidence, limits: Limits | None = None) -> dict[str, list[str]]:
    """Every invariant's violations (an empty list: it held)."""
    verdicts = {name: judge(ev) for name, judge in INVARIANTS.items()}
    verdicts["the commit lag"] = commit_lag(ev, limits or Limits())
    return verdicts


__all__ = [
    "INVARIANTS",
    "LagSample",
    "Limits",
    "check",
    "commit_lag",
    "committed_short_of_log_end",
    "copies",
    "duplicates_outside_windows",
    "first_coordinator_fault",
    "lag_ages",
    "lost",
    "out_of_order",
    "rebalances_outside_windows",
    "stale_records",
    "unexplained_exits",
]
