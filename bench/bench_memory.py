"""Memory of a long-running consumer: RSS of consumer processes over 10 minutes, reading as records are
produced (1M a minute) or at full rate.

    python bench/bench_memory.py [--minutes 10] [--per-minute 1000000] [--size 200] [--sample-s 5]
    python bench/bench_memory.py --full-rate RECORDS [--minutes 10] [--size 100] [--sample-s 5]

A producer process writes ``--per-minute`` records (``--size`` bytes, two headers) at a steady rate for
``--minutes`` to one topic (6 partitions), and consumer processes read it as it arrives, each in a group
of its own, side by side: ``StaticConsumer.consume`` and ``StaticConsumer.consume_batch`` (every record's
key, value, headers and timestamp read, every batch committed) and, as the baseline, the raw
confluent-kafka loop (``consume(500)``, the same fields read, ``commit()``). Every ``--sample-s`` seconds
the resident set size (VmRSS) of each consumer is read from /proc. Printed per consumer: RSS after the
first minute (warm: librdkafka's fetch queues have filled), at the end, the peak (VmHWM), and the slope
of a least-squares line through the samples after the first minute, in MB per minute; "flat" when the
line rises less than 5 MB over the measured span (a leak of one byte per record would be 9 MB here).
Not a test. Run it with nothing else busy on the machine, so that the producer keeps its rate.

``--full-rate RECORDS``: RECORDS records of ``--size`` bytes (no headers, uncompressed) are produced
first, and each consumer process then reads the whole topic again and again, as fast as it can, for
``--minutes``: each pass with a new consumer (a new group, closed at the end of the pass) in the same
process, so its librdkafka queue is as full as the fetch settings let it be for the whole run; the raw
loop is given the librdkafka defaults StaticConsumer changes (``confluent-kafka (library's settings)``).
Also printed: the bound on the queued data that docs/configuration.md states, for this topic.
The broker is KAFKA_BOOTSTRAP_SERVERS if set, else the embedded one (see docs/testing.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

HEADERS = [("trace-id", b"0af7651916cd43dd8448eb211c80319c"), ("source", b"bench")]
CONSUMERS = ["StaticConsumer.consume", "StaticConsumer.consume_batch", "confluent-kafka"]
LIBRARY_SETTINGS = "confluent-kafka (library's settings)"
FULL_RATE_CONSUMERS = ["StaticConsumer.consume", "StaticConsumer.consume_batch", LIBRARY_SETTINGS]
PARTITIONS = 6
FLAT_MB = 5.0


# -- the child processes -------------------------------------------------------------------------------


def run_producer(bootstrap: str, topic: str, per_minute: int, minutes: float, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": "lz4"})
    value, total, tick = b"x" * size, int(per_minute * minutes), 0.1
    started, sent = time.monotonic(), 0
    while sent < total:  # what is due by the next tick, ten ticks a second: a steady rate
        due = min(total, int((time.monotonic() - started + tick) * per_minute / 60))
        while sent < due:
            try:
                producer.produce(topic, key=str(sent).encode(), value=value, headers=HEADERS)
                sent += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        time.sleep(tick)
    producer.flush(60)
    print(json.dumps({"produced": sent}), flush=True)


class Progress:
    """Records seen by this process, printed as a JSON line at most once a second."""

    def __init__(self) -> None:
        self.seen, self.passes, self._last = 0, 0, time.monotonic()

    def add(self, count: int, force: bool = False) -> None:
        self.seen += count
        if force or time.monotonic() - self._last >= 1.0:
            self._last = time.monotonic()
            print(json.dumps({"seen": self.seen, "passes": self.passes}), flush=True)


def read_pass(kind: str, bootstrap: str, topic: str, expected: int, progress: Progress) -> None:
    """One consumer (a new group) reads ``expected`` records of ``topic``, every batch committed."""
    seen, size = 0, 0
    if kind.startswith("confluent-kafka"):
        from confluent_kafka import Consumer

        extra: dict[str, object] = {}
        if kind == LIBRARY_SETTINGS:
            from static_consumer.settings._config import CLIENT_DEFAULTS

            extra = {key: default.value for key, default in CLIENT_DEFAULTS.items()}
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"mem-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **extra,
            }
        )
        consumer.subscribe([topic])
        try:
            while seen < expected:
                msgs = consumer.consume(500, 1.0)
                for m in msgs:
                    size += len(m.key()) + len(m.value()) + len(m.headers() or ()) + m.timestamp()[1] % 2
                seen += len(msgs)
                if msgs:
                    consumer.commit(asynchronous=False)
                progress.add(len(msgs))
        finally:
            consumer.close()
        return
    from static_consumer import ConsumerSettings, StaticConsumer

    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"mem-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="mem-0",
    )
    with StaticConsumer(settings) as static:
        while seen < expected:
            got = (
                static.consume_batch(500, 1.0) if kind.endswith("consume_batch") else static.consume(500, 1.0)
            )
            for r in got:
                size += len(r.key or b"") + len(r.value or b"") + len(r.headers) + (r.timestamp_ms or 0) % 2
            seen += len(got)
            if len(got):
                static.commit(got)
            progress.add(len(got))


def run_consumer(kind: str, bootstrap: str, topic: str, expected: int, until: float) -> None:
    """Read ``expected`` records, again and again with a new consumer each pass while ``time.time()`` is
    before ``until`` (full rate; 0: one pass)."""
    progress = Progress()
    while True:
        read_pass(kind, bootstrap, topic, expected, progress)
        progress.passes += 1
        if time.time() >= until:
            break
    progress.add(0, force=True)


# -- the parent ----------------------------------------------------------------------------------------


def queue_bound(size: int) -> str:
    """The bound docs/configuration.md states, for this topic (one broker, PARTITIONS partitions)."""
    kbytes, messages, per_partition, fetch_max = 65536, 100_000, 1024 * 1024, 50 * 1024 * 1024
    fetch = min(fetch_max, PARTITIONS * per_partition)
    queued = min(messages * size, kbytes * 1024)
    return (
        f"bound on queued values: min({messages:,} x {size} B, {kbytes // 1024} MiB) + one Fetch response "
        f"(min(50 MiB, {PARTITIONS} partitions x 1 MiB)) = {(queued + fetch) / 2**20:.1f} MiB"
    )


def rss_kb(pid: int) -> tuple[int, int]:
    """VmRSS and VmHWM (peak) of a process, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(rest.split()[0])
    return fields["VmRSS"], fields["VmHWM"]


