"""The harness can run a 3-node KRaft cluster and restart brokers (clean and kill -9) without data loss."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from static_consumer_lab import JvmKafkaCluster, create_topic, produce, resolve_classpath
from static_consumer_lab.kafka_ops import metadata


def _total_records(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "harness-count", "enable.auto.commit": False}
    )
    try:
        total = 0
        for p in range(3):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            total += high - low
        return total
    finally:
        consumer.close()


def test_three_node_cluster_survives_clean_and_hard_broker_restarts(
    kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster],
) -> None:
    cluster = kafka_jvm_cluster_factory(3)
    bootstrap = cluster.bootstrap_servers
    assert set(metadata(bootstrap, timeout_s=10).brokers) == {1, 2, 3}
    topic = create_topic(bootstrap, "replicated", 3, replication=3)
    produce(bootstrap, topic, 300)

    cluster.restart_node(2)  # clean: SIGTERM, controlled shutdown
    cluster.restart_node(3, hard=True)  # kill -9
    assert cluster.node(3).running and cluster.node(2).running
    produce(bootstrap, topic, 300, start=300)

    assert set(metadata(bootstrap, timeout_s=10).brokers) == {1, 2, 3}
    assert _total_records(bootstrap, topic) == 600


def test_broker_classpath_resolves_with_maven_into_an_empty_cache_and_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first-run path: `mvn dependency:copy-dependencies` into an empty cache, then a broker from it."""
    monkeypatch.setenv("STATIC_CONSUMER_CACHE_DIR", str(tmp_path / "cache"))
    cold = resolve_classpath()
    warm = resolve_classpath()
    assert not cold.cached and warm.cached
    assert (cold.directory / f"kafka_2.13-{cold.version}.jar").exists()
    with JvmKafkaCluster(1) as cluster:
        assert set(metadata(cluster.bootstrap_servers, timeout_s=10).brokers) == {1}
        started = cluster.start_seconds
    with capsys.disabled():
        print(
            f"\n[static_consumer] first run: Kafka {cold.version} classpath resolved by Maven in "
            f"{cold.resolve_seconds:.1f} s into an empty cache, broker start-up {started:.1f} s; "
            f"cached resolution {warm.resolve_seconds:.3f} s"
        )
