"""AsyncStaticConsumer beside aiokafka (static, ``group_instance_id``) and the sync consume_batch, one run.

    pip install -e '.[bench]'      # aiokafka, for this benchmark only
    python bench/bench_async.py [--records 200000] [--rounds 3] [--restarts 3]

On one topic (6 partitions, 100-byte values), each loop reads the whole topic with a new group id and
the same static instance id, reading every value and committing every batch, round after round (a
warm-up round, then ``--rounds`` rounds with the loops in alternating order):

- ``sync StaticConsumer.consume_batch``: the baseline, ``for r in batch: len(r.value)``, ``commit(batch)``;
- ``AsyncStaticConsumer.consume_batch``: the same, awaited, inside ``asyncio.run``;
- ``AsyncStaticConsumer.batches()``: ``async for batch in consumer.batches(500, 1.0)``, every value read
  (each batch committed by the iterator once the body is done, sent with the next fetch);
- ``aiokafka getmany (group_instance_id)``: ``await c.getmany(timeout_ms=1000, max_records=500)``, every
  value read, ``await c.commit()`` (aiokafka's own consumed positions).

Records/s is timed from the first record to the last; the ratio of a loop is taken per round against
the sync pass of the same round (median [min-max] of rounds). For the asyncio loops a 10 ms timer runs
beside the consumer and its worst lateness in the pass is printed (how long the loop was unavailable).
Then static restart-to-first-record for each client (classic protocol; aiokafka has no KIP-848): a
member with the instance id joins a new group and reads, closes without leaving, and a new one with the
same instance id is timed from its creation to its first record, ``--restarts`` times. The broker is
KAFKA_BOOTSTRAP_SERVERS if set, else the embedded one (see docs/testing.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from _bench import Pass, PassTimer, Rounds, machine, produce

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer.aio import AsyncStaticConsumer
from static_consumer_lab.brokers import create_topic, local_cluster
from static_consumer_lab.children.loop_lag import LoopLag

BATCH = 500
PARTITIONS = 6
SESSION_MS = 10000
PASS_TIMEOUT_S = 600.0
INSTANCE = "bench-0"
SYNC = "sync StaticConsumer.consume_batch"
ASYNC = "AsyncStaticConsumer.consume_batch"
ASYNC_ITER = "AsyncStaticConsumer.batches()"
AIOKAFKA = "aiokafka getmany (group_instance_id)"
TICK_S = 0.01


def _settings(bootstrap: str, topic: str, group: str) -> ConsumerSettings:
    return ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=group,
        topics=(topic,),
        instance_id=INSTANCE,
        session_timeout_ms=SESSION_MS,
    )


def _aiokafka(bootstrap: str, topic: str, group: str) -> Any:
    from aiokafka import AIOKafkaConsumer

    return AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        group_instance_id=INSTANCE,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        max_poll_records=BATCH,
    )


def sync_pass(bootstrap: str, topic: str, count: int) -> Pass:
    timer, size = PassTimer(), 0
    deadline = time.monotonic() + PASS_TIMEOUT_S
    with StaticConsumer(_settings(bootstrap, topic, f"sync-{uuid.uuid4().hex[:8]}")) as consumer:
        while timer.seen < count and time.monotonic() < deadline:
            batch = consumer.consume_batch(BATCH, 1.0)
            if not len(batch):
                continue
            timer.add(len(batch))
            for r in batch:
                size += len(r.value or b"")
            consumer.commit(batch)
    return timer.result()


async def async_pass(bootstrap: str, topic: str, count: int, lags: list[float]) -> Pass:
    timer, size = PassTimer(), 0
    deadline = time.monotonic() + PASS_TIMEOUT_S
    consumer = AsyncStaticConsumer(_settings(bootstrap, topic, f"async-{uuid.uuid4().hex[:8]}"))
    async with consumer:
        async with LoopLag(TICK_S) as lag:
            while timer.seen < count and time.monotonic() < deadline:
                batch = await consumer.consume_batch(BATCH, 1.0)
                if not len(batch):
                    continue
                timer.add(len(batch))
                for r in batch:
                    size += len(r.value or b"")
                await consumer.commit(batch)
    lags.append(lag.worst)
    return timer.result()


async def async_iter_pass(bootstrap: str, topic: str, count: int, lags: list[float]) -> Pass:
    timer, size = PassTimer(), 0
    deadline = time.monotonic() + PASS_TIMEOUT_S
    consumer = AsyncStaticConsumer(_settings(bootstrap, topic, f"iter-{uuid.uuid4().hex[:8]}"))
    async with consumer:
        async with LoopLag(TICK_S) as lag:
            async for batch in consumer.batches(BATCH, 1.0):
                timer.add(len(batch))
                for r in batch:
                    size += len(r.value or b"")
                if timer.seen >= count or time.monotonic() > deadline:
                    consumer.stop()  # the iterator commits this batch and ends
    lags.append(lag.worst)
    return timer.result()


async def aiokafka_pass(bootstrap: str, topic: str, count: int, lags: list[float]) -> Pass:
    timer, size = PassTimer(), 0
    deadline = time.monotonic() + PASS_TIMEOUT_S
    consumer = _aiokafka(bootstrap, topic, f"aiok-{uuid.uuid4().hex[:8]}")
    await consumer.start()
    try:
        async with LoopLag(TICK_S) as lag:
            while timer.seen < count and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
                got = 0
                for msgs in batches.values():
                    got += len(msgs)
                    for m in msgs:
                        size += len(m.value or b"")
                if not got:
                    continue
                timer.add(got)
                await consumer.commit()
    finally:
        await consumer.stop()
    lags.append(lag.worst)
    return timer.result()


def _restarts(first_record: Callable[[str], float], restarts: int) -> list[float]:
    group = f"restart-{uuid.uuid4().hex[:8]}"
    samples = [first_record(group) for _ in range(restarts + 1)]
    return samples[1:]  # the first start joins a new group; the rest are static restarts


def sync_first_record(bootstrap: str, topic: str) -> Callable[[str], float]:
    def run(group: str) -> float:
        started = time.monotonic()
        with StaticConsumer(_settings(bootstrap, topic, group)) as consumer:
            while not len(consumer.consume_batch(10, 1.0)):
                if time.monotonic() - started > 60:
                    raise RuntimeError("no record within 60 s")
            return time.monotonic() - started  # no commit: the next start reads from the start again

    return run


def async_first_record(bootstrap: str, topic: str) -> Callable[[str], float]:
    async def run(group: str) -> float:
        started = time.monotonic()
        async with AsyncStaticConsumer(_settings(bootstrap, topic, group)) as consumer:
            while not len(await consumer.consume_batch(10, 1.0)):
                if time.monotonic() - started > 60:
                    raise RuntimeError("no record within 60 s")
            return time.monotonic() - started

    return lambda group: asyncio.run(run(group))


def aiokafka_first_record(bootstrap: str, topic: str) -> Callable[[str], float]:
    async def run(group: str) -> float:
        started = time.monotonic()
        consumer = _aiokafka(bootstrap, topic, group)
        await consumer.start()
        try:
            while not any((await consumer.getmany(timeout_ms=1000, max_records=10)).values()):
                if time.monotonic() - started > 60:
                    raise RuntimeError("no record within 60 s")
            return time.monotonic() - started
        finally:
            await consumer.stop()  # aiokafka sends no LeaveGroup when group_instance_id is set

    return lambda group: asyncio.run(run(group))


def _in_loop(make: Callable[[], Awaitable[Pass]]) -> Callable[[], Pass]:
    return lambda: asyncio.run(make())  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--restarts", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"async-bench-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, PARTITIONS)
        took = produce(bootstrap, topic, args.records, 100)
        print(f"topic {topic}: {args.records:,} records of 100 B in {PARTITIONS} partitions ({took:.1f} s)")
        lags: dict[str, list[float]] = {ASYNC: [], ASYNC_ITER: [], AIOKAFKA: []}
        loops = {
            SYNC: lambda: sync_pass(bootstrap, topic, args.records),
            ASYNC: _in_loop(lambda: async_pass(bootstrap, topic, args.records, lags[ASYNC])),
            ASYNC_ITER: _in_loop(lambda: async_iter_pass(bootstrap, topic, args.records, lags[ASYNC_ITER])),
            AIOKAFKA: _in_loop(lambda: aiokafka_pass(bootstrap, topic, args.records, lags[AIOKAFKA])),
        }
        rounds = Rounds(baseline=SYNC)
        rounds.run(loops, args.rounds, log=print)
        print("throughput (every value read, every batch committed):")
        for line in rounds.table():
            print(line)
        print("worst event-loop lateness of a 10 ms timer during a pass (warm-up excluded):")
        for name, values in lags.items():
            measured = values[1:]
            worst = f"median {statistics.median(measured) * 1000:.1f} ms, max {max(measured) * 1000:.1f} ms"
            print(f"    {name:<44} {worst}")
        print(f"static restart -> first record (classic protocol, {args.restarts} restarts each):")
        for name, first in (
            (SYNC, sync_first_record(bootstrap, topic)),
            (ASYNC, async_first_record(bootstrap, topic)),
            (AIOKAFKA, aiokafka_first_record(bootstrap, topic)),
        ):
            samples = _restarts(first, args.restarts)
            values = ", ".join(f"{s:.2f}" for s in samples)
            print(f"    {name:<44} median {statistics.median(samples):.2f} s [{values}]")


if __name__ == "__main__":
    main()
