"""Where a consume loop's time goes: CPU time of the consuming thread per record, stage by stage, and the
garbage collections, for the raw confluent-kafka loop and StaticConsumer's loops, in one run.

    python bench/profile_consume.py [--records 300000] [--rounds 3] [--cprofile consume|batch]

Stages: the consume call (for StaticConsumer also the client's own ``consume()`` inside it, so the rest
is the wrapper's: turning messages into Records, its bookkeeping, and freeing the previous batch), the
user's loop (every value read), and the commit; then the records per consume call that returned any (a
loop that outruns the fetcher gets smaller batches, which cost more per record). ``--cprofile`` adds a
cProfile of one StaticConsumer pass. Thread CPU time, not wall time: what a wrapper adds to the
consuming thread, whatever else the machine runs. StaticConsumer's commit does not wait for the broker
(librdkafka's asynchronous commit, its result served by the next consume on the consuming thread, while
the raw loop commits synchronously), so the process's CPU per record over the same span is printed
beside it ("process", librdkafka's threads included): the consuming thread's share alone could flatter
it. Each round ends with the ratios to the raw loop of that round. The broker is KAFKA_BOOTSTRAP_SERVERS
if set, else the embedded one (see docs/testing.md).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import time
import uuid
from typing import Any

from _bench import machine, produce, raw_consumer

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer_lab.brokers import create_topic, local_cluster

BATCH = 500
CLOCK = time.thread_time


class Collections:
    """Garbage collections by generation, counted through gc.callbacks while installed."""

    def __init__(self) -> None:
        self.started = [0, 0, 0]

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started[info["generation"]] += 1


class TimedClient:
    """The adapter's confluent-kafka consumer, its consume() timed."""

    def __init__(self, real: Any) -> None:
        self.real, self.spent = real, 0.0

    def consume(self, count: int, timeout: float) -> Any:
        began = CLOCK()
        try:
            return self.real.consume(count, timeout)
        finally:
            self.spent += CLOCK() - began

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def raw(bootstrap: str, topic: str, count: int) -> tuple[dict[str, float], Collections]:
    consumer = raw_consumer(bootstrap, topic)
    stages = dict.fromkeys(("consume", "loop", "commit"), 0.0)
    collections, seen, size, calls = Collections(), 0, 0, 0
    process = 0.0
    try:
        while seen < count:
            began = CLOCK()
            msgs = consumer.consume(BATCH, 1.0)
            consumed = CLOCK()
            if not msgs:
                continue
            if not seen:  # timed from the first batch on
                gc.callbacks.append(collections)
                process = time.process_time()
            else:
                stages["consume"] += consumed - began
            for m in msgs:
                size += len(m.value())
            looped = CLOCK()
            consumer.commit(asynchronous=False)
            stages["loop"] += looped - consumed
            stages["commit"] += CLOCK() - looped
            seen += len(msgs)
            calls += 1
    finally:
        process = time.process_time() - process
        if collections in gc.callbacks:
            gc.callbacks.remove(collections)
        consumer.close()
    result = {k: v / seen * 1e9 for k, v in stages.items()}
    result["process"] = process / seen * 1e9
    result["records per call"] = seen / calls
    return result, collections


def wrapped(
    bootstrap: str, topic: str, count: int, *, batches: bool, profile: cProfile.Profile | None = None
) -> tuple[dict[str, float], Collections]:
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"wrap-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="profile-0",
        session_timeout_ms=10000,
    )
    stages = dict.fromkeys(("consume", "loop", "commit"), 0.0)
    collections, seen, size, calls = Collections(), 0, 0, 0
    client: TimedClient | None = None
    process = 0.0
    with StaticConsumer(settings) as consumer:
        adapter: Any = consumer._session.adapter  # the ConfluentAdapter (a benchmark may look inside)
        try:
            while seen < count:
                began = CLOCK()
                got = consumer.consume_batch(BATCH, 1.0) if batches else consumer.consume(BATCH, 1.0)
                consumed = CLOCK()
                if not len(got):
                    continue
                if client is None:  # timed from the first batch on
                    client = adapter._consumer = TimedClient(adapter._consumer)
                    gc.callbacks.append(collections)
                    process = time.process_time()
                    if profile is not None:
                        profile.enable()
                else:
                    stages["consume"] += consumed - began
                for r in got:
                    size += len(r.value or b"")
                looped = CLOCK()
                consumer.commit(got)
                stages["loop"] += looped - consumed
                stages["commit"] += CLOCK() - looped
                seen += len(got)
                calls += 1
        finally:
            process = time.process_time() - process
            if profile is not None:
                profile.disable()
            if client is not None:
                gc.callbacks.remove(collections)
                adapter._consumer = client.real
    result = {k: v / seen * 1e9 for k, v in stages.items()}
    result["of which the client's consume()"] = (client.spent if client else 0.0) / seen * 1e9
    result["process"] = process / seen * 1e9
    result["records per call"] = seen / calls
    return result, collections


def show(name: str, got: tuple[dict[str, float], Collections]) -> tuple[float, float]:
    """Prints one pass; returns its consuming thread's and its process's CPU per record."""
    stages, collections = got
    total = stages["consume"] + stages["loop"] + stages["commit"]
    parts = ", ".join(f"{k} {v:.0f}" for k, v in stages.items())
    print(f"  {name:<26} {total:5.0f} ns/record: {parts}; collections by generation {collections.started}")
    return total, stages["process"]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cprofile", choices=["consume", "batch"])
    args = parser.parse_args()
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}")
        topic = create_topic(bootstrap, f"profile-{uuid.uuid4().hex[:6]}", 6)
        produce(bootstrap, topic, args.records, 100)
        print(f"{args.records:,} records of 100 B, 6 partitions; consuming thread's CPU per record")
        for number in range(1, args.rounds + 1):
            print(f"round {number}:")
            base = show("raw confluent-kafka", raw(bootstrap, topic, args.records))
            for name, batches in (("consume", False), ("consume_batch", True)):
                got = show(f"StaticConsumer.{name}", wrapped(bootstrap, topic, args.records, batches=batches))
                thread, process = got[0] / base[0], got[1] / base[1]
                print(f"    {name} / raw: consuming thread {thread:.2f}, process {process:.2f}")
        if args.cprofile:
            profile = cProfile.Profile()
            wrapped(bootstrap, topic, args.records, batches=args.cprofile == "batch", profile=profile)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(15)
            print(out.getvalue())


if __name__ == "__main__":
    main()
