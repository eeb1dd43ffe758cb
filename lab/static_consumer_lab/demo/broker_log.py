"""The broker's own word on rebalances for the demo: generations and group epochs as demo events.

The log lines and their parsing are :mod:`static_consumer_lab.brokers.rebalances` (shared with the
integration tests); this module turns them into the demo's events and keeps the evidence.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from static_consumer_lab.brokers import rebalances
from static_consumer_lab.demo.metrics import Event


def _events(found: list[rebalances.Rebalance]) -> list[Event]:
    return [{"kind": r.kind, "group": r.group, "value": r.value, "ts": r.ts} for r in found]


def parse(text: str, groups: Iterable[str]) -> list[Event]:
    """Generation (classic) and epoch (KIP-848) events of ``groups`` in one broker log's text."""
    return _events(rebalances.parse(text, groups))


def read(paths: Iterable[Path], groups: Iterable[str]) -> list[Event]:
    """Events from every node's log, once each (a generation is logged by its coordinator only)."""
    return _events(rebalances.read(paths, groups))


def keep_lines(paths: Iterable[Path], groups: Iterable[str], out: Path) -> None:
    """Copy every broker log line that names one of ``groups`` to ``out`` (evidence next to the events)."""
    names = list(groups)
    with open(out, "w", encoding="utf-8") as kept:
        for path in paths:
            for line in path.read_text(errors="replace").splitlines():
                if any(name in line for name in names):
                    kept.write(line + "\n")
