"""Consume throughput of StaticConsumer next to a raw confluent-kafka loop, in one run on one topic.

    python bench/bench_throughput.py [--records 1000000] [--repeats 2]

Three loops read the same records from the beginning with their own group id, in batches of 500,
committing after each batch (the at-least-once pattern), and touch every record's value: raw
confluent-kafka, StaticConsumer.consume() (a Record per message) and StaticConsumer.consume_batch()
(a RecordBatch, field by field). Passes alternate so machine noise hits all three. Also measures
restart-to-first-record latency of a static member: close, start a new process-equivalent consumer
with the same instance id, time until its first record. Prints the numbers and the ratios to the raw
loop (goal >= 0.97). Uses KAFKA_BOOTSTRAP_SERVERS or the embedded broker.
"""

from __future__ import annotations

import argparse
import functools
import operator
import os
import statistics
import time
import uuid
from typing import Any

from static_consumer import ConsumerSettings, RecordBatch, StaticConsumer
from static_consumer.testing import create_topic, local_cluster
from static_consumer.testing.kafka_ops import QUIET_LOGGER

BATCH = 500
VALUE = operator.attrgetter("value")
PARTITIONS = 6


def produce_bulk(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "logger": QUIET_LOGGER,
        }
    )
    value = b"x" * 100
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("producer did not flush")


def raw_pass(bootstrap: str, topic: str, count: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "logger": QUIET_LOGGER,
        }
    )
    consumer.subscribe([topic])
    seen, size, started = 0, 0, None
    deadline = time.monotonic() + 600
    while seen < count and time.monotonic() < deadline:
        msgs = consumer.consume(BATCH, 1.0)
        if not msgs:
            continue
        started = started or time.monotonic()
        last: dict[int, int] = {}
        for m in msgs:
            if m.error() is None:
                size += len(m.value())
                last[m.partition()] = m.offset()
                seen += 1
        consumer.commit(
            offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()], asynchronous=False
        )
    elapsed = time.monotonic() - (started or time.monotonic())
    consumer.close()
    return seen / elapsed


def wrapper_pass(bootstrap: str, topic: str, count: int, *, columns: bool = False) -> float:
    """StaticConsumer.consume() and commit(records); with ``columns``, consume_batch() and commit(batch)."""
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"wrap-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="bench-0",
        session_timeout_ms=10000,
    )
    seen, size, started = 0, 0, None
    deadline = time.monotonic() + 600
    with StaticConsumer(settings) as consumer:
        while seen < count and time.monotonic() < deadline:
            batch = consumer.consume_batch(BATCH, 1.0) if columns else consumer.consume(BATCH, 1.0)
            if not len(batch):
                continue
            started = started or time.monotonic()
            for value in batch.values if isinstance(batch, RecordBatch) else map(VALUE, batch):
                size += len(value or b"")
            seen += len(batch)
            consumer.commit(batch)
        elapsed = time.monotonic() - (started or time.monotonic())
    return seen / elapsed


def restart_latency(bootstrap: str, topic: str, rounds: int = 3) -> list[float]:
    """Seconds from starting a static member (same instance id as one just closed) to its first record."""
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"restart-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="bench-restart",
        session_timeout_ms=10000,
    )
    samples: list[float] = []
    for _ in range(rounds + 1):
        t0 = time.monotonic()
        with StaticConsumer(settings) as consumer:
            while not consumer.consume(10, 1.0):
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("no record within 60 s")
            samples.append(time.monotonic() - t0)
            # no commit: every restart reads from the start again, so a record is always waiting
    return samples[1:]  # the first start joins a new group; the rest are static restarts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    passes = {
        "raw confluent-kafka": raw_pass,
        "StaticConsumer": wrapper_pass,
        "consume_batch": functools.partial(wrapper_pass, columns=True),
    }
    results: dict[str, list[float]] = {name: [] for name in passes}
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = create_topic(bootstrap, f"bench-{uuid.uuid4().hex[:6]}", PARTITIONS)
        t0 = time.monotonic()
        produce_bulk(bootstrap, topic, args.records)
        print(
            f"Kafka {cluster.version} ({cluster.backend}); produced {args.records:,} records in "
            f"{time.monotonic() - t0:.1f} s"
        )
        for _ in range(args.repeats):
            for name, run in passes.items():
                results[name].append(run(bootstrap, topic, args.records))
        latency = restart_latency(bootstrap, topic)
    best: dict[str, Any] = {name: max(rates) for name, rates in results.items()}
    for name, rates in results.items():
        passes = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"{name:>20}: best {best[name]:>10,.0f} records/s  (passes: {passes})")
    raw = best["raw confluent-kafka"]
    print(
        f"{'ratio':>20}: {best['StaticConsumer'] / raw:.3f} (StaticConsumer.consume, Records; goal >= 0.97)"
    )
    print(
        f"{'ratio, columns':>20}: {best['consume_batch'] / raw:.3f} "
        "(StaticConsumer.consume_batch, RecordBatch)"
    )
    print(
        f"static restart -> first record: median {statistics.median(latency):.2f} s "
        f"(samples: {', '.join(f'{s:.2f}' for s in latency)})"
    )


if __name__ == "__main__":
    main()
