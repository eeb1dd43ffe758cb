"""Micro-batch bookkeeping for the Spark runner: limits, the batch being collected, adaptive sizing. Pure."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from static_consumer._base.records import Record, RecordBatch, TopicPartition


@dataclass(frozen=True)
class BatchLimits:
    """When a batch is complete: ``max_records`` records, ``max_bytes`` of payload (keys, values,
    headers) or ``max_wait_s`` after collection started, whichever comes first.

    ``poll_records`` is how many records one client call asks for. A batch must be processed (fn plus
    commit) well within ``max_poll_interval_ms``, because the client is not polled meanwhile: a batch
    that takes more than ``slow_fraction`` of it logs a warning and, with ``on_slow="shrink"``, halves
    the record limit of the following batches, not below ``min_records`` (default 1,000); it grows
    back while batches are fast.

    Every batch holds ``max_records`` and ``max_bytes``, replays included (a single record over
    ``max_bytes`` goes alone; the rest of what was collected waits for the next batch).
    """

    max_records: int = 100_000
    max_bytes: int = 128 * 1024 * 1024
    max_wait_s: float = 2.0
    poll_records: int = 10_000
    slow_fraction: float = 0.5
    on_slow: Literal["warn", "shrink"] = "shrink"
    min_records: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_records", "max_bytes", "poll_records", "shrink_floor"):
            if getattr(self, name) < 1:
                raise ValueError(f"BatchLimits.{name} must be >= 1, got {getattr(self, name)}")
        if self.min_records is not None and self.min_records > self.max_records:
            raise ValueError(
                f"BatchLimits.min_records ({self.min_records}) must be <= max_records ({self.max_records})"
            )
        if not self.max_wait_s > 0:
            raise ValueError(f"BatchLimits.max_wait_s must be > 0, got {self.max_wait_s}")
        if not 0 < self.slow_fraction < 1:
            raise ValueError(f"BatchLimits.slow_fraction must be in (0, 1), got {self.slow_fraction}")

    @property
    def shrink_floor(self) -> int:
        """Fewest records a shrunk batch may be limited to: ``min_records``, else 1,000 (or
        ``max_records`` if smaller)."""
        return self.min_records if self.min_records is not None else min(1_000, self.max_records)


@dataclass(frozen=True)
class OffsetRange:
    """First and last offset (both inclusive) of one partition's records in a batch."""

    first: int
    last: int

    @property
    def next_offset(self) -> int:
        """What to commit once the batch is processed: Kafka commits the next offset to read."""
        return self.last + 1


@dataclass
class PendingBatch:
    """Records collected for the next batch, as the client's :class:`RecordBatch` chunks (no object per
    record). Records of revoked or lost partitions are dropped before the batch is handed out, so a
    batch never holds records of partitions this member gave up. :meth:`take` hands out the oldest
    records within the limits and keeps the rest for the next batch."""

    chunks: list[RecordBatch] = field(default_factory=list)
    count: int = 0
    bytes: int = 0
    sizes: list[int] = field(default_factory=list)  # payload bytes per chunk

    def __len__(self) -> int:
        return self.count

    @property
    def records(self) -> list[Record]:
        """The records, built on demand (for inspection; the runner hands the chunks on as columns)."""
        return [record for chunk in self.chunks for record in chunk.records()]

    def add(
        self, records: RecordBatch | Sequence[Record], owned: frozenset[TopicPartition] | None = None
    ) -> int:
        """Append records (only those of ``owned`` partitions, when given); returns how many were added."""
        chunk = records if isinstance(records, RecordBatch) else RecordBatch.from_records(records)
        if owned is not None and len(chunk):
            keys = {(tp.topic, tp.partition) for tp in owned}
            if not chunk.positions() <= keys:
                chunk = chunk.select(keys)
        if not len(chunk):
            return 0
        self._append(chunk, chunk.payload_bytes())
        return len(chunk)

    def _append(self, chunk: RecordBatch, size: int) -> None:
        self.chunks.append(chunk)
        self.sizes.append(size)
        self.count += len(chunk)
        self.bytes += size

    def prepend(self, older: PendingBatch) -> None:
        """Put ``older`` records before these (each partition's records stay in offset order)."""
        self.chunks[:0], self.sizes[:0] = older.chunks, older.sizes
        self.count += older.count
        self.bytes += older.bytes

    def take(self, max_records: int, max_bytes: int) -> PendingBatch:
        """Remove and return the oldest records up to ``max_records`` and ``max_bytes`` (at least one
        record, even one larger than ``max_bytes``); the rest stays for the next batch. A chunk is cut
        where a limit falls, so every partition's records keep their order across the cut."""
        out = PendingBatch()
        while self.chunks:
            chunk, size = self.chunks[0], self.sizes[0]
            room, room_bytes = max_records - out.count, max_bytes - out.bytes
            if room <= 0 or (out.count and room_bytes <= 0):
                break
            if len(chunk) <= room and size <= room_bytes:
                out._append(chunk, size)
                self.chunks.pop(0)
                self.sizes.pop(0)
                continue
            if size <= room_bytes:  # only the record limit cuts this chunk
                head, tail = chunk.split(room)
                head_bytes = head.payload_bytes()
            else:
                cut, head_bytes = _cut(chunk, room, room_bytes, alone_ok=not out.count)
                head, tail = chunk.split(cut)
            if len(head):
                out._append(head, head_bytes)
                self.chunks[0], self.sizes[0] = tail, size - head_bytes
            break
        self.count -= out.count
        self.bytes -= out.bytes
        return out

    def drop(self, partitions: Iterable[TopicPartition]) -> int:
        """Forget the records of ``partitions``; returns how many were dropped. Their offsets were not
        committed, so whoever owns the partitions next reads them again."""
        gone = {(tp.topic, tp.partition) for tp in partitions}
        if not gone or not self.chunks:
            return 0
        kept = [chunk.select(chunk.positions() - gone) for chunk in self.chunks]
        kept = [chunk for chunk in kept if len(chunk)]
        dropped = self.count - sum(map(len, kept))
        if dropped:
            self.chunks = kept
            self.sizes = [chunk.payload_bytes() for chunk in kept]
            self.count -= dropped
            self.bytes = sum(self.sizes)
        return dropped

    def full(self, max_records: int, max_bytes: int) -> bool:
        return self.count >= max_records or self.bytes >= max_bytes

    def offsets(self) -> dict[TopicPartition, OffsetRange]:
        """First and last offset per partition, in partition order."""
        first: dict[tuple[str, int], int] = {}
        last: dict[tuple[str, int], int] = {}
        for chunk in self.chunks:
            lowest, highest = chunk.offset_bounds()
            for key, low in lowest.items():
                first[key] = min(first.get(key, low), low)
                last[key] = max(last.get(key, highest[key]), highest[key])
        return {TopicPartition(*key): OffsetRange(first[key], last[key]) for key in sorted(first)}


