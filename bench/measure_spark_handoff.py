"""The Spark bridge's small costs, measured (the per-batch and start-up numbers in docs/spark.md).

    python bench/measure_spark_handoff.py [--records 100000] [--repeats 5] [--fetch-records 1000000]

In one process, with embedded local Spark from ``spark_session()``:

- the JVM start: the first ``spark_session()`` call of the process;
- one batch of ``--records`` records (100 B values, keys, 6 partitions) handed to Spark and written to
  Spark's ``noop`` sink, ``--repeats`` times each, interleaved, from the batch's Arrow table (what the
  runner builds) to the end of the write: ``handoff="parquet"``; ``handoff="arrow"`` with
  ``spark.sql.execution.arrow.localRelationThreshold=0`` (what ``spark_session()`` sets) and at Spark's
  default; ``createDataFrame`` of the same rows as Python tuples with an explicit schema (from the
  tuples);
- then, on a broker (``KAFKA_BOOTSTRAP_SERVERS`` or the embedded one), a bare ``consume_batch`` loop of
  a StaticConsumer over ``--fetch-records`` records, librdkafka's fetch defaults against the settings of
  docs/spark.md "Client settings for throughput", alternating, 3 passes each (first record to last).

Prints every pass and the median [min-max] of each.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from _bench import produce

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer._base.records import RecordBatch
from static_consumer.spark import records_to_table, spark_session
from static_consumer.spark._handoff import FrameMaker, spark_schema
from static_consumer_lab.brokers import create_topic, local_cluster

THRESHOLD = "spark.sql.execution.arrow.localRelationThreshold"
TUNED_FETCH: dict[str, str | int | float | bool] = {
    "fetch.message.max.bytes": 10 * 1024 * 1024,
    "queued.min.messages": 1_000_000,
}


def synthetic_batch(records: int, partitions: int = 6) -> RecordBatch:
    value = b"x" * 100
    return RecordBatch(
        ["bench"] * records,
        [i % partitions for i in range(records)],
        [i // partitions for i in range(records)],
        [str(i).encode() for i in range(records)],
        [value] * records,
        [1_700_000_000_000 + i for i in range(records)],
        [1] * records,  # librdkafka's CreateTime
    )


def spread(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.3f} s [{min(seconds):.3f}-{max(seconds):.3f}]"


def handoffs(spark: Any, records: int, repeats: int) -> None:
    table = records_to_table(synthetic_batch(records))
    rows = [tuple(row.values()) for row in table.to_pylist()]
    parquet, arrow = FrameMaker(spark, "parquet"), FrameMaker(spark, "arrow")

    def framed(maker: FrameMaker) -> Callable[[], None]:
        def run() -> None:
            df, cleanup = maker(table)
            try:
                df.write.format("noop").mode("overwrite").save()
            finally:
                cleanup()

        return run

    def arrow_at_sparks_default() -> None:
        spark.conf.unset(THRESHOLD)
        try:
            framed(arrow)()
        finally:
            spark.conf.set(THRESHOLD, "0")

    def python_tuples() -> None:
        spark.createDataFrame(rows, schema=spark_schema()).write.format("noop").mode("overwrite").save()

    ways: dict[str, Callable[[], None]] = {
        "handoff=parquet": framed(parquet),
        "handoff=arrow, threshold 0": framed(arrow),
        "handoff=arrow, Spark's default threshold": arrow_at_sparks_default,
        "createDataFrame(Python tuples, schema)": python_tuples,
    }
    print(f"default {THRESHOLD} after unset: {_default_threshold(spark)}")
    for run in ways.values():  # warm-up: the first job of each kind compiles code
        run()
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for repeat in range(repeats):
        order = list(ways) if repeat % 2 == 0 else list(reversed(ways))
        for name in order:
            began = time.perf_counter()
            ways[name]()
            seconds[name].append(time.perf_counter() - began)
        print(f"repeat {repeat + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.3f} s" for n in ways))
    parquet.close()
    print(f"one batch of {records:,} records, DataFrame + noop write, median [min-max] of {repeats}:")
    for name, took in seconds.items():
        print(f"  {name:<42} {spread(took)}")


def _default_threshold(spark: Any) -> str:
    spark.conf.unset(THRESHOLD)
    try:
        return str(spark.conf.get(THRESHOLD))
    finally:
        spark.conf.set(THRESHOLD, "0")


def consume_pass(bootstrap: str, topic: str, count: int, librdkafka: dict[str, Any]) -> float:
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"measure-fetch-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="measure-0",
        session_timeout_ms=10_000,
        librdkafka=librdkafka,
    )
    seen, first, last = 0, 0.0, 0.0
    deadline = time.monotonic() + 300
    with StaticConsumer(settings) as consumer:
        while seen < count and time.monotonic() < deadline:
            batch = consumer.consume_batch(100_000, 1.0)
            if len(batch):
                first = first or time.perf_counter()
                seen += len(batch)
                last = time.perf_counter()
    if seen < count:
        raise SystemExit(f"read {seen} of {count} records within 300 s")
    return last - first


def fetch_tuning(count: int) -> None:
    with local_cluster(os.environ) as cluster:
        topic = create_topic(cluster.bootstrap_servers, f"measure-fetch-{uuid.uuid4().hex[:8]}", 6)
        produced = produce(cluster.bootstrap_servers, topic, count, 100)
        print(
            f"Kafka {cluster.version}; {count:,} records x 100 B, 6 partitions (produced in {produced:.1f} s)"
        )
        seconds: dict[str, list[float]] = {"librdkafka defaults": [], "fetch settings of docs/spark.md": []}
        for repeat in range(3):
            for name in seconds if repeat % 2 == 0 else reversed(list(seconds)):
                conf = {} if name == "librdkafka defaults" else TUNED_FETCH
                seconds[name].append(consume_pass(cluster.bootstrap_servers, topic, count, conf))
            print(f"pass {repeat + 1}: " + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()))
        print(
            f"bare consume_batch(100,000) loop over {count:,} records, first to last, median [min-max] of 3:"
        )
        for name, took in seconds.items():
            print(f"  {name:<32} {spread(took)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fetch-records", type=int, default=1_000_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    began = time.perf_counter()
    spark = spark_session()
    jvm_s = time.perf_counter() - began
    try:
        print(
            f"{os.cpu_count()} cores; Spark {spark.version} local[*], driver memory "
            f"{spark.conf.get('spark.driver.memory')}; first spark_session() (JVM start) {jvm_s:.1f} s"
        )
        handoffs(spark, args.records, args.repeats)
    finally:
        spark.stop()
    if args.fetch_records:
        fetch_tuning(args.fetch_records)


if __name__ == "__main__":
    main()
