"""Why librdkafka's default fetch pipeline caps the idiomatic loop: one setting varied at a time.

    python bench/measure_fetch_pipeline.py [--records 500000] [--size 100] [--rounds 3] [--variants a,b]
                                           [--c-reader PATH]

The loop is the raw confluent-kafka one users write: ``consume(500, 1.0)``, every value read,
``commit(asynchronous=False)`` per batch (``async`` and ``none`` variants change only the commit). Each
variant is librdkafka's defaults plus the settings it names, read by a new consumer in a new group from
the topic's start; variants run in a rotated order, round after round, in one process. Printed per pass:
records/s (first record to last) and the share of the pass the loop spent waiting inside ``consume()``
(an empty or short queue); then one more round with librdkafka's own ``debug=fetch`` log (a logger counts
the lines; the logging slows that round, so its rates are not in the table) tells how often a partition
was taken off the fetch list because the consumer queue was over ``queued.min.messages`` or
``queued.max.messages.kbytes`` (each such time it backs off for ``fetch.queue.backoff.ms``) and how many
Fetch requests were sent. Also printed: the wall time of the commit call per batch. ``--c-reader`` adds
the same loop in C (``bench/rdkafka_read.c``, built against the wheel's librdkafka): what librdkafka
reads without Python, with librdkafka's defaults and with the library's, committing every batch or never
(``C:`` variants, one process per pass). The broker is KAFKA_BOOTSTRAP_SERVERS if set, else the embedded
one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any

from _bench import machine, produce

from static_consumer_lab.brokers import create_topic, local_cluster

BATCH = 500
MIB = 1024 * 1024
VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "commit=async": {},
    "commit=none": {},
    "fetch.queue.backoff.ms=100": {"fetch.queue.backoff.ms": 100},
    "fetch.queue.backoff.ms=50": {"fetch.queue.backoff.ms": 50},
    "fetch.queue.backoff.ms=20": {"fetch.queue.backoff.ms": 20},
    "fetch.queue.backoff.ms=10": {"fetch.queue.backoff.ms": 10},
    "fetch.queue.backoff.ms=10 + commit=async": {"fetch.queue.backoff.ms": 10},
    "fetch.queue.backoff.ms=10 + commit=none": {"fetch.queue.backoff.ms": 10},
    "queued.min.messages=1000000": {"queued.min.messages": 1_000_000},
    "queued.min.messages=20000": {"queued.min.messages": 20_000},
    "fetch.message.max.bytes=10MiB": {"fetch.message.max.bytes": 10 * MIB},
    "fetch.message.max.bytes=256KiB": {"fetch.message.max.bytes": 256 * 1024},
    "queued.max.messages.kbytes=8192": {"queued.max.messages.kbytes": 8192},
    "fetch.max.bytes=1MiB": {"fetch.max.bytes": MIB},
    "fetch.wait.max.ms=10": {"fetch.wait.max.ms": 10},
    "fetch.min.bytes=1MiB": {"fetch.min.bytes": MIB},
    "notes: fetch.message.max.bytes=10MiB+queued.min.messages=1M": {
        "fetch.message.max.bytes": 10 * MIB,
        "queued.min.messages": 1_000_000,
    },
}


class FetchLog(logging.Handler):
    """Counts librdkafka's debug=fetch lines that matter here."""

    def __init__(self) -> None:
        super().__init__()
        self.queue_full = 0
        self.fetches = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "not fetchable: queued." in text:
            self.queue_full += 1
        elif ": Fetch " in text and "toppar(s)" in text:
            self.fetches += 1


@dataclass
class Pass:
    rate: float
    waiting: float  # share of the pass spent inside consume()
    cpu_us: float  # CPU time of the process (the loop and librdkafka's threads) per record
    queue_full: int
    fetches: int
    commit_us: float = float("nan")  # wall time of one commit call, per batch


C_VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "C: defaults": ("sync", {}),
    "C: defaults + commit=none": ("none", {}),
    "C: fetch.queue.backoff.ms=10": ("sync", {"fetch.queue.backoff.ms": 10}),
    "C: fetch.queue.backoff.ms=10 + commit=none": ("none", {"fetch.queue.backoff.ms": 10}),
}