def slope_mb_per_min(samples: list[tuple[float, int]]) -> float:
    """Least-squares slope of (seconds, kB) samples, in MB per minute."""
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_r = sum(r for _, r in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    cov = sum((t - mean_t) * (r - mean_r) for t, r in samples)
    return cov / var * 60 / 1024 if var else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--per-minute", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=200, help="value bytes")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument(
        "--consumers", help=f"default: {', '.join(CONSUMERS)} ({', '.join(FULL_RATE_CONSUMERS)})"
    )
    parser.add_argument("--full-rate", type=int, metavar="RECORDS", help="re-read a topic of RECORDS records")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from _bench import machine

    from static_consumer_lab.brokers import create_topic, local_cluster

    full = args.full_rate is not None
    kinds = (args.consumers or ",".join(FULL_RATE_CONSUMERS if full else CONSUMERS)).split(",")
    expected = args.full_rate if full else int(args.per_minute * args.minutes)
    until = time.time() + args.minutes * 60 if full else 0.0
    me = [sys.executable, __file__]
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}")
        topic = create_topic(bootstrap, f"memory-{uuid.uuid4().hex[:6]}", PARTITIONS)
        if full:
            from _bench import produce

            took = produce(bootstrap, topic, expected, args.size, compression="none")
            print(f"{expected:,} records of {args.size} B, uncompressed, produced in {took:.1f} s")
            print(queue_bound(args.size))
            until = time.time() + args.minutes * 60
        consumers = {
            kind: subprocess.Popen(
                [*me, "--consumer", kind, bootstrap, topic, str(expected), str(until)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for kind in kinds
        }
        seen: dict[str, int] = dict.fromkeys(kinds, 0)

        passes: dict[str, int] = dict.fromkeys(kinds, 0)

        def follow(kind: str, proc: subprocess.Popen[str]) -> None:
            for line in proc.stdout or ():
                got = json.loads(line)
                seen[kind], passes[kind] = got.get("seen", seen[kind]), got.get("passes", passes[kind])

        for kind, proc in consumers.items():
            threading.Thread(target=follow, args=(kind, proc), daemon=True).start()
        if full:
            producer = None
            print(f"re-reading it for {args.minutes:g} min; consumers: {', '.join(kinds)}", flush=True)
        else:
            producer = subprocess.Popen(
                [*me, "--producer", bootstrap, topic, str(args.per_minute), str(args.minutes), str(args.size)]
            )
            print(
                f"producing {args.per_minute:,} records/minute of {args.size} B with 2 headers for "
                f"{args.minutes:g} min; consumers: {', '.join(kinds)}",
                flush=True,
            )
        started = time.monotonic()
        samples: dict[str, list[tuple[float, int]]] = {k: [] for k in kinds}
        peak: dict[str, int] = dict.fromkeys(kinds, 0)
        deadline = started + args.minutes * 60 + 300
        next_report = started + 60
        while any(p.poll() is None for p in consumers.values()) and time.monotonic() < deadline:
            now = time.monotonic() - started
            for kind, proc in consumers.items():
                if proc.poll() is None:
                    rss, hwm = rss_kb(proc.pid)
                    samples[kind].append((now, rss))
                    peak[kind] = max(peak[kind], hwm)
            if time.monotonic() >= next_report:
                next_report += 60
                print(
                    f"  {now / 60:4.1f} min: "
                    + ", ".join(
                        f"{k} {samples[k][-1][1] / 1024:.1f} MB, {seen[k]:,} read"
                        for k in kinds
                        if samples[k]
                    ),
                    flush=True,
                )
            time.sleep(args.sample_s)
        if producer is not None:
            producer.wait(timeout=120)
        for proc in consumers.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    load = os.getloadavg()[0]
    print(f"\nRSS per consumer process, sampled every {args.sample_s:g} s; 1-minute load average {load:.1f}")
    print(
        "| consumer | records read | RSS at 1 min, MB | at end, MB | peak, MB | MB/min after 1 min | flat |"
    )
    print("|---|---|---|---|---|---|---|")
    for kind in kinds:
        warm = [(t, r) for t, r in samples[kind] if t >= 60]
        if len(warm) < 2:
            print(f"| {kind} | {seen[kind]:,} | too few samples | | | | |")
            continue
        slope = slope_mb_per_min(warm)
        span_min = (warm[-1][0] - warm[0][0]) / 60
        flat = "yes" if slope * span_min < FLAT_MB else "NO"
        print(
            f"| {kind} | {seen[kind]:,} ({passes[kind]} passes) | {warm[0][1] / 1024:.1f} | "
            f"{warm[-1][1] / 1024:.1f} | "
            f"{peak[kind] / 1024:.1f} | {slope:+.3f} | {flat} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--producer":
        bootstrap, topic, per_minute, minutes, size = sys.argv[2:]
        run_producer(bootstrap, topic, int(per_minute), float(minutes), int(size))
    elif len(sys.argv) > 1 and sys.argv[1] == "--consumer":
        kind, bootstrap, topic, expected, until = sys.argv[2:]
        run_consumer(kind, bootstrap, topic, int(expected), float(until))
    else:
        main()
