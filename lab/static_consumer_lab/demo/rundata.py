"""The raw events of one demo run, in memory and on disk.

On disk (``<out>/events``), everything the table is computed from:

- ``run.json``: the knobs, the run's window, the topic, and per strategy its group id, protocol and own
  bounce window (each group is bounced on its own schedule; absent in older runs: the run's window);
- ``producer.jsonl``: the producer's delivery reports, ``{"kind": "delivered", "records": [[partition,
  offset, created_ms], ...]}``;
- ``broker.jsonl``: the generations (classic) and group epochs (KIP-848) the broker logged,
  ``{"kind": "generation"|"epoch", "group": ..., "value": N, "ts": ...}`` (absent: no broker log), and
  ``broker.log``, the broker's log lines that name the run's groups (for reading, not counted);
- ``<strategy>/<member>#<n>.jsonl``: one stream per member incarnation, as the child process emitted it
  (``static_consumer_lab.children.child``) plus what the runner saw (``spawn``, ``signal``, ``reaped``).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from static_consumer_lab.demo.metrics import Event

RUN_FILE = "run.json"
MARKER = ".demo-events"  # marks a directory this code made, so a later run may clear it
PRODUCER_FILE = "producer.jsonl"
BROKER_FILE = "broker.jsonl"
FORMAT = 1


@dataclass(frozen=True)
class Incarnation:
    name: str  # "<member>#<n>", unique within the strategy
    events: Sequence[Event]

    @property
    def member(self) -> str:
        return self.name.split("#", 1)[0]


@dataclass(frozen=True)
class StrategyRun:
    strategy: str
    group_id: str
    protocol: str
    incarnations: Sequence[Incarnation]
    broker: Sequence[Event] | None  # generation/epoch events of this group; None: no broker log
    window: tuple[float, float] | None = None  # its own bounce window; None: the run's


def window_of(run: RunData, strategy: StrategyRun) -> tuple[float, float]:
    """The window ``strategy``'s numbers are measured over: its own, else the run's."""
    return run.window if strategy.window is None else strategy.window


@dataclass(frozen=True)
class RunData:
    window: tuple[float, float]
    topic: str
    partitions: int
    produced: Sequence[tuple[int, int, int]]  # (partition, offset, created_ms)
    strategies: Sequence[StrategyRun]
    meta: Mapping[str, Any]


def _jsonl(path: Path) -> Iterator[Event]:
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def write_jsonl(path: Path, events: Iterable[Mapping[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps(event) + "\n")


def prepare(directory: Path) -> Path:
    """An empty events directory; refuses to clear a non-empty one that is not a previous run's."""
    if directory.exists():
        if not (directory / MARKER).exists() and any(directory.iterdir()):
            raise ValueError(f"{directory} exists and holds no previous demo run: choose another --out")
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    (directory / MARKER).touch()
    return directory


def write_run(directory: Path, run: RunData, *, streams: bool = True) -> None:
    """Write ``run``; ``streams`` False leaves the incarnation files to whoever wrote them live."""
    meta = {
        "format": FORMAT,
        "window": list(run.window),
        "topic": run.topic,
        "partitions": run.partitions,
        "strategies": [
            {
                "name": s.strategy,
                "group_id": s.group_id,
                "protocol": s.protocol,
                **({} if s.window is None else {"window": list(s.window)}),
            }
            for s in run.strategies
        ],
        "broker_log": all(s.broker is not None for s in run.strategies),
        **run.meta,
    }
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RUN_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    chunks = [run.produced[i : i + 1000] for i in range(0, len(run.produced), 1000)]
    write_jsonl(
        directory / PRODUCER_FILE,
        ({"kind": "delivered", "records": [list(r) for r in chunk]} for chunk in chunks),
    )
    if meta["broker_log"]:
        write_jsonl(directory / BROKER_FILE, (e for s in run.strategies for e in s.broker or ()))
    if streams:
        for s in run.strategies:
            for inc in s.incarnations:
                write_jsonl(directory / s.strategy / f"{inc.name}.jsonl", inc.events)


def events_dir(path: Path) -> Path:
    """``path`` itself or its ``events`` subdirectory, whichever holds ``run.json``."""
    for candidate in (path, path / "events"):
        if (candidate / RUN_FILE).exists():
            return candidate
    raise FileNotFoundError(f"no {RUN_FILE} in {path} or {path / 'events'}: not a demo run's output")


def load(path: Path) -> RunData:
    """Read a run back from its files alone."""
    directory = events_dir(path)
    meta = json.loads((directory / RUN_FILE).read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{directory / RUN_FILE}: format {meta.get('format')!r}, expected {FORMAT}")
    produced = [
        (int(p), int(o), int(c)) for e in _jsonl(directory / PRODUCER_FILE) for p, o, c in e["records"]
    ]
    broker = list(_jsonl(directory / BROKER_FILE)) if meta["broker_log"] else None
    strategies = []
    for s in meta["strategies"]:
        files = sorted((directory / s["name"]).glob("*.jsonl"))
        incarnations = [Incarnation(f.name.removesuffix(".jsonl"), list(_jsonl(f))) for f in files]
        mine = None if broker is None else [e for e in broker if e["group"] == s["group_id"]]
        own = s.get("window")
        window = None if own is None else (float(own[0]), float(own[1]))
        strategies.append(StrategyRun(s["name"], s["group_id"], s["protocol"], incarnations, mine, window))
    known = {"format", "window", "topic", "partitions", "strategies", "broker_log"}
    w0, w1 = meta["window"]
    return RunData(
        (float(w0), float(w1)),
        meta["topic"],
        int(meta["partitions"]),
        produced,
        strategies,
        {k: v for k, v in meta.items() if k not in known},
    )
