"""Helpers for the broker-fault tests: cluster waits and what the coordinator and members know.

``SteadyProducer`` (the shared background producer) is re-exported for the tests that import it here.
"""

from __future__ import annotations

from static_consumer_lab.brokers import JvmKafkaCluster, KafkaCluster, describe_consumer_group
from static_consumer_lab.brokers.containers import ContainerKafkaCluster
from static_consumer_lab.brokers.kafka_ops import high_watermarks
from static_consumer_lab.brokers.kafka_ops import wait_in_sync as wait_in_sync
from static_consumer_lab.brokers.rebalances import Rebalance
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.pauses import went_backwards
from static_consumer_lab.children.processes import wait_until
from static_consumer_lab.producer import SteadyProducer as SteadyProducer


def wait_all_consumed(group: Group, timeout_s: float = 120.0) -> set[tuple[str, int, int]]:
    """Wait until the group consumed every offset of its topic (0 up to the high watermark)."""
    marks = high_watermarks(group.bootstrap, group.topic, group.partitions)
    everything = {(group.topic, p, o) for p, high in marks.items() for o in range(high)}
    try:
        wait_until(
            lambda: set(group.consumed()) >= everything,
            timeout_s,
            f"all {len(everything)} records of {group.topic} consumed",
            poll_s=0.5,
        )
    except AssertionError as exc:
        missing = sorted(everything - set(group.consumed()))
        per_partition = {p: sum(1 for (_t, pp, _o) in missing if pp == p) for p in marks}
        raise AssertionError(f"{exc}; missing per partition {per_partition}, first {missing[:3]}") from None
    return everything


def coordinator(bootstrap: str, group_id: str, timeout_s: float = 60.0) -> int:
    """The node id of the group's coordinator, retried while a broker is away."""
    found: list[int] = []

    def ask() -> bool:
        try:
            found.append(describe_consumer_group(bootstrap, group_id, timeout_s=5.0).coordinator.id)
        except Exception:  # noqa: BLE001 - coordinator moving or loading
            return False
        return True

    wait_until(ask, timeout_s, f"the coordinator of {group_id}", poll_s=0.5)
    return found[-1]


def member_ids(bootstrap: str, group_id: str) -> dict[str, str]:
    """instance id -> member id, as the coordinator knows them."""
    members = describe_consumer_group(bootstrap, group_id, timeout_s=10).members
    return {m.group_instance_id: m.member_id for m in members}


def assigned_member_ids(group: Group) -> dict[str, str]:
    """instance id -> the member id each live member was last assigned partitions under."""
    out = {}
    for name, proc in group.members.items():
        assigned = proc.events("assigned")
        assert assigned, f"{proc.name} was never assigned"
        out[name] = assigned[-1]["member_id"]
    return out


def deferred_commits(group: Group) -> int:
    """Commits that failed transiently (coordinator moving) and went out with the next one."""
    return sum(len(proc.events("commit_deferred")) for proc in group.all_processes())


def trouble(group: Group) -> list[str]:
    """Fencing, fatal errors, lost partitions, errors or exits seen by any member (live ones must run)."""
    found = [
        f"{proc.name}: {event}"
        for proc in group.all_processes()
        for event in proc.events()
        if event["kind"] in ("fenced", "fatal", "lost", "error")
    ]
    found += [
        f"{proc.name} exited {proc.returncode}: {proc.stderr_tail(5)}"
        for proc in group.members.values()
        if proc.returncode is not None
    ]
    return found


def logged_rebalances(cluster: KafkaCluster, group_id: str) -> list[Rebalance] | None:
    """The group's classic generations and KIP-848 group epochs from the broker log, when the backend
    keeps one (the JVM harness and the container); None for an existing cluster."""
    if isinstance(cluster, (JvmKafkaCluster, ContainerKafkaCluster)):
        return cluster.group_rebalances(group_id)
    return None


def assert_all_consumed_and_committed(group: Group, acked: int, samples: list[dict[int, int]]) -> None:
    """Nothing lost (every acknowledged record consumed), every partition committed up to its high
    watermark, and the committed offsets ``samples`` (``sampling_commits``) never went backwards."""
    assert len(wait_all_consumed(group)) == acked  # nothing lost
    marks = high_watermarks(group.bootstrap, group.topic, group.partitions)
    wait_until(lambda: group.committed() == marks, 60, "every partition committed up to its high watermark")
    samples.append(group.committed())
    assert len(samples) > 20, "too few samples of the committed offsets"
    assert went_backwards(samples) == []
