"""The harness is a real broker: a two-process confluent-kafka group consumes every record exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from static_consumer_lab.brokers import describe_consumer_group, produce
from static_consumer_lab.brokers.backends import KafkaCluster
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import confluent_spec
from static_consumer_lab.producer import SteadyProducer

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


def _group_settings(bootstrap: str) -> tuple[int | None, ...]:
    from static_consumer import ConsumerSettings
    from static_consumer._kafka.probe import probe

    caps = probe(
        ConsumerSettings(bootstrap_servers=bootstrap, group_id="profile-check", connect_timeout_s=10)
    )
    return (
        caps.group_initial_rebalance_delay_ms,
        caps.group_min_session_timeout_ms,
        caps.consumer_session_timeout_ms,
        caps.consumer_max_session_timeout_ms,
        caps.consumer_heartbeat_interval_ms,
    )


def test_the_stock_broker_has_apache_kafkas_group_settings(kafka_bootstrap_servers: str) -> None:
    """What the stock profile promises, read back from the broker as the library's probe reads it:
    Kafka 4.3's defaults (3 s initial delay, 6 s classic minimum, 45 s KIP-848 session up to 60 s, 5 s
    heartbeats), so the numbers measured on it are what users get."""
    assert _group_settings(kafka_bootstrap_servers) == (3000, 6000, 45000, 60000, 5000)


@pytest.mark.lab_broker("this test checks the lab broker itself")
def test_the_lab_broker_lowers_only_the_group_minimums(kafka_bootstrap_servers: str) -> None:
    assert _group_settings(kafka_bootstrap_servers) == (0, 1000, 45000, 60000, 5000)


def test_the_producer_reads_back_the_offsets_librdkafka_did_not_report(
    kafka_bootstrap_servers: str, kafka_topic_factory: Callable[..., str]
) -> None:
    """An idempotent retry the broker had already written is acknowledged with no offset; the producer
    finds such records in the log by key, so every acknowledged record has its offset (the chaos runs'
    'nothing lost' and the demo's loss count rely on it). Here a third of them are planted as unreported."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = kafka_topic_factory(3)
    producer = SteadyProducer(kafka_bootstrap_servers, topic, rate_per_s=400, max_s=1.0, keep_deliveries=True)
    with producer:
        wait_until(lambda: producer.acked >= 300, 30, "300 records acknowledged")
    reported = sorted(producer.delivered)
    assert len(reported) == producer.acked >= 300
    reader = Consumer({"bootstrap.servers": kafka_bootstrap_servers, "group.id": "read-back"})
    reader.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    keys: dict[tuple[int | None, int | None], bytes | None] = {}
    for _ in range(60):
        read = reader.consume(1000, 0.5)
        keys.update({(m.partition(), m.offset()): m.key() for m in read if not m.error()})
        if len(keys) >= len(reported):
            break
    reader.close()
    planted = reported[::3]
    producer.delivered = reported[1::3] + reported[2::3]
    for partition, offset, ts in planted:  # what the delivery callback keeps for an unreported offset
        key = keys[partition, offset]
        assert key is not None
        producer._unplaced.setdefault(partition, {})[key] = ts
    producer._place(30.0)
    assert sorted(producer.delivered) == reported
