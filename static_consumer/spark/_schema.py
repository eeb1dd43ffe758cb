"""The Arrow form of Spark's Kafka source rows, and the conversion from records. Pure; no Spark needed.

Spark's Kafka source (``spark.read.format("kafka")`` with ``includeHeaders=true``) yields rows of
``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int, headers array<struct<key string, value binary>>``, every field nullable. A
DataFrame built from :data:`KAFKA_SCHEMA` has exactly that schema, so code written against the native
source runs unchanged on the bridge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from static_consumer._base.records import Record, RecordBatch

HEADER_TYPE = pa.struct([("key", pa.string()), ("value", pa.binary())])

# Microseconds in UTC: Spark's TimestampType. createDataFrame would cast any other unit to this anyway.
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")

KAFKA_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", TIMESTAMP_TYPE),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(HEADER_TYPE)),
    ]
)

# librdkafka numbers timestamp types NOT_AVAILABLE=0, CREATE_TIME=1, LOG_APPEND_TIME=2; Spark shows
# Kafka's own ids (TimestampType.id): NO_TIMESTAMP_TYPE=-1, CREATE_TIME=0, LOG_APPEND_TIME=1.
_SPARK_TIMESTAMP_TYPE_OFFSET = -1


# RecordBatch.from_records() and the columns read Record fields by position; fail at import, not with
# wrong columns, if they move.
_FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp_ms", "timestamp_type", "headers")
if tuple(Record._fields) != _FIELDS:
    raise ImportError(f"static_consumer.spark expects Record fields {_FIELDS}, found {Record._fields}")


def spark_timestamp_type(librdkafka_type: int) -> int:
    """The ``timestampType`` Spark's Kafka source shows for a librdkafka timestamp type."""
    return librdkafka_type + _SPARK_TIMESTAMP_TYPE_OFFSET


def record_bytes(record: Record) -> int:
    """Payload size of a record (key, value, headers), the measure batch byte limits count."""
    return RecordBatch.from_records([record]).payload_bytes()


def records_to_table(records: Sequence[Record] | RecordBatch) -> pa.Table:
    """A table with :data:`KAFKA_SCHEMA`, one row per record, in the given order.

    ``headers`` is null for a record without headers, as in Spark's Kafka source.
    """
    batch = records if isinstance(records, RecordBatch) else RecordBatch.from_records(records)
    return batches_to_table([batch])


def batches_to_table(batches: Sequence[RecordBatch]) -> pa.Table:
    """:func:`records_to_table` for the records of several batches, in order: each column is built
    from the batches' lists, never from a Python object per record."""

    def column(field: Callable[[RecordBatch], list[Any]]) -> list[Any]:
        return field(batches[0]) if len(batches) == 1 else list(chain.from_iterable(map(field, batches)))

    n = sum(map(len, batches))
    if any(b.headers is not None for b in batches):
        nested = [b.headers if b.headers is not None else [()] * len(b) for b in batches]
        headers = pa.array([h or None for h in chain.from_iterable(nested)], pa.list_(HEADER_TYPE))
    else:
        headers = pa.nulls(n, pa.list_(HEADER_TYPE))
    topics = {b.topic for b in batches if len(b)}
    topic = topics.pop() if len(topics) == 1 else None
    if topic is None:
        topic_column = pa.array(column(_TOPICS), pa.string())
    else:  # one topic, the usual case: repeated in C rather than converted string by string
        topic_column = pa.repeat(pa.scalar(topic, pa.string()), n)
    columns = [
        pa.array(column(_KEYS), pa.binary()),
        pa.array(column(_VALUES), pa.binary()),
        topic_column,
        pa.array(column(_PARTITIONS), pa.int32()),
        pa.array(column(_OFFSETS), pa.int64()),
        pa.array(column(_STAMPS), pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP_TYPE),
        pc.add(pa.array(column(_STAMP_TYPES), pa.int32()), _SPARK_TIMESTAMP_TYPE_OFFSET),
        headers,
    ]
    return pa.Table.from_arrays(columns, schema=KAFKA_SCHEMA)


_KEYS = attrgetter("keys")
_VALUES = attrgetter("values")
_TOPICS = attrgetter("topics")
_PARTITIONS = attrgetter("partitions")
_OFFSETS = attrgetter("offsets")
_STAMPS = attrgetter("timestamps_ms")
_STAMP_TYPES = attrgetter("timestamp_types")


__all__ = [
    "HEADER_TYPE",
    "KAFKA_SCHEMA",
    "TIMESTAMP_TYPE",
    "batches_to_table",
    "record_bytes",
    "records_to_table",
    "spark_timestamp_type",
]
