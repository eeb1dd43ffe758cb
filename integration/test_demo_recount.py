"""The demo's table is what its raw events say: a small, fast bounce of every strategy on the shared
broker, recounted from the files it saved alone, agrees with the run's own tally field by field."""

from __future__ import annotations

from pathlib import Path

from static_consumer.demo.metrics import differences
from static_consumer.demo.recount import recount_dir
from static_consumer.demo.rundata import prepare
from static_consumer.demo.runner import run_demo
from static_consumer.demo.strategies import ALL_STRATEGIES, DemoConfig
from static_consumer.testing.backends import KafkaCluster

FAST = DemoConfig(
    members=2,
    rounds=1,
    partitions=4,
    rate_per_s=100,
    restart_delay_s=0.5,
    processing_ms=2.0,
    state_warmup_s=0.2,
    session_timeout_s=10.0,
    strategies=ALL_STRATEGIES,
    settle_s=1.0,
    lead_s=2.0,
    tail_s=2.0,
)


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
        assert (m.restarts, m.produced, m.lost) == (2, len(run.produced), 0), name
        assert m.latency_p50_ms is not None and m.max_lag > 0, name
    # The saved streams hold what the table needs: each incarnation's start and end, and its records.
    for strategy in run.strategies:
        for inc in strategy.incarnations:
            kinds = {e["kind"] for e in inc.events}
            assert {"spawn", "start", "reaped"} <= kinds, (strategy.strategy, inc.name, kinds)
    # The dynamic eager control really rebalanced; the static members really did not move.
    assert outcome.tally["eager"].partition_moves > 0 and outcome.tally["eager"].live_revocations > 0
    for name in ("static", "static-kip848"):
        assert (outcome.tally[name].partition_moves, outcome.tally[name].live_revocations) == (0, 0), name
