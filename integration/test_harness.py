"""The harness is a real broker: a two-process confluent-kafka group consumes every record exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from static_consumer_lab.brokers import describe_consumer_group, produce
from static_consumer_lab.brokers.backends import KafkaCluster
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import confluent_spec

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
