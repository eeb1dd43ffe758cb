"""The one producer every strategy's group reads: a steady rate, and a log of every delivered record."""

from __future__ import annotations

import threading
import time
from typing import Any

from static_consumer.testing.kafka_ops import QUIET_LOGGER


class ContinuousProducer:
    """Produces sequence-numbered records at a steady rate until stopped (bounded by ``max_s``).

    ``delivered`` holds (partition, offset, producer timestamp ms) of every acknowledged record. Keys are
    the sequence numbers, so records spread over the partitions by hash.
    """

    def __init__(self, bootstrap: str, topic: str, rate_per_s: int, max_s: float = 3600.0) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "logger": QUIET_LOGGER}
        )
        self._topic, self._rate, self._max_s = topic, rate_per_s, max_s
        self._stop = threading.Event()
        self.delivered: list[tuple[int, int, int]] = []
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)

    def _ack(self, err: Any, msg: Any) -> None:
        if err is None:
            self.delivered.append((msg.partition(), msg.offset(), msg.timestamp()[1]))
        else:
            self.failed += 1

    def _run(self) -> None:
        sent, began = 0, time.monotonic()
        while not self._stop.is_set() and time.monotonic() - began < self._max_s:
            due = int((time.monotonic() - began) * self._rate)
            while sent < due:
                key = str(sent).encode()
                try:
                    self._producer.produce(self._topic, key=key, value=key, on_delivery=self._ack)
                except BufferError:
                    break  # the local queue is full: retry on the next tick
                sent += 1
            self._producer.poll(0.02)

    def start(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop producing, wait for every acknowledgement; the number of records delivered."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=10)
        self._producer.flush(30)
        return len(self.delivered)

    def __enter__(self) -> ContinuousProducer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
