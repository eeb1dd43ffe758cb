"""A record that keeps failing, under the default retries: how long the member's other partitions wait,
and that retrying never costs the member its partitions (docs/failures.md).

    python bench/bench_failing_records.py [--runs 3] [--protocols classic consumer] [--rate 200]

Per run, one static member (README's pod main, ``run_until_sigterm``) reads a 4-partition topic fed at
``--rate`` records/s, each record carrying the time it was produced. After a warm-up one poison record
goes to partition 0; the handler raises ``RecordFailedError`` for it on every attempt.

- ``defaults``: the settings' defaults (3 retries 1, 2 and 4 s apart), then ``failure_action='skip'``.
  Reported: the largest produce-to-handled latency of records of partitions 1-3 produced while the
  poison record was retried, against the largest before it; the time from the first failure to the skip.
- ``budget``: retries that would outlast ``max_poll_interval_ms`` (20 retries up to 5 s apart, with
  ``max_poll_interval_ms=10000``): they stop at half of it; reported: the time to the skip, and whether
  the member lost or gave up a partition meanwhile (a Lost or Revoked event), which it must not.

The broker comes from KAFKA_BOOTSTRAP_SERVERS, else the JVM harness's stock profile (docs/testing.md).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid
from typing import Any

from static_consumer import (
    ConsumerSettings,
    Lost,
    MembershipEvent,
    MembershipListener,
    RecordFailedError,
    RecordSkipped,
    RecordsRetried,
    Revoked,
    StaticConsumer,
    run_until_sigterm,
)
from static_consumer._base.records import Record
from static_consumer_lab.brokers import create_topic, local_cluster

PARTITIONS = 4
POISON = b"poison"


class Watch(MembershipListener):
    def __init__(self) -> None:
        self.events: list[tuple[float, MembershipEvent]] = []

    def on_event(self, event: MembershipEvent) -> None:
        self.events.append((time.time(), event))

    def first(self, kind: type[MembershipEvent]) -> float | None:
        return next((at for at, e in self.events if isinstance(e, kind)), None)


def run(bootstrap: str, protocol: str, scenario: str, rate: int) -> dict[str, Any]:
    topic = create_topic(bootstrap, f"fail-{uuid.uuid4().hex[:8]}", PARTITIONS)
    fields: dict[str, Any] = {"failure_action": "skip"}
    if scenario == "budget":
        fields.update(failure_retries=20, failure_max_backoff_s=5.0, max_poll_interval_ms=10_000)
        if protocol == "classic":
            fields["session_timeout_ms"] = 6000
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        topics=[topic],
        instance_id="bench-0",
        protocol=protocol,
        **fields,
    )
    watch = Watch()
    consumer = StaticConsumer(settings, listeners=[watch], env={})
    handled: list[tuple[int, float, float]] = []  # partition, produced at, handled at

    def handle(batch: list[Record]) -> None:
        now = time.time()
        for record in batch:
            if record.value == POISON:
                raise RecordFailedError(record, "poison")
            handled.append((record.partition, float(record.value or b"0"), now))

    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    stop = threading.Event()
    marks: dict[str, float] = {}

    def feed() -> None:
        i, began = 0, time.time()
        while not stop.is_set():
            if i == rate * 5 and "poison" not in marks:  # after 5 s
                marks["poison"] = time.time()
                producer.produce(topic, value=POISON, partition=0)
            producer.produce(topic, value=repr(time.time()).encode(), partition=i % PARTITIONS)
            producer.poll(0)
            i += 1
            time.sleep(max(0.0, began + i / rate - time.time()))
        producer.flush(10)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()

    def end() -> None:
        deadline = time.time() + 90
        while time.time() < deadline:
            skipped = watch.first(RecordSkipped)
            if skipped is not None and time.time() > skipped + 5:
                break
            time.sleep(0.2)
        stop.set()
        consumer.stop()

    threading.Thread(target=end, daemon=True).start()
    run_until_sigterm(consumer, handle, max_records=100, poll_timeout_s=0.2)
    feeder.join()
    first_fail = watch.first(RecordsRetried)
    skipped = watch.first(RecordSkipped)
    assert first_fail is not None and skipped is not None, "the poison record was not retried and skipped"
    poisoned = marks["poison"]
    others = [(h - p) for part, p, h in handled if part != 0 and poisoned - 0.5 <= p <= skipped]
    before = [(h - p) for part, p, h in handled if part != 0 and poisoned - 3.0 <= p < poisoned - 0.5]
    # The member's own close revokes everything at the end: only what happened while it retried counts.
    moved = [
        type(e).__name__
        for at, e in watch.events
        if isinstance(e, Lost | Revoked) and first_fail <= at <= skipped
    ]
    return {
        "retrying_s": skipped - first_fail,
        "others_max_s": max(others) if others else float("nan"),
        "others_n": len(others),
        "before_max_s": max(before) if before else float("nan"),
        "lost_or_revoked": moved,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--protocols", nargs="+", default=["classic", "consumer"])
    parser.add_argument("--scenarios", nargs="+", default=["defaults", "budget"])
    parser.add_argument("--rate", type=int, default=200)
    args = parser.parse_args()
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if bootstrap:
        go(bootstrap, args)
        return
    with local_cluster(os.environ, profile="stock") as cluster:
        go(cluster.bootstrap_servers, args)


def go(bootstrap: str, args: argparse.Namespace) -> None:
    print("scenario protocol run retrying_s others_max_s (n) before_max_s lost_or_revoked", flush=True)
    for scenario in args.scenarios:
        for protocol in args.protocols:
            for n in range(1, args.runs + 1):
                r = run(bootstrap, protocol, scenario, args.rate)
                others = f"{r['others_max_s']:.2f} ({r['others_n']})"
                moved = r["lost_or_revoked"] or "-"
                line = f"{scenario} {protocol} {n} {r['retrying_s']:.2f} {others} {r['before_max_s']:.3f}"
                print(f"{line} {moved}", flush=True)


if __name__ == "__main__":
    main()
