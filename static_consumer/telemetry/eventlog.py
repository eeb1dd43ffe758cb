"""A JSONL membership event log: one JSON object per membership event, schema versioned (``v``).

The log records facts (event, partitions, generation, member id) and what this member concluded from
them (join kind, completed rebalance, partitions moved), using the same tracker as the OpenTelemetry
listener. Fields are documented in docs/observability.md. Compatibility: readers must ignore fields
they do not know; adding a field keeps the version, removing, renaming or changing the meaning of one
bumps it. Each line is written and flushed whole, so a crash loses at most the line being written.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from static_consumer._base.records import TopicPartition
from static_consumer._core.events import (
    Assigned,
    BatchProgress,
    Closed,
    CommitRefused,
    FatalError,
    Fenced,
    Joining,
    Lost,
    MembershipEvent,
    MembershipListener,
    RecordDeadLettered,
    RecordSkipped,
    RecordsRetried,
    Revoked,
    Stalled,
)
from static_consumer.telemetry._schema import EVENT_LOG_SPARK_SCHEMA, SCHEMA_VERSION
from static_consumer.telemetry._tracker import Failed, Join, MembershipTracker, Rebalance

_NAMES: dict[type[MembershipEvent], str] = {
    Joining: "joining",
    Assigned: "assigned",
    Revoked: "revoked",
    Lost: "lost",
    Fenced: "fenced",
    FatalError: "fatal",
    Closed: "closed",
    BatchProgress: "batch",
    Stalled: "stalled",
    CommitRefused: "commit_refused",
    RecordsRetried: "retried",
    RecordDeadLettered: "dead_lettered",
    RecordSkipped: "skipped",
}
_BATCH_FIELDS = (
    "batch_id",
    "records",
    "bytes",
    "collect_s",
    "process_s",
    "commit_s",
    "input_rows_per_s",
    "processing_rows_per_s",
    "lag",
    "committed",
    "version",
)


class EventLog(MembershipListener):
    """Appends one line per membership event to ``target`` (a path, opened for appending, or an open
    text stream such as ``sys.stdout``). Thread-safe; several consumers may share one log.

    ``look_up_held`` as for :class:`~static_consumer.telemetry.OtelListener` (the broker is asked once
    per join, however many listeners ask).
    """

    def __init__(self, target: str | os.PathLike[str] | TextIO, *, look_up_held: bool = True) -> None:
        if isinstance(target, str | os.PathLike):
            path = Path(target)
            path.parent.mkdir(parents=True, exist_ok=True)
            self._stream: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
            self._owned = True
        else:
            self._stream, self._owned = target, False
        self._lock = threading.Lock()
        self._look_up = look_up_held
        self._trackers: dict[tuple[str, str | None], MembershipTracker] = {}

    def close(self) -> None:
        """Close the file this log opened (a stream passed in is only flushed)."""
        with self._lock:
            if self._owned and not self._stream.closed:
                self._stream.close()
            elif not self._stream.closed:
                self._stream.flush()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def on_event(self, event: MembershipEvent) -> None:
        self._write(event)

    def _write(self, event: MembershipEvent) -> None:
        with self._lock:
            key = (event.group_id, event.instance_id)
            tracker = self._trackers.setdefault(key, MembershipTracker(look_up_held=self._look_up))
            line = record(event, tracker)
            self._stream.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._stream.flush()


def record(event: MembershipEvent, tracker: MembershipTracker) -> dict[str, Any]:
    """The log line for ``event``; feeds ``event`` to ``tracker`` (which must have seen the ones before)."""
    outcomes = tracker.observe(event)
    line: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "ts": datetime.fromtimestamp(event.at, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "event": _NAMES.get(type(event), type(event).__name__.lower()),
        "group": event.group_id,
        "instance_id": event.instance_id,
        "member_id": event.member_id,
        "generation": event.generation,
        "protocol": tracker.protocol,
        "partitions": None,
        "rebalance": False,
    }
    if isinstance(event, Assigned | Revoked | Lost):
        line["partitions"] = _partitions(event.partitions)
    elif isinstance(event, Joining):
        held = tracker.held
        line["held"] = None if held is None else held.held
        if held is not None and held.held:
            line["partitions"] = _partitions(held.partitions)
    elif isinstance(event, Fenced | FatalError):
        line["error"] = event.error
    elif isinstance(event, Closed):
        line["left_group"] = event.left_group
    elif isinstance(event, CommitRefused):
        line["partitions"] = _partitions(event.partitions)
        line["offsets"] = [
            {"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o in event.offsets
        ]
        line["error"] = event.error
    elif isinstance(event, BatchProgress):
        for name in _BATCH_FIELDS:
            value = getattr(event, name)
            line[name] = round(value, 6) if isinstance(value, float) else value
    elif isinstance(event, Stalled):
        line.update(
            gap_s=round(event.gap_s, 6),
            verdict=event.verdict,
            dropped=event.dropped,
            rewound=[{"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o in event.rewound],
            waited_s=round(event.waited_s, 6),
        )
    elif isinstance(event, RecordsRetried | RecordDeadLettered | RecordSkipped):
        _failure_fields(line, event)
    for outcome in outcomes:
        if isinstance(outcome, Join):
            line.update(join_kind=outcome.kind, duration_s=round(outcome.duration_s, 6))
        elif isinstance(outcome, Rebalance):
            line.update(rebalance=True, moved=outcome.moved, duration_s=round(outcome.duration_s, 6))
        elif isinstance(outcome, Failed):
            line["failed"] = outcome.reason
    return line


def _failure_fields(line: dict[str, Any], event: RecordsRetried | RecordDeadLettered | RecordSkipped) -> None:
    tp = event.partition
    line["partitions"] = _partitions([tp])
    line["offsets"] = [{"topic": tp.topic, "partition": tp.partition, "offset": event.offset}]
    line["error"] = event.error
    if isinstance(event, RecordsRetried):
        line.update(attempts=event.attempt, records=event.records, wait_s=round(event.wait_s, 6))
        return
    line["attempts"] = event.attempts
    if isinstance(event, RecordDeadLettered):
        topic, partition, offset = event.dead_letter
        line["dead_letter"] = {"topic": topic, "partition": partition, "offset": offset}


def _partitions(partitions: Iterable[TopicPartition]) -> list[dict[str, Any]]:
    return [{"topic": tp.topic, "partition": tp.partition} for tp in sorted(partitions)]


def read_event_log(source: str | os.PathLike[str] | Iterable[str]) -> Iterator[dict[str, Any]]:
    """The records of an event log (a path or lines), oldest first.

    Raises ValueError for a record of a newer schema version or a malformed line; a malformed *last*
    line (a crash while writing it) is skipped.
    """
    if isinstance(source, str | os.PathLike):
        with open(source, encoding="utf-8") as lines:
            yield from _parse(lines)
    else:
        yield from _parse(source)


def _parse(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    bad: tuple[int, str] | None = None
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        if bad is not None:
            raise ValueError(f"event log line {bad[0]} is not a JSON object: {bad[1][:80]!r}")
        try:
            item = json.loads(text)
        except ValueError:
            bad = (number, text)
            continue
        if not isinstance(item, dict) or not isinstance(item.get("v"), int):
            raise ValueError(f"event log line {number} has no schema version 'v': {text[:80]!r}")
        if item["v"] > SCHEMA_VERSION:
            raise ValueError(
                f"event log line {number} uses schema v{item['v']}; this reader knows up to "
                f"v{SCHEMA_VERSION}: upgrade static-consumer"
            )
        yield item


__all__ = ["EVENT_LOG_SPARK_SCHEMA", "SCHEMA_VERSION", "EventLog", "read_event_log", "record"]
