"""What confluent_kafka.aio.AIOConsumer does, measured on a real broker (the facts in docs/asyncio.md).

    python bench/measure_aio_consumer.py

Prints, for the installed confluent-kafka: which threads run its consume calls and its rebalance
callbacks, what happens to a plain (non-async) rebalance callback, and how fencing reaches the caller
when a second consumer joins with the same group.instance.id (classic protocol). The broker is
KAFKA_BOOTSTRAP_SERVERS if set, else the embedded one (see docs/testing.md).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import confluent_kafka
from confluent_kafka.aio import AIOConsumer

from static_consumer_lab.brokers import create_topic, local_cluster, produce
from static_consumer_lab.brokers.kafka_ops import QUIET_LOGGER


class RecordingExecutor(ThreadPoolExecutor):
    """AIOConsumer's own default (a pool of 100 workers), noting the thread of every call."""

    def __init__(self) -> None:
        super().__init__(max_workers=100)
        self.threads: list[int] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        def noted() -> Any:
            self.threads.append(threading.get_ident())
            return fn(*args, **kwargs)

        return super().submit(noted)


def conf(bootstrap: str, group: str, instance: str | None = "m-0") -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 500,
        "logger": QUIET_LOGGER,
    }
    if instance is not None:
        config["group.instance.id"] = instance
    return config


async def threads_and_callbacks(bootstrap: str, topic: str) -> None:
    loop_thread = threading.get_ident()
    executor = RecordingExecutor()
    callback_threads: list[int] = []

    async def on_assign(consumer: Any, partitions: list[Any]) -> None:
        callback_threads.append(threading.get_ident())
        await asyncio.sleep(0)

    consumer = AIOConsumer(conf(bootstrap, f"aio-{uuid.uuid4().hex[:8]}"), executor=executor)
    await consumer.subscribe([topic], on_assign=on_assign)
    got, deadline = 0, time.monotonic() + 60
    calls = 0
    while got < 1000 and time.monotonic() < deadline:
        got += len(await consumer.consume(100, 1.0))
        calls += 1
    await consumer.close()
    threads = set(executor.threads)
    print(f"consume: {calls} sequential calls ran on {len(threads)} distinct executor thread(s)")

    # Overlapping calls (a health check's assignment() while a consume waits) take more threads.
    executor2 = RecordingExecutor()
    consumer = AIOConsumer(conf(bootstrap, f"aio-{uuid.uuid4().hex[:8]}"), executor=executor2)
    await consumer.subscribe([topic])
    for _ in range(10):
        await asyncio.gather(consumer.consume(100, 0.5), consumer.assignment(), consumer.position([]))
    await consumer.close()
    print(f"consume with concurrent assignment()/position(): {len(set(executor2.threads))} thread(s)")
    on_loop = all(t == loop_thread for t in callback_threads)
    print(f"on_assign (a coroutine): ran {len(callback_threads)} time(s), on the loop's thread: {on_loop}")


async def plain_callback(bootstrap: str, topic: str) -> None:
    called: list[str] = []

    def on_assign(consumer: Any, partitions: list[Any]) -> None:  # a plain function, as the sync API takes
        called.append("on_assign")

    consumer = AIOConsumer(conf(bootstrap, f"aio-{uuid.uuid4().hex[:8]}"))
    await consumer.subscribe([topic], on_assign=on_assign)
    outcome = "no error"
    got, deadline = 0, time.monotonic() + 30
    try:
        while not got and time.monotonic() < deadline:
            got = len(await consumer.consume(100, 1.0))
    except Exception as exc:  # noqa: BLE001 - what it raises is the measurement
        outcome = f"{type(exc).__name__}: {exc}"
    print(f"plain on_assign: called {len(called)} time(s); consume(): {outcome}; records before: {got}")
    await consumer.close()


async def fencing(bootstrap: str, topic: str) -> None:
    group = f"aio-{uuid.uuid4().hex[:8]}"
    errors: list[str] = []

    async def error_cb(err: Any) -> None:
        errors.append(err.name())

    first_conf = conf(bootstrap, group)
    first_conf["error_cb"] = error_cb
    first = AIOConsumer(first_conf)
    await first.subscribe([topic])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not await first.consume(100, 1.0):
        pass
    second = AIOConsumer(conf(bootstrap, group))  # same group.instance.id: the newest joiner wins
    await second.subscribe([topic])
    second_task = asyncio.create_task(_drain(second, 20))
    seen: list[str] = []
    raised = "nothing raised"
    fenced_at = None
    started = time.monotonic()
    try:
        while time.monotonic() - started < 20 and fenced_at is None:
            for msg in await first.consume(100, 1.0):
                err = msg.error()
                if err is not None:
                    seen.append(f"{err.name()} (code {err.code()}, fatal() {err.fatal()}): {err.str()[:90]}")
                    fenced_at = time.monotonic() - started
    except Exception as exc:  # noqa: BLE001 - what it raises is the measurement
        raised = f"{type(exc).__name__}: {exc}"
    try:
        await first.commit(asynchronous=False)
        commit = "commit() returned"
    except Exception as exc:  # noqa: BLE001 - what it raises is the measurement
        commit = f"commit() raised {type(exc).__name__}: {str(exc)[:90]}"
    print(f"fencing: consume() returned error messages {seen}; {raised}; after it {commit}")
    print(f"fencing: error_cb (a coroutine) got {errors or 'nothing'}")
    await first.close()
    await second_task
    await second.close()


async def _drain(consumer: AIOConsumer, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        await consumer.consume(100, 0.5)


def main() -> None:
    print(f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}")
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = f"aio-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, 2)
        produce(bootstrap, topic, 1000)
        asyncio.run(threads_and_callbacks(bootstrap, topic))
        asyncio.run(plain_callback(bootstrap, topic))
        asyncio.run(fencing(bootstrap, topic))


if __name__ == "__main__":
    main()
