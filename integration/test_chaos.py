"""Chaos, short and seeded: faults on a schedule against README pod mains and a pool pod, on a 3-node
cluster with an authorizer, and every invariant of ``static_consumer_lab.chaos.invariants`` checked from
the raw per-record evidence (docs/chaos.md).

Per protocol one run on the module's cluster: two README pod mains and one pool pod of two workers
(four static members) on a 6-partition topic (replication 3, min.insync.replicas 2) fed at 100
records/s, and one fault of each kind in the order the seed deals them: a member killed (-9) and
restarted 1 s later, two members SIGTERMed at once and restarted, a pause under the session and one
past it, the group's coordinator killed (-9) and restarted, the members' READ on the group or topic
revoked and granted again: the schedule of ``make chaos`` without its single SIGTERM (the pair covers
it) and its broker SIGTERM (a clean broker shutdown takes longer than a CI run should).

The lab broker profile, for 10 s sessions (the KIP-848 group's set as a group config): what a fault
costs scales with the session, and a run waits out one session per kill, long pause and ACL fault; and
a killed broker fenced after 3 s instead of 9 s, so that the coordinator's fail-over stays well inside
the session. The figures of the stock 45 s session come from the long run (docs/chaos.md).

A failure prints the seed, the evidence directory and the command that replays the schedule;
``STATIC_CONSUMER_CHAOS_SEED`` runs another seed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from static_consumer_lab.brokers.authorizer import AclCluster, start_acl_cluster
from static_consumer_lab.chaos.invariants import Limits
from static_consumer_lab.chaos.report import figures, render
from static_consumer_lab.chaos.run import ChaosConfig, run

pytestmark = pytest.mark.lab_broker("10 s sessions: a chaos run waits out a session per kill and long pause")

SEEDS = {"classic": 345, "consumer": 848}
KINDS = ("kill", "term2", "pause", "long_pause", "broker_kill", "acl")
LIMITS = Limits()
# The controller fences a killed broker after broker.session.timeout.ms (stock 9 s): with the stock value
# the coordinator's fail-over (fencing, election, loading the group) takes about as long as a 10 s
# session, and the members' sessions may expire during it. 3 s keeps the fail-over well inside it.
QUICK_FAIL_OVER = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "1000"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[AclCluster]:
    acl = start_acl_cluster(3, profile="lab", extra_config=QUICK_FAIL_OVER)
    try:
        yield acl
    finally:
        acl.cluster.stop()


def _config(protocol: str, seed: int) -> ChaosConfig:
    return ChaosConfig(
        seed=seed,
        protocol=protocol,
        members=2,
        pools=1,
        processes=2,
        faults=len(KINDS),  # one of each
        rate=100,
        partitions=6,
        session_s=10.0,
        grace_s=5.0,
        kinds=KINDS,
        gap_s=(2.0, 4.0),
        coordinator_share=1.0,
    )


def _replay(config: ChaosConfig) -> str:
    return (
        f"python bench/chaos.py --lab --seed {config.seed} --protocol {config.protocol} --faults "
        f"{config.faults} --members {config.members} --pools {config.pools} --rate {config.rate} "
        f"--partitions {config.partitions} --session-s {config.session_s:g} --grace-s {config.grace_s:g} "
        f"--kinds {','.join(config.kinds)} --coordinator-share 1"
        + "".join(f" --broker {key}={value}" for key, value in QUICK_FAIL_OVER.items())
    )


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_chaos_seeded_faults_keep_every_invariant(protocol: str, cluster: AclCluster, tmp_path: Path) -> None:
    seed = int(os.environ.get("STATIC_CONSUMER_CHAOS_SEED", SEEDS[protocol]))
    config = _config(protocol, seed)
    evidence = run(cluster, config, tmp_path / protocol)
    fig = figures(evidence, LIMITS)
    print(render(fig))
    replay = f"seed {seed}, evidence in {tmp_path / protocol}; replay: {_replay(config)}"
    # Not vacuous: every kind was carried out, the coordinator was killed, the revoked ACL ended members.
    assert {f["kind"] for f in fig["faults"]} == set(KINDS), replay
    assert any(f.coordinator for f in evidence.faults), replay
    assert any(e.code == 78 for e in evidence.exits), replay
    assert len(evidence.acked) > 10_000, replay
    failed = {name: found for name, found in fig["invariants"].items() if found}
    assert failed == {}, replay
