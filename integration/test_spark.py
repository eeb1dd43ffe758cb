"""The Spark bridge on a real broker with a driver in this process, once with local Spark and once on a
standalone master with one worker (started from PySpark's own scripts, session fixture): rows equal
Spark's own Kafka source for both handoffs, Parquet files on the cluster only with a shared directory,
and nothing is committed when fn fails. A local-Spark pod whose session stops mid-batch exits 75 with
SparkSessionStoppedError; a pod whose fn blocks past max.poll + session rides out the refused commit
(both protocols).

One SparkSession per backend (with Spark's Kafka connector from Maven Central, to compare). Restarts,
kills and exactly-once sinks are in test_spark_exactly_once.py (bridge pods on a Spark Connect server).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _side_by_side import side_by_side
from confluent_kafka import Producer

from static_consumer import ConsumerSettings
from static_consumer._base.errors import ConfigurationError
from static_consumer.spark import (
    BatchInfo,
    BatchLimits,
    Handoff,
    MicroBatchRunner,
    resolve_kafka_connector,
    spark_session,
)
from static_consumer_lab.brokers import committed_offsets, produce
from static_consumer_lab.brokers.kafka_ops import high_watermarks
from static_consumer_lab.children.group import shorten_consumer_session
from static_consumer_lab.children.pauses import owned_at, taken_over, timeline
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import CLASSIC_DEFAULTS, for_protocol, static_spec
from static_consumer_lab.producer import SteadyProducer

pytestmark = pytest.mark.lab_broker(
    "Spark bridge pods join without the 3 s initial rebalance delay; nothing here depends on the session"
)


BLOCK_S = 16.0  # a blocked handler: past max_poll_interval_ms (7 s) + session (6 s)


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


def pod_spec(pod_settings: ConsumerSettings, **extra: Any) -> dict[str, Any]:
    """A local-Spark bridge pod in a child process (``static_consumer_lab.children.child``'s spark mode)."""
    fields = pod_settings.model_dump(mode="json", exclude_defaults=True)
    return {"mode": "spark", "master": "local[1]", "settings": fields, "max_records": 300, **extra}


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
    spec = pod_spec(
        settings(bootstrap, group, topic), sink="append", path=str(tmp_path / "sink"), stop_session_at=1
    )
    pod = kafka_consumer_process_factory(spec, name="local-pod")
    assert pod.wait(240) == 75, pod.stderr_tail()
    [error] = pod.events("error")
    assert error["kind_of"] == "SparkSessionStoppedError", error
    assert "Spark session stopped during batch 1" in error["reason"]
    written = sum(e["records"] for e in pod.events("batch"))
    assert committed_offsets(bootstrap, group, topic, 1) == {0: written}  # batch 1 was not committed


def test_a_pod_whose_fn_blocks_past_its_session_rides_out_the_refused_commit(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
    tmp_path: Path,
) -> None:
    """A blocked handler through the Spark runner: fn blocks 16 s, past max_poll_interval_ms (7 s) + session
    (6 s: the classic members' own, the KIP-848 group's config on the lab broker); the other member
    takes the partitions and the batch's commit is refused. The pod does not exit: a CommitRefused
    event, it rejoins and processes batches again, none of them of a partition the other member owned
    then; nothing committed or lost. A classic and a KIP-848 group side by side."""

    def blocked(protocol: str) -> None:
        (tmp_path / protocol).mkdir()
        _blocked_pod(
            protocol,
            kafka_bootstrap_servers,
            kafka_topic_factory(4),
            kafka_group_id_factory(),
            kafka_consumer_process_factory,
            tmp_path / protocol,
        )

    side_by_side(blocked)


def _blocked_pod(
    protocol: str,
    bootstrap: str,
    topic: str,
    group: str,
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
    tmp_path: Path,
) -> None:
    fields: dict[str, Any] = {"protocol": protocol, "session_timeout_ms": 6000, "max_poll_interval_ms": 7000}
    if protocol == "consumer":
        shorten_consumer_session(bootstrap, group, 6000)  # and 500 ms heartbeats
    other = kafka_consumer_process_factory(
        {**static_spec(bootstrap, group, [topic], "app-0", **fields), "batch": 100}, name="app-0"
    )
    other.wait_for_kind("assigned", timeout_s=60)
    trigger = tmp_path / "block"
    base = settings(bootstrap, group, topic, "app-1").model_dump(exclude_defaults=True)
    pod_fields = ConsumerSettings(**for_protocol(protocol, CLASSIC_DEFAULTS, {**base, **fields}))
    spec = pod_spec(pod_fields, sink="noop", max_records=200, block=str(trigger), max_runtime_s=400)
    with SteadyProducer(bootstrap, topic, 100) as producer:
        pod = kafka_consumer_process_factory(spec, name=f"spark-1-{protocol}")
        pod.wait_for(lambda e: e["kind"] == "batch" and e["records"] > 0, 240, "a first batch")
        wait_until(lambda: other.assignment() and pod.assignment(), 60, "both members assigned")
        owned = pod.assignment()
        trigger.write_text(f"{BLOCK_S} 60")  # at least BLOCK_S, and on until the takeover (released below)
        blocking = pod.wait_for_kind("blocking", timeout_s=60)
        # Taken over since the pod got them, not since the block began: under load the pod's first batch
        # can come later than max_poll_interval_ms after its assignment, so the pod may be out of the group
        # and its partitions with the other member before the block (seen: assigned 0.5 s before it).
        got = max(e["ts"] for e in pod.events("assigned") if owned & {(t, p) for t, p in e["partitions"]})
        wait_until(
            lambda: taken_over(other, owned, got),
            60,
            lambda: (
                f"the other member taking over {sorted(owned)}; what both saw:\n"
                + timeline([other, pod], min(got, blocking["ts"] - 5.0), time.time())
            ),
        )
        (tmp_path / "block.release").touch()
        unblocked = pod.wait_for_kind("unblocked", timeout_s=90)
        refused = pod.wait_for(lambda e: e["kind"] == "commit_refused" and e["ts"] >= unblocked["ts"], 30, "")
        back = pod.wait_for(
            lambda e: e["kind"] == "assigned" and e["ts"] > unblocked["ts"] and bool(e["partitions"]),
            90,
            "rejoin",
        )
        pod.wait_for(
            lambda e: e["kind"] == "batch" and e["ts"] > back["ts"] and e["records"] > 0, 60, "batches"
        )
        acked = producer.stop()
    print(
        f"spark pod ({protocol}): blocked {unblocked['ts'] - blocking['ts']:.1f} s; commit refused "
        f"({refused['error']}); "
        f"assigned again {back['ts'] - unblocked['ts']:.1f} s after fn returned"
    )
    assert pod.returncode is None, pod.stderr_tail()
    stale = [
        (e["batch_id"], key)
        for e in pod.events("batch")
        if e["ts"] > unblocked["ts"]
        for key in e["offsets"]
        if (key.rsplit(":", 1)[0], int(key.rsplit(":", 1)[1])) in owned_at(other, e["ts"])
    ]
    assert stale == [], f"batches of partitions the other member owned: {stale}"
    marks = high_watermarks(bootstrap, topic, 4)
    wait_until(lambda: committed_offsets(bootstrap, group, topic, 4) == marks, 90, "all committed")
    # Nothing lost: every acknowledged record was processed and committed by one of the two.
    assert sum(marks.values()) == acked
    assert pod.stop(timeout_s=60) == 0 and other.stop() == 0
