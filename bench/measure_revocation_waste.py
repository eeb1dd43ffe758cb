"""Records fetched and thrown away after a revocation: what a deep prefetch queue costs when partitions move.

    python bench/measure_revocation_waste.py [--records 1200000] [--size 100] [--pace 100000] [--runs 2]

On a real broker, per protocol (classic with the range assignor, where a rebalance revokes everything;
KIP-848, where only the partitions that move are revoked) and per fetch setting (the library's defaults
and librdkafka's, ``fetch.queue.backoff.ms`` 1000): member A reads a 6-partition topic, processing
``--pace`` records a second (a sleep per batch: an application slower than the fetcher, whose queue is
therefore as full as the fetch settings let it be), committing every batch synchronously and the
processed offsets of revoked partitions in its revoke callback, as StaticConsumer does; once it has read
a quarter of the topic, member B joins the group and takes half of the partitions; both read on until
every record was handed out. Each member is a plain confluent-kafka consumer configured as StaticConsumer
configures librdkafka (``client_config``), so librdkafka's statistics (``rxmsgs``: messages it fetched
and queued, per partition) can be read. Once the topic is drained a member's queue is empty, so what it
fetched minus what it handed out is what it threw away: the queued messages of revoked partitions, which
librdkafka purges (their next owner fetches them again from the committed offset). Also checked: no
record lost, none handed out twice. The broker is KAFKA_BOOTSTRAP_SERVERS if set, else the embedded one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import uuid
from typing import Any

from _bench import machine, produce
from confluent_kafka import Consumer, TopicPartition

from static_consumer import ConsumerSettings
from static_consumer._core.modes import client_config
from static_consumer_lab.brokers import create_topic, local_cluster

PARTITIONS = 6


class Member:
    """One group member on a thread of its own: hands records out, counts them, commits like the library."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        protocol: str,
        extra: dict[str, Any],
        pace: float,
    ):
        self.pace = pace
        settings = ConsumerSettings(
            bootstrap_servers=bootstrap, group_id=group, topics=(topic,), protocol=protocol, librdkafka=extra
        )
        config: dict[str, Any] = dict(client_config(settings, name))
        config.update({"statistics.interval.ms": 100, "stats_cb": self._stats})
        self.fetched: dict[int, int] = {}
        self.seen: set[tuple[int, int]] = set()
        self.handed_out = 0
        self.revocations = 0
        self.processed: dict[int, int] = {}
        self.stop = threading.Event()
        self.topic = topic
        self.consumer = Consumer(config)
        self.consumer.subscribe([topic], on_revoke=self._revoked)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _stats(self, text: str) -> None:
        parts = json.loads(text).get("topics", {}).get(self.topic, {}).get("partitions", {})
        self.fetched = {int(p): v["rxmsgs"] for p, v in parts.items() if int(p) >= 0}

    def _commit(self, partitions: list[int]) -> None:
        offsets = [
            TopicPartition(self.topic, p, self.processed.pop(p) + 1)
            for p in partitions
            if p in self.processed
        ]
        if offsets:
            self.consumer.commit(offsets=offsets, asynchronous=False)

    def _revoked(self, _consumer: Any, parts: list[TopicPartition]) -> None:
        self.revocations += 1
        self._commit([p.partition for p in parts])

    def _run(self) -> None:
        while not self.stop.is_set():
            msgs = self.consumer.consume(500, 0.2)
            for m in msgs:
                if m.error() is None:
                    self.seen.add((m.partition(), m.offset()))
                    self.processed[m.partition()] = m.offset()
                    self.handed_out += 1
            self._commit(list(self.processed))
            time.sleep(len(msgs) / self.pace)
        self.consumer.poll(0.3)  # the last statistics

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def run(
    bootstrap: str, topic: str, records: int, protocol: str, extra: dict[str, Any], pace: float
) -> dict[str, Any]:
    group = f"waste-{uuid.uuid4().hex[:8]}"
    a = Member(bootstrap, topic, group, "waste-a", protocol, extra, pace)
    deadline = time.monotonic() + 300
    while a.handed_out < records // 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    b = Member(bootstrap, topic, group, "waste-b", protocol, extra, pace)
    while len(a.seen | b.seen) < records and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # both queues are empty by now (nothing left to fetch); statistics catch up
    out: dict[str, Any] = {"lost": records - len(a.seen | b.seen), "twice": len(a.seen & b.seen)}
    for name, member in (("A", a), ("B", b)):
        member.close()
        fetched = sum(member.fetched.values())
        out[name] = {
            "fetched": fetched,
            "handed_out": member.handed_out,
            "thrown_away": fetched - member.handed_out,
            "revocations": member.revocations,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_200_000)
    parser.add_argument("--pace", type=float, default=100_000, help="records/s each member processes")
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    variants = {
        "library's defaults": {},
        "librdkafka's (fetch.queue.backoff.ms=1000)": {"fetch.queue.backoff.ms": 1000},
    }
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}")
        topic = create_topic(bootstrap, f"waste-{uuid.uuid4().hex[:6]}", PARTITIONS)
        produce(bootstrap, topic, args.records, args.size, compression="none")
        print(
            f"{args.records:,} records of {args.size} B, uncompressed, {PARTITIONS} partitions; each member "
            f"processes {args.pace:,.0f} records/s"
        )
        thrown: dict[tuple[str, str], list[int]] = {}
        for number in range(args.runs):
            for protocol in ("classic", "consumer"):
                for variant, extra in variants.items():
                    got = run(bootstrap, topic, args.records, protocol, extra, args.pace)
                    thrown.setdefault((protocol, variant), []).append(
                        got["A"]["thrown_away"] + got["B"]["thrown_away"]
                    )
                    print(f"  run {number + 1}, {protocol}, {variant}: {json.dumps(got)}", flush=True)
    print("\n| protocol | fetch settings | records thrown away after the revocation (runs) |")
    print("|---|---|---|")
    for (protocol, variant), counts in thrown.items():
        print(
            f"| {protocol} | {variant} | {', '.join(f'{c:,}' for c in counts)} "
            f"(median {statistics.median(counts):,.0f}) |"
        )


if __name__ == "__main__":
    main()
