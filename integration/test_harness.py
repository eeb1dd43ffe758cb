"""The harness is a real broker: a two-process confluent-kafka group consumes every record exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from static_consumer_lab import describe_consumer_group, produce
from static_consumer_lab.backends import KafkaCluster
from static_consumer_lab.processes import ConsumerProcess, wait_until
from static_consumer_lab.specs import confluent_spec

RECORDS = 10_000


def test_two_process_group_consumes_every_record_exactly_once(
    kafka_cluster: KafkaCluster,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap = kafka_cluster.bootstrap_servers
    topic = kafka_topic_factory(6)
    group = kafka_group_id_factory()
    spec = confluent_spec(bootstrap, group, [topic])
    members = [kafka_consumer_process_factory(spec, name=f"member-{i}") for i in (1, 2)]

    # Produce only once the group is stable with both members, so no rebalance can redeliver a record.
    def both_assigned() -> bool:
        return all(len(m.assignment()) == 3 for m in members)

    for member in members:
        member.wait_for_kind("assigned", timeout_s=60)
    wait_until(both_assigned, timeout_s=60, what="a 3+3 split of the 6 partitions")
    assert members[0].assignment().isdisjoint(members[1].assignment())

    assert produce(bootstrap, topic, RECORDS) == RECORDS

    def consumed() -> int:
        return sum(len(m.records()) for m in members)

    wait_until(lambda: consumed() >= RECORDS, timeout_s=120, what=f"{RECORDS} records")

    description = describe_consumer_group(bootstrap, group)
    assert len(description.members) == 2
    assert {m.client_id for m in description.members}  # both members answer with their client ids

    for member in members:
        assert member.stop() == 0
    counts = Counter(r for m in members for r in m.records())
    assert len(counts) == RECORDS, f"{RECORDS - len(counts)} records missing"
    assert max(counts.values()) == 1, "a record was received twice"
    per_partition = Counter(p for (_t, p, _o) in counts)
    assert sorted(per_partition) == list(range(6))
