"""The Spark bridge on a real broker with a driver in this process, once with local Spark and once on a
standalone master with one worker (started from PySpark's own scripts, session fixture): rows equal
Spark's own Kafka source for both handoffs, Parquet files on the cluster only with a shared directory,
and nothing is committed when fn fails. A local-Spark pod whose session stops mid-batch exits 75 with
SparkSessionStoppedError.

One SparkSession per backend (with Spark's Kafka connector from Maven Central, to compare). Restarts,
kills and exactly-once sinks are in test_spark_exactly_once.py (bridge pods on a Spark Connect server).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from static_consumer import ConsumerSettings
from static_consumer.errors import ConfigurationError
from static_consumer.spark import (
    BatchInfo,
    BatchLimits,
    Handoff,
    MicroBatchRunner,
    resolve_kafka_connector,
    spark_session,
)
from static_consumer_lab import ConsumerProcess, committed_offsets, produce

pytestmark = pytest.mark.lab_broker(
    "Spark bridge pods join without the 3 s initial rebalance delay; nothing here depends on the session"
)


@pytest.fixture(scope="module", params=["local", "standalone"])
def spark(request: pytest.FixtureRequest) -> Iterator[Any]:
    connector = resolve_kafka_connector()
    conf = {"spark.sql.shuffle.partitions": "2"}
    if request.param == "local":
        session = spark_session(driver_memory="1g", jars=connector.jars, conf=conf)
    else:
        cluster = request.getfixturevalue("spark_standalone_cluster")
        conf |= {"spark.executor.memory": "512m", "spark.cores.max": "1"}
        # The executor runs in the worker's JVM and connects back to this driver: at the address set
        # here, not at 127.0.0.1 by default as a local session would.
        session = spark_session(
            master=cluster.master_url,
            driver_host="127.0.0.1",
            driver_memory="1g",
            jars=connector.jars,
            conf=conf,
        )
    try:
        yield session
    finally:
        session.stop()


def on_cluster(spark: Any) -> bool:
    return not str(spark.sparkContext.master).startswith("local")


def settings(bootstrap: str, group: str, topic: str, instance_id: str = "spark-0") -> ConsumerSettings:
    return ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=group,
        topics=(topic,),
        instance_id=instance_id,
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
        max_poll_interval_ms=30_000,
        connect_timeout_s=10.0,
        shutdown_timeout_s=10.0,
    )


def produce_varied(bootstrap: str, topic: str, count: int) -> None:
    """Records with and without keys, values and headers, so every column is exercised."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        headers: list[tuple[str, str | bytes | None]] | None = None
        if i % 3 == 0:
            headers = [("seq", str(i).encode()), ("none", None)]
        producer.produce(
            topic,
            key=None if i % 5 == 0 else f"k{i}".encode(),
            value=None if i % 7 == 0 else f"value-{i}".encode(),
            headers=headers,
        )
        producer.poll(0)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("handoff", ["arrow", "parquet"])
def test_bridge_rows_equal_sparks_own_kafka_source(
    handoff: Handoff,
    spark: Any,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    tmp_path: Path,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(3), kafka_group_id_factory()
    # Executors on other hosts cannot read this process's temporary files: on a cluster the Parquet
    # handoff needs a directory every executor reads (here the same disk, as a shared volume would be).
    shared = str(tmp_path / "handoff") if handoff == "parquet" and on_cluster(spark) else None
    if shared is not None:
        with pytest.raises(ConfigurationError, match="handoff_dir="):
            MicroBatchRunner(settings(bootstrap, group, topic), print, spark=spark, handoff=handoff)
    produce_varied(bootstrap, topic, 2_000)
    rows: list[Any] = []
    schemas: list[Any] = []

    def collect(df: Any, info: BatchInfo) -> None:
        schemas.append(df.schema)
        rows.extend(df.collect())
        if len(rows) >= 2_000:
            runner.stop()  # everything is there; the idle timeout below only bounds a failing run

    runner = MicroBatchRunner(
        settings(bootstrap, group, topic),
        collect,
        spark=spark,
        handoff=handoff,
        handoff_dir=shared,
        limits=BatchLimits(max_records=700),
    )
    summary = runner.run(idle_timeout_s=60.0)
    assert summary.records == 2_000 and summary.batches >= 3

    native = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert all(schema == native.schema for schema in schemas)

    def key(row: Any) -> tuple[int, int]:
        return (row["partition"], row["offset"])

    assert sorted(rows, key=key) == sorted(native.collect(), key=key)
    assert committed_offsets(bootstrap, group, topic, 3) == {
        p: n for p, n in Counter(r["partition"] for r in rows).items()
    }


def test_nothing_is_committed_when_fn_fails(
    spark: Any,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(2), kafka_group_id_factory()
    produce(bootstrap, topic, 500)

    def broken(df: Any, info: BatchInfo) -> None:
        df.count()
        raise OSError("sink unavailable")

    with pytest.raises(OSError, match="sink unavailable"):
        MicroBatchRunner(settings(bootstrap, group, topic), broken, spark=spark).run(idle_timeout_s=30.0)
    assert committed_offsets(bootstrap, group, topic, 2) == {}

    seen: list[int] = []

    def count(df: Any, info: BatchInfo) -> None:
        seen.append(df.count())
        if sum(seen) >= 500:
            again.stop()

    again = MicroBatchRunner(settings(bootstrap, group, topic), count, spark=spark)
    again.run(idle_timeout_s=60.0)
    assert sum(seen) == 500  # the same instance, restarted, gets every record again


def test_a_local_pod_whose_session_stops_mid_batch_exits_75_with_a_typed_error(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
    tmp_path: Path,
) -> None:
    # What a user of local Spark saw before: "[INTERNAL_ERROR] ... you hit a bug in Spark".
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(1), kafka_group_id_factory()
    produce(bootstrap, topic, 1_000)
    spec = {
        "mode": "spark",
        "master": "local[1]",
        "settings": settings(bootstrap, group, topic).model_dump(mode="json", exclude_defaults=True),
        "sink": "append",
        "path": str(tmp_path / "sink"),
        "max_records": 300,
        "stop_session_at": 1,
    }
    pod = kafka_consumer_process_factory(spec, name="local-pod")
    assert pod.wait(240) == 75, pod.stderr_tail()
    [error] = pod.events("error")
    assert error["kind_of"] == "SparkSessionStoppedError", error
    assert "Spark session stopped during batch 1" in error["reason"]
    written = sum(e["records"] for e in pod.events("batch"))
    assert committed_offsets(bootstrap, group, topic, 1) == {0: written}  # batch 1 was not committed
