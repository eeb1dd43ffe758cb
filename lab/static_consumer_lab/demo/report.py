"""Render a demo run: the header with every knob, the side-by-side table, and ``bounce.json``."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from static_consumer_lab.demo.metrics import ROWS, Metrics
from static_consumer_lab.demo.rundata import RunData, window_of


def header(run: RunData) -> str:
    meta = run.meta
    cfg = meta.get("config", {})
    kill = "yes (each member SIGKILLed in turn, then restarted)" if cfg.get("kill") else "no"
    lines = [
        _profile(meta),
        f"Rolling bounce: {cfg.get('members')} members x {cfg.get('rounds')} graceful round(s), "
        f"hard-kill round: {kill}; "
        f"{run.partitions} partitions, {cfg.get('rate_per_s')} records/s from one producer, "
        f"every strategy a group on the same topic, each bounced at its own pace from the same moment",
        f"restart delay {cfg.get('restart_delay_s')} s (exit to the new process's consumer start), "
        f"processing {cfg.get('processing_ms')} ms/record, state warm-up {cfg.get('state_warmup_s')} s "
        f"per partition received without its state (0: stateless), "
        f"{_sessions(meta.get('sessions_ms'))}, max.poll.interval.ms {meta.get('max_poll_ms')}",
        f"bounce windows (each group at its own pace; every number is over its own): {_windows(run)}; "
        f"Apache Kafka {meta.get('kafka_version')} ({meta.get('backend')}), "
        f"librdkafka {meta.get('librdkafka')}, {meta.get('cpus')} CPUs, load average "
        f"{_load(meta.get('load_before'))} before, {_load(meta.get('load_after'))} after; "
        f"run wall time {meta.get('wall_s')} s",
    ]
    for name, text in meta.get("descriptions", {}).items():
        lines.append(f"  {name}: {text}")
    formed = meta.get("formation_s")
    if formed:
        # Runs saved before formation went in steps started every member at once.
        step = meta.get("formation_step")
        started = f"members started {step} at a time" if step else "all members started together"
        lines.append(
            f"group formation, {started} (s to a complete assignment): "
            + ", ".join(f"{name} {seconds}" for name, seconds in formed.items())
        )
    for late in meta.get("unsettled", []):
        lines.append(
            f"WARNING: {', '.join(late['groups'])} had not settled {late['waited_s']} s "
            f"after {late['after']} "
            "(the run went on; the events show the group's state)"
        )
    return "\n".join(lines)


def _windows(run: RunData) -> str:
    spans = [window_of(run, s) for s in run.strategies]
    if not spans:
        w0, w1 = run.window
        return f"{w1 - w0:.1f} s"
    return ", ".join(
        f"{s.strategy} {w1 - w0:.1f} s" for s, (w0, w1) in zip(run.strategies, spans, strict=True)
    )


def _profile(meta: Mapping[str, Any]) -> str:
    if meta.get("broker_profile") == "lab":
        return (
            "LAB BROKER (lowered group minimums: sessions and heartbeats no stock or hosted broker allows; "
            "not numbers to choose a setup by)"
        )
    if meta.get("broker_profile") == "stock":
        return "stock broker (Apache Kafka's default group settings, as a hosted service has them)"
    return "broker profile: unknown (an existing cluster, or a run from before profiles were recorded)"


def _sessions(sessions: Mapping[str, Sequence[int]] | None) -> str:
    if not sessions:
        return "sessions: n/a"
    names = {"classic": "classic", "consumer": "KIP-848"}
    return ", ".join(
        f"{names.get(protocol, protocol)} session {session / 1000:g} s / heartbeat {heartbeat / 1000:g} s"
        for protocol, (session, heartbeat) in sessions.items()
    )


def _load(values: Sequence[float] | None) -> str:
    return "n/a" if not values else "/".join(f"{v:.1f}" for v in values)


def table(metrics: Mapping[str, Metrics]) -> str:
    columns = list(metrics)
    head = ["", *columns]
    body = [[label, *[fmt(getattr(metrics[c], key)) for c in columns]] for key, label, fmt in ROWS]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [head, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(
    path: Path, run: RunData, tallied: Mapping[str, Metrics], recounted: Mapping[str, list[str]] | None
) -> None:
    """``recounted``: per strategy the fields on which the recount from the files disagreed."""
    doc: dict[str, Any] = {
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "window": list(run.window),
        "topic": run.topic,
        "partitions": run.partitions,
        "meta": dict(run.meta),
        "strategies": {name: m.to_json() for name, m in tallied.items()},
        "recount_differences": recounted,
        "events": "events/ (recount with: static-consumer demo --recount <this directory>)",
    }
    path.write_text(json.dumps(doc, indent=2) + "\n")
