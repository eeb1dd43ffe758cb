"""What exactly-once costs per batch in each sink, side by side in one run (the numbers in docs/spark.md).

    python bench/measure_spark_sinks.py [--records 100000] [--batches 8] [--repeats 3] [--writers 3]
        [--parts per-batch,concurrent]

In one process, with embedded local Spark and Delta (``spark_session(delta=True)``), batches of
``--records`` records (100 B values, 6 partitions, offsets continuing batch after batch) are written,
``--batches`` per table and way, the ways interleaved batch by batch so load on the machine hits
all of them alike; each repeat starts new tables:

- ``delta append``: ``df.write.format("delta").mode("append")``, no exactly-once;
- ``delta txnAppId``: the same with ``txnAppId``/``txnVersion`` per pod (the bridge's former scheme:
  exactly-once only while a partition stays with its pod);
- ``delta MERGE``: :func:`~static_consumer.spark.write_delta` (MERGE on topic, partition, offset);
- ``delta MERGE, partitioned``: the same on a table partitioned by ``partition``;
- ``delta MERGE, 50 snapshot tasks``: ``delta MERGE`` with Delta's own
  ``spark.databricks.delta.snapshotPartitions`` (50) instead of ``delta_conf()``'s one task per core;
- ``parquet append``: ``df.write.mode("append").parquet``, no exactly-once;
- ``parquet log``: :func:`~static_consumer.spark.write_parquet` (the commit log).

Prints the median [min-max] seconds per batch of each (the first batch of each table, which creates
it, apart), and the rows of the final tables as a check. Then ``--writers`` threads MERGE batches of
their own partitions into one table at the same time, once unpartitioned and once partitioned by
``partition``: how many MERGEs Delta refused for a concurrent commit (and were retried), and the time,
next to the same MERGEs one writer after the other (``--parts concurrent`` runs only this part).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from static_consumer._base.records import RecordBatch, TopicPartition
from static_consumer.spark import (
    BatchInfo,
    OffsetRange,
    records_to_table,
    spark_session,
    write_delta,
    write_parquet,
)
from static_consumer.spark.delta import SNAPSHOT_PARTITIONS, SNAPSHOT_PARTITIONS_DEFAULT

PARTITIONS = 6


def batch(
    spark: Any, number: int, records: int, partitions: tuple[int, ...] = tuple(range(PARTITIONS))
) -> tuple[Any, BatchInfo]:
    """Batch ``number`` of a stream: ``records`` records spread over ``partitions``, offsets following
    the previous batch's."""
    per = records // len(partitions)
    parts = [p for p in partitions for _ in range(per)]
    offsets = [number * per + i for _ in partitions for i in range(per)]
    n = len(parts)
    rb = RecordBatch(
        ["bench"] * n, parts, offsets, [None] * n, [b"x" * 100] * n, [1_700_000_000_000] * n, [1] * n
    )
    ranges = {
        TopicPartition("bench", p): OffsetRange(number * per, number * per + per - 1) for p in partitions
    }
    df = spark.createDataFrame(records_to_table(rb)).selectExpr(
        "topic", "partition", "offset", "timestamp", "CAST(value AS STRING) AS body"
    )
    return df, BatchInfo(number, n, n * 100, ranges, "bench-0", 0.0)


# Each way's table, a folder of the repeat's root.
FOLDERS = {
    "delta append": "delta-append",
    "delta txnAppId": "delta-txn",
    "delta MERGE": "delta-merge",
    "delta MERGE, partitioned": "delta-merge-part",
    "delta MERGE, 50 snapshot tasks": "delta-merge-50",
    "parquet append": "parquet-append",
    "parquet log": "parquet-log",
}


def ways(root: Path, spark: Any) -> dict[str, Callable[[Any, BatchInfo], object]]:
    def at(name: str) -> str:
        return str(root / FOLDERS[name])

    def merge_deltas_own(df: Any, info: BatchInfo) -> None:
        """write_delta with Delta's own 50 tasks for a table's state (delta_conf() sets one per core)."""
        ours = spark.conf.get(SNAPSHOT_PARTITIONS)
        spark.conf.set(SNAPSHOT_PARTITIONS, str(SNAPSHOT_PARTITIONS_DEFAULT))
        try:
            write_delta(df, info, at("delta MERGE, 50 snapshot tasks"))
        finally:
            spark.conf.set(SNAPSHOT_PARTITIONS, ours)

    def delta_append(df: Any, info: BatchInfo) -> None:
        df.write.format("delta").mode("append").save(at("delta append"))

    def delta_txn(df: Any, info: BatchInfo) -> None:
        (
            df.write.format("delta")
            .mode("append")
            .option("txnAppId", "bench-0")
            .option("txnVersion", str(info.batch_id + 1))
            .save(at("delta txnAppId"))
        )

    return {
        "delta append": delta_append,
        "delta txnAppId": delta_txn,
        "delta MERGE": lambda df, info: write_delta(df, info, at("delta MERGE")),
        "delta MERGE, partitioned": lambda df, info: write_delta(
            df, info, at("delta MERGE, partitioned"), partition_by=["partition"]
        ),
        "delta MERGE, 50 snapshot tasks": merge_deltas_own,
        "parquet append": lambda df, info: df.write.mode("append").parquet(at("parquet append")),
        "parquet log": lambda df, info: write_parquet(df, info, at("parquet log")),
    }


