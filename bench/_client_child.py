"""One Kafka client in a process of its own, for bench_clients.py: read a topic, or restart as a static
member and time the first record. Prints one JSON line; imports only the client it runs.

    python bench/_client_child.py CLIENT read|restart BOOTSTRAP TOPIC GROUP INSTANCE COUNT [PROTOCOL]

``read``: consume COUNT records (every value read, every batch committed), timed from the first record
to the last: wall seconds and this process's CPU seconds (the client's own threads included).
``restart``: start, wait for the first record, commit that batch and close without leaving the group
(every client here is a static member: none sends LeaveGroup on close); reports when the first record
arrived and when the client was constructed, as ``time.monotonic()`` (system-wide on Linux), so the
parent can time from the moment it started this process. PROTOCOL (``classic``, the default, or
``consumer``: KIP-848, librdkafka-based clients only) is the group protocol.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from typing import Any

BATCH = 500
SESSION_MS = 30000
DEADLINE_S = 600.0


class Clock:
    """First and last record, in wall and CPU time."""

    def __init__(self) -> None:
        self.seen = 0
        self.first: tuple[float, float] | None = None
        self.constructed = time.monotonic()

    def add(self, count: int) -> None:
        if self.first is None:
            self.first = (time.monotonic(), time.process_time())
        self.seen += count

    def result(self) -> dict[str, float]:
        assert self.first is not None, "no record arrived"
        return {
            "records": self.seen,
            "wall_s": time.monotonic() - self.first[0],
            "cpu_s": time.process_time() - self.first[1],
            "first_at": self.first[0],
            "constructed_at": self.constructed,
        }


def confluent(
    bootstrap: str,
    topic: str,
    group: str,
    instance: str,
    count: int,
    *,
    same_settings: bool = False,
    asynchronous: bool = False,
    protocol: str = "classic",
) -> dict[str, float]:
    from confluent_kafka import Consumer

    extra: dict[str, Any] = {}
    if same_settings:  # the librdkafka defaults StaticConsumer changes (docs/configuration.md)
        from static_consumer.settings._config import CLIENT_DEFAULTS

        extra = {key: default.value for key, default in CLIENT_DEFAULTS.items()}
    clock = Clock()  # the client's life starts here (imports done)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "group.protocol": protocol,
            # Under KIP-848 the broker decides the session (librdkafka refuses the key).
            **({"session.timeout.ms": SESSION_MS} if protocol == "classic" else {}),
            **extra,
        }
    )
    consumer.subscribe([topic])
    size, deadline = 0, time.monotonic() + DEADLINE_S
    try:
        while clock.seen < count and time.monotonic() < deadline:
            msgs = consumer.consume(BATCH, 1.0)
            if not msgs:
                continue
            clock.add(len(msgs))
            for m in msgs:
                size += len(m.value())
            consumer.commit(asynchronous=asynchronous)
        return clock.result()
    finally:
        consumer.close()


def static_consumer(
    bootstrap: str,
    topic: str,
    group: str,
    instance: str,
    count: int,
    *,
    batch: bool,
    protocol: str = "classic",
) -> dict[str, float]:
    from static_consumer import ConsumerSettings, StaticConsumer

    clock = Clock()  # before the settings are built and checked
    fields: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": (topic,),
        "instance_id": instance,
        "protocol": protocol,
    }
    if protocol == "classic":  # under KIP-848 the broker decides the session
        fields["session_timeout_ms"] = SESSION_MS
    settings = ConsumerSettings(**fields)
    size, deadline = 0, time.monotonic() + DEADLINE_S
    with StaticConsumer(settings) as consumer:
        consume = consumer.consume_batch if batch else consumer.consume
        while clock.seen < count and time.monotonic() < deadline:
            got = consume(BATCH, 1.0)  # a RecordBatch or a list of Records: both sized, iterated, committed
            if not len(got):
                continue
            clock.add(len(got))
            for r in got:
                size += len(r.value or b"")
            consumer.commit(got)
        return clock.result()


def _peer_settings(bootstrap: str, group: str, instance: str) -> dict[str, Any]:
    """kafka-python's and aiokafka's consumer settings (the same names in both): a static member, from
    the topic's start, committing by hand."""
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "group_instance_id": instance,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "max_poll_records": BATCH,
        "session_timeout_ms": SESSION_MS,
    }


def kafka_python(bootstrap: str, topic: str, group: str, instance: str, count: int) -> dict[str, float]:
    from kafka import KafkaConsumer

    clock = Clock()
    consumer = KafkaConsumer(topic, **_peer_settings(bootstrap, group, instance))
    size, deadline = 0, time.monotonic() + DEADLINE_S
    try:
        while clock.seen < count and time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=1000, max_records=BATCH)
            if not got:
                continue
            for records in got.values():
                clock.add(len(records))
                for r in records:
                    size += len(r.value or b"")
            consumer.commit()
        return clock.result()
    finally:
        consumer.close()  # a static member (group_instance_id) sends no LeaveGroup


def aiokafka(bootstrap: str, topic: str, group: str, instance: str, count: int) -> dict[str, float]:
    async def run() -> dict[str, float]:
        from aiokafka import AIOKafkaConsumer

        clock = Clock()
        consumer = AIOKafkaConsumer(topic, **_peer_settings(bootstrap, group, instance))
        await consumer.start()
        size, deadline = 0, time.monotonic() + DEADLINE_S
        try:
            while clock.seen < count and time.monotonic() < deadline:
                got = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
                if not got:
                    continue
                for records in got.values():
                    clock.add(len(records))
                    for r in records:
                        size += len(r.value or b"")
                await consumer.commit()
            return clock.result()
        finally:
            await consumer.stop()  # a static member (group_instance_id) sends no LeaveGroup

    return asyncio.run(run())


CLIENTS: dict[str, Callable[..., dict[str, float]]] = {
    "confluent-kafka": confluent,
    "confluent-kafka (library's settings)": lambda *a, **k: confluent(*a, same_settings=True, **k),
    # For context, not a mode the library offers: librdkafka's own asynchronous commit, unordered and
    # unchecked (the loop never learns of a failure, and two in flight can land out of order).
    "confluent-kafka (library's settings, async commits)": lambda *a, **k: confluent(
        *a, same_settings=True, asynchronous=True, **k
    ),
    "StaticConsumer.consume": lambda *a, **k: static_consumer(*a, batch=False, **k),
    "StaticConsumer.consume_batch": lambda *a, **k: static_consumer(*a, batch=True, **k),
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
}


def main(argv: list[str]) -> None:
    client, what, bootstrap, topic, group, instance, count, *rest = argv
    protocol = rest[0] if rest else "classic"
    extra = {} if protocol == "classic" else {"protocol": protocol}
    # A restart reads one batch (the first record is what is timed), then commits it and closes.
    result: dict[str, Any] = CLIENTS[client](
        bootstrap, topic, group, instance, 1 if what == "restart" else int(count), **extra
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
