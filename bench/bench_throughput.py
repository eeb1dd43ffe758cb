"""Consume throughput of StaticConsumer next to the raw confluent-kafka loop a user would write, in one run.

    python bench/bench_throughput.py [--records 1000000] [--rounds 5] [--sizes 100,1024,10240]
                                     [--commits sync,async] [--bookkeeping] [--quick]

The baseline is the idiomatic confluent-kafka loop: ``msgs = c.consume(500, 1.0)``, read every
``m.value()``, then ``c.commit(asynchronous=False)`` (librdkafka's stored offsets, no Python
bookkeeping). Against it, on the same topic and with the same batch size, each reading every value the
way users write it (attribute access in a Python for-loop) and committing every batch:

- ``StaticConsumer.consume``: ``for r in records: len(r.value)``, then ``commit(records)``;
- ``StaticConsumer.consume_batch``: ``for r in batch: len(r.value)``, then ``commit(batch)``;
- ``StaticConsumer.consume_batch, batch.values``: ``for v in batch.values: len(v)`` (the column API).

(Every produced value is non-null, so the loops take ``len()`` of values as the raw loop does.)

``--bookkeeping`` adds a second, labelled baseline: the raw loop that tracks the last offset per
partition in a dict and commits explicit offsets (what StaticConsumer's explicit commits correspond to).

Each record size (100 B without headers; 1 KiB and 10 KiB with two headers, fewer records so a pass
still reads for seconds: 1,000,000 x 100 B, 400,000 x 1 KiB, 60,000 x 10 KiB by default) gets a topic of
its own, read in each commit mode (synchronous, asynchronous) by every loop, round after round: a
warm-up round, then ``--rounds`` measured rounds with the loops in alternating order. A pass is timed
from its first record to its last (wall time: records/s; CPU time of this process per record: the
Python loop plus librdkafka's threads, the broker runs elsewhere), and its garbage collections are
counted. The ratio of a loop is taken per round (its pass / the baseline pass of the same round) and
reported as the median with the min and max over rounds; the bar is >= 0.97 on the median. Also
measures a static member's restart-to-first-record latency (close, start a consumer with the same
instance id in this process, time to its first record). The broker is KAFKA_BOOTSTRAP_SERVERS
if set, else the embedded one (see docs/testing.md).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
import uuid
from collections.abc import Callable

from _bench import Pass, PassTimer, Rounds, machine, median_ratio, produce, raw_consumer

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer_lab.brokers import create_topic, local_cluster

BATCH = 500
PARTITIONS = 6
BAR = 0.97
RAW = "raw confluent-kafka (idiomatic)"
BOOKKEEPING = "raw confluent-kafka, offsets per partition in a dict"
CONSUME = "StaticConsumer.consume"
BATCH_RECORDS = "StaticConsumer.consume_batch"
BATCH_VALUES = "StaticConsumer.consume_batch, batch.values"
PASS_TIMEOUT_S = 600.0


def raw_pass(
    bootstrap: str, topic: str, count: int, *, asynchronous: bool, bookkeeping: bool = False
) -> Pass:
    from confluent_kafka import TopicPartition

    consumer = raw_consumer(bootstrap, topic)
    timer, size = PassTimer(), 0
    deadline = time.monotonic() + PASS_TIMEOUT_S
    try:
        while timer.seen < count and time.monotonic() < deadline:
            msgs = consumer.consume(BATCH, 1.0)
            if not msgs:
                continue
            timer.add(len(msgs))
            if bookkeeping:
                last: dict[int, int] = {}
                for m in msgs:
                    if m.error() is None:
                        size += len(m.value())
                        last[m.partition()] = m.offset()
                offsets = [TopicPartition(topic, p, o + 1) for p, o in last.items()]
                consumer.commit(offsets=offsets, asynchronous=asynchronous)
            else:
                for m in msgs:
                    size += len(m.value())
                consumer.commit(asynchronous=asynchronous)
        return timer.result()
    finally:
        consumer.close()


def wrapper_pass(bootstrap: str, topic: str, count: int, *, asynchronous: bool, read: str) -> Pass:
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"wrap-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="bench-0",
        session_timeout_ms=10000,
    )
    timer, size = PassTimer(), 0
    deadline = time.monotonic() + PASS_TIMEOUT_S
    with StaticConsumer(settings) as consumer:
        while timer.seen < count and time.monotonic() < deadline:
            if read == CONSUME:
                records = consumer.consume(BATCH, 1.0)
                if not records:
                    continue
                timer.add(len(records))
                for r in records:
                    size += len(r.value)  # type: ignore[arg-type]  # never None here
                consumer.commit(records, asynchronous=asynchronous)
                continue
            batch = consumer.consume_batch(BATCH, 1.0)
            if not len(batch):
                continue
            timer.add(len(batch))
            if read == BATCH_VALUES:
                for v in batch.values:
                    size += len(v)  # type: ignore[arg-type]
            else:
                for r in batch:
                    size += len(r.value)  # type: ignore[arg-type]
            consumer.commit(batch, asynchronous=asynchronous)
        return timer.result()


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


def records_for(size: int, records: int) -> int:
    """Fewer records of the larger sizes (``records`` of 100 B): 40% of them of 1 KiB, 6% of 10 KiB."""
    if size <= 100:
        return records
    return max(1000, records * 2 // 5 if size <= 1024 else records * 3 // 50)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records of 100 B (fewer when larger)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sizes", default="100,1024,10240", help="value sizes in bytes")
    parser.add_argument("--commits", default="sync,async")
    parser.add_argument("--bookkeeping", action="store_true", help="add the raw loop with a dict of offsets")
    parser.add_argument("--quick", action="store_true", help="a smoke run of seconds: 5,000 records, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds, args.sizes, args.commits = 5000, 1, "100", "sync"
        print("smoke run (--quick): checks the loops run; its numbers mean nothing")
    sizes = [int(s) for s in args.sizes.split(",")]
    commits = args.commits.split(",")
    summary: list[str] = []
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}")
        print(f"batches of {BATCH}, {PARTITIONS} partitions, a warm-up round then {args.rounds} rounds")
        for size in sizes:
            count = records_for(size, args.records)
            headers = size > 100
            topic = create_topic(bootstrap, f"bench-{size}-{uuid.uuid4().hex[:6]}", PARTITIONS)
            took = produce(bootstrap, topic, count, size, headers=headers)
            for commit in commits:
                asynchronous = commit == "async"
                described = f"{size:,} B{' with 2 headers' if headers else ''}"
                what = f"{count:,} records of {described}, {commit} commits"
                print(f"{what} (produced in {took:.1f} s):")
                loops: dict[str, Callable[[], Pass]] = {
                    RAW: functools.partial(raw_pass, bootstrap, topic, count, asynchronous=asynchronous)
                }
                if args.bookkeeping:
                    loops[BOOKKEEPING] = functools.partial(
                        raw_pass, bootstrap, topic, count, asynchronous=asynchronous, bookkeeping=True
                    )
                for read in (CONSUME, BATCH_RECORDS, BATCH_VALUES):
                    loops[read] = functools.partial(
                        wrapper_pass, bootstrap, topic, count, asynchronous=asynchronous, read=read
                    )
                rounds = Rounds(baseline=RAW)
                rounds.run(loops, args.rounds, log=print)
                table = rounds.table()
                print("\n".join(table))
                summary.append(what)
                for name in loops:
                    if name != RAW:
                        ratio = median_ratio(rounds, name)
                        verdict = "yes" if ratio >= BAR else "no"
                        summary.append(f"    {name}: {ratio:.3f} of raw (>= {BAR}: {verdict})")
        latency = restart_latency(bootstrap, topic)
    print("Median per-round ratio to the idiomatic raw loop:")
    print("\n".join(summary))
    print(
        f"static restart -> first record (in process): median {statistics.median(latency):.2f} s "
        f"(samples: {', '.join(f'{s:.2f}' for s in latency)})"
    )


if __name__ == "__main__":
    main()
