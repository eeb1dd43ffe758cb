"""Per-batch progress of the runner: the :class:`~static_consumer._core.events.BatchProgress` event and the
lag.

Lag needs the partitions' end offsets, which the consumer's public API does not give; they are looked
up with a ListOffsets request (kafka-python's admin client, with the consumer's connection and security
settings) at most every ``interval_s``, on a thread of its own so that a slow or unreachable broker
never holds up the runner, and each batch's lag is computed against the last answer.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from static_consumer._base.records import TopicPartition
from static_consumer._core.events import BatchProgress
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)


class LagProbe:
    """End offsets of the partitions, refreshed at most every ``interval_s`` (None: never asked)."""

    def __init__(
        self,
        settings: ConsumerSettings,
        interval_s: float | None,
        clock: Callable[[], float] = time.monotonic,
        lookup: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]] | None = None,
    ) -> None:
        self._settings = settings
        self._interval_s = interval_s
        self._clock = clock
        self._lookup = lookup or self._list_offsets
        self._ends: dict[TopicPartition, int] = {}
        self._asked_at: float | None = None
        self._guard = threading.Lock()
        self._busy = False
        self._admin: Any = None
        self._closer: Any = None

    def lag(self, positions: Mapping[TopicPartition, int]) -> int | None:
        """Records behind ``positions`` (next offsets) in those partitions by the last end offsets
        looked up, or None when they are not known (yet). Starts a look-up when the last is stale."""
        if self._interval_s is None or not positions:
            return None
        now = self._clock()
        with self._guard:
            ends = dict(self._ends)
            busy = self._busy
        stale = self._asked_at is None or now - self._asked_at >= self._interval_s
        if not busy and (stale or not set(positions) <= set(ends)):
            self._asked_at = now
            self._busy = True
            wanted = sorted(positions)
            threading.Thread(
                target=self._refresh, args=(wanted,), name="static-consumer-lag", daemon=True
            ).start()
        if not set(positions) <= set(ends):
            return None
        return sum(max(0, ends[tp] - position) for tp, position in positions.items())

    def prepare(self) -> None:
        """Connect the look-up client in the background now, so that the first batches find it ready."""
        if self._interval_s is None:
            return
        with self._guard:
            if self._busy:
                return
            self._busy = True
        threading.Thread(target=self._refresh, args=([],), name="static-consumer-lag", daemon=True).start()

    def _refresh(self, partitions: list[TopicPartition]) -> None:
        try:
            found = self._lookup(partitions)
        except Exception as exc:  # noqa: BLE001 - progress must not stop the runner
            log.debug("end offsets unavailable: %r", exc)
            found = {}
        with self._guard:
            self._ends.update(found)
            self._busy = False

    def _list_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        from kafka.admin import OffsetSpec
        from kafka.structs import TopicPartition as KafkaTopicPartition

        from static_consumer._kafka.kafka_python import admin_client

        if self._admin is None:
            self._closer = admin_client(self._settings, "static-consumer-spark-lag")
            self._admin = self._closer.__enter__()
        if not partitions:
            return {}
        specs = {KafkaTopicPartition(tp.topic, tp.partition): OffsetSpec.LATEST for tp in partitions}
        found = self._admin.list_partition_offsets(specs, timeout_ms=5_000)
        return {TopicPartition(k.topic, k.partition): int(v.offset) for k, v in found.items()}

    def close(self) -> None:
        with self._guard:
            if self._busy:
                return  # the look-up thread still uses the client; it dies with the process
        if self._closer is not None:
            closer, self._closer, self._admin = self._closer, None, None
            try:
                closer.__exit__(None, None, None)
            except Exception as exc:  # noqa: BLE001 - closing a monitoring client is best effort
                log.debug("closing the lag client: %r", exc)


def progress(
    fields: Mapping[str, Any],
    *,
    batch_id: int,
    records: int,
    size: int,
    collect_s: float,
    process_s: float,
    commit_s: float,
    since_previous_s: float | None,
    lag: int | None,
    committed: bool,
    version: int | None,
) -> BatchProgress:
    """The event for one processed batch; ``fields`` are the consumer's event fields (group, ids)."""
    arrival_s = since_previous_s if since_previous_s is not None else collect_s
    return BatchProgress(
        **fields,
        batch_id=batch_id,
        records=records,
        bytes=size,
        collect_s=collect_s,
        process_s=process_s,
        commit_s=commit_s,
        input_rows_per_s=records / arrival_s if arrival_s > 0 else 0.0,
        processing_rows_per_s=records / process_s if process_s > 0 else 0.0,
        lag=lag,
        committed=committed,
        version=version,
    )


__all__ = ["LagProbe", "progress"]
