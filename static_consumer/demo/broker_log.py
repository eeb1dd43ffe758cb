"""The broker's own word on rebalances: generations and group epochs read from its log (JVM harness).

Apache Kafka 4.x logs, at INFO, "Stabilized group G generation N" when a classic group completes a
rebalance and "[GroupId G] Bumped group epoch to N" when a KIP-848 group's membership or subscriptions
change (a static member replacing itself does not bump it). Log timestamps are the JVM's local time
with millisecond precision.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from static_consumer.demo.metrics import Event

_STAMP = r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] "
_CLASSIC = re.compile(_STAMP + r".*Stabilized group (\S+) generation (\d+)", re.MULTILINE)
_CONSUMER = re.compile(_STAMP + r".*\[GroupId (\S+)\] Bumped group epoch to (\d+)", re.MULTILINE)


def _ts(stamp: str) -> float:
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def parse(text: str, groups: Iterable[str]) -> list[Event]:
    """Generation (classic) and epoch (KIP-848) events of ``groups`` in one broker log's text."""
    wanted = set(groups)
    events: list[Event] = []
    for kind, pattern in (("generation", _CLASSIC), ("epoch", _CONSUMER)):
        for m in pattern.finditer(text):
            if m.group(2) in wanted:
                events.append(
                    {"kind": kind, "group": m.group(2), "value": int(m.group(3)), "ts": _ts(m.group(1))}
                )
    return sorted(events, key=lambda e: (e["ts"], e["group"], e["value"]))


def read(paths: Iterable[Path], groups: Iterable[str]) -> list[Event]:
    """Events from every node's log, once each (a generation is logged by its coordinator only)."""
    wanted = list(groups)
    seen: set[tuple[str, str, int]] = set()
    out: list[Event] = []
    for path in paths:
        if not path.exists():
            continue
        for event in parse(path.read_text(errors="replace"), wanted):
            key = (event["kind"], event["group"], event["value"])
            if key not in seen:
                seen.add(key)
                out.append(event)
    return sorted(out, key=lambda e: (e["ts"], e["group"], e["value"]))


def keep_lines(paths: Iterable[Path], groups: Iterable[str], out: Path) -> None:
    """Copy every broker log line that names one of ``groups`` to ``out`` (evidence next to the events)."""
    names = list(groups)
    with open(out, "w", encoding="utf-8") as kept:
        for path in paths:
            for line in path.read_text(errors="replace").splitlines():
                if any(name in line for name in names):
                    kept.write(line + "\n")
