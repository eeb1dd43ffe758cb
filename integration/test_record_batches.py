"""consume_batch() and consume() on a real broker: what a RecordBatch or a record list says, and what
committing it commits.

A batch's columns are built from librdkafka's messages only when read, and its offset helpers take each
partition's first and last record in the order librdkafka delivered them (offset order per partition).
These tests hold those shortcuts to what the broker really stored: every produced record arrives once,
field for field, and committing each batch leaves the group's committed offsets at the end of every
partition, for a one-topic subscription (the topic column is not even built) and for two topics. The
records are the Records the adapter makes in place of librdkafka's messages (native ones where the C
extension is built), for consume() as for consume_batch().
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from static_consumer import ConsumerSettings, Record, RecordBatch, StaticConsumer, TopicPartition
from static_consumer._core.confluent import ConfluentAdapter
from static_consumer_lab.brokers import committed_offsets
from static_consumer_lab.brokers.kafka_ops import QUIET_LOGGER

pytestmark = pytest.mark.lab_broker(
    "single-member groups form without the 3 s initial rebalance delay; records and commits do not depend "
    "on any group timing"
)

PARTITIONS = 3
PER_TOPIC = 3000


def _produce(bootstrap: str, topic: str) -> dict[bytes, tuple[bytes | None, tuple[tuple[str, bytes], ...]]]:
    """PER_TOPIC records keyed ``topic:i``; every 100th has a header, every 250th a null value."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": QUIET_LOGGER})
    sent: dict[bytes, tuple[bytes | None, tuple[tuple[str, bytes], ...]]] = {}
    for i in range(PER_TOPIC):
        key = f"{topic}:{i}".encode()
        value = None if i % 250 == 0 else b"v%d" % i
        headers = (("trace", b"%d" % i),) if i % 100 == 0 else ()
        producer.produce(topic, key=key, value=value, headers=list(headers) or None, partition=i % PARTITIONS)
        sent[key] = (value, headers)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return sent


def _read_all(
    consumer: StaticConsumer, expected: int, *, batches: bool = True, deadline_s: float = 60.0
) -> list[RecordBatch]:
    """Every record, with consume_batch() (or consume(), its lists turned into batches after the checks)."""
    got: list[RecordBatch] = []
    seen, deadline = 0, time.monotonic() + deadline_s
    while seen < expected and time.monotonic() < deadline:
        batch: RecordBatch | list[Record]
        batch = consumer.consume_batch(500, 1.0) if batches else consumer.consume(500, 1.0)
        if not len(batch):
            continue
        # Each batch's offset helpers against its records, before anything else is read from it.
        by_partition: dict[tuple[str, int], list[int]] = {}
        for record in batch.records() if isinstance(batch, RecordBatch) else batch:
            assert type(record) is Record
            by_partition.setdefault((record.topic, record.partition), []).append(record.offset)
        if isinstance(batch, RecordBatch):
            assert batch.highest_offsets() == {tp: max(offs) for tp, offs in by_partition.items()}
            assert batch.offset_bounds()[0] == {tp: min(offs) for tp, offs in by_partition.items()}
            assert batch.positions() == set(by_partition)
        committed = consumer.commit(batch)
        assert {(tp.topic, tp.partition): o for tp, o in committed.items()} == {
            tp: max(offs) + 1 for tp, offs in by_partition.items()
        }
        got.append(batch if isinstance(batch, RecordBatch) else RecordBatch.from_records(batch))
        seen += len(batch)
    return got


def _check(
    batches: list[RecordBatch], sent: dict[bytes, tuple[bytes | None, tuple[tuple[str, bytes], ...]]]
) -> None:
    got = [record for batch in batches for record in batch]
    assert sorted(r.key or b"" for r in got) == sorted(sent), "every record once, none twice"
    for record in got:
        assert record.key is not None
        assert (record.value, record.headers) == sent[record.key]
        assert record.topic == record.key.split(b":")[0].decode()
        assert record.timestamp_ms is not None and record.timestamp_type == 1  # CreateTime


