"""Plain data the consumer hands out: partitions, records and record batches. Pure; no client library
types leak out.

TopicPartition and Record are NamedTuples rather than dataclasses: a consumer builds one Record per
message, and tuple construction, hashing and comparison run in C. They are immutable and compare by
value. A RecordBatch holds one consume call's records field by field, for consumers that hand whole
batches on (to Arrow, Spark, a bulk write) and should not pay for a Python object per record.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import itemgetter
from typing import NamedTuple, TypeVar

_T = TypeVar("_T")


class TopicPartition(NamedTuple):
    """One partition of a topic. Ordered by (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class Record(NamedTuple):
    """One consumed message. ``timestamp_ms`` is None when the broker gave no timestamp."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


Headers = tuple[tuple[str, bytes | None], ...]

_new_record = functools.partial(tuple.__new__, Record)
_OFFSET_OF_PAIR = itemgetter(1)


def highest_offsets(pairs: Iterable[tuple[tuple[str, int], int]]) -> dict[tuple[str, int], int]:
    """Highest offset per (topic, partition) of ``((topic, partition), offset)`` pairs, in any order,
    without a Python loop per pair: sorted by offset (linear for the usual already-ordered batch), a
    dict keeps the last value per key."""
    return dict(sorted(pairs, key=_OFFSET_OF_PAIR))


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """Records field by field: the i-th record is ``(topics[i], partitions[i], offsets[i], ...)``.

    ``headers`` is None when no record of the batch has headers (the common case), else one tuple per
    record. Each partition's records are in offset order, as the client delivers them. The lists are
    the batch's own; treat them as read-only.
    """

    topics: list[str]
    partitions: list[int]
    offsets: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    timestamps_ms: list[int | None]
    timestamp_types: list[int]
    headers: list[Headers] | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())

    def records(self) -> list[Record]:
        """The batch as :class:`Record` objects (built on demand, without a Python frame per record)."""
        headers = self.headers if self.headers is not None else [()] * len(self.offsets)
        fields = (self.topics, self.partitions, self.offsets, self.keys, self.values, self.timestamps_ms)
        return list(map(_new_record, zip(*fields, self.timestamp_types, headers, strict=True)))

    @classmethod
    def from_records(cls, records: Sequence[Record]) -> RecordBatch:
        if not records:
            return cls([], [], [], [], [], [], [])
        topics, partitions, offsets, keys, values, stamps, types, headers = map(
            list, zip(*records, strict=True)
        )
        return cls(
            topics, partitions, offsets, keys, values, stamps, types, headers if any(headers) else None
        )

    def positions(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs the batch has records of."""
        return set(zip(self.topics, self.partitions, strict=True))

    def offset_bounds(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """Lowest and highest offset per (topic, partition)."""
        ordered = sorted(self._pairs(), key=_OFFSET_OF_PAIR)
        return dict(reversed(ordered)), dict(ordered)

    def highest_offsets(self) -> dict[tuple[str, int], int]:
        """Highest offset per (topic, partition): what a commit of the batch needs."""
        return highest_offsets(self._pairs())

    def _pairs(self) -> Iterator[tuple[tuple[str, int], int]]:
        return zip(zip(self.topics, self.partitions, strict=True), self.offsets, strict=True)

    def select(self, keep: Iterable[tuple[str, int]]) -> RecordBatch:
        """Only the records of the given (topic, partition) pairs."""
        wanted = set(keep)
        mask = [pos in wanted for pos in zip(self.topics, self.partitions, strict=True)]
        if all(mask):
            return self

        def pick(column: list[_T]) -> list[_T]:
            return list(compress(column, mask))

        return RecordBatch(
            pick(self.topics),
            pick(self.partitions),
            pick(self.offsets),
            pick(self.keys),
            pick(self.values),
            pick(self.timestamps_ms),
            pick(self.timestamp_types),
            None if self.headers is None else pick(self.headers),
        )

    def payload_bytes(self) -> int:
        """Bytes of keys, values and headers (names and values)."""
        size = sum(map(len, filter(None, self.keys))) + sum(map(len, filter(None, self.values)))
        if self.headers is not None:
            size += sum(len(name) + len(value or b"") for hs in self.headers for name, value in hs)
        return size


__all__ = ["Headers", "Record", "RecordBatch", "TopicPartition", "highest_offsets"]