def per_batch(spark: Any, args: Any) -> None:
    seconds: dict[str, list[float]] = {}
    created: dict[str, list[float]] = {}
    for repeat in range(args.repeats):
        root = Path(tempfile.mkdtemp(prefix="measure-sinks-"))
        table = ways(root, spark)
        for number in range(args.batches):
            order = list(table) if number % 2 == 0 else list(reversed(table))
            for name in order:
                df, info = batch(spark, number, args.records)
                began = time.perf_counter()
                table[name](df, info)
                spent = time.perf_counter() - began
                (created if number == 0 else seconds).setdefault(name, []).append(spent)
        rows = {name: _rows(spark, root, name) for name in table}
        print(f"repeat {repeat + 1}: rows per table {rows}")
    runs = f"{args.repeats} x {args.batches - 1}"
    print(f"seconds per batch of {args.records:,} records, median [min-max] of {runs}:")
    base = statistics.median(seconds["delta append"])
    for name, took in seconds.items():
        first = statistics.median(created[name])
        print(
            f"  {name:<31} {statistics.median(took):.3f} [{min(took):.3f}-{max(took):.3f}]"
            f"  x{statistics.median(took) / base:.2f} of delta append;  first (creates the table) {first:.3f}"
        )


def _rows(spark: Any, root: Path, name: str) -> int:
    kind = "delta" if name.startswith("delta") else "parquet"
    return int(spark.read.format(kind).load(str(root / FOLDERS[name])).count())


def concurrent(spark: Any, args: Any) -> None:
    merges = args.writers * args.batches
    for partitioned in (False, True):
        for at_once in (True, False):
            retries, took, rows = _concurrent_round(
                spark, args, ["partition"] if partitioned else [], at_once=at_once
            )
            size = args.records // args.writers
            print(
                f"{args.writers} writers x {args.batches} MERGEs of {size:,} records, "
                f"{'partitioned by partition' if partitioned else 'unpartitioned'}, "
                f"{'at the same time' if at_once else 'one writer after the other'}: {retries} retried for "
                f"a concurrent commit ({retries / merges:.2f} per MERGE), {took:.1f} s "
                f"({took / merges:.2f} s per MERGE), rows {rows:,}"
            )


def _concurrent_round(
    spark: Any, args: Any, partition_by: list[str], *, at_once: bool
) -> tuple[int, float, int]:
    """Writers MERGE batches of their own partitions into one new table, at once (threads) or one after
    the other: retries, seconds, rows."""
    per_writer = PARTITIONS // args.writers
    path = str(Path(tempfile.mkdtemp(prefix="measure-sinks-conc-")) / "t")
    df, info = batch(spark, 0, 600)
    write_delta(df, info, path, partition_by=partition_by)  # created up front
    retries: list[float] = []
    lock = threading.Lock()

    def noted(wait: float) -> None:
        with lock:
            retries.append(wait)
        time.sleep(wait)

    def writer(w: int) -> None:
        mine = tuple(range(w * per_writer, (w + 1) * per_writer))
        for number in range(1, args.batches + 1):
            df, info = batch(spark, number, args.records // args.writers, mine)
            write_delta(df, info, path, partition_by=partition_by, sleep=noted)

    began = time.perf_counter()
    if at_once:
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for w in range(args.writers):
            writer(w)
    took = time.perf_counter() - began
    return len(retries), took, int(spark.read.format("delta").load(path).count())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--parts", default="per-batch,concurrent", help="which parts to run, in order")
    args = parser.parse_args()
    parts = args.parts.split(",")
    unknown = sorted(set(parts) - {"per-batch", "concurrent"})
    if unknown:
        parser.error(f"--parts: unknown {unknown}; per-batch, concurrent")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    spark = spark_session(delta=True, conf={"spark.sql.shuffle.partitions": "2"})
    try:
        print(f"Spark {spark.version} local[*], driver memory {spark.conf.get('spark.driver.memory')}")
        if "per-batch" in parts:
            per_batch(spark, args)
        if "concurrent" in parts:
            concurrent(spark, args)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
