"""Bridge pods (child processes, static members) on one Spark and a real broker.

On a Spark Connect server: the rows the bridge hands over, by either handoff, equal Spark's own Kafka
source on the same server; a clean SIGTERM restart leaves exactly the produced records in a plain Parquet
sink; with a checkpoint the exactly-once sinks (Parquet with its commit log, Delta MERGE), written in the
same pass, hold every record once after a ``kill -9`` in the window where a batch is written but neither
checkpointed nor committed, and the replayed batch carries the key it had; a stop() during a stuck batch
returns within shutdown_timeout_s; a pod whose session dies exits 75 with SparkSessionStoppedError; batch
progress reaches the JSONL event log. On a standalone master (each pod a driver of its own application):
the Parquet sink holds every record once after a kill -9 mid-batch.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from test_spark import produce_varied, settings

from static_consumer.spark import KAFKA_SCHEMA
from static_consumer.telemetry import read_event_log
from static_consumer_lab.brokers import committed_offsets, describe_consumer_group, produce
from static_consumer_lab.children.processes import ConsumerProcess, wait_until

pytestmark = pytest.mark.lab_broker(
    "Spark bridge pods join without the 3 s initial rebalance delay and a killed pod's session (10 s) "
    "expires soon; exactly-once does not depend on how long that takes"
)

Pods = Callable[..., ConsumerProcess]
PARTITIONS = 3
STOP_BUDGET_S = 3.0


@dataclass
class Stream:
    """A topic with records, a group, and bridge pods reading it on one Spark (``session``: the Spark
    Connect server's ``remote``, or a standalone ``master`` each pod drives an application on)."""

    session: dict[str, Any]
    bootstrap: str
    topic: str
    group: str
    start: Pods
    tmp: Path

    def spec(self, **extra: Any) -> dict[str, Any]:
        return pod_spec(self.session, self.bootstrap, self.group, self.topic, **extra)

    def committed(self) -> set[tuple[int, int]]:
        return produced(committed_offsets(self.bootstrap, self.group, self.topic, PARTITIONS))

    def wait_committed(self, count: int, timeout_s: float = 300) -> None:
        wait_until(lambda: len(self.committed()) >= count, timeout_s, f"{count} offsets committed")


def _stream(session: dict[str, Any], request: pytest.FixtureRequest, tmp_path: Path) -> Stream:
    return Stream(
        session,
        request.getfixturevalue("kafka_bootstrap_servers"),
        request.getfixturevalue("kafka_topic_factory")(PARTITIONS),
        request.getfixturevalue("kafka_group_id_factory")(),
        request.getfixturevalue("kafka_consumer_process_factory"),
        tmp_path,
    )


@pytest.fixture
def stream(spark_connect_server: Any, request: pytest.FixtureRequest, tmp_path: Path) -> Stream:
    """Pods on the Spark Connect server."""
    return _stream({"remote": spark_connect_server.url}, request, tmp_path)


@pytest.fixture
def standalone_stream(
    spark_standalone_cluster: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> Stream:
    """Pods each driving an application on the standalone master (its worker has one core and 1 GiB)."""
    session = {
        "master": spark_standalone_cluster.master_url,
        "driver_host": "127.0.0.1",
        "conf": {"spark.executor.memory": "512m", "spark.cores.max": "1"},
    }
    return _stream(session, request, tmp_path)


def pod_spec(session: dict[str, Any], bootstrap: str, group: str, topic: str, **extra: Any) -> dict[str, Any]:
    # A first Delta write (creating the table) took 40 s on a loaded 2-core machine (one run): well within
    # the poll interval here, so that a slow machine does not turn into a member leaving the group.
    consumer = settings(bootstrap, group, topic).model_copy(update={"max_poll_interval_ms": 180_000})
    return {
        "mode": "spark",
        **session,
        "settings": consumer.model_dump(mode="json", exclude_defaults=True),
        "max_records": 400,
        "max_wait_s": 0.5,
        "max_runtime_s": 240,
        **extra,
    }


def batch_records(pod: ConsumerProcess) -> int:
    return sum(e["records"] for e in pod.events("batch"))


def produced(counts: dict[int, int]) -> set[tuple[int, int]]:
    return {(p, o) for p, n in counts.items() for o in range(n)}


def parquet_positions(path: Path) -> Counter[tuple[int, int]]:
    """(partition, offset) of every row of a Parquet directory, with how often it is there."""
    table = ds.dataset(str(path), format="parquet").to_table(columns=["partition", "offset"])
    return Counter(
        zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
    )


def delta_positions(path: Path) -> Counter[tuple[int, int]]:
    """The same for a Delta table, from the data files its log adds (the sinks only add files); a
    table partitioned by ``partition`` has it in the log, not in the files."""
    files: dict[str, dict[str, str]] = {}
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                files[action["add"]["path"]] = action["add"].get("partitionValues") or {}
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    found: Counter[tuple[int, int]] = Counter()
    for name, values in files.items():
        if "partition" in values:
            offsets = pq.read_table(path / unquote(name), columns=["offset"]).column("offset").to_pylist()
            found.update((int(values["partition"]), offset) for offset in offsets)
            continue
        table = pq.read_table(path / unquote(name), columns=["partition", "offset"])
        found.update(
            zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True)
        )
    return found


def kill_while_holding(pod: ConsumerProcess, timeout_s: float = 180) -> dict[str, Any]:
    """kill -9 the pod while fn holds a batch it wrote (in the sink, not checkpointed, not committed);
    returns that batch's event."""
    holding = pod.wait_for(lambda e: e["kind"] == "holding", timeout_s, "a batch written and held")
    [held] = [e for e in pod.events("batch") if e["batch_id"] == holding["batch_id"]]
    pod.kill()
    return held


def first_batch(pod: ConsumerProcess, timeout_s: float = 180) -> dict[str, Any]:
    return pod.wait_for(lambda e: e["kind"] == "batch", timeout_s, "a batch")


def test_a_clean_static_restart_leaves_exactly_the_produced_records(stream: Stream) -> None:
    spec = stream.spec(sink="append", path=str(stream.tmp / "sink"))
    produce(stream.bootstrap, stream.topic, 3_000)
    first = stream.start(spec, name="pod-a")
    first.wait_for(lambda e: e["kind"] == "batch" and batch_records(first) >= 800, 180, "800 records")
    assert first.stop(60) == 0  # SIGTERM mid-stream: finish the batch, commit, close without LeaveGroup
    assert batch_records(first) < 3_000, "the restart should happen while records are still waiting"
    produce(stream.bootstrap, stream.topic, 1_000, start=3_000)
    second = stream.start(spec, name="pod-b")
    wait_until(lambda: batch_records(first) + batch_records(second) >= 4_000, 180, "the remaining records")
    assert [m.group_instance_id for m in describe_consumer_group(stream.bootstrap, stream.group).members] == [
        "spark-0"
    ]
    assert second.stop(60) == 0
    written = parquet_positions(stream.tmp / "sink")
    assert max(written.values()) == 1, f"duplicates: {[p for p, n in written.items() if n > 1][:10]}"
    assert set(written) == stream.committed() and len(written) == 4_000


@pytest.mark.parametrize("handoff", ["arrow", "parquet"])
def test_bridge_rows_through_spark_connect_equal_sparks_own_kafka_source(
    handoff: str, stream: Stream
) -> None:
    """What test_spark.py checks in-process for local and standalone Spark, through a Spark Connect
    server (a pod of its own: PySpark switches a whole process to Connect mode): the rows the bridge
    hands to fn, written as they are, equal what Spark's own Kafka source reads on the same server,
    schema (nullability included) and every column of every record. By either handoff: Arrow inside
    the plan (the default), or Parquet files in ``handoff_dir``, a directory the server reads too (here
    the same disk, as a shared volume would be; the faster way on Connect, docs/spark.md)."""
    produce_varied(stream.bootstrap, stream.topic, 2_000)
    bridge, native = stream.tmp / "bridge", stream.tmp / "native"
    ways = {"arrow": {}, "parquet": {"handoff": "parquet", "handoff_dir": str(stream.tmp / "handoff")}}
    spec = stream.spec(sink="append", path=str(bridge), native_to=str(native), **ways[handoff])
    pod = stream.start(spec, name=f"pod-rows-{handoff}")
    wait_until(lambda: batch_records(pod) >= 2_000, 180, "2,000 records through the bridge")
    assert pod.stop(120) == 0, pod.stderr_tail()  # the native read runs after run() returned
    assert (stream.tmp / "handoff").is_dir() == (handoff == "parquet")  # made by the Parquet handoff only

    by_position = [("partition", "ascending"), ("offset", "ascending")]
    ours, theirs = (ds.dataset(str(path), format="parquet") for path in (bridge, native))
    # Spark keeps its schema (nullability included) in the files' metadata: equal metadata, equal schema.
    assert ours.schema.equals(theirs.schema, check_metadata=True), (ours.schema, theirs.schema)
    assert ours.schema.names == KAFKA_SCHEMA.names
    rows, expected = (d.to_table().sort_by(by_position).to_pylist() for d in (ours, theirs))
    assert len(rows) == 2_000 and rows == expected
    assert stream.committed() == {(r["partition"], r["offset"]) for r in expected}


def test_exactly_once_after_kill_9_mid_batch_on_a_standalone_cluster(standalone_stream: Stream) -> None:
    """The same promise with each pod a driver of its own application on a standalone master (batches
    as Arrow in the tasks, executors in the worker's JVM): one kill -9 while a written batch is
    neither checkpointed nor committed, then the next pod replays it under its key: 0 duplicates and
    0 missing in the Parquet sink."""
    stream = standalone_stream
    table = stream.tmp / "table"
    common = {"sink": "parquet", "path": str(table), "checkpoint": str(stream.tmp / "checkpoint")}
    produce(stream.bootstrap, stream.topic, 1_500)
    held = kill_while_holding(
        stream.start(stream.spec(hold_from_batch=1, hold_s=120, max_records=300, **common), name="pod-a")
    )
    last = stream.start(stream.spec(max_records=1_000, **common), name="pod-b")
    replay = first_batch(last)
    assert (replay["version"], replay["offsets"]) == (held["version"], held["offsets"])
    stream.wait_committed(1_500)
    assert last.stop(60) == 0
    written = parquet_positions(table)
    duplicates = [p for p, n in written.items() if n > 1]
    missing = stream.committed() - set(written)
    assert (len(duplicates), len(missing), len(written)) == (0, 0, 1_500), (
        duplicates[:10],
        sorted(missing)[:10],
    )


def test_exactly_once_after_kill_9_mid_batch(stream: Stream) -> None:
    """Each batch goes to a Parquet directory and a Delta table (one pass for both sinks: the slow part
    is the pods and the kill), with a checkpoint: the replay carries the key it had. One kill: a second
    pod killed the same way would test the same thing again (the replay that follows a kill is what a
    kill tests), and test_spark_partition_moves.py kills three pods while partitions move."""
    delta, parquet = stream.tmp / "delta", stream.tmp / "parquet"
    common = {
        "sinks": {"parquet": str(parquet), "delta": str(delta)},
        "checkpoint": str(stream.tmp / "checkpoint"),
    }
    produce(stream.bootstrap, stream.topic, 2_400)
    holding = stream.spec(hold_from_batch=1, hold_s=120, max_records=300, **common)

    # The pod dies with a batch in the sinks that neither the checkpoint nor Kafka knows is done.
    held = kill_while_holding(stream.start(holding, name="pod-a"))

    # The rest in bigger batches: each Delta commit costs seconds on a loaded machine.
    last = stream.start(
        stream.spec(event_log=str(stream.tmp / "log"), max_records=2_000, **common), name="pod-c"
    )
    replay = first_batch(last)
    assert (replay["version"], replay["offsets"]) == (held["version"], held["offsets"])
    stream.wait_committed(2_400)
    for start in (2_400, 2_600, 2_800):  # a few batches more, apart: lag is looked up on the side
        produce(stream.bootstrap, stream.topic, 200, start=start)
        time.sleep(1.0)
    stream.wait_committed(3_000)
    assert last.stop(60) == 0

    for name, written in (("parquet", parquet_positions(parquet)), ("delta", delta_positions(delta))):
        duplicates = [p for p, n in written.items() if n > 1]
        missing = stream.committed() - set(written)
        assert (len(duplicates), len(missing), len(written)) == (0, 0, 3_000), (
            name,
            duplicates[:10],
            sorted(missing)[:10],
        )
    assert ds.dataset(str(parquet), format="parquet").schema.names == KAFKA_SCHEMA.names
    progress = [line for line in read_event_log(stream.tmp / "log") if line["event"] == "batch"]
    assert progress and all(line["committed"] and line["records"] > 0 for line in progress)
    assert all(line["processing_rows_per_s"] > 0 and line["version"] for line in progress)
    assert any(line["lag"] is not None for line in progress)


def test_stop_abandons_a_stuck_batch_within_shutdown_timeout_and_the_next_pod_replays_it(
    stream: Stream,
) -> None:
    common = {
        "sink": "parquet",
        "path": str(stream.tmp / "table"),
        "checkpoint": str(stream.tmp / "checkpoint"),
    }
    produce(stream.bootstrap, stream.topic, 1_500)
    spec = stream.spec(hold_from_batch=0, hold_s=120, **common)
    spec["settings"]["shutdown_timeout_s"] = STOP_BUDGET_S
    stuck = stream.start(spec, name="pod-a")
    held = stuck.wait_for(lambda e: e["kind"] == "holding", 180, "a stuck batch")
    begun = time.monotonic()
    assert stuck.stop(60) == 0
    took = time.monotonic() - begun
    [summary] = stuck.events("summary")
    print(
        f"stop() with a hung batch and shutdown_timeout_s=3: run() returned {summary['stop_s']:.1f} s after "
        f"SIGTERM, the pod exited after {took:.1f} s"
    )
    # The budget, the 0.5 s close() always gets, and a few seconds for a loaded machine; the 120 s fn
    # (or a stop waiting for it) is far beyond. The exit adds the interpreter's and Spark client's end.
    assert summary["stop_s"] < STOP_BUDGET_S + 0.5 + 3, f"run() returned {summary['stop_s']} s after SIGTERM"
    assert took < STOP_BUDGET_S + 0.5 + 6, f"the pod exited {took:.1f} s after SIGTERM"
    assert stream.committed() == set()  # abandoned uncommitted
    [batch] = [e for e in stuck.events("batch") if e["batch_id"] == held["batch_id"]]

    again = stream.start(stream.spec(**common), name="pod-b")
    assert first_batch(again)["version"] == batch["version"]
    stream.wait_committed(1_500)
    assert again.stop(60) == 0
    written = parquet_positions(stream.tmp / "table")
    assert max(written.values()) == 1 and len(written) == 1_500


def test_a_pod_whose_session_dies_exits_75_with_a_typed_error(stream: Stream) -> None:
    produce(stream.bootstrap, stream.topic, 1_000)
    pod = stream.start(
        stream.spec(sink="append", path=str(stream.tmp / "s"), stop_session_at=1), name="pod-dies"
    )
    assert pod.wait(180) == 75
    [error] = pod.events("error")
    assert error["kind_of"] == "SparkSessionStoppedError", error
    assert "Spark session stopped during batch 1" in error["reason"]
    assert len(stream.committed()) == batch_records(pod)  # batch 1 was not committed
