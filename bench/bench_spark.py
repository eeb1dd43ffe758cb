"""Benchmark the Spark bridge against Spark's own Kafka source, on the same topic, in one run.

    python bench/bench_spark.py [--records 1000000] [--partitions 6] [--value-bytes 100]
                                [--batch-records 100000] [--repeats 3]
    python bench/bench_spark.py --pods 1,2,3 [--server-master local[2]] [...]

Produces the records once, then reads them all with both, into Spark's ``noop`` sink (which forces
every row and column to be materialised and writes nothing):

- bridge: MicroBatchRunner (StaticConsumer -> pyarrow -> DataFrame -> fn -> commit), timed from the
  start of the run (group join included) until the last batch was written, once per handoff: "parquet"
  (the default for local Spark: a short-lived Parquet file) and "arrow" (``spark.createDataFrame``);
- native: ``spark.read.format("kafka")`` batch read (spark-sql-kafka-0-10 from Maven Central).

Both run in the same SparkSession after a warm-up of each, best of ``--repeats`` (each bridge repeat
uses a new consumer group, so it reads everything again). Both clients fetch up to 10 MiB per
partition. Prints rows/s of each (best and median repeat) and bridge/native (whether it is >= 0.5). The
broker is ``KAFKA_BOOTSTRAP_SERVERS`` if set, else one the test harness starts (see docs/testing.md).

``--pods 1,2,3`` measures scale-out instead: 1, 2 and 3 bridge pods (static members with their own
partitions) feeding one Spark Connect server, next to the native source on that server (see
bench/_spark_pods.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
import uuid
from typing import Any

from confluent_kafka import Producer

from static_consumer import ConsumerSettings
from static_consumer.spark import (
    BatchInfo,
    BatchLimits,
    MicroBatchRunner,
    resolve_kafka_connector,
    spark_session,
)
from static_consumer.spark._handoff import Handoff
from static_consumer_lab.brokers import create_topic, local_cluster

# Fetch sizes for both readers: 10 MiB per partition (the clients' default is 1 MiB), and librdkafka
# prefetching up to a batch ahead per partition, so neither waits on round trips to the broker.
FETCH_BYTES = 10 * 1024 * 1024
# How the bridge hands batches to Spark: "parquet" is what "auto" picks for a local session, "arrow" is
# spark.createDataFrame(table) (the only way to a Spark Connect server).
HANDOFFS: tuple[Handoff, ...] = ("parquet", "arrow")
BRIDGE_FETCH: dict[str, str | int | float | bool] = {
    "fetch.message.max.bytes": FETCH_BYTES,
    "queued.min.messages": 1_000_000,
}


def produce_records(bootstrap: str, topic: str, count: int, value_bytes: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    value = b"x" * value_bytes
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise SystemExit("producer could not deliver every record within 120 s")
    return time.perf_counter() - started


def native_read(spark: Any, bootstrap: str, topic: str) -> tuple[int, float]:
    started = time.perf_counter()
    df = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.max.partition.fetch.bytes", str(FETCH_BYTES))
        .load()
    )
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    return df.count(), seconds  # counted after the clock stopped: the count is a check, not the work


def bridge_read(
    spark: Any,
    bootstrap: str,
    topic: str,
    batch_records: int,
    max_batches: int | None = None,
    handoff: Handoff = "auto",
) -> tuple[int, float, float]:
    """Records, seconds until the last batch was written, and seconds spent collecting batches."""
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"bench-spark-{uuid.uuid4().hex[:8]}",
        topics=(topic,),
        instance_id="bench-0",
        session_timeout_ms=10_000,
        max_poll_interval_ms=300_000,
        librdkafka=BRIDGE_FETCH,
    )
    done = {"records": 0, "collect_s": 0.0, "last": 0.0}

    def write(df: Any, info: BatchInfo) -> None:
        df.write.format("noop").mode("overwrite").save()
        done["records"] += info.records
        done["collect_s"] += info.collect_s
        done["last"] = time.perf_counter()

    limits = BatchLimits(max_records=batch_records, max_wait_s=2.0)
    runner = MicroBatchRunner(settings, write, spark=spark, limits=limits, handoff=handoff)
    started = time.perf_counter()
    runner.run(idle_timeout_s=3.0, max_batches=max_batches)
    return int(done["records"]), done["last"] - started, done["collect_s"]


def warm_up(spark: Any, bootstrap: str, topic: str, batch_records: int) -> None:
    """Run both readers on part of the topic first, so neither timed repeat starts on a cold JVM."""
    for handoff in HANDOFFS:
        bridge_read(spark, bootstrap, topic, batch_records, max_batches=3, handoff=handoff)
    (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .limit(3 * batch_records)
        .write.format("noop")
        .mode("overwrite")
        .save()
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--driver-memory", default=None, help="default: half the memory, 1-8 GiB")
    parser.add_argument("--pods", default=None, help="scale-out: pod counts to measure, e.g. 1,2,3")
    parser.add_argument("--server-master", default="local[2]", help="--pods: the Connect server's master")
    parser.add_argument(
        "--pod-handoffs",
        default="arrow,parquet",
        help="--pods: handoffs to measure (parquet: files in a directory the server reads, handoff_dir)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    connector = resolve_kafka_connector()
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = create_topic(bootstrap, f"bench-spark-{uuid.uuid4().hex[:8]}", args.partitions)
        produced_s = produce_records(bootstrap, topic, args.records, args.value_bytes)
        print(
            f"{os.cpu_count()} cores; Kafka {cluster.version}; topic: {args.records:,} records x "
            f"{args.value_bytes} B in {args.partitions} partitions (produced in {produced_s:.1f} s)"
        )
        if args.pods:
            from _spark_pods import run as run_pods

            run_pods(args, bootstrap, topic, list(connector.jars))
            return
        spark = spark_session(driver_memory=args.driver_memory, jars=connector.jars)
        try:
            print(
                f"Spark {spark.version} local[*] on {os.cpu_count()} cores, driver memory "
                f"{spark.conf.get('spark.driver.memory')}; spark-sql-kafka-0-10 {connector.version}"
                f"{'' if connector.exact else ' (nearest on Maven Central)'}; Kafka {cluster.version}"
            )
            print(
                f"topic: {args.records:,} records x {args.value_bytes} B in {args.partitions} partitions "
                f"(produced in {produced_s:.1f} s); bridge batches of {args.batch_records:,}"
            )
            warm_up(spark, bootstrap, topic, args.batch_records)
            seconds: dict[str, list[float]] = {"native": [], **{f"bridge ({h})": [] for h in HANDOFFS}}
            for repeat in range(1, args.repeats + 1):
                rows, took = native_read(spark, bootstrap, topic)
                assert rows == args.records, f"native read {rows} rows, expected {args.records}"
                seconds["native"].append(took)
                line = [f"native {took:.2f} s"]
                for handoff in HANDOFFS:
                    rows, took, collect_s = bridge_read(
                        spark, bootstrap, topic, args.batch_records, handoff=handoff
                    )
                    assert rows == args.records, f"bridge read {rows} rows, expected {args.records}"
                    seconds[f"bridge ({handoff})"].append(took)
                    line.append(f"bridge/{handoff} {took:.2f} s (collecting {collect_s:.2f} s)")
                print(f"repeat {repeat}: " + ", ".join(line))
        finally:
            spark.stop()
    print(f"{'reader':<18} {'best rows/s':>12} {'median rows/s':>14} {'/native best':>13} {'median':>7}")
    native = args.records / min(seconds["native"]), args.records / statistics.median(seconds["native"])
    ratios = []
    for name, took_s in seconds.items():
        best, median = args.records / min(took_s), args.records / statistics.median(took_s)
        ratio = (best / native[0], median / native[1])
        ratios.append(ratio)
        print(f"{name:<18} {best:>12,.0f} {median:>14,.0f} {ratio[0]:>13.2f} {ratio[1]:>7.2f}")
    worst = min(min(r) for r in ratios[1:])
    verdict = "yes" if worst >= 0.5 else "no"
    print(f"bridge/native, lowest of the above: {worst:.2f} (>= 0.5: {verdict})")


if __name__ == "__main__":
    main()