def read_c(reader: str, bootstrap: str, topic: str, count: int, variant: str) -> Pass:
    commit, extra = C_VARIANTS[variant]
    try:
        done = subprocess.run(
            [reader, bootstrap, topic, str(count), commit, *(f"{k}={v}" for k, v in extra.items())],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    except (subprocess.TimeoutExpired, subprocess.CalledProcessError) as exc:
        # A pass that reads nothing (before rdkafka_read.c named its groups by pid and nanoseconds, two
        # passes in the same second shared a group) is counted as failed, not fatal.
        print(f"  {variant}: the C reader failed ({type(exc).__name__})", flush=True)
        return Pass(float("nan"), float("nan"), float("nan"), 0, 0)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return Pass(got["records_per_s"], float("nan"), got["cpu_us_per_record"], 0, 0)


def read(bootstrap: str, topic: str, count: int, variant: str, *, trace: bool) -> Pass:
    from confluent_kafka import Consumer

    counter = FetchLog()
    logger = logging.getLogger(f"librdkafka.{uuid.uuid4().hex[:6]}")
    logger.propagate = False
    logger.addHandler(counter)
    logger.setLevel(logging.DEBUG)
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"pipe-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "logger": logger,
        **VARIANTS[variant],
    }
    if trace:
        config["debug"] = "fetch"
    commit = variant.rpartition("commit=")[2] if "commit=" in variant else "sync"
    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen, size, inside, first, cpu, committing, batches = 0, 0, 0.0, 0.0, 0.0, 0.0, 0
    deadline = time.monotonic() + 300
    try:
        while seen < count and time.monotonic() < deadline:
            began = time.monotonic()
            msgs = consumer.consume(BATCH, 1.0)
            if not msgs:
                continue
            if not seen:
                first, cpu = time.monotonic(), time.process_time()
            else:
                inside += time.monotonic() - began
            seen += len(msgs)
            for m in msgs:
                size += len(m.value())
            began = time.monotonic()
            if commit == "sync":
                consumer.commit(asynchronous=False)
            elif commit == "async":
                consumer.commit(asynchronous=True)
            committing += time.monotonic() - began
            batches += 1
        wall, cpu = time.monotonic() - first, time.process_time() - cpu
    finally:
        consumer.close()
    if seen < count:
        raise RuntimeError(f"{variant}: read {seen} of {count}")
    commit_us = committing / batches * 1e6
    return Pass(seen / wall, inside / wall, cpu / seen * 1e6, counter.queue_full, counter.fetches, commit_us)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--c-reader", help="bench/rdkafka_read.c, built (adds the C: variants)")
    args = parser.parse_args()
    variants = args.variants.split(",") + (list(C_VARIANTS) if args.c_reader else [])
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}")
        topic = create_topic(bootstrap, f"pipeline-{uuid.uuid4().hex[:6]}", 6)
        produce(bootstrap, topic, args.records, args.size, compression="none")
        print(f"{args.records:,} records of {args.size} B uncompressed, 6 partitions; consume(500) per batch")
        passes: dict[str, list[Pass]] = {v: [] for v in variants}
        traced: dict[str, Pass] = {}
        for number in range(args.rounds + 2):  # a warm-up, the rounds, a traced round
            shift = number % len(variants)
            trace = number == args.rounds + 1
            for variant in variants[shift:] + variants[:shift]:
                if variant in C_VARIANTS:
                    got = read_c(args.c_reader, bootstrap, topic, args.records, variant)
                else:
                    got = read(bootstrap, topic, args.records, variant, trace=trace)
                if trace:
                    traced[variant] = got
                elif number:
                    passes[variant].append(got)
                label = "warm-up" if number == 0 else "traced" if trace else f"round {number}"
                print(
                    f"  {label}: {variant}: {got.rate:,.0f}/s, waiting {got.waiting:.0%}, "
                    f"CPU {got.cpu_us:.2f} us/record, commit {got.commit_us:.0f} us/batch, "
                    f"queue-full backoffs {got.queue_full}, fetches {got.fetches}",
                    flush=True,
                )
    print(f"\n1-minute load average at the end: {os.getloadavg()[0]:.1f}")
    print(
        "| variant (defaults plus) | records/s, median [min-max] | waiting in consume() | CPU us/record | "
        "commit call, us/batch | "
        "queue-full backoffs (traced round) | Fetch requests (traced round) |"
    )
    print("|---|---|---|---|---|---|---|")
    for variant, got in passes.items():
        rates = [p.rate for p in got]
        print(
            f"| {variant} | {statistics.median(rates):,.0f} [{min(rates):,.0f}-{max(rates):,.0f}] | "
            f"{statistics.median(p.waiting for p in got):.0%} | "
            f"{statistics.median(p.cpu_us for p in got):.2f} | "
            f"{statistics.median(p.commit_us for p in got):.0f} | "
            f"{traced[variant].queue_full} | {traced[variant].fetches} |"
        )


if __name__ == "__main__":
    main()
