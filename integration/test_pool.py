"""Process pools on a real broker: two pods, each ``static-consumer run --processes 2``.

For both protocols side by side (classic on the stock broker, KIP-848 on the lab one), what users run
(the command, its status and event-log files; the scale-down command in a process of its own):

1. a worker killed with SIGKILL (an OOM kill) is restarted in place under its instance id. Classic: it
   takes its partitions back with no new generation, and no other worker, of its pod or the other,
   sees a revocation. KIP-848: the broker holds the dead member's id until its session expires (the
   group's 10 s override on the lab broker here; bench/bench_pool.py measures the stock 45 s); the
   restart waits for that and gets its share back; the test prints what it cost;
2. SIGTERM to a pod reaches both its workers: each commits and closes without LeaveGroup, the pod exits 0
   within ``shutdown_timeout_s``, and its restart takes the same partitions back with no revocation in
   the other pod;
3. N shrinks 2 -> 1 on both pods: ``static-consumer scale-down --processes 1`` removes exactly the ids
   that went away, and the remaining workers consume every partition.

Nothing produced is lost in any step. A second test, once per protocol: a worker whose instance id
another process holds exits 82, and the pool stops (exit 82) instead of restarting it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _faults import logged_rebalances
from _side_by_side import side_by_side

from static_consumer_lab.brokers import KafkaCluster, produce
from static_consumer_lab.brokers.kafka_ops import committed_offsets, high_watermarks
from static_consumer_lab.children.group import CONSUMER_PROTOCOL_SESSION_MS, shorten_consumer_session
from static_consumer_lab.children.pods import PoolPod, event_time
from static_consumer_lab.children.processes import wait_until
from static_consumer_lab.children.specs import CLASSIC_DEFAULTS, for_protocol
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 8
SHUTDOWN_S = 10.0
SESSION_S = CONSUMER_PROTOCOL_SESSION_MS / 1000  # KIP-848: the group's override
MARGIN_S = 5.0  # release_margin_s's default
SLACK_S = 10.0  # start-up, a join, one reconciliation, a loaded machine
Owned = dict[str, set[tuple[str, int]]]


@pytest.fixture
def pods(tmp_path: Path) -> Iterator[list[PoolPod]]:
    started: list[PoolPod] = []
    yield started
    for pod in started:
        pod.kill()


def wait_stable(pods: list[PoolPod], topic: str, settle_s: float = 3.0, timeout_s: float = 90.0) -> Owned:
    """Every partition owned by exactly one worker of the running pods, and no change for ``settle_s``."""
    everything = {(topic, p) for p in range(PARTITIONS)}
    last: Owned = {}
    since = time.monotonic()

    def settled() -> bool:
        nonlocal last, since
        owned: Owned = {}
        for pod in pods:
            owned.update(pod.owned())
        parts = [tp for s in owned.values() for tp in s]
        complete = len(parts) == len(set(parts)) and set(parts) == everything
        if not complete or owned != last:
            last, since = owned, time.monotonic()
            return False
        return time.monotonic() - since >= settle_s

    wait_until(settled, timeout_s, lambda: f"a settled assignment; now {last}")
    return last


def wait_consumed(pods: list[PoolPod], topic: str, produced: int) -> None:
    def consumed() -> int:
        return len({r for pod in pods for r in pod.records() if r[0] == topic})

    wait_until(
        lambda: consumed() >= produced, 120, lambda: f"{produced} records consumed, {consumed()} so far"
    )


def worker(pod: PoolPod, index: int) -> dict[str, Any]:
    return pod.workers()[index] if len(pod.workers()) > index else {}


def assigned_generations(pod: PoolPod, instance_id: str, since: float = 0.0) -> list[int]:
    return [
        e["generation"]
        for e in pod.events(since)
        if e["event"] == "assigned" and e["instance_id"] == instance_id
    ]


def pool_settings(protocol: str, bootstrap: str, group: str, topic: str) -> dict[str, Any]:
    """The pods' ConsumerSettings fields; a KIP-848 group gets the lab session (group override)."""
    if protocol == "consumer":
        shorten_consumer_session(bootstrap, group)
    base = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": topic,
        "protocol": protocol,
        "max_poll_interval_ms": 30000,
        "connect_timeout_s": 10.0,
        "shutdown_timeout_s": SHUTDOWN_S,
    }
    return for_protocol(protocol, CLASSIC_DEFAULTS, base)


COMMAND = Path(sys.executable).with_name("static-consumer")


@pytest.fixture
def brokers(kafka_cluster: KafkaCluster, kafka_lab_cluster: KafkaCluster) -> dict[str, KafkaCluster]:
    """Classic on the stock broker. KIP-848 on the lab broker: a crash there costs the group's session,
    the stock 45 s (bench/bench_pool.py measures it); what these tests show does not depend on its length."""
    return {"classic": kafka_cluster, "consumer": kafka_lab_cluster}


