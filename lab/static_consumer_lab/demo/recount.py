"""The table again, from the saved event files alone: ``static-consumer demo --recount DIR``.

Where :mod:`.tally` replays the run in time order, this works per incarnation and per partition: each
incarnation's stream becomes holding intervals, a partition's intervals are merged and their complement
in the window is its unowned time; records are joined to the producer's delivery log by (partition,
offset); lag is counted with binary searches. Same definitions (:mod:`.metrics`), no shared code.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from static_consumer_lab.demo.metrics import Event, Metrics
from static_consumer_lab.demo.rundata import Incarnation, RunData, StrategyRun, load, window_of


@dataclass(frozen=True)
class Holding:
    """``incarnation`` (of ``member``) held ``partition`` over ``[start, end]``."""

    partition: int
    member: str
    incarnation: str
    start: float
    end: float


@dataclass(frozen=True)
class _Stream:
    holdings: list[Holding]
    acquisitions: list[tuple[float, str, int, int, str]]  # (ts, incarnation, seq, partition, member)
    live_revocations: list[float]  # timestamps


def _is_kill(event: Event) -> bool:
    return event["kind"] == "signal" and event.get("signal") == "KILL"


def _is_ending(event: Event) -> bool:
    return event["kind"] in ("exit", "reaped") or _is_kill(event)


def _stream(inc: Incarnation) -> _Stream:
    ordered = sorted(enumerate(inc.events), key=lambda pair: (float(pair[1]["ts"]), pair[0]))
    stop = next((pos for pos, (_seq, e) in enumerate(ordered) if e["kind"] == "signal"), len(ordered))
    ending = next((pos for pos, (_seq, e) in enumerate(ordered) if _is_ending(e)), None)
    if ending is None:  # died without a word: it ends at its last sign of life
        end_ts = float(ordered[-1][1]["ts"]) if ordered else 0.0
        ending = len(ordered)
    else:
        end_ts = float(ordered[ending][1]["ts"])
    open_since: dict[int, float] = {}
    holdings: list[Holding] = []
    acquisitions = []
    for seq, event in ordered[:ending]:
        ts, kind = float(event["ts"]), event["kind"]
        for _topic, partition in event.get("partitions", ()):
            if kind == "assigned" and partition not in open_since:
                open_since[partition] = ts
                acquisitions.append((ts, inc.name, seq, partition, inc.member))
            elif kind in ("revoked", "lost") and partition in open_since:
                holdings.append(Holding(partition, inc.member, inc.name, open_since.pop(partition), ts))
    holdings.extend(Holding(p, inc.member, inc.name, start, end_ts) for p, start in open_since.items())
    revocations = [
        float(e["ts"]) for _seq, e in ordered[:stop] if e["kind"] in ("revoked", "lost") and e["partitions"]
    ]
    return _Stream(holdings, acquisitions, revocations)


def holdings(strategy: StrategyRun) -> list[Holding]:
    """Every holding interval of the strategy's incarnations (for the picture too)."""
    return sorted(
        (h for inc in strategy.incarnations for h in _stream(inc).holdings),
        key=lambda h: (h.partition, h.start, h.incarnation),
    )


def unowned_gaps(intervals: Sequence[Holding], w0: float, w1: float) -> list[tuple[float, float]]:
    """Maximal stretches of ``[w0, w1]`` covered by none of ``intervals`` (one partition's holdings).

    A holding of zero length still marks its instant as held, as the tally's replay sees it.
    """
    gaps = []
    reach = w0
    for h in sorted(intervals, key=lambda h: (h.start, h.end)):
        if h.end < w0 or h.start > w1:
            continue
        if h.start > reach:
            gaps.append((reach, h.start))
        reach = max(reach, h.end)
    if reach < w1:
        gaps.append((reach, w1))
    return gaps


def _percentile(histogram: Counter[int], total: int, percent: int) -> int | None:
    """Nearest rank, by walking the latency histogram upwards."""
    if total == 0:
        return None
    rank = (percent * total + 99) // 100
    seen = 0
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= rank:
            return value
    raise AssertionError("unreachable: the histogram holds total values")


def _strategy(run: RunData, strategy: StrategyRun) -> Metrics:
    w0, w1 = window_of(run, strategy)

    def inside(ts: float) -> bool:
        return w0 <= ts <= w1

    streams = [_stream(inc) for inc in strategy.incarnations]

    by_partition: dict[int, list[Holding]] = defaultdict(list)
    for stream in streams:
        for h in stream.holdings:
            by_partition[h.partition].append(h)
    gaps = [g for p in range(run.partitions) for g in unowned_gaps(by_partition[p], w0, w1)]
    gaps = [(a, b) for a, b in gaps if b > a]

    moves = 0
    previous: dict[int, str] = {}
    for ts, _inc, _seq, partition, member in sorted(a for s in streams for a in s.acquisitions):
        if partition in previous and previous[partition] != member and inside(ts):
            moves += 1
        previous[partition] = member

    events = [e for inc in strategy.incarnations for e in inc.events]
    rebuilds = [e for e in events if e["kind"] == "rebuild" and inside(float(e["started"]))]

    first_done: dict[tuple[int, int], int] = {}
    processings = 0
    for e in events:
        if e["kind"] == "records" and "done_ms" in e:
            for (_topic, p, o), done in zip(e["records"], e["done_ms"], strict=True):
                processings += 1
                key = (int(p), int(o))
                first_done[key] = min(int(done), first_done.get(key, int(done)))
    created = {(p, o): c for p, o, c in run.produced}
    lo, hi = int(w0 * 1000), int(w1 * 1000)
    histogram: Counter[int] = Counter(
        first_done[key] - c for key, c in created.items() if lo <= c <= hi and key in first_done
    )
    total = sum(histogram.values())

    produced_at = sorted(created.values())
    done_at = sorted(first_done.values())
    moments = [lo, *(t for t in produced_at + done_at if lo < t <= hi)]
    max_lag = max(bisect_right(produced_at, t) - bisect_right(done_at, t) for t in moments)

    broker = strategy.broker
    return Metrics(
        window_s=w1 - w0,
        restarts=sum(1 for e in events if e["kind"] == "start" and inside(float(e["ts"]))),
        kills=sum(1 for e in events if _is_kill(e) and inside(float(e["ts"]))),
        rebalances=None if broker is None else sum(1 for e in broker if inside(float(e["ts"]))),
        live_revocations=sum(1 for s in streams for ts in s.live_revocations if inside(ts)),
        partition_moves=moves,
        unowned_s=sum(b - a for a, b in gaps),
        longest_unowned_s=max((b - a for a, b in gaps), default=0.0),
        rebuilds=sum(len(e["partitions"]) for e in rebuilds),
        rebuild_s=sum(float(e["seconds"]) for e in rebuilds),
        latency_p50_ms=_percentile(histogram, total, 50),
        latency_p99_ms=_percentile(histogram, total, 99),
        latency_max_ms=max(histogram) if histogram else None,
        max_lag=max_lag,
        produced=len(created),
        duplicated=processings - len(first_done),
        lost=len(created.keys() - first_done.keys()),
    )


def recount(run: RunData) -> dict[str, Metrics]:
    return {s.strategy: _strategy(run, s) for s in run.strategies}


def recount_dir(path: Path) -> tuple[RunData, dict[str, Metrics]]:
    run = load(path)
    return run, recount(run)
