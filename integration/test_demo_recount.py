"""The demo's table is what its raw events say: a small, fast bounce of every strategy on the shared
broker, a graceful round then a hard-kill round, recounted from the files it saved alone, agrees with
the run's own tally field by field; and the ``static-consumer demo --recount DIR`` command, run on what
the demo wrote, agrees with the written ``bounce.json``."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from static_consumer_lab.brokers.backends import KafkaCluster
from static_consumer_lab.demo.main import report
from static_consumer_lab.demo.metrics import differences
from static_consumer_lab.demo.recount import recount_dir
from static_consumer_lab.demo.rundata import prepare
from static_consumer_lab.demo.runner import run_demo
from static_consumer_lab.demo.strategies import ALL_STRATEGIES, DemoConfig
from static_consumer_lab.demo.tally import tally

pytestmark = pytest.mark.lab_broker(
    "the demo's fast configuration sets 6 s KIP-848 group sessions (below the stock 45 s minimum); the "
    "recount does not depend on them (the demo's own numbers: docs/rolling-deploys.md)"
)

FAST = DemoConfig(
    members=2,
    rounds=1,
    kill=True,
    partitions=4,
    rate_per_s=100,
    restart_delay_s=0.5,
    processing_ms=2.0,
    state_warmup_s=0.2,
    # A hard-killed member's session must expire before dynamic groups (and KIP-848 static ones) go on:
    # short enough for CI, long enough for heartbeats from 20 processes on a busy 2-core machine.
    session_timeout_s=6.0,
    lab=True,
    strategies=ALL_STRATEGIES,
    settle_s=1.0,
    lead_s=2.0,
    tail_s=2.0,
)
COMMAND = Path(sys.executable).with_name("static-consumer")


def test_the_recount_from_saved_events_agrees_with_the_runs_tally(
    kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    events_dir = prepare(tmp_path / "events")
    outcome = run_demo(kafka_cluster, FAST, events_dir, progress=print)
    run, recounted = recount_dir(events_dir)

    assert [s.strategy for s in run.strategies] == list(ALL_STRATEGIES)
    for name in ALL_STRATEGIES:
        assert differences(outcome.tally[name], recounted[name]) == [], name
    for name, m in outcome.tally.items():
        # 2 graceful restarts, then 2 hard kills each followed by a restart.
        assert (m.restarts, m.kills, m.produced, m.lost) == (4, 2, len(run.produced), 0), name
        assert m.latency_p50_ms is not None and m.max_lag > 0, name
    # The saved streams hold what the table needs: each incarnation's start and end, and its records.
    for strategy in run.strategies:
        for inc in strategy.incarnations:
            kinds = {e["kind"] for e in inc.events}
            assert {"spawn", "start", "reaped"} <= kinds, (strategy.strategy, inc.name, kinds)
        killed = [i for i in strategy.incarnations if any(e.get("signal") == "KILL" for e in i.events)]
        assert len(killed) == 2 and all(not any(e["kind"] == "exit" for e in i.events) for i in killed)
    # The dynamic eager control really rebalanced; the static members really did not move, and under
    # the classic protocol not even after a hard kill: the replacement took the dead member's place
    # (fencing it) long before its session would have expired.
    assert outcome.tally["eager"].partition_moves > 0 and outcome.tally["eager"].live_revocations > 0
    for strategy in run.strategies:
        # Each group was bounced at its own pace and is measured over its own window.
        assert strategy.window is not None and outcome.tally[strategy.strategy].window_s > 0
    graceful_only = []
    for strategy in run.strategies:
        kills = [
            e["ts"]
            for e in run.meta["schedule"]
            if e["strategy"] == strategy.strategy and e["signal"] == "KILL"
        ]
        assert strategy.window is not None and len(kills) == 2, strategy.strategy
        graceful_only.append(replace(strategy, window=(strategy.window[0], min(kills))))
    graceful = tally(replace(run, strategies=graceful_only))
    for name in ("static", "static-kip848"):
        assert (graceful[name].partition_moves, graceful[name].live_revocations) == (0, 0), name
    static = outcome.tally["static"]
    assert (static.partition_moves, static.live_revocations) == (0, 0)
    assert static.longest_unowned_s < FAST.sessions()["classic"][0] / 1000

    # What `static-consumer demo` writes, and what its --recount says of it.
    assert report(outcome, tmp_path) == 0
    assert (tmp_path / "bounce.png").stat().st_size > 0 and COMMAND.exists(), COMMAND
    done = subprocess.run(
        [str(COMMAND), "demo", "--recount", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the run's own tally agrees" in done.stdout and "hard-kill round: yes" in done.stdout
