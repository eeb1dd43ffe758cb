"""The JSONL membership event log: schema v1 lines, appending across restarts, the reader."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from static_consumer._base.records import TopicPartition
from static_consumer._core.events import (
    Assigned,
    Closed,
    CommitRefused,
    Fenced,
    HeldAssignment,
    Joining,
    MembershipEvent,
    Revoked,
    Stalled,
)
from static_consumer.telemetry import SCHEMA_VERSION, EventLog, read_event_log

# Schema v1 fields every line has (docs/observability.md); others appear on some events only.
ALWAYS = {
    "v",
    "ts",
    "event",
    "group",
    "instance_id",
    "member_id",
    "generation",
    "protocol",
    "partitions",
    "rebalance",
}


def tps(*partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition("t", p) for p in partitions)


def fields(at: float, generation: int | None = None, member: str | None = "app-1-a") -> dict[str, Any]:
    return {
        "group_id": "orders",
        "instance_id": "app-1",
        "member_id": member,
        "generation": generation,
        "at": at,
    }


def write(log: EventLog, *events: MembershipEvent) -> None:
    for event in events:
        log.on_event(event)


def incarnation(
    start: float, held: HeldAssignment, generation: int, parts: tuple[TopicPartition, ...]
) -> list[MembershipEvent]:
    return [
        Joining(**fields(start, member=None), protocol="classic", lookup_held=lambda: held),
        Assigned(**fields(start + 0.5, generation), partitions=parts),
        Revoked(**fields(start + 9, generation), partitions=parts),
        Closed(**fields(start + 9.1, generation), left_group=False),
    ]


def test_lines_follow_schema_v1() -> None:
    stream = io.StringIO()
    write(
        EventLog(stream),
        *incarnation(1_700_000_000.0, HeldAssignment(False, (), "Empty"), 1, tps(0, 1))[:2],
        Revoked(**fields(1_700_000_010.0, 1), partitions=tps(0, 1)),
        Assigned(**fields(1_700_000_010.25, 2), partitions=tps(1)),
        Fenced(**fields(1_700_000_020.0, 2), error="fenced by app-1 elsewhere"),
    )
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert all(ALWAYS <= line.keys() and line["v"] == SCHEMA_VERSION for line in lines)
    joining, assigned, revoked, rebalanced, fenced = lines
    assert joining["event"] == "joining" and joining["held"] is False and joining["partitions"] is None
    assert joining["ts"] == "2023-11-14T22:13:20.000000Z"
    assert assigned["join_kind"] == "static_join" and assigned["duration_s"] == 0.5
    assert assigned["partitions"] == [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]
    assert (assigned["generation"], assigned["protocol"], assigned["member_id"]) == (1, "classic", "app-1-a")
    assert revoked["event"] == "revoked" and revoked["rebalance"] is False
    assert (rebalanced["rebalance"], rebalanced["moved"], rebalanced["duration_s"]) == (True, 1, 0.25)
    assert fenced["event"] == "fenced" and fenced["error"] == "fenced by app-1 elsewhere"


def test_a_stall_line_says_the_gap_verdict_and_what_was_dropped_or_rewound() -> None:
    out = io.StringIO()
    log = EventLog(out, look_up_held=False)
    write(
        log,
        Stalled(**fields(5.0, 3), gap_s=9.25, threshold_s=3.0, verdict="gone", dropped=4, waited_s=0.012),
        Stalled(**fields(11.0, 3), gap_s=6.5, threshold_s=3.0, verdict="expired", rewound=((tps(1)[0], 40),)),
    )
    gone, expired = (json.loads(line) for line in out.getvalue().splitlines())
    assert ALWAYS <= gone.keys() and gone["event"] == "stalled"
    assert (gone["gap_s"], gone["verdict"], gone["dropped"], gone["rewound"], gone["waited_s"]) == (
        9.25,
        "gone",
        4,
        [],
        0.012,
    )
    assert expired["rewound"] == [{"topic": "t", "partition": 1, "offset": 40}]


def test_a_refused_commit_line_names_the_refusal_and_the_offsets_not_committed() -> None:
    out = io.StringIO()
    write(
        EventLog(out, look_up_held=False),
        CommitRefused(**fields(5.0, 3), offsets=((tps(1)[0], 40),), error="UNKNOWN_MEMBER_ID", reason="x"),
    )
    line = json.loads(out.getvalue())
    assert (
        ALWAYS <= line.keys() and line["event"] == "commit_refused" and line["error"] == "UNKNOWN_MEMBER_ID"
    )
    assert line["partitions"] == [{"topic": "t", "partition": 1}]
    assert line["offsets"] == [{"topic": "t", "partition": 1, "offset": 40}]
    assert line["rebalance"] is False and "failed" not in line


def test_restart_appends_and_shows_the_generation_kept(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "members.jsonl"
    with EventLog(path) as first:
        write(first, *incarnation(0, HeldAssignment(False, (), "Empty"), 4, tps(2, 3)))
    with EventLog(path) as second:  # the restarted process
        write(second, *incarnation(20, HeldAssignment(True, tps(2, 3), "Stable"), 4, tps(2, 3)))
    records = list(read_event_log(path))
    assert [r["event"] for r in records] == ["joining", "assigned", "revoked", "closed"] * 2
    assert records[4]["held"] is True and records[4]["partitions"] == [
        {"topic": "t", "partition": 2},
        {"topic": "t", "partition": 3},
    ]
    assert records[5]["join_kind"] == "static_rejoin"
    # The generation before and after the restart is the same: the group did not rebalance.
    assert records[3]["generation"] == records[5]["generation"] == 4
    assert records[7]["left_group"] is False
    assert not any(r["rebalance"] for r in records)


def test_reader_skips_a_truncated_last_line_only(tmp_path: Path) -> None:
    good = json.dumps({"v": 1, "event": "closed"})
    assert [r["event"] for r in read_event_log([good + "\n", '{"v": 1, "ev'])] == ["closed"]
    with pytest.raises(ValueError, match="line 1 is not a JSON object"):
        list(read_event_log(['{"v": 1, "ev\n', good + "\n"]))


def test_reader_refuses_newer_schemas() -> None:
    with pytest.raises(ValueError, match="schema v2"):
        list(read_event_log([json.dumps({"v": 2, "event": "assigned"})]))
    with pytest.raises(ValueError, match="no schema version"):
        list(read_event_log([json.dumps({"event": "assigned"})]))


def test_closing_a_stream_log_only_flushes_it() -> None:
    stream = io.StringIO()
    log = EventLog(stream)
    write(log, Closed(**fields(1), left_group=True))
    log.close()
    assert not stream.closed and json.loads(stream.getvalue())["left_group"] is True
