"""The pure-Python Record: what static_consumer uses when its C extension (``native.c``) is not built
or ``STATIC_CONSUMER_PURE_PYTHON=1`` is set. Same public behaviour as the native Record, slower.

The native Record answers fields from the client's message; this one reads every field when the record
is made (:func:`wrap`) and holds them in a tuple. The adapter cannot tell the two apart: ``wrap``,
``wrap_one`` and ``column`` take and return the same things as the native ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any, Final, SupportsIndex, overload

from static_consumer._base.records.partition import TopicPartition

# librdkafka's RD_KAFKA_TIMESTAMP_NOT_AVAILABLE (confluent_kafka.TIMESTAMP_NOT_AVAILABLE; a unit test
# pins that they agree): timestamp_ms is None for it.
_TIMESTAMP_NOT_AVAILABLE = 0
_FIELDS: Final = ("topic", "partition", "offset", "key", "value", "timestamp_ms", "timestamp_type", "headers")


def _field(index: int) -> property:
    def get(self: Record) -> Any:
        return self._values[index]

    return property(get)


class Record:
    """One consumed message. ``timestamp_ms`` is None when the broker gave no timestamp."""

    __slots__ = ("_values",)
    __module__ = "static_consumer"  # pickles name static_consumer.Record, either implementation
    _fields = _FIELDS
    _field_defaults: dict[str, Any] = {"headers": ()}  # a dict, as namedtuple has it
    __match_args__ = _FIELDS

    _values: tuple[Any, ...]

    def __new__(
        cls,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None,
        timestamp_type: int,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> Record:
        self = object.__new__(cls)
        self._values = (topic, partition, offset, key, value, timestamp_ms, timestamp_type, headers)
        return self

    topic = _field(0)
    partition = _field(1)
    offset = _field(2)
    key = _field(3)
    value = _field(4)
    timestamp_ms = _field(5)
    timestamp_type = _field(6)
    headers = _field(7)

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self._values[0], self._values[1])

    # -- a tuple of the fields, as a named tuple is --------------------------------------------------

    def __eq__(self, other: object) -> bool:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values == theirs

    def __ne__(self, other: object) -> bool:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values != theirs

    def __lt__(self, other: object) -> bool:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values < theirs

    def __le__(self, other: object) -> bool:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values <= theirs

    def __gt__(self, other: object) -> bool:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values > theirs

    def __ge__(self, other: object) -> bool:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values >= theirs

    def __hash__(self) -> int:
        return hash(self._values)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(_FIELDS, self._values, strict=True))
        return f"{type(self).__name__}({fields})"

    def __len__(self) -> int:
        return len(_FIELDS)

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Any, ...]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        return self._values[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._values)

    def __contains__(self, value: object) -> bool:
        return value in self._values

    def __add__(self, other: object) -> tuple[Any, ...]:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else self._values + theirs

    def __radd__(self, other: object) -> tuple[Any, ...]:
        theirs = _tuple_of(other)
        return NotImplemented if theirs is None else theirs + self._values

    def __mul__(self, times: SupportsIndex) -> tuple[Any, ...]:
        if not hasattr(type(times), "__index__"):
            return NotImplemented
        return self._values * times

    __rmul__ = __mul__

    def count(self, value: Any) -> int:
        return self._values.count(value)

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**63 - 1) -> int:
        return self._values.index(value, start, stop)

    # -- the namedtuple helpers ---------------------------------------------------------------------

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(_FIELDS, self._values, strict=True))

    def _replace(self, **changes: Any) -> Record:
        unknown = [name for name in changes if name not in _FIELDS]
        if unknown:
            raise ValueError(f"Got unexpected field names: {unknown!r}")
        values = zip(_FIELDS, self._values, strict=True)
        return type(self)(*(changes.get(name, value) for name, value in values))

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> Record:
        values = tuple(iterable)
        if len(values) != len(_FIELDS):
            raise TypeError(f"Expected {len(_FIELDS)} arguments, got {len(values)}")
        return cls(*values)

    def __getnewargs__(self) -> tuple[Any, ...]:
        return self._values

    def __reduce__(self) -> tuple[type[Record], tuple[Any, ...]]:
        return type(self), self._values


def _tuple_of(other: object) -> tuple[Any, ...] | None:
    if isinstance(other, Record):
        return other._values
    return other if isinstance(other, tuple) else None


Sequence.register(Record)

# -- made from the client's messages (the duck-typed accessors of confluent_kafka.Message) ----------------


def _bytes(value: Any) -> Any:
    # A plain Consumer (no deserializer) yields bytes; the stubs also allow str.
    return value.encode() if isinstance(value, str) else value


def _headers(raw: Any) -> tuple[tuple[str, bytes | None], ...]:
    if raw is None:
        return ()
    items = raw.items() if isinstance(raw, dict) else raw
    return tuple((name, _bytes(value)) for name, value in items)


def wrap_one(msg: Any) -> Record:
    """A Record of one message (that has no error)."""
    ts_type, ts = msg.timestamp()
    return Record(
        msg.topic(),
        msg.partition(),
        msg.offset(),
        _bytes(msg.key()),
        _bytes(msg.value()),
        None if ts_type == _TIMESTAMP_NOT_AVAILABLE else ts,
        ts_type,
        _headers(msg.headers()),
    )


def wrap(msgs: list[Any], topic: str | None) -> dict[tuple[str, int], int] | None:
    """Replace the client's messages in ``msgs`` by Records, in place, and return the highest offset
    per (topic, partition); None, with the list untouched, when a message has an error."""
    if any(msg.error() is not None for msg in msgs):
        return None
    msgs[:] = map(wrap_one, msgs)
    topics: Iterable[str] = repeat(topic) if topic is not None else map(_TOPIC, msgs)
    # A dict keeps the last value per key, and each partition's records come in offset order.
    return dict(zip(zip(topics, map(_PARTITION, msgs)), map(_OFFSET, msgs)))  # noqa: B905 - repeat()


_TOPIC, _PARTITION, _OFFSET = attrgetter("topic"), attrgetter("partition"), attrgetter("offset")
_GETTERS: list[Callable[[Any], Any]] = [attrgetter(name) for name in _FIELDS]


def column(records: list[Any], index: int) -> list[Any]:
    """Field ``index`` of every Record of the list."""
    return list(map(_GETTERS[index], records))


__all__ = ["Record", "column", "wrap", "wrap_one"]