def _read_check_and_commit_all(
    bootstrap: str,
    group_id: str,
    topics: tuple[str, ...],
    sent: dict[bytes, tuple[bytes | None, tuple[tuple[str, bytes], ...]]],
    *,
    batches: bool = True,
) -> list[RecordBatch]:
    """Read every sent record with consume_batch (or consume), committing each batch; check the records
    and that the group's committed offsets are at the end of every partition of every topic."""
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=group_id,
        topics=topics,
        instance_id="batches-0",
        session_timeout_ms=10_000,
    )
    with StaticConsumer(settings) as consumer:
        read = _read_all(consumer, len(sent), batches=batches)
    _check(read, sent)
    per_partition = PER_TOPIC // PARTITIONS
    for topic in topics:
        assert committed_offsets(bootstrap, group_id, topic, PARTITIONS) == {
            p: per_partition for p in range(PARTITIONS)
        }
    return read


def test_one_topic_batches_match_the_broker_and_commit_every_partition_to_its_end(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    topic = kafka_topic_factory(PARTITIONS)
    sent = _produce(kafka_bootstrap_servers, topic)
    batches = _read_check_and_commit_all(kafka_bootstrap_servers, kafka_group_id_factory(), (topic,), sent)
    assert all(batch.topic == topic for batch in batches)


def test_one_topic_record_lists_match_the_broker_and_commit_every_partition_to_its_end(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    topic = kafka_topic_factory(PARTITIONS)
    sent = _produce(kafka_bootstrap_servers, topic)
    _read_check_and_commit_all(
        kafka_bootstrap_servers, kafka_group_id_factory(), (topic,), sent, batches=False
    )


def test_two_topic_batches_match_the_broker_and_commit_both_topics(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    topics = (kafka_topic_factory(PARTITIONS), kafka_topic_factory(PARTITIONS))
    sent = {**_produce(kafka_bootstrap_servers, topics[0]), **_produce(kafka_bootstrap_servers, topics[1])}
    batches = _read_check_and_commit_all(kafka_bootstrap_servers, kafka_group_id_factory(), topics, sent)
    for batch in batches:
        assert batch.topic == (batch.topics[0] if len(set(batch.topics)) == 1 else None)


def test_a_new_subscription_never_labels_queued_records_of_the_old_topic_with_the_new_one(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    """librdkafka keeps handing out prefetched records of the old subscription until the rebalance
    runs, so the adapter's one-topic shortcut must not name them after the new topic."""
    old, new = kafka_topic_factory(PARTITIONS), kafka_topic_factory(PARTITIONS)
    _produce(kafka_bootstrap_servers, old)
    _produce(kafka_bootstrap_servers, new)
    adapter = ConfluentAdapter(
        {
            "bootstrap.servers": kafka_bootstrap_servers,
            "group.id": kafka_group_id_factory(),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )

    def ignore(_: list[TopicPartition]) -> None:
        pass

    records: list[Record] = []

    def take(max_records: int) -> None:
        got = adapter.consume_batch(max_records, 1.0)
        records.extend(
            got.records() if isinstance(got, RecordBatch) else (r for r in got if isinstance(r, Record))
        )

    try:
        adapter.subscribe([old], on_assign=ignore, on_revoke=ignore, on_lost=ignore)
        deadline = time.monotonic() + 60
        while not records and time.monotonic() < deadline:  # joined, fetching, records queued
            take(10)
        adapter.subscribe([new], on_assign=ignore, on_revoke=ignore, on_lost=ignore)
        while not any(r.topic == new for r in records) and time.monotonic() < deadline:
            take(500)
    finally:
        adapter.close()
    assert any(r.topic == new for r in records), "the new subscription delivered nothing within 60 s"
    mislabelled = [r for r in records if r.key is None or r.key.split(b":")[0].decode() != r.topic]
    assert not mislabelled, f"{len(mislabelled)} records carry another topic's name, e.g. {mislabelled[0]}"
