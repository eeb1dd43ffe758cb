"""The batch in flight: turned into a DataFrame and handed to ``fn`` on a worker thread.

The worker never touches the consumer: polling, rebalance callbacks and commits all stay on the thread
that runs the runner (librdkafka serves callbacks there, and the consumer's bookkeeping is not locked).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from static_consumer.spark._batch import OffsetRange
from static_consumer.types import TopicPartition


@dataclass(frozen=True)
class BatchInfo:
    """What ``fn`` is told about its batch. ``batch_id`` counts from 0 per runner; ``offsets`` (first and
    last offset per partition) identify the batch across restarts, e.g. for idempotent writes.
    ``attempt`` is 1, or higher when a :class:`FailurePolicy` retries the batch."""

    batch_id: int
    records: int
    bytes: int
    offsets: dict[TopicPartition, OffsetRange]
    instance_id: str | None
    collect_s: float
    attempt: int = 1


@dataclass(frozen=True)
class FailurePolicy:
    """What happens when ``fn`` raises: ``retries`` more calls with the same DataFrame (exponential
    ``backoff_s`` up to ``max_backoff_s``), then the runner stops and re-raises; nothing of the batch is
    committed. Retries also stop when the next one would start past ``max_poll_interval_ms``."""

    retries: int = 0
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError(f"FailurePolicy values must be >= 0, got {self}")

    def wait_s(self, attempt: int) -> float:
        """Pause after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)))


class InFlight:
    """One batch being processed by ``work`` on a daemon thread (daemon: a hung ``fn`` cannot keep a
    pod from exiting once the runner gave up on it)."""

    def __init__(
        self, info: BatchInfo, work: Callable[[], None], clock: Callable[[], float] = time.monotonic
    ):
        self.info = info
        self.partitions = frozenset(info.offsets)
        self.error: BaseException | None = None
        self.seconds = 0.0
        self._work = work
        self._clock = clock
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"static-consumer-batch-{info.batch_id}", daemon=True
        )

    def start(self) -> InFlight:
        self._thread.start()
        return self

    def _run(self) -> None:
        begun = self._clock()
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - handed to the runner's thread, which re-raises it
            self.error = exc
        finally:
            self.seconds = self._clock() - begun
            self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout_s: float) -> bool:
        """True once the work finished (successfully or not) within ``timeout_s``."""
        return self._done.wait(timeout_s)


__all__ = ["BatchInfo", "FailurePolicy", "InFlight"]
