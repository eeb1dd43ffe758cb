"""RecordList and RecordBatch: what ``consume()`` and ``consume_batch()`` return.

A RecordList is the list consume() returns: a plain list of Records that also knows the highest offset
of each partition, so committing it needs no pass over the records. A RecordBatch holds one consume
call's records field by field, for consumers that hand whole batches on (to Arrow, Spark, a bulk write)
and should not pay for the fields they never read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import compress, repeat
from operator import attrgetter, itemgetter
from typing import Any, Self, SupportsIndex, TypeVar, cast

from static_consumer._base.records.impl import Record, column

_T = TypeVar("_T")


Headers = tuple[tuple[str, bytes | None], ...]

_OFFSET_OF_PAIR = itemgetter(1)
_POSITION = attrgetter("topic", "partition")
_OFFSET = attrgetter("offset")


def highest_offsets(pairs: Iterable[tuple[tuple[str, int], int]]) -> dict[tuple[str, int], int]:
    """Highest offset per (topic, partition) of ``((topic, partition), offset)`` pairs, in any order,
    without a Python loop per pair: sorted by offset (linear for the usual already-ordered batch), a
    dict keeps the last value per key."""
    return dict(sorted(pairs, key=_OFFSET_OF_PAIR))


def records_highest_offsets(records: Iterable[Record]) -> dict[tuple[str, int], int]:
    """Highest offset per (topic, partition) of Records in any order."""
    batch = records if isinstance(records, list | tuple) else list(records)
    return highest_offsets(zip(map(_POSITION, batch), map(_OFFSET, batch), strict=True))


class RecordList(list[Record]):
    """The list of Records one ``consume()`` call returns.

    A plain list in every respect (it compares, prints and pickles as one), that also remembers the
    highest offset of each partition, worked out while its records were built from the client's
    messages, so ``commit(records)`` needs no pass over them. Any change to the list forgets it; it is
    then computed from the records, as for any other sequence of Records.
    """

    __slots__ = ("_highest",)

    def __init__(self, records: Iterable[Record] = (), highest: dict[tuple[str, int], int] | None = None):
        super().__init__(records)
        self._highest = highest

    def highest_offsets(self) -> dict[tuple[str, int], int]:
        """Highest offset per (topic, partition): what a commit of the records needs."""
        if self._highest is None:
            self._highest = records_highest_offsets(self)
        return self._highest

    # Every method that can change which records the list holds (sort and reverse cannot).
    def _changed(self) -> None:
        self._highest = None

    def __setitem__(self, index: Any, value: Any) -> None:
        self._changed()
        super().__setitem__(index, value)

    def __delitem__(self, index: Any) -> None:
        self._changed()
        super().__delitem__(index)

    def __iadd__(self, other: Iterable[Record]) -> Self:  # type: ignore[override, misc]
        self._changed()
        return super().__iadd__(other)

    def __imul__(self, times: SupportsIndex) -> Self:
        self._changed()
        return super().__imul__(times)

    def append(self, record: Record) -> None:
        self._changed()
        super().append(record)

    def extend(self, records: Iterable[Record]) -> None:
        self._changed()
        super().extend(records)

    def insert(self, index: SupportsIndex, record: Record) -> None:
        self._changed()
        super().insert(index, record)

    def pop(self, index: SupportsIndex = -1) -> Record:
        self._changed()
        return super().pop(index)

    def remove(self, record: Record) -> None:
        self._changed()
        super().remove(record)

    def clear(self) -> None:
        self._changed()
        super().clear()


_COLUMNS = (
    "topics",
    "partitions",
    "offsets",
    "keys",
    "values",
    "timestamps_ms",
    "timestamp_types",
    "headers",
)
ColumnLoader = Callable[[str], list[Any] | None]
"""Loads one column of a deferred :class:`RecordBatch` by name (one of ``RecordBatch.COLUMNS``)."""

_UNKNOWN: Any = object()


def _load_column(records: list[Record], name: str) -> list[Any] | None:
    """A column of a batch of Records (None for headers when no record has any)."""
    got = column(records, _COLUMNS.index(name))
    return None if name == "headers" and not any(got) else got


class RecordBatch:
    """Records field by field: the i-th record is ``(topics[i], partitions[i], offsets[i], ...)``.

    ``headers`` is None when no record of the batch has headers (the common case), else one tuple per
    record. The lists are the batch's own; treat them as read-only.

    A batch the consumer hands out is *deferred*: it holds the Records of the consume call (which
    answer from the client's messages), iterating it yields them, and each column is built from them the
    first time it is read, so code that reads only ``values`` (and commits the batch) pays for nothing
    else. Its records come in the client's order, which keeps each partition's records in offset order;
    the offset helpers rely on that there and take the first and last record of each partition, while a
    batch built from lists or records may be in any order and gets the true minimum and maximum.
    Reading columns from several threads is safe (a column may be built twice, never wrongly).
    """

    COLUMNS = _COLUMNS
    __slots__ = ("_columns", "_highest", "_in_order", "_load", "_records", "_size", "_topic")

    def __init__(
        self,
        topics: list[str],
        partitions: list[int],
        offsets: list[int],
        keys: list[bytes | None],
        values: list[bytes | None],
        timestamps_ms: list[int | None],
        timestamp_types: list[int],
        headers: list[Headers] | None = None,
    ) -> None:
        columns = (topics, partitions, offsets, keys, values, timestamps_ms, timestamp_types, headers)
        lengths = {len(column) for column in columns if column is not None}
        if len(lengths) > 1:
            raise ValueError(f"RecordBatch columns differ in length: {sorted(lengths)}")
        self._size = len(offsets)
        self._columns: dict[str, Any] = dict(zip(_COLUMNS, columns, strict=True))
        self._load: ColumnLoader | None = None
        self._topic: str | None = _UNKNOWN
        self._in_order = False
        self._highest: Callable[[], dict[tuple[str, int], int]] | None = None
        self._records: list[Record] | None = None

    @classmethod
    def deferred(
        cls,
        size: int,
        load: ColumnLoader,
        *,
        topic: str | None = None,
        highest: Callable[[], dict[tuple[str, int], int]] | None = None,
    ) -> RecordBatch:
        """A batch of ``size`` records in client order whose columns come from ``load(name)`` when first
        read. ``topic``, when the caller knows every record is of that one topic, saves the topic column;
        None leaves it to the records. ``highest``, if given, answers :meth:`highest_offsets` without
        building the partition and offset columns."""
        batch = cls.__new__(cls)
        batch._size, batch._columns, batch._load = size, {}, load
        batch._topic = topic if topic is not None and size else _UNKNOWN
        batch._in_order = True
        batch._highest = highest
        batch._records = None
        return batch

    @classmethod
    def of_records(
        cls,
        records: list[Record],
        *,
        topic: str | None = None,
        highest: dict[tuple[str, int], int] | None = None,
    ) -> RecordBatch:
        """A deferred batch over ``records`` in client order (what ``consume_batch()`` hands out):
        iterating it yields these Records, and each column is read from them when first read.
        ``highest``, if given, is their highest offset per (topic, partition)."""
        batch = cls.deferred(
            len(records),
            functools.partial(_load_column, records),
            topic=topic,
            highest=None if highest is None else highest.copy,
        )
        batch._records = records
        return batch

    def _column(self, name: str) -> Any:
        try:
            return self._columns[name]
        except KeyError:
            pass
        if name == "topics" and self._topic is not _UNKNOWN and self._topic is not None:
            column: Any = [self._topic] * self._size
        else:
            assert self._load is not None  # a batch from lists has every column
            column = self._load(name)
        self._columns[name] = column
        return column

    @property
    def topics(self) -> list[str]:
        return cast("list[str]", self._column("topics"))

    @property
    def partitions(self) -> list[int]:
        return cast("list[int]", self._column("partitions"))

    @property
    def offsets(self) -> list[int]:
        return cast("list[int]", self._column("offsets"))

    @property
    def keys(self) -> list[bytes | None]:
        return cast("list[bytes | None]", self._column("keys"))

    @property
    def values(self) -> list[bytes | None]:
        return cast("list[bytes | None]", self._column("values"))

    @property
    def timestamps_ms(self) -> list[int | None]:
        return cast("list[int | None]", self._column("timestamps_ms"))

    @property
    def timestamp_types(self) -> list[int]:
        return cast("list[int]", self._column("timestamp_types"))

    @property
    def headers(self) -> list[Headers] | None:
        return cast("list[Headers] | None", self._column("headers"))

    @property
    def topic(self) -> str | None:
        """The topic of every record, or None when the batch is empty or has records of several."""
        if self._topic is _UNKNOWN:
            topics = self.topics
            self._topic = topics[0] if topics and topics.count(topics[0]) == len(topics) else None
        return self._topic

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Record]:
        if self._records is not None:
            return iter(self._records)
        headers = self.headers
        fields = (self.topics, self.partitions, self.offsets, self.keys, self.values, self.timestamps_ms)
        return map(
            Record, *fields, self.timestamp_types, repeat((), self._size) if headers is None else headers
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RecordBatch):
            return NotImplemented
        return len(self) == len(other) and self.records() == other.records()

    __hash__ = None  # type: ignore[assignment]  # mutable lists inside, like a list

    def __repr__(self) -> str:
        # Sizes only: a batch's keys and values are user data (and may be large).
        return f"RecordBatch({self._size} records of {len(self.positions())} partitions)"

    def records(self) -> list[Record]:
        """The batch as :class:`Record` objects (a new list)."""
        return list(self)

    @classmethod
    def from_records(cls, records: Sequence[Record]) -> RecordBatch:
        if not records:
            return cls([], [], [], [], [], [], [])
        topics, partitions, offsets, keys, values, stamps, types, headers = map(
            list, zip(*records, strict=True)
        )
        batch = cls(
            topics, partitions, offsets, keys, values, stamps, types, headers if any(headers) else None
        )
        batch._records = list(records)
        return batch

    def positions(self) -> set[tuple[str, int]]:
        """The (topic, partition) pairs the batch has records of."""
        topic = self.topic
        if topic is not None:
            return {(topic, partition) for partition in set(self.partitions)}
        return set(zip(self.topics, self.partitions, strict=True))

    def offset_bounds(self) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        """Lowest and highest offset per (topic, partition)."""
        if not self._in_order:
            ordered = sorted(self._pairs(), key=_OFFSET_OF_PAIR)
            return dict(reversed(ordered)), dict(ordered)
        return self._first_or_last(first=True), self._first_or_last(first=False)

    def highest_offsets(self) -> dict[tuple[str, int], int]:
        """Highest offset per (topic, partition): what a commit of the batch needs."""
        if self._highest is not None:
            return self._highest()
        if not self._in_order:
            return highest_offsets(self._pairs())
        return self._first_or_last(first=False)

    def _first_or_last(self, *, first: bool) -> dict[tuple[str, int], int]:
        """Offset of each partition's first or last record, in C loops: with one topic keyed by
        partition alone (no tuple per record); a dict keeps the last value it is given per key."""
        topic = self.topic
        keys: list[Any] = self.partitions
        if topic is None:
            keys = list(zip(self.topics, keys, strict=True))
        offsets = self.offsets
        if first:
            found = dict(zip(reversed(keys), reversed(offsets), strict=True))
        else:
            found = dict(zip(keys, offsets, strict=True))
        return {(topic, p): o for p, o in found.items()} if topic is not None else found

    def _pairs(self) -> Iterator[tuple[tuple[str, int], int]]:
        return zip(zip(self.topics, self.partitions, strict=True), self.offsets, strict=True)

    def select(self, keep: Iterable[tuple[str, int]]) -> RecordBatch:
        """Only the records of the given (topic, partition) pairs."""
        wanted = set(keep)
        topic = self.topic
        if topic is not None:
            parts = {p for t, p in wanted if t == topic}
            mask = list(map(parts.__contains__, self.partitions))
        else:
            mask = [pos in wanted for pos in zip(self.topics, self.partitions, strict=True)]
        if all(mask):
            return self

        def pick(column: list[_T]) -> list[_T]:
            return list(compress(column, mask))

        picked = RecordBatch(
            pick(self.topics),
            pick(self.partitions),
            pick(self.offsets),
            pick(self.keys),
            pick(self.values),
            pick(self.timestamps_ms),
            pick(self.timestamp_types),
            None if self.headers is None else pick(self.headers),
        )
        picked._in_order = self._in_order  # a subsequence keeps each partition's order
        return picked

    def payload_bytes(self) -> int:
        """Bytes of keys, values and headers (names and values)."""
        size = sum(map(len, filter(None, self.keys))) + sum(map(len, filter(None, self.values)))
        if self.headers is not None:
            size += sum(len(name) + len(value or b"") for hs in self.headers for name, value in hs)
        return size

    def payload_sizes(self) -> list[int]:
        """:meth:`payload_bytes` of each record, in order."""
        sizes = [len(k or b"") + len(v or b"") for k, v in zip(self.keys, self.values, strict=True)]
        if self.headers is not None:
            for i, hs in enumerate(self.headers):
                sizes[i] += sum(len(name) + len(value or b"") for name, value in hs)
        return sizes

    def split(self, n: int) -> tuple[RecordBatch, RecordBatch]:
        """The first ``n`` records and the rest, each a batch in this batch's order."""
        if n <= 0:
            return RecordBatch([], [], [], [], [], [], []), self
        if n >= self._size:
            return self, RecordBatch([], [], [], [], [], [], [])
        if self._records is not None and not self._columns:  # deferred over Records: stay deferred
            topic = None if self._topic is _UNKNOWN else self._topic
            head = RecordBatch.of_records(self._records[:n], topic=topic)
            tail = RecordBatch.of_records(self._records[n:], topic=topic)
            head._in_order = tail._in_order = self._in_order
            return head, tail
        columns: list[Any] = [getattr(self, name) for name in _COLUMNS]
        halves: tuple[list[Any], list[Any]] = (
            [None if c is None else c[:n] for c in columns],
            [None if c is None else c[n:] for c in columns],
        )
        head, tail = (RecordBatch(*half) for half in halves)
        head._in_order = tail._in_order = self._in_order  # a prefix and a suffix keep each partition's order
        return head, tail


__all__ = [
    "ColumnLoader",
    "Headers",
    "RecordBatch",
    "RecordList",
    "highest_offsets",
    "records_highest_offsets",
]