def _setting(
    protocol: str, brokers: dict[str, KafkaCluster], topics: Callable[..., str], tmp_path: Path
) -> tuple[KafkaCluster, str, Path]:
    """One protocol's run of a side-by-side test: its broker, a topic there and a work directory."""
    cluster = brokers[protocol]
    workdir = tmp_path / protocol
    workdir.mkdir()
    return cluster, topics(PARTITIONS, bootstrap=cluster.bootstrap_servers), workdir


def test_pools_restart_crashed_workers_in_place_stop_on_sigterm_and_scale_down(
    brokers: dict[str, KafkaCluster],
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    pods: list[PoolPod],
    tmp_path: Path,
) -> None:
    def run(protocol: str) -> None:
        cluster, topic, workdir = _setting(protocol, brokers, kafka_topic_factory, tmp_path)
        _restart_stop_and_scale_down(protocol, cluster, topic, kafka_group_id_factory(), pods, workdir)

    side_by_side(run)


def _restart_stop_and_scale_down(
    protocol: str, kafka_cluster: KafkaCluster, topic: str, group: str, started: list[PoolPod], tmp_path: Path
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    settings = pool_settings(protocol, bootstrap, group, topic)
    a, b = (PoolPod(n, processes=2, settings=settings, workdir=tmp_path) for n in ("app-0", "app-1"))
    pods = [a, b]
    started += pods  # the fixture kills what is left
    for pod in pods:
        pod.start()
    for pod in pods:
        pod.wait_ready()
    owned = wait_stable(pods, topic)
    assert set(owned) == {"app-0-0", "app-0-1", "app-1-0", "app-1-1"}
    produced = produce(bootstrap, topic, 2000)
    wait_consumed(pods, topic, produced)

    # 1. a worker is killed: restarted in place under its id --------------------------------------------
    rebalances, since = logged_rebalances(kafka_cluster, group), time.time()
    generation = assigned_generations(a, "app-0-1")[-1]
    killed_pid, killed = a.kill_worker(1), time.monotonic()
    wait_until(
        lambda: worker(a, 1).get("restarts") == 1 and worker(a, 1).get("ready"),
        SESSION_S + MARGIN_S + 60,
        lambda: f"app-0-1 restarted and joined; {a.describe()}",
    )
    back_s = time.monotonic() - killed
    after = wait_stable(pods, topic)
    assert worker(a, 1)["instance_id"] == "app-0-1" and worker(a, 1)["pid"] != killed_pid
    assert worker(a, 1)["last_exit"] == 137 and worker(a, 0)["restarts"] == 0
    others = [e for pod in pods for e in pod.revocations(since) if e["instance_id"] != "app-0-1"]
    if protocol == "classic":
        assert after == owned, "the restarted worker and the others keep their partitions"
        assert others == [], f"other workers saw revocations: {others}"
        assert assigned_generations(a, "app-0-1", since) == [generation], "no new generation"
        if rebalances is not None:
            assert logged_rebalances(kafka_cluster, group) == rebalances, "the group rebalanced"
    else:
        bumps = (
            None
            if rebalances is None
            else len(logged_rebalances(kafka_cluster, group) or []) - len(rebalances)
        )
        print(
            f"KIP-848: the killed worker was back {back_s:.1f} s after the kill ({SESSION_S:.0f} s session); "
            f"same partitions: {after['app-0-1'] == owned['app-0-1']}; revocations in the other workers: "
            f"{len(others)}; group epoch bumps: {bumps}"
        )
        assert SESSION_S * 0.5 <= back_s <= SESSION_S + MARGIN_S + SLACK_S
        assert len(after["app-0-1"]) == len(owned["app-0-1"]), "the uniform assignor gives it its share"
    produced += produce(bootstrap, topic, 1000, start=produced)
    wait_consumed(pods, topic, produced)

    # 2. SIGTERM to a pod: both workers commit and close without leaving; the restart revokes nothing ---
    owned, rebalances, since = after, logged_rebalances(kafka_cluster, group), time.time()
    signalled = time.monotonic()
    assert a.stop(timeout_s=SHUTDOWN_S + 30) == 0, a.describe()
    assert time.monotonic() - signalled < SHUTDOWN_S + 5, "the pod outlived its shutdown bound"
    closed = {e["instance_id"]: e["left_group"] for e in a.events(since) if e["event"] == "closed"}
    assert closed == {"app-0-0": False, "app-0-1": False}
    marks = high_watermarks(bootstrap, topic, PARTITIONS)
    mine = {p for _, p in owned["app-0-0"] | owned["app-0-1"]}
    committed = committed_offsets(bootstrap, group, topic, PARTITIONS)
    assert {p: committed.get(p) for p in mine} == {p: marks[p] for p in mine}, "all consumed is committed"
    a.start()
    a.wait_ready()
    assert wait_stable(pods, topic) == owned
    assert b.revocations(since) == [], "the other pod noticed the restart"
    if rebalances is not None:
        assert logged_rebalances(kafka_cluster, group) == rebalances, "the group rebalanced"

    # 3. N 2 -> 1: scale-down removes the ids that went away ------------------------------------------
    for pod in pods:
        assert pod.stop(timeout_s=SHUTDOWN_S + 30) == 0, pod.describe()
    for pod in pods:
        pod.start(processes=1)
    since = time.time()
    flags = ["--statefulset", "app", "--processes", "1", "-b", bootstrap, "--json"]
    wait_until(lambda: a.ready and b.ready, 60, "both pods ready with one worker each")
    done = subprocess.run(
        [str(COMMAND), "scale-down", group, *flags],
        env={**os.environ, "STATIC_CONSUMER_PROTOCOL": protocol},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"removed": [\n    "app-0-1",\n    "app-1-1"\n  ]' in done.stdout, done.stdout + done.stderr
    assert set(wait_stable(pods, topic)) == {"app-0-0", "app-1-0"}
    moved_at = [event_time(e) for pod in pods for e in pod.events(since) if e["event"] == "assigned"]
    assert moved_at, "the remaining workers took the removed ones' partitions"
    produced += produce(bootstrap, topic, 1000, start=produced)
    wait_consumed(pods, topic, produced)
    for pod in pods:
        assert pod.stop(timeout_s=SHUTDOWN_S + 30) == 0, pod.describe()


FENCE_BOUND_S = 10.0  # a fenced member exits within 10 s (integration/test_static_fencing.py)


def test_a_fenced_worker_stops_its_pool_with_82_instead_of_restarting_into_a_fight(
    brokers: dict[str, KafkaCluster],
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    pods: list[PoolPod],
    tmp_path: Path,
) -> None:
    """Another process holds a pool worker's instance id (a stray copy of the pod): the worker exits 82,
    the pool restarts nothing, stops its other worker cleanly and exits 82; the other process keeps going.

    Which one ends differs by protocol (the core's rule, integration/test_static_fencing.py). Classic: the
    newest joiner wins, so the pool runs first and the newcomer fences its worker app-0-1. KIP-848: the
    member already in the group wins and a newcomer is refused, so only a pool that joins second can lose
    a worker: the other process holds app-0-1 first and the pool's app-0-1 is the one turned away (82 once
    the holder's commits prove it alive). A KIP-848 newcomer to a running pool just exits 82 itself; the
    pool is not touched, which is the core's test, not the pool's. Both protocols side by side.
    """

    def run(protocol: str) -> None:
        cluster, topic, workdir = _setting(protocol, brokers, kafka_topic_factory, tmp_path)
        _fenced_worker(protocol, cluster.bootstrap_servers, topic, kafka_group_id_factory(), pods, workdir)

    side_by_side(run)


def _fenced_worker(
    protocol: str, bootstrap: str, topic: str, group: str, pods: list[PoolPod], tmp_path: Path
) -> None:
    settings = pool_settings(protocol, bootstrap, group, topic)
    pool = PoolPod("app-0", processes=2, settings=settings, workdir=tmp_path)
    # The README's single-process pod main with POD_NAME=app-0-1: instance id app-0-1, like pool worker 1.
    other = PoolPod("app-0-1", processes=1, settings=settings, workdir=tmp_path, plain=True)
    pods += [pool, other]
    first, second = (pool, other) if protocol == "classic" else (other, pool)
    with SteadyProducer(bootstrap, topic, rate_per_s=200, max_s=120) as producer:
        first.start()
        if first is pool:
            pool.wait_ready()
            wait_stable([pool], topic)
        else:
            wait_until(
                lambda: len(other.batches()) >= 2, 60, lambda: f"app-0-1 consuming; {other.describe()}"
            )
        since, started = time.time(), time.monotonic()
        second.start()
        code = pool.wait(FENCE_BOUND_S + SHUTDOWN_S + SLACK_S + 10)
        took = time.monotonic() - started
        print(f"{protocol}: the pool exited {code} {took:.1f} s after the other process started")
        assert code == 82, pool.describe()
        assert took < FENCE_BOUND_S + SHUTDOWN_S + SLACK_S, "the pool outlived fence + shutdown bounds"
        fenced, stayed = pool.workers()[1], pool.workers()[0]
        assert (fenced["instance_id"], fenced["last_exit"], fenced["restarts"]) == ("app-0-1", 82, 0)
        assert fenced["pid"] is None and fenced.get("restart_at") is None, "a restart was pending"
        assert (stayed["instance_id"], stayed["last_exit"], stayed["restarts"]) == ("app-0-0", 0, 0)
        if protocol == "classic":  # it had joined before ``since``: any join after it is a rejoin
            joins = [
                e for e in pool.events(since) if e["event"] == "joining" and e["instance_id"] == "app-0-1"
            ]
            assert joins == [], f"app-0-1 joined again: {joins}"
        closed = {e["instance_id"]: e["left_group"] for e in pool.events(since) if e["event"] == "closed"}
        assert closed.get("app-0-0") is False, f"app-0-0 did not close without leaving: {closed}"
        # The other process was not disturbed into exiting: it still consumes its share.
        handled = len(other.batches())
        wait_until(
            lambda: len(other.batches()) > handled, 30, lambda: f"app-0-1 consuming; {other.describe()}"
        )
        assert other.proc is not None and other.proc.poll() is None, other.describe()
    assert producer.acked > 0
    assert other.stop(timeout_s=SHUTDOWN_S + 30) == 0, other.describe()
