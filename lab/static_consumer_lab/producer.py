"""One background producer for tests, benchmarks and the demo: records keep arriving while members restart,
fence or migrate."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from static_consumer_lab.brokers.classpath import HarnessError
from static_consumer_lab.brokers.kafka_ops import QUIET_LOGGER


class SteadyProducer:
    """Writes records to ``topic`` at ``rate_per_s`` from a thread, for at most ``max_s``.

    Key and value are the decimal sequence number (0, 1, ...). acks=all with idempotence: a retry after
    a broker fault never writes a record twice, so every offset below the high watermark is exactly one
    acknowledged record. Records wait in the queue while the broker is away.

    As a context manager: started on entry; on a normal exit it stops as :meth:`stop` does (every record
    acknowledged, or HarnessError), so :attr:`acked` is final after the block; on an exception it only
    halts. ``extra``: more librdkafka properties (e.g. a secured listener's). ``keep_deliveries``: also
    keep (partition, offset, producer timestamp ms) of every acknowledged record in :attr:`delivered` (the
    demo's end-to-end latency and loss count read it). librdkafka reports no offset for a record whose
    retry the broker had already written (answered as a duplicate sequence, acknowledged all the same):
    :meth:`stop` reads those offsets back from the log by key, so :attr:`delivered` is complete after it.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        rate_per_s: int = 200,
        max_s: float = 300.0,
        extra: Mapping[str, Any] | None = None,
        keep_deliveries: bool = False,
    ) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "logger": QUIET_LOGGER,
                **(extra or {}),
            }
        )
        self.topic, self._rate, self._max_s = topic, rate_per_s, max_s
        self._bootstrap, self._extra = bootstrap, dict(extra or {})
        self._halt = threading.Event()
        self.sent = 0
        self.acked = 0
        self.errors: list[str] = []
        self.delivered: list[tuple[int, int, int]] = []
        self._unplaced: dict[int, dict[bytes, int]] = {}  # partition -> key -> timestamp: offset not reported
        self._keep = keep_deliveries
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def _ack(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked += 1
            if self._keep and msg.offset() is None:
                self._unplaced.setdefault(msg.partition(), {})[msg.key()] = msg.timestamp()[1]
            elif self._keep:
                self.delivered.append((msg.partition(), msg.offset(), msg.timestamp()[1]))
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        began = time.monotonic()
        while not self._halt.is_set() and time.monotonic() - began < self._max_s:
            due = int((time.monotonic() - began) * self._rate)
            while self.sent < due:
                key = str(self.sent).encode()
                try:
                    self._producer.produce(self.topic, key=key, value=key, on_delivery=self._ack)
                except BufferError:  # queue full while a leader is moving: wait for acks, then go on
                    self._producer.poll(0.1)
                    continue
                self.sent += 1
            self._producer.poll(0.02)

    def describe(self) -> str:
        """Counts so far, for a timeout's message."""
        return f"producer: {self.sent} sent, {self.acked} acknowledged, errors {self.errors[:3]}"

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __enter__(self) -> SteadyProducer:
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.stop()
        else:  # a failing test: stop the thread and give up on what is still queued, quietly
            self.halt()

    def _halt_thread(self) -> None:
        self._halt.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=10)

    def halt(self, flush_s: float = 5.0) -> None:
        """Stop writing and give what is queued ``flush_s`` to go out, without checking the acks."""
        self._halt_thread()
        self._producer.flush(flush_s)

    def stop(self, timeout_s: float = 90.0) -> int:
        """Stop writing and wait for every acknowledgement; the number acknowledged (all of them)."""
        self._halt_thread()
        remaining = self._producer.flush(timeout_s)
        if remaining or self.errors or self.acked != self.sent:
            raise HarnessError(
                f"producer: {self.acked} of {self.sent} acknowledged, {remaining} queued, "
                f"errors {self.errors[:3]}"
            )
        if self._unplaced:
            self._place(timeout_s)
        return self.acked

    def _place(self, timeout_s: float) -> None:
        """Find the offsets of the acknowledged records librdkafka reported none for, by key in the log
        (the keys are unique), and add them to :attr:`delivered`."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer(
            {
                "bootstrap.servers": self._bootstrap,
                "group.id": f"place-{self.topic}",
                "enable.auto.commit": False,
                "logger": QUIET_LOGGER,
                **self._extra,
            }
        )
        try:
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._unplaced])
            deadline = time.monotonic() + timeout_s
            while any(self._unplaced.values()) and time.monotonic() < deadline:
                for msg in consumer.consume(1000, 1.0):
                    partition, offset, key = msg.partition(), msg.offset(), msg.key()
                    if msg.error() or partition is None or offset is None or not isinstance(key, bytes):
                        continue
                    ts = self._unplaced.get(partition, {}).pop(key, None)
                    if ts is not None:
                        self.delivered.append((partition, offset, ts))
        finally:
            consumer.close()
        missing = sum(map(len, self._unplaced.values()))
        if missing:
            raise HarnessError(
                f"producer: {missing} acknowledged records not found in the log of {self.topic}"
            )
