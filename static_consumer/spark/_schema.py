"""The Arrow form of Spark's Kafka source rows, and the conversion from records. Pure; no Spark needed.

Spark's Kafka source (``spark.read.format("kafka")`` with ``includeHeaders=true``) yields rows of
``key binary, value binary, topic string, partition int, offset long, timestamp timestamp,
timestampType int, headers array<struct<key string, value binary>>``, every field nullable. A
DataFrame built from :data:`KAFKA_SCHEMA` has exactly that schema, so code written against the native
source runs unchanged on the bridge.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from static_consumer.types import Record

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


# records_to_table() reads Record fields by position; fail at import, not with wrong columns, if they move.
_FIELDS = ("topic", "partition", "offset", "key", "value", "timestamp_ms", "timestamp_type", "headers")
if tuple(Record._fields) != _FIELDS:
    raise ImportError(f"static_consumer.spark expects Record fields {_FIELDS}, found {Record._fields}")


def spark_timestamp_type(librdkafka_type: int) -> int:
    """The ``timestampType`` Spark's Kafka source shows for a librdkafka timestamp type."""
    return librdkafka_type + _SPARK_TIMESTAMP_TYPE_OFFSET


def record_bytes(record: Record) -> int:
    """Payload size of a record (key, value, headers), the measure batch byte limits count."""
    size = len(record.key or b"") + len(record.value or b"")
    for name, value in record.headers:
        size += len(name) + len(value or b"")
    return size


def records_to_table(records: Sequence[Record]) -> pa.Table:
    """A table with :data:`KAFKA_SCHEMA`, one row per record, in the given order.

    ``headers`` is null for a record without headers, as in Spark's Kafka source.
    """
    if not records:
        return KAFKA_SCHEMA.empty_table()
    # Records are NamedTuples: zip(*) transposes them into one tuple per field in a single C pass.
    topic, partition, offset, key, value, timestamp_ms, timestamp_type, headers = zip(*records, strict=True)
    n = len(records)
    columns = [
        pa.array(key, pa.binary()),
        pa.array(value, pa.binary()),
        pa.array(topic, pa.string()),
        pa.array(partition, pa.int32()),
        pa.array(offset, pa.int64()),
        pa.array(timestamp_ms, pa.int64()).cast(pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP_TYPE),
        pc.add(pa.array(timestamp_type, pa.int32()), _SPARK_TIMESTAMP_TYPE_OFFSET),
        pa.nulls(n, pa.list_(HEADER_TYPE))
        if headers.count(()) == n
        else pa.array([h or None for h in headers], pa.list_(HEADER_TYPE)),
    ]
    return pa.Table.from_arrays(columns, schema=KAFKA_SCHEMA)


__all__ = [
    "HEADER_TYPE",
    "KAFKA_SCHEMA",
    "TIMESTAMP_TYPE",
    "record_bytes",
    "records_to_table",
    "spark_timestamp_type",
]
