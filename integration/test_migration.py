"""Migrating a running dynamic group to static membership, one pod at a time (issue 9, docs/migration.md).

During the rollout every replacement is a rebalance (the dynamic member leaves, the static one is a new
member) and the audit reports the group as mixed; nothing is lost. Once every member is static, restarts
are no rebalance at all: no new generation on the broker and no revocation in the members that stayed.
Runs on its own one-node cluster so the broker's log of stabilised generations belongs to this test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from static_consumer.admin.audit import audit_group
from static_consumer.settings import ConsumerSettings
from static_consumer.testing import JvmKafkaCluster, create_topic, produce
from static_consumer.testing.group import Group
from static_consumer.testing.processes import ConsumerProcess
from static_consumer.testing.specs import static_spec

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
BATCH = 50


class BackgroundProducer:
    """Produces numbered records in batches until stopped, so the rollout happens under load."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic, self.produced = bootstrap, topic, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.failure: BaseException | None = None

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.1):
                self.produced += produce(self.bootstrap, self.topic, BATCH, start=self.produced)
        except BaseException as exc:  # noqa: BLE001 - re-raised by stop() in the test thread
            self.failure = exc

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=70)
        assert not self._thread.is_alive(), "the producer did not stop"
        if self.failure is not None:
            raise self.failure
        return self.produced


def test_rolling_a_dynamic_group_to_static_members(
    kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    cluster = kafka_jvm_cluster_factory(nodes=1)
    bootstrap, group_id = cluster.bootstrap_servers, kafka_group_id_factory()
    topic = create_topic(bootstrap, f"t-{group_id}", PARTITIONS)
    static_now: set[str] = set()

    def spec(name: str) -> dict[str, Any]:
        # The same app before and after: only the static settings change (instance id and policy).
        if name in static_now:
            return static_spec(bootstrap, group_id, [topic], name)
        return static_spec(bootstrap, group_id, [topic], None, static_policy="dynamic")

    group = Group(kafka_consumer_process_factory, bootstrap, group_id, topic, PARTITIONS, spec_factory=spec)
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group_id, topics=(topic,))
    group.start(MEMBERS[0]).wait_for_kind("assigned", timeout_s=60)
    for name in MEMBERS[1:]:
        group.start(name)
    group.wait_stable()
    assert audit_group(settings).description.static_members == ()

    with BackgroundProducer(bootstrap, topic) as producer:
        # --- the rollout: replace each dynamic member by a static one ----------------------------
        before_rollout = max(cluster.group_generations(group_id))
        rollout_began = time.time()
        for step, name in enumerate(MEMBERS, start=1):
            group.stop(name)  # a dynamic member sends LeaveGroup on close: rebalance
            static_now.add(name)
            group.start(name).wait_for_kind("assigned", timeout_s=60)  # a new member: rebalance
            group.wait_stable()
            audit = audit_group(settings)
            assert audit.verdict in ("ok", "problems"), audit.to_dict()  # settled, maybe mismatched
            assert len(audit.description.static_members) == step
            if step < len(MEMBERS):  # mid-rollout the audit says the group is mixed, and why
                assert audit.report.mixed_membership and audit.description.mixed
                (warning,) = [w for w in audit.warnings if w.startswith("mixed group")]
                assert "migration" in warning
                assert f"{step} static and {len(MEMBERS) - step} dynamic" in warning
            if step == 1:
                mixed_rebalances = _restart(group, cluster, [name])
        after_rollout = max(cluster.group_generations(group_id))
        revocations = group.revocations_since(rollout_began)
        print(
            f"rollout of {len(MEMBERS)} pods: generations {before_rollout} -> {after_rollout}, "
            f"{revocations} revocations in members that stayed up"
        )
        assert after_rollout - before_rollout >= len(MEMBERS), "each replacement should rebalance"
        assert revocations >= len(MEMBERS)
        # Even in the mixed group, the static member's own restart was no rebalance.
        assert mixed_rebalances == (0, 0)

        # --- all static: the audit is clean and restarts are no rebalance -------------------------
        done = audit_group(settings)
        assert done.verdict == "ok" and not done.report.mixed_membership, done.problems()
        assert [m.instance_id for m in done.description.members] == list(MEMBERS)
        assert _restart(group, cluster, MEMBERS) == (0, 0)
        produced = producer.stop()

    consumed = group.wait_consumed(produced)
    for name in MEMBERS:
        group.stop(name)
    print(f"produced {produced} records during the migration; consumed {len(group.consumed())} distinct")
    assert set(group.consumed()) == {
        (topic, p, o) for p, end in _end_offsets(bootstrap, topic).items() for o in range(end)
    }, "a record produced during the migration was never consumed"
    assert len(consumed) == produced
    assert group.committed() == _end_offsets(bootstrap, topic), "the final commits do not cover everything"


def _restart(group: Group, cluster: JvmKafkaCluster, names: Sequence[str]) -> tuple[int, int]:
    """Restart ``names`` one by one; returns (new generations, revocations in the others). Each must
    come back with the partitions it had."""
    before, generation, began = group.owned(), max(cluster.group_generations(group.group_id)), time.time()
    for name in names:
        group.stop(name)
        group.start(name).wait_for_kind("assigned", timeout_s=60)
        group.wait_stable()
    assert group.owned() == before, "a static member came back with other partitions"
    new_generations = max(cluster.group_generations(group.group_id)) - generation
    return new_generations, group.revocations_since(began)


def _end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets", "enable.auto.commit": False})
    try:
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
        }
    finally:
        probe.close()
