"""The Spark bridge on a real broker with local Spark: rows equal Spark's own Kafka source, nothing is
committed when fn fails, and a Parquet sink written by fn holds exactly the produced records after a clean
static restart (no duplicates, no loss) and every one of them after kill -9 (no loss).

One SparkSession for the in-process tests (with Spark's Kafka connector from Maven Central, to compare);
the restart tests run the bridge as pods in child processes, so they can be SIGTERMed and SIGKILLed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from confluent_kafka import Producer

from static_consumer import ConsumerSettings
from static_consumer.spark import (
    BatchInfo,
    BatchLimits,
    Handoff,
    MicroBatchRunner,
    resolve_kafka_connector,
    spark_session,
)
from static_consumer.testing import committed_offsets, describe_group, produce

CHILD = Path(__file__).with_name("spark_child.py")
REPO = CHILD.parent.parent


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    connector = resolve_kafka_connector()
    session = spark_session(
        driver_memory="1g", jars=connector.jars, conf={"spark.sql.shuffle.partitions": "2"}
    )
    try:
        yield session
    finally:
        session.stop()


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
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(3), kafka_group_id_factory()
    produce_varied(bootstrap, topic, 2_000)
    rows: list[Any] = []
    schemas: list[Any] = []

    def collect(df: Any, info: BatchInfo) -> None:
        schemas.append(df.schema)
        rows.extend(df.collect())

    runner = MicroBatchRunner(
        settings(bootstrap, group, topic),
        collect,
        spark=spark,
        handoff=handoff,
        limits=BatchLimits(max_records=700),
    )
    summary = runner.run(idle_timeout_s=4.0)
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
    again = MicroBatchRunner(
        settings(bootstrap, group, topic), lambda df, info: seen.append(df.count()), spark=spark
    )
    again.run(idle_timeout_s=4.0)
    assert sum(seen) == 500  # the same instance, restarted, gets every record again


class SparkPod:
    """The bridge in a child process (integration/spark_child.py), with its JSON-line events."""

    def __init__(self, spec: dict[str, Any], name: str) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._stderr = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".stderr")[1])
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        with open(self._stderr, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(CHILD), json.dumps(spec)], stdout=subprocess.PIPE, stderr=err, env=env
            )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()

    def records(self) -> int:
        with self._cond:
            return sum(e["records"] for e in self.events if e["kind"] == "batch")

    def wait_until(self, condition: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not condition():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    raise AssertionError(
                        f"{self.name}: no {what} within {timeout_s} s (exit {self.proc.poll()}); "
                        f"events {self.events[-5:]}\nstderr:\n{self.stderr_tail()}"
                    )
                self._cond.wait(min(remaining, 0.5))

    def stderr_tail(self, lines: int = 30) -> str:
        return "\n".join(self._stderr.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout_s: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture
def pods() -> Iterator[Callable[[dict[str, Any], str], SparkPod]]:
    started: list[SparkPod] = []

    def start(spec: dict[str, Any], name: str) -> SparkPod:
        pod = SparkPod(spec, name)
        started.append(pod)
        return pod

    yield start
    for pod in started:
        pod.kill()


def pod_spec(bootstrap: str, group: str, topic: str, sink: Path) -> dict[str, Any]:
    return {
        "settings": settings(bootstrap, group, topic).model_dump(mode="json", exclude_defaults=True),
        "sink": str(sink),
        "max_records": 1_000,
        "max_wait_s": 1.0,
    }


def sink_positions(sink: Path) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row in the Parquet sink, with how often it was written."""
    table = ds.dataset(str(sink), format="parquet").to_table(columns=["partition", "offset"])
    return Counter(
        zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    )


def produced_positions(counts: dict[int, int]) -> set[tuple[int, int]]:
    return {(p, o) for p, n in counts.items() for o in range(n)}


def test_clean_static_restart_leaves_exactly_the_produced_records_in_the_sink(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    pods: Callable[[dict[str, Any], str], SparkPod],
    tmp_path: Path,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(3), kafka_group_id_factory()
    sink = tmp_path / "sink"
    spec = pod_spec(bootstrap, group, topic, sink)
    produce(bootstrap, topic, 3_000)

    first = pods(spec, "pod-a")
    first.wait_until(lambda: first.records() >= 1_000, 120, "1,000 records")
    assert first.stop() == 0  # SIGTERM mid-stream: finish the batch, commit, close without LeaveGroup
    assert first.records() < 3_000, "the restart should happen while records are still waiting"
    produce(bootstrap, topic, 1_000, start=3_000)

    second = pods(spec, "pod-b")
    second.wait_until(lambda: first.records() + second.records() >= 4_000, 120, "the remaining records")
    members = describe_group(bootstrap, group).members
    assert [m.group_instance_id for m in members] == ["spark-0"]  # the restarted pod kept its identity
    assert second.stop() == 0

    written = sink_positions(sink)
    assert max(written.values()) == 1, f"duplicates: {[pos for pos, n in written.items() if n > 1][:10]}"
    counts = committed_offsets(bootstrap, group, topic, 3)
    assert sum(counts.values()) == 4_000
    assert set(written) == produced_positions(counts)


def test_after_kill_9_the_restarted_pod_loses_nothing(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    pods: Callable[[dict[str, Any], str], SparkPod],
    tmp_path: Path,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(3), kafka_group_id_factory()
    sink = tmp_path / "sink"
    spec = pod_spec(bootstrap, group, topic, sink)
    produce(bootstrap, topic, 5_000)

    first = pods(spec, "pod-a")
    first.wait_until(lambda: first.records() >= 1_000, 120, "1,000 records")
    first.kill()  # SIGKILL: no commit, no close; the broker still holds the member
    assert first.records() < 5_000, "the kill should land while records are still waiting"

    second = pods(spec, "pod-b")  # same instance id: takes the member over without waiting for the session
    second.wait_until(
        lambda: len(produced_positions(committed_offsets(bootstrap, group, topic, 3))) >= 5_000,
        120,
        "all offsets committed",
    )
    assert second.stop() == 0

    written = sink_positions(sink)
    assert set(written) == produced_positions(committed_offsets(bootstrap, group, topic, 3))
    assert len(written) == 5_000  # every record, some possibly twice (at-least-once after a kill)
