"""assignment_mode='ordinal' on a real broker.

Three StatefulSet-style pods (POD_NAME app-0..2, replicas=3) on a 7-partition topic: every partition is
consumed by exactly one pod, nobody ever joins the group (describe shows no members, so no rebalance can
happen), and a restarted pod resumes from the group's committed offsets: nothing is lost after kill -9,
nothing is duplicated after SIGTERM. A dead pod's partitions wait for it: nobody else takes them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from assignors import ordinal_plan_all
from static_consumer_lab.brokers import add_partitions, committed_offsets, describe_consumer_group, produce
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec

PARTITIONS = 7
REPLICAS = 3
Partition = tuple[str, int]
Offset = tuple[str, int, int]


@dataclass
class Pods:
    """Ordinal pods of one StatefulSet, each a child process; restartable under the same pod name."""

    start_process: Callable[..., ConsumerProcess]
    bootstrap: str
    group_id: str
    topic: str
    protocol: str = "classic"
    settings: dict[str, Any] = field(default_factory=dict)
    running: dict[str, ConsumerProcess] = field(default_factory=dict)
    retired: list[ConsumerProcess] = field(default_factory=list)

    def start(self, pod: str) -> ConsumerProcess:
        spec = static_spec(
            self.bootstrap,
            self.group_id,
            [self.topic],
            None,
            env={"POD_NAME": pod},
            assignment_mode="ordinal",
            replicas=REPLICAS,
            protocol=self.protocol,
            **self.settings,
        )
        proc = self.start_process(spec, name=f"{pod}#{len(self.retired) + 1}")
        self.running[pod] = proc
        proc.wait_for_kind("assigned", timeout_s=60)
        return proc

    def retire(self, pod: str, *, kill: bool) -> ConsumerProcess:
        proc = self.running.pop(pod)
        if kill:
            proc.kill()
        else:
            assert proc.stop(timeout_s=60) == 0, proc.stderr_tail()
        self.retired.append(proc)
        return proc

    def everyone(self) -> list[ConsumerProcess]:
        return [*self.retired, *self.running.values()]

    def records(self) -> list[Offset]:
        return [r for proc in self.everyone() for r in proc.records()]

    def wait_consumed(self, produced: int) -> Counter[Offset]:
        wait_until(lambda: len(set(self.records())) >= produced, 120, f"{produced} distinct records")
        return Counter(self.records())

    def wait_committed(self, produced: int) -> dict[int, int]:
        def total() -> int:
            return sum(committed_offsets(self.bootstrap, self.group_id, self.topic, PARTITIONS).values())

        wait_until(lambda: total() == produced, 60, f"commits covering {produced} records", poll_s=0.5)
        return committed_offsets(self.bootstrap, self.group_id, self.topic, PARTITIONS)


@pytest.fixture
def pods(
    request: pytest.FixtureRequest,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> Pods:
    pods = Pods(
        kafka_consumer_process_factory,
        kafka_bootstrap_servers,
        kafka_group_id_factory(),
        kafka_topic_factory(PARTITIONS),
        protocol=getattr(request, "param", "classic"),
    )
    for ordinal in range(REPLICAS):
        pods.start(f"app-{ordinal}")
    return pods


def _slice(proc: ConsumerProcess) -> set[Partition]:
    return proc.assignment()


def _expected(topic: str, partitions: int = PARTITIONS) -> dict[str, set[Partition]]:
    plan = ordinal_plan_all(REPLICAS, {topic: partitions})
    return {f"app-{k}": {(p.topic, p.partition) for p in parts} for k, parts in plan.items()}


def _no_members(pods: Pods) -> None:
    description = describe_consumer_group(pods.bootstrap, pods.group_id)
    assert list(description.members) == [], "an ordinal pod joined the group"


def _first_offsets(proc: ConsumerProcess) -> dict[int, int]:
    first: dict[int, int] = {}
    for _t, p, o in proc.records():
        first.setdefault(p, o)
    return first


def _last_offsets(records: Iterable[Offset]) -> dict[int, int]:
    last: dict[int, int] = {}
    for _t, p, o in records:
        last[p] = max(o, last.get(p, -1))
    return last


@pytest.mark.parametrize("pods", ["classic", "consumer"], indirect=True)
def test_three_pods_cover_every_partition_exactly_once_without_joining(pods: Pods) -> None:
    slices = {pod: _slice(proc) for pod, proc in pods.running.items()}
    assert slices == _expected(pods.topic)
    every = [p for s in slices.values() for p in s]
    assert sorted(every) == [(pods.topic, p) for p in range(PARTITIONS)], "a partition owned twice or never"

    produced = produce(pods.bootstrap, pods.topic, 2100)
    counts = pods.wait_consumed(produced)
    assert len(counts) == produced and max(counts.values()) == 1, "a record was consumed twice"
    for pod, proc in pods.running.items():
        assert {(t, p) for t, p, _o in proc.records()} <= slices[pod], f"{pod} read outside its slice"
    # Commits land under the group id although nobody is a member of the group.
    committed = pods.wait_committed(produced)
    assert committed == {p: o + 1 for p, o in _last_offsets(counts).items()}
    _no_members(pods)
    for proc in pods.running.values():
        assert [e["kind"] for e in proc.events() if e["kind"] in ("revoked", "lost")] == []
        assert proc.returncode is None, proc.stderr_tail()
    for pod in list(pods.running):
        pods.retire(pod, kill=False)
    _no_members(pods)


def test_kill9_pod_waits_then_resumes_from_committed_offsets(pods: Pods) -> None:
    victim = pods.running["app-1"]
    victim_slice = _slice(victim)
    victim_partitions = {p for _t, p in victim_slice}
    produced = produce(pods.bootstrap, pods.topic, 1400)
    victim.wait_for_kind("records", timeout_s=60)
    pods.retire("app-1", kill=True)  # mid-stream: some records processed but not committed
    at_kill = committed_offsets(pods.bootstrap, pods.group_id, pods.topic, PARTITIONS)
    produced += produce(pods.bootstrap, pods.topic, 700, start=produced)

    # The liveness trade-off: the dead pod's partitions wait for it, nobody else takes them.
    time.sleep(3)
    others = {(t, p) for proc in pods.running.values() for t, p, _o in proc.records()}
    assert others.isdisjoint(victim_slice)
    during = committed_offsets(pods.bootstrap, pods.group_id, pods.topic, PARTITIONS)
    assert {p: during.get(p) for p in victim_partitions} == {p: at_kill.get(p) for p in victim_partitions}

    restarted = pods.start("app-1")
    assert _slice(restarted) == victim_slice
    counts = pods.wait_consumed(produced)
    assert len(counts) == produced, "a record was lost"
    # Resumed from the group's committed offsets (earliest where nothing was committed), not from the
    # beginning and not from where the killed process had read to.
    assert _first_offsets(restarted) == {p: at_kill.get(p, 0) for p in victim_partitions}
    duplicated = {(t, p) for (t, p, _o), n in counts.items() if n > 1}
    assert duplicated <= victim_slice, "only the killed pod's uncommitted records may come twice"
    pods.wait_committed(produced)
    _no_members(pods)


def test_sigterm_restart_resumes_without_duplicates(pods: Pods) -> None:
    produced = produce(pods.bootstrap, pods.topic, 1400)
    pods.wait_consumed(produced)
    old = pods.retire("app-2", kill=False)  # finishes its batch, commits, closes
    closed = [e for e in old.events() if e["kind"] == "closed"]
    assert closed and closed[-1]["left_group"] is False
    last_seen = _last_offsets(old.records())

    produced += produce(pods.bootstrap, pods.topic, 700, start=produced)
    restarted = pods.start("app-2")
    assert _slice(restarted) == _slice(old)
    counts = pods.wait_consumed(produced)
    assert len(counts) == produced and max(counts.values()) == 1, "lost or duplicated records"
    assert _first_offsets(restarted) == {p: o + 1 for p, o in last_seen.items()}
    pods.wait_committed(produced)
    _no_members(pods)


def test_added_partitions_are_planned_by_every_pod(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    pods = Pods(
        kafka_consumer_process_factory,
        kafka_bootstrap_servers,
        kafka_group_id_factory(),
        kafka_topic_factory(PARTITIONS),
        settings={"librdkafka": {"topic.metadata.refresh.interval.ms": 2000}},
    )
    for ordinal in range(REPLICAS):
        pods.start(f"app-{ordinal}")
    produced = produce(pods.bootstrap, pods.topic, 700)
    pods.wait_consumed(produced)

    before = {pod: _slice(proc) for pod, proc in pods.running.items()}
    add_partitions(pods.bootstrap, pods.topic, 9)
    expected = _expected(pods.topic, 9)

    def replanned() -> bool:
        return {pod: _slice(proc) for pod, proc in pods.running.items()} == expected

    wait_until(replanned, 30, "every pod re-planning for 9 partitions")
    for pod, proc in pods.running.items():
        # A partition the new plan moves away is revoked (after committing), never silently dropped.
        revoked = {(t, p) for e in proc.events("revoked") for t, p in e["partitions"]}
        assert revoked == before[pod] - expected[pod]
    produced += produce(pods.bootstrap, pods.topic, 900, start=produced)
    counts = pods.wait_consumed(produced)
    assert len(counts) == produced, "a record was lost"
    for partition in (7, 8):
        assert any(p == partition for _t, p, _o in counts), f"nothing consumed from new partition {partition}"
    _no_members(pods)
