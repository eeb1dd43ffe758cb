"""The live audit on a real broker: librdkafka's range/roundrobin assignment equals the model's prediction
before and after a static restart, unowned partitions and mixed static/dynamic groups are reported."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from static_consumer._base.records import TopicPartition
from static_consumer.admin.audit import audit_group
from static_consumer.admin.cli import main
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers import add_partitions
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import confluent_spec

pytestmark = pytest.mark.lab_broker(
    "classic groups form without the 3 s initial rebalance delay; the audit compares assignments, which no "
    "group timing changes"
)

StartFn = Callable[..., ConsumerProcess]


def by_instance(settings: ConsumerSettings) -> dict[str, set[TopicPartition]]:
    description = audit_group(settings).description
    return {m.instance_id or m.member_id: set(m.assignment) for m in description.members}


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_live_assignment_equals_the_model_before_and_after_a_static_restart(
    strategy: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    topics = [kafka_topic_factory(5), kafka_topic_factory(3)]  # uneven: range and roundrobin differ

    def spec(instance_id: str) -> dict[str, Any]:
        config = {"group.instance.id": instance_id, "partition.assignment.strategy": strategy}
        return confluent_spec(bootstrap, group, topics, **{**config, "session.timeout.ms": 30_000})

    # Started in reverse order, so arrival order and instance-id order disagree.
    names = ["pod-2", "pod-1", "pod-0"]
    members = {n: kafka_consumer_process_factory(spec(n), name=n) for n in names}

    def settled() -> bool:
        owned = [len(m.assignment()) for m in members.values()]
        return all(owned) and sum(owned) == 8

    wait_until(settled, 60, "all 8 partitions owned by the 3 members")
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)

    before = audit_group(settings)
    assert before.verdict == "ok", before.problems()
    assert before.model == strategy
    predicted = before.expected_by_member()
    assert predicted is not None
    assert {k: set(v) for k, v in predicted.items()} == by_instance(settings)
    old_member_id = before.description.member("pod-1").member_id  # type: ignore[union-attr]

    killed_at = time.time()
    members["pod-1"].kill()
    restarted = kafka_consumer_process_factory(spec("pod-1"), name="pod-1-restarted")
    restarted.wait_for_kind("assigned", timeout_s=30)

    after = audit_group(settings)
    assert after.verdict == "ok", after.problems()
    assert after.description.member("pod-1").member_id != old_member_id  # type: ignore[union-attr]
    assert after.expected_by_member() == predicted  # same instance ids, same plan
    assert {k: set(v) for k, v in predicted.items()} == by_instance(settings)
    # A static restart within the session timeout is no rebalance: the others kept their partitions.
    for name in ("pod-0", "pod-2"):
        assert [e for e in members[name].events("revoked") if e["ts"] >= killed_at] == []


def test_partitions_added_and_left_unassigned_are_reported(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(2), kafka_group_id_factory()
    members = [
        kafka_consumer_process_factory(
            confluent_spec(bootstrap, group, [topic], **{"group.instance.id": f"pod-{i}"}), name=f"pod-{i}"
        )
        for i in range(2)
    ]
    wait_until(lambda: [len(m.assignment()) for m in members] == [1, 1], 60, "a 1+1 split")

    # librdkafka sees the new partitions only at its next metadata refresh (5 min by default).
    add_partitions(bootstrap, topic, 4)
    out = io.StringIO()
    code = main(["describe", group, "-b", bootstrap, "--check", "--json"], stdout=out)
    report = json.loads(out.getvalue())["audit"]

    assert code == 1
    assert report["verdict"] == "problems"
    assert report["unassigned"] == {topic: [2, 3]}
    assert any("no owner" in p for p in report["problems"])

    # The remedy the report names: removing one live member makes it rejoin, and the group reassigns.
    assert main(["remove-members", group, "--instance-id", "pod-0", "-b", bootstrap]) == 0
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)
    wait_until(lambda: audit_group(settings).verdict == "ok", 30, "the new partitions to be assigned")


def test_mixed_static_and_dynamic_group_is_flagged(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(4), kafka_group_id_factory()
    static = confluent_spec(bootstrap, group, [topic], **{"group.instance.id": "pod-0"})
    members = [
        kafka_consumer_process_factory(static, name="static"),
        kafka_consumer_process_factory(confluent_spec(bootstrap, group, [topic]), name="dynamic"),
    ]
    wait_until(lambda: [len(m.assignment()) for m in members] == [2, 2], 60, "a 2+2 split")

    audit = audit_group(ConsumerSettings(bootstrap_servers=bootstrap, group_id=group))

    assert audit.description.mixed and audit.report.mixed_membership
    assert any(w.startswith("mixed group") for w in audit.warnings)
    assert len(audit.description.dynamic_members) == 1
