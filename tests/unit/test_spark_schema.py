"""The Arrow form of Kafka records matches Spark's Kafka source, without starting Spark."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from static_consumer._base.records import Record, RecordBatch
from static_consumer.spark import KAFKA_SCHEMA, records_to_table
from static_consumer.spark._schema import batches_to_table, record_bytes, spark_timestamp_type

# The schema of spark.read.format("kafka").option("includeHeaders", "true"), as printed by Spark 4.
SPARK_KAFKA_SOURCE = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)


def test_the_arrow_schema_becomes_the_spark_kafka_source_schema() -> None:
    assert from_arrow_schema(KAFKA_SCHEMA) == SPARK_KAFKA_SOURCE


def test_records_become_rows_in_order_with_every_field() -> None:
    records = [
        Record("orders", 2, 41, b"k", b"v1", 1_700_000_000_123, 1, (("trace", b"abc"), ("empty", None))),
        Record("orders", 0, 7, None, None, None, 0),
        Record("audit", 1, 3, b"", b"v3", 1_700_000_000_000, 2),
    ]
    rows = records_to_table(records).to_pylist()
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [
        ("orders", 2, 41),
        ("orders", 0, 7),
        ("audit", 1, 3),
    ]
    first, second, third = rows
    assert (first["key"], first["value"]) == (b"k", b"v1")
    assert first["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123_000, tzinfo=dt.UTC)
    assert first["timestampType"] == 0  # CreateTime, as Kafka numbers it
    assert first["headers"] == [{"key": "trace", "value": b"abc"}, {"key": "empty", "value": None}]
    # No key, value or timestamp: nulls, and timestampType -1 as Spark shows NO_TIMESTAMP_TYPE.
    assert (second["key"], second["value"], second["timestamp"], second["timestampType"]) == (
        None,
        None,
        None,
        -1,
    )
    assert second["headers"] is None  # Spark's Kafka source gives null, not [], without headers
    assert third["key"] == b"" and third["timestampType"] == 1  # LogAppendTime


def test_timestamps_are_utc_microseconds_like_spark_timestamps() -> None:
    table = records_to_table([Record("t", 0, 0, None, b"v", 1_700_000_000_123, 1)])
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [1_700_000_000_123_000]


def test_an_empty_batch_is_an_empty_table_with_the_schema() -> None:
    table = records_to_table([])
    assert table.num_rows == 0 and table.schema == KAFKA_SCHEMA


@pytest.mark.parametrize(("librdkafka", "spark"), [(0, -1), (1, 0), (2, 1)])
def test_timestamp_types_map_to_kafkas_ids(librdkafka: int, spark: int) -> None:
    assert spark_timestamp_type(librdkafka) == spark


def test_record_bytes_counts_key_value_and_headers() -> None:
    assert (
        record_bytes(Record("t", 0, 0, b"ab", b"cde", None, 0, (("h", b"xy"), ("n", None)))) == 2 + 3 + 3 + 1
    )


def test_a_table_of_several_batches_equals_the_table_of_all_their_records() -> None:
    first = [Record("t", 0, i, b"k", b"v%d" % i, 1_700_000_000_000 + i, 1) for i in range(3)]
    second = [
        Record("t", 1, 7, None, b"w", 1_700_000_000_100, 2, (("trace", b"x"),)),
        Record("t", 1, 8, b"k", None, 1_700_000_000_101, 1),
    ]
    table = batches_to_table([RecordBatch.from_records(first), RecordBatch.from_records(second)])
    assert table.equals(records_to_table(first + second))
    assert table.column("headers").to_pylist() == [None, None, None, [{"key": "trace", "value": b"x"}], None]