def _cut(chunk: RecordBatch, room: int, room_bytes: int, *, alone_ok: bool) -> tuple[int, int]:
    """How many of ``chunk``'s first records fit ``room`` records and ``room_bytes``, and their bytes;
    one record even if it alone is over ``room_bytes`` when ``alone_ok`` (the batch has nothing else)."""
    total = fitted = 0
    for size in chunk.payload_sizes()[:room]:
        if total + size > room_bytes:
            if fitted == 0 and alone_ok:
                return 1, size
            break
        total += size
        fitted += 1
    return fitted, total


def commit_offsets(
    ranges: Mapping[TopicPartition, OffsetRange], owned: frozenset[TopicPartition]
) -> dict[TopicPartition, int]:
    """Next offsets to commit for a processed batch, only for partitions still owned (committing for a
    partition that moved would overwrite its new owner's progress)."""
    return {tp: r.next_offset for tp, r in ranges.items() if tp in owned}


class BatchSizer:
    """Keeps batch processing time under the poll budget by adapting the record limit."""

    def __init__(self, limits: BatchLimits, max_poll_interval_s: float) -> None:
        self._limits = limits
        self._budget_s = max_poll_interval_s
        self.max_records = limits.max_records

    @property
    def slow_s(self) -> float:
        """Processing time above which a batch counts as slow."""
        return self._budget_s * self._limits.slow_fraction

    def observe(self, records: int, seconds: float) -> str | None:
        """Note how long a batch of ``records`` took to process; returns a warning for a slow batch."""
        limits = self._limits
        if seconds > self.slow_s:
            message = (
                f"processing a batch of {records} records took {seconds:.1f}s, more than "
                f"{limits.slow_fraction:.0%} of max_poll_interval_ms ({self._budget_s:.0f}s); past it the "
                "member leaves the group and the batch's partitions move"
            )
            if limits.on_slow == "shrink" and self.max_records > limits.shrink_floor:
                # Size for half the budget at the observed rate, at least halving, never below min_records.
                target = math.floor(records * (self.slow_s / 2) / seconds) if seconds > 0 else records
                self.max_records = max(limits.shrink_floor, min(self.max_records // 2, target))
                message += f"; next batches hold at most {self.max_records} records"
            elif limits.on_slow == "warn":
                message += "; lower BatchLimits.max_records/max_bytes or raise max_poll_interval_ms"
            return message
        if (
            seconds < self.slow_s / 4
            and self.max_records < limits.max_records
            and records >= self.max_records
        ):
            self.max_records = min(limits.max_records, self.max_records * 2)
        return None


__all__ = ["BatchLimits", "BatchSizer", "OffsetRange", "PendingBatch", "commit_offsets"]
