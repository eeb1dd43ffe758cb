"""Consume throughput of StaticConsumer next to a raw confluent-kafka loop, in one run on one topic.

    python bench/bench_throughput.py [--records 1000000] [--repeats 5]

Three loops read the same records from the beginning with their own group id, in batches of 500,
committing after each batch (the at-least-once pattern), and touch every record's value: raw
confluent-kafka, StaticConsumer.consume() (a Record per message) and StaticConsumer.consume_batch()
(a RecordBatch whose columns are built when read). Passes alternate so machine noise hits all three.
Each pass is timed from its first record to its last, in wall time (records/s) and in CPU time of this
process (the Python loop plus librdkafka's threads; the broker runs elsewhere), which is steadier than
wall time on a shared machine. Also measures restart-to-first-record latency of a static member: close,
start a new process-equivalent consumer with the same instance id, time until its first record. Prints
the numbers and the ratios to the raw loop (goal >= 0.97, on the median pass). Uses
KAFKA_BOOTSTRAP_SERVERS or the embedded broker.
"""

from __future__ import annotations

import argparse
import functools
import operator
import os
import statistics
import time
import uuid

from static_consumer import ConsumerSettings, RecordBatch, StaticConsumer
from static_consumer.testing import create_topic, local_cluster
from static_consumer.testing.kafka_ops import QUIET_LOGGER

BATCH = 500
# Judged on the median pass: a best-of-N ratio compares each loop's single luckiest pass, and on a shared
# machine one lucky pass moves it by a few percent either way.
GOAL = 0.97
VALUE = operator.attrgetter("value")
PARTITIONS = 6
RAW = "raw confluent-kafka"


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


Pass = tuple[float, float]  # records/s, CPU microseconds per record


def _rates(seen: int, started: tuple[float, float] | None) -> Pass:
    if started is None or not seen:
        raise RuntimeError("no record arrived")
    wall, cpu = time.monotonic() - started[0], time.process_time() - started[1]
    return seen / wall, cpu / seen * 1e6


def raw_pass(bootstrap: str, topic: str, count: int) -> Pass:
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
        started = started or (time.monotonic(), time.process_time())
        last: dict[int, int] = {}
        for m in msgs:
            if m.error() is None:
                size += len(m.value())
                last[m.partition()] = m.offset()
                seen += 1
        consumer.commit(
            offsets=[TopicPartition(topic, p, o + 1) for p, o in last.items()], asynchronous=False
        )
    rates = _rates(seen, started)
    consumer.close()
    return rates


def wrapper_pass(bootstrap: str, topic: str, count: int, *, columns: bool = False) -> Pass:
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
            started = started or (time.monotonic(), time.process_time())
            for value in batch.values if isinstance(batch, RecordBatch) else map(VALUE, batch):
                size += len(value or b"")
            seen += len(batch)
            consumer.commit(batch)
        rates = _rates(seen, started)
    return rates


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
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    passes = {
        RAW: raw_pass,
        "StaticConsumer.consume_batch": functools.partial(wrapper_pass, columns=True),
        "StaticConsumer.consume": wrapper_pass,
    }
    results: dict[str, list[Pass]] = {name: [] for name in passes}
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = create_topic(bootstrap, f"bench-{uuid.uuid4().hex[:6]}", PARTITIONS)
        t0 = time.monotonic()
        produce_bulk(bootstrap, topic, args.records)
        print(
            f"Kafka {cluster.version} ({cluster.backend}); produced {args.records:,} records in "
            f"{time.monotonic() - t0:.1f} s; {args.repeats} passes of each loop, alternating"
        )
        for repeat in range(args.repeats):
            for name, run in passes.items():
                results[name].append(run(bootstrap, topic, args.records))
            print(f"  pass {repeat + 1}: " + ", ".join(f"{n} {r[-1][0]:,.0f}/s" for n, r in results.items()))
        latency = restart_latency(bootstrap, topic)
    print(f"{'loop':<30} {'best rec/s':>11} {'median rec/s':>13} {'CPU us/rec':>11}  passes (rec/s)")
    summary: dict[str, tuple[float, float, float]] = {}
    for name, got in results.items():
        rates, cpus = [r for r, _ in got], [c for _, c in got]
        summary[name] = (max(rates), statistics.median(rates), statistics.median(cpus))
        best, median, cpu = summary[name]
        passes_text = ", ".join(f"{r:,.0f}" for r in rates)
        print(f"{name:<30} {best:>11,.0f} {median:>13,.0f} {cpu:>11.2f}  {passes_text}")
    raw = summary.pop(RAW)
    for name, (best, median, cpu) in summary.items():
        verdict = "met" if median / raw[1] >= GOAL else "NOT met"
        print(
            f"{name} / raw: {best / raw[0]:.3f} best, {median / raw[1]:.3f} median; "
            f"CPU per record x{cpu / raw[2]:.2f} (goal >= {GOAL} on the median: {verdict})"
        )
    print(
        f"static restart -> first record: median {statistics.median(latency):.2f} s "
        f"(samples: {', '.join(f'{s:.2f}' for s in latency)})"
    )


if __name__ == "__main__":
    main()
