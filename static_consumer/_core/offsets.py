"""Which offsets are safe to commit: the at-least-once bookkeeping of the consumer. Pure.

Kafka commits the *next* offset to read, so a processed record at offset N commits N + 1. Only
partitions this member currently owns are tracked: after a revoke or loss, committing for a partition
would overwrite the progress of its new owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from static_consumer.types import Record, TopicPartition, records_highest_offsets


class OffsetTracker:
    """Highest processed offset per owned partition, and what was last committed."""

    def __init__(self) -> None:
        self._owned: set[TopicPartition] = set()
        self._processed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return frozenset(self._owned)

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        self._owned.update(partitions)

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._owned.discard(tp)
            self._processed.pop(tp, None)
            self._committed.pop(tp, None)

    def clear(self) -> None:
        self.remove(list(self._owned))
        self._processed.clear()

    def mark(self, record: Record) -> bool:
        """Record that ``record`` was processed. False (ignored) when its partition is not owned."""
        tp = record.topic_partition
        if tp not in self._owned:
            return False
        if record.offset + 1 > self._processed.get(tp, -1):
            self._processed[tp] = record.offset + 1
        return True

    def mark_all(self, records: Iterable[Record]) -> list[TopicPartition]:
        """mark() for a batch, without a Python loop per record (the per-record cost matters at high
        throughput). Returns the partitions that were ignored because they are not owned."""
        return self.mark_highest(records_highest_offsets(records))

    def mark_highest(self, highest: Mapping[tuple[str, int], int]) -> list[TopicPartition]:
        """mark() for the highest processed offset per (topic, partition); returns the partitions
        ignored because they are not owned."""
        ignored = []
        owned, processed = self._owned, self._processed
        for key, offset in highest.items():
            # A plain (topic, partition) finds its TopicPartition (a NamedTuple: equal, same hash) in the
            # set and the dict, and updating the dict keeps its TopicPartition key: one is built only for
            # a partition seen the first time (the per-batch cost counts at high throughput).
            if key not in owned:
                ignored.append(TopicPartition(*key))
                continue
            done = processed.get(key)
            if done is None:
                processed[TopicPartition(*key)] = offset + 1
            elif offset + 1 > done:
                processed[key] = offset + 1
        return ignored

    def pending(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Offsets processed but not yet committed (limited to ``partitions`` if given)."""
        wanted = self._owned if partitions is None else self._owned.intersection(partitions)
        return {
            tp: offset
            for tp, offset in self._processed.items()
            if tp in wanted and self._committed.get(tp) != offset
        }

    def last_committed(self) -> dict[TopicPartition, int]:
        """What was last committed for the partitions owned now (sending it again moves nothing)."""
        return {tp: offset for tp, offset in self._committed.items() if tp in self._owned}

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Note a successful commit, so it is not sent again."""
        for tp, offset in offsets.items():
            if tp in self._owned:
                self._committed[tp] = offset
                if offset > self._processed.get(tp, -1):
                    self._processed[tp] = offset


__all__ = ["OffsetTracker"]
