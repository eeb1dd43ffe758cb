"""Hand-made demo event streams for unit tests of the demo's metrics, report and picture."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from static_consumer_lab.demo.rundata import Incarnation, RunData, StrategyRun

T = "t"
Event = dict[str, Any]


def ev(kind: str, ts: float, *parts: int, **fields: Any) -> Event:
    event: Event = {"kind": kind, "ts": ts, **fields}
    if kind in ("assigned", "revoked", "lost", "rebuild"):
        event["partitions"] = [[T, p] for p in parts]
    return event


def records(ts: float, *rows: tuple[int, int, int, int]) -> Event:
    """rows: (partition, offset, created_ms, done_ms)."""
    return {
        "kind": "records",
        "ts": ts,
        "records": [[T, p, o] for p, o, _c, _d in rows],
        "created_ms": [c for _p, _o, c, _d in rows],
        "done_ms": [d for _p, _o, _c, d in rows],
    }


def make_run(
    incarnations: dict[str, list[Event]],
    *,
    produced: Sequence[tuple[int, int, int]] = (),
    window: tuple[float, float] = (5.0, 20.0),
    partitions: int = 4,
    broker: list[Event] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> RunData:
    strategy = StrategyRun(
        "s", "g", "classic", [Incarnation(name, events) for name, events in incarnations.items()], broker
    )
    return RunData(window, T, partitions, list(produced), [strategy], dict(meta or {}))
