"""What a rolling bounce cost, computed from the events the consumers reported (pure functions).

Every number comes from observed events: assignments, revocations and records as each consumer process
saw them (and, for rebalances, the generations the broker logged). Nothing is predicted by a model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Event = Mapping[str, Any]


@dataclass(frozen=True)
class MemberRun:
    """One process of one member: ``stopping_at`` is when it was told to stop (None: ran to the end)."""

    name: str
    events: Sequence[Event]
    stopping_at: float | None
    ended_at: float


@dataclass(frozen=True)
class Interval:
    """``owner`` held ``partition`` from ``start`` to ``end`` (seconds since the epoch)."""

    partition: int
    owner: str
    start: float
    end: float


def ownership(runs: Iterable[MemberRun]) -> list[Interval]:
    """Who owned which partition when, from assigned/revoked/lost events (additive for both protocols)."""
    intervals: list[Interval] = []
    for run in runs:
        held: dict[int, float] = {}
        for event in run.events:
            kind = event["kind"]
            if kind == "assigned":
                for _topic, partition in event["partitions"]:
                    held.setdefault(partition, event["ts"])
            elif kind in ("revoked", "lost"):
                for _topic, partition in event["partitions"]:
                    if partition in held:
                        intervals.append(Interval(partition, run.name, held.pop(partition), event["ts"]))
        intervals.extend(Interval(p, run.name, start, run.ended_at) for p, start in held.items())
    return sorted(intervals, key=lambda i: (i.partition, i.start))


def partition_moves(intervals: Iterable[Interval], since: float, until: float = float("inf")) -> int:
    """How often a partition went to a different member than the one that held it before, for
    assignments that started within [since, until)."""
    last_owner: dict[int, str] = {}
    moves = 0
    for interval in sorted(intervals, key=lambda i: (i.start, i.partition)):
        previous = last_owner.get(interval.partition)
        if previous is not None and previous != interval.owner and since <= interval.start < until:
            moves += 1
        last_owner[interval.partition] = interval.owner
    return moves


def _live(run: MemberRun, ts: float, since: float, until: float) -> bool:
    return since <= ts < until and (run.stopping_at is None or ts < run.stopping_at)


def live_revocations(runs: Iterable[MemberRun], since: float, until: float = float("inf")) -> int:
    """Revoked or lost events (with partitions) seen by members that were not themselves stopping."""
    return sum(
        1
        for run in runs
        for e in run.events
        if e["kind"] in ("revoked", "lost") and e["partitions"] and _live(run, e["ts"], since, until)
    )


def stall_seconds(runs: Iterable[MemberRun], since: float, until: float = float("inf")) -> float:
    """Seconds live members spent between giving up partitions and their next assignment: the
    stop-the-world pause of each rebalance, summed over members."""
    total = 0.0
    for run in runs:
        revoked_at: float | None = None
        for event in run.events:
            live = _live(run, event["ts"], since, until)
            if event["kind"] in ("revoked", "lost") and event["partitions"] and live:
                revoked_at = revoked_at if revoked_at is not None else event["ts"]
            elif event["kind"] == "assigned" and revoked_at is not None:
                total += event["ts"] - revoked_at
                revoked_at = None
    return total


@dataclass(frozen=True)
class Delivery:
    produced: int
    distinct: int
    duplicated: int

    @property
    def lost(self) -> int:
        return self.produced - self.distinct


def delivery(produced: int, records: Iterable[tuple[str, int, int]]) -> Delivery:
    counts = Counter(records)
    return Delivery(produced, len(counts), sum(c - 1 for c in counts.values()))


def rebalances(generations: Sequence[int], before: int, through: int) -> int | None:
    """Generations the broker stabilised in (before, through] (None when no broker log could be read)."""
    if not generations:
        return None
    return sum(1 for g in generations if before < g <= through)
