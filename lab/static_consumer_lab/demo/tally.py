"""The run's own tally: everything the runner observed, replayed once in time order.

One pass per strategy keeps the state an observer would keep while watching the group: who holds each
partition right now, since when a partition has had no holder, who held it last, which incarnations have
been told to stop. A second pass replays record processings in time order for latency and lag. The
definitions are in :mod:`.metrics`; :mod:`.recount` computes the same numbers another way, from files.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from static_consumer_lab.demo.metrics import Event, Metrics
from static_consumer_lab.demo.rundata import Incarnation, RunData, StrategyRun, window_of

_ENDING = ("exit", "reaped")


def tally(run: RunData) -> dict[str, Metrics]:
    return {s.strategy: _Replay(run, s).metrics() for s in run.strategies}


def _has_ending(inc: Incarnation) -> bool:
    return any(
        e["kind"] in _ENDING or (e["kind"] == "signal" and e.get("signal") == "KILL") for e in inc.events
    )


class _Replay:
    def __init__(self, run: RunData, strategy: StrategyRun) -> None:
        self.run, self.strategy = run, strategy
        self.w0, self.w1 = window_of(run, strategy)
        self.holders: dict[int, set[str]] = {p: set() for p in range(run.partitions)}
        self.free_since: dict[int, float] = {p: -math.inf for p in range(run.partitions)}
        self.held: dict[str, set[int]] = defaultdict(set)
        self.last_member: dict[int, str] = {}
        self.signalled: set[str] = set()
        self.ended: set[str] = set()
        self.unowned = 0.0
        self.longest = 0.0
        self.counts: dict[str, int] = defaultdict(int)
        self.rebuild_s = 0.0

    def _in_window(self, ts: float) -> bool:
        return self.w0 <= ts <= self.w1

    # ------------------------------------------------------------------------------- membership pass
    def _timeline(self) -> list[tuple[float, str, int, Event]]:
        items: list[tuple[float, str, int, Event]] = []
        for inc in self.strategy.incarnations:
            items.extend((float(e["ts"]), inc.name, seq, e) for seq, e in enumerate(inc.events))
            if inc.events and not _has_ending(inc):  # died without a word: it ends at its last sign of life
                last = max(float(e["ts"]) for e in inc.events)
                items.append((last, inc.name, len(inc.events), {"kind": "_end", "ts": last}))
        items.sort(key=lambda item: item[:3])
        return items

    def _close_gap(self, partition: int, until: float) -> None:
        lo, hi = max(self.free_since[partition], self.w0), min(until, self.w1)
        if hi > lo:
            self.unowned += hi - lo
            self.longest = max(self.longest, hi - lo)

    def _acquire(self, name: str, partition: int, ts: float) -> None:
        if not self.holders[partition]:
            self._close_gap(partition, ts)
        self.holders[partition].add(name)
        self.held[name].add(partition)
        member = name.split("#", 1)[0]
        previous = self.last_member.get(partition)
        if previous is not None and previous != member and self._in_window(ts):
            self.counts["moves"] += 1
        self.last_member[partition] = member

    def _release(self, name: str, partition: int, ts: float) -> None:
        if partition not in self.held[name]:
            return
        self.held[name].discard(partition)
        self.holders[partition].discard(name)
        if not self.holders[partition]:
            self.free_since[partition] = ts

    def _end(self, name: str, ts: float) -> None:
        for partition in sorted(self.held[name]):
            self._release(name, partition, ts)
        self.ended.add(name)

    def _membership(self, ts: float, name: str, event: Event) -> None:
        kind = event["kind"]
        partitions = [p for _topic, p in event.get("partitions", ())]
        if kind == "start" and self._in_window(ts):
            self.counts["restarts"] += 1
        elif kind == "signal":
            self.signalled.add(name)
            if event.get("signal") == "KILL":
                self.counts["kills"] += self._in_window(ts)
                self._end(name, ts)
        elif kind in (*_ENDING, "_end") and name not in self.ended:
            self._end(name, ts)
        elif kind == "assigned" and name not in self.ended:
            for partition in partitions:
                if partition not in self.held[name]:
                    self._acquire(name, partition, ts)
        elif kind in ("revoked", "lost"):
            if partitions and name not in self.signalled and self._in_window(ts):
                self.counts["revocations"] += 1
            if name not in self.ended:
                for partition in partitions:
                    self._release(name, partition, ts)
        elif kind == "rebuild" and self._in_window(float(event["started"])):
            self.counts["rebuilds"] += len(partitions)
            self.rebuild_s += float(event["seconds"])

    # -------------------------------------------------------------------------------- records pass
    def _processings(self) -> Iterable[tuple[int, int, int, int]]:
        """(done_ms, partition, offset, created_ms) of every processing, in time order."""
        rows: list[tuple[int, int, int, int]] = []
        for inc in self.strategy.incarnations:
            for e in inc.events:
                if e["kind"] == "records" and "done_ms" in e:
                    for (_t, p, o), created, done in zip(
                        e["records"], e["created_ms"], e["done_ms"], strict=True
                    ):
                        rows.append((int(done), int(p), int(o), int(created)))
        rows.sort()
        return rows

    def _records(self) -> dict[str, Any]:
        lo, hi = int(self.w0 * 1000), int(self.w1 * 1000)
        seen: set[tuple[int, int]] = set()
        latencies: list[int] = []
        changes: list[tuple[int, int]] = [(c, +1) for _p, _o, c in self.run.produced]
        duplicated = 0
        for done, p, o, created in self._processings():
            if (p, o) in seen:
                duplicated += 1
                continue
            seen.add((p, o))
            changes.append((done, -1))
            if lo <= created <= hi:
                latencies.append(done - created)
        changes.sort()
        lag, i = 0, 0
        while i < len(changes) and changes[i][0] <= lo:  # the lag as the window opens
            lag += changes[i][1]
            i += 1
        max_lag = lag
        while i < len(changes) and changes[i][0] <= hi:
            t = changes[i][0]
            while i < len(changes) and changes[i][0] == t:
                lag += changes[i][1]
                i += 1
            max_lag = max(max_lag, lag)
        latencies.sort()
        produced = {(p, o) for p, o, _c in self.run.produced}
        return {
            "latency_p50_ms": _nearest_rank(latencies, 50),
            "latency_p99_ms": _nearest_rank(latencies, 99),
            "latency_max_ms": latencies[-1] if latencies else None,
            "max_lag": max_lag,
            "produced": len(produced),
            "duplicated": duplicated,
            "lost": len(produced - seen),
        }

    def metrics(self) -> Metrics:
        for ts, name, _seq, event in self._timeline():
            self._membership(ts, name, event)
        for partition, holders in self.holders.items():
            if not holders:
                self._close_gap(partition, math.inf)
        broker = self.strategy.broker
        return Metrics(
            window_s=self.w1 - self.w0,
            restarts=self.counts["restarts"],
            kills=self.counts["kills"],
            rebalances=None if broker is None else sum(self._in_window(float(e["ts"])) for e in broker),
            live_revocations=self.counts["revocations"],
            partition_moves=self.counts["moves"],
            unowned_s=self.unowned,
            longest_unowned_s=self.longest,
            rebuilds=self.counts["rebuilds"],
            rebuild_s=self.rebuild_s,
            **self._records(),
        )


def _nearest_rank(ordered: list[int], percent: int) -> int | None:
    if not ordered:
        return None
    return ordered[-(-percent * len(ordered) // 100) - 1]
