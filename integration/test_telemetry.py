"""Telemetry on a real broker: a static restart is a static rejoin, not a rebalance.

Each member runs in its own process with the OpenTelemetry listener on the SDK's in-memory reader (its
totals streamed as ``metrics`` events) and a JSONL event log. A static member restarted within the
session timeout records a static rejoin and no rebalance, and the live members record nothing; the
event log shows the same generation before and after. Restarted after the broker dropped it, the
member's join is a plain static join and the live members record a rebalance.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _side_by_side import side_by_side

from static_consumer.telemetry import read_event_log
from static_consumer_lab.brokers import describe_consumer_group
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess, wait_until

pytestmark = pytest.mark.lab_broker(
    "10 s sessions: one scenario waits for a member to expire; the metrics do not depend on how long"
)

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
SESSION_S = 10  # static_spec's classic session timeout; the KIP-848 group's (Group sets it)


def _values(proc: ConsumerProcess) -> dict[str, float]:
    """The member's latest metric totals ({} before its first membership event)."""
    snapshots = proc.events("metrics")
    return snapshots[-1]["values"] if snapshots else {}


def _rebalances(proc: ConsumerProcess) -> float:
    return _values(proc).get("static_consumer.rebalances", 0)


def _observed(logs: Path) -> Callable[[str], dict[str, Any]]:
    """Each member writes its JSONL event log under ``logs`` and streams its OpenTelemetry totals."""
    return lambda name: {"event_log": str(logs / f"{name}.jsonl"), "otel": True}


def test_static_restart_counts_a_rejoin_and_no_rebalance(
    tmp_path: Path,
    kafka_group_factory: Callable[..., Group],
) -> None:
    """The classic and the KIP-848 group side by side."""
    side_by_side(lambda protocol: _restart_counted(protocol, tmp_path, kafka_group_factory))


def _restart_counted(
    protocol: str,
    tmp_path: Path,
    kafka_group_factory: Callable[..., Group],
) -> None:
    tmp_path = tmp_path / protocol  # the members' event logs are named by member
    tmp_path.mkdir()
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        spec_extra=_observed(tmp_path),
    )
    group.form(MEMBERS)
    live = [group.members["app-0"], group.members["app-2"]]
    before = {p.name: _rebalances(p) for p in live}
    held = group.owned()["app-1"]
    restart_began = time.time()

    group.stop("app-1")
    restarted = group.start("app-1")
    restarted.wait_for(
        lambda e: e["kind"] == "metrics" and e["values"].get("static_consumer.joins", 0) >= 1,
        timeout_s=SESSION_S,
        what="the restarted member's join",
    )
    group.wait_stable()

    values = _values(restarted)
    assert values.get("static_consumer.static_rejoins") == 1, values
    assert values.get("static_consumer.joins[static_rejoin]") == 1, values
    assert values.get("static_consumer.rebalances", 0) == 0, values
    assert values.get("static_consumer.assigned_partitions") == len(held)
    assert restarted.assignment() == held
    assert group.revocations_since(restart_began, live) == 0, "the live members noticed the restart"
    for name in ("app-0", "app-2"):
        group.stop(name)
    group.stop("app-1")
    for proc in live:  # final totals, streamed when they closed
        assert _rebalances(proc) == before[proc.name], f"{proc.name} saw a rebalance: {_values(proc)}"

    # The event log of app-1: two processes, the same generation across the restart, a rejoin.
    records = list(read_event_log(tmp_path / "app-1.jsonl"))
    joins = [r for r in records if r.get("join_kind")]
    assert [r["join_kind"] for r in joins][-1] == "static_rejoin"
    closes = [r for r in records if r["event"] == "closed"]
    assert closes[0]["generation"] is not None
    assert joins[-1]["generation"] == closes[0]["generation"], "the restart did not start a new generation"
    assert not any(r["rebalance"] for r in records[records.index(joins[-1]) :])


def test_restart_after_the_session_expired_is_a_join_that_rebalances(
    tmp_path: Path,
    kafka_group_factory: Callable[..., Group],
) -> None:
    group = kafka_group_factory(
        PARTITIONS,
        protocol="classic",
        spec_extra=_observed(tmp_path),
    )
    group.form(MEMBERS)
    live = [group.members["app-0"], group.members["app-1"]]
    before = {p.name: _rebalances(p) for p in live}

    group.stop("app-2")

    def gone() -> bool:
        return "app-2" not in {
            m.group_instance_id for m in describe_consumer_group(group.bootstrap, group.group_id).members
        }

    wait_until(gone, SESSION_S + 30, "the broker to drop app-2 after its session timeout")
    wait_until(lambda: all(_rebalances(p) > before[p.name] for p in live), 30, "the live members' rebalance")
    expired = {p.name: _rebalances(p) for p in live}
    restarted = group.start("app-2")
    group.wait_stable()
    time.sleep(1)  # let the last metrics snapshots arrive

    values = _values(restarted)
    assert values.get("static_consumer.joins[static_join]") == 1, values
    assert values.get("static_consumer.static_rejoins", 0) == 0, values
    assert all(_rebalances(p) > expired[p.name] for p in live), "the late join rebalanced the live members"
    moved = [_values(p).get("static_consumer.rebalance.partitions_moved", 0) for p in live]
    assert all(m >= 2 for m in moved), moved  # one histogram count per rebalance, two rebalances each
