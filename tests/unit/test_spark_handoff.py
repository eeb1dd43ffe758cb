"""How batches reach Spark: createDataFrame, or short-lived Parquet files for local sessions (no JVM)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from static_consumer._base.errors import ConfigurationError
from static_consumer._base.records import Record
from static_consumer.spark import KAFKA_SCHEMA, records_to_table
from static_consumer.spark._handoff import FrameMaker, _host, choose, spark_schema


class Reader:
    """Stands in for spark.read: remembers the schema and reads the file with pyarrow."""

    def __init__(self) -> None:
        self.schemas: list[Any] = []
        self.paths: list[str] = []

    def schema(self, schema: Any) -> Reader:
        self.schemas.append(schema)
        return self

    def parquet(self, path: str) -> Any:
        self.paths.append(path)
        return pq.read_table(path)


class LocalSession:
    def __init__(self, master: str = "local[*]") -> None:
        self.sparkContext = SimpleNamespace(master=master)
        self.read = Reader()
        self.created: list[Any] = []

    def createDataFrame(self, data: Any) -> Any:  # noqa: N802 - Spark's name
        self.created.append(data)
        return data


@pytest.mark.parametrize(
    ("master", "expected"),
    [("local[*]", "parquet"), ("local[2]", "parquet"), ("spark://m:7077", "arrow"), ("yarn", "arrow")],
)
def test_auto_uses_files_only_where_executors_share_the_drivers_disk(master: str, expected: str) -> None:
    assert choose("auto", LocalSession(master)) == expected


def test_auto_falls_back_to_create_dataframe_without_a_spark_context() -> None:
    assert choose("auto", object()) == "arrow"
    assert choose("arrow", LocalSession()) == "arrow"  # an explicit choice is kept


@pytest.mark.parametrize("master", ["spark://m:7077", "k8s://https://api:6443", "yarn"])
def test_parquet_files_on_a_cluster_need_a_directory_every_executor_reads(master: str) -> None:
    with pytest.raises(ConfigurationError, match="handoff_dir="):
        choose("parquet", LocalSession(master))
    with pytest.raises(ConfigurationError, match="Spark Connect"):
        choose("parquet", object())  # no SparkContext: a Spark Connect session (or unknown)
    assert choose("parquet", LocalSession(master), "/shared/batches") == "parquet"
    assert choose("auto", LocalSession(master), "/shared/batches") == "parquet"
    assert choose("auto", LocalSession(master)) == "arrow"


def test_parquet_handoff_reads_the_batch_back_under_the_kafka_schema(tmp_path: Path) -> None:
    session = LocalSession()
    maker = FrameMaker(session, "parquet", directory=str(tmp_path))
    table = records_to_table([Record("t", 0, 5, b"k", b"v", 1_700_000_000_000, 1, (("h", b"x"),))])
    df, cleanup = maker(table)
    read: Any = df  # the stand-in reader returns an Arrow table
    assert read.equals(table) and read.schema == KAFKA_SCHEMA
    assert session.read.schemas == [spark_schema()]  # explicit: no inference, exactly the source schema
    assert session.created == []
    [path] = session.read.paths
    assert Path(path).exists()
    cleanup()
    assert not Path(path).exists()
    maker.close()
    assert list(tmp_path.iterdir()) == []


def test_arrow_handoff_is_create_dataframe() -> None:
    session = LocalSession()
    maker = FrameMaker(session, "arrow")
    table = records_to_table([])
    df, cleanup = maker(table)
    cleanup()
    assert df is table and session.created == [table] and session.read.paths == []


def test_batch_directories_of_dead_processes_are_removed(tmp_path: Path) -> None:
    host = _host()
    gone = tmp_path / f"static-consumer-batches-{host}-999999999-abc"  # no such process
    mine = tmp_path / f"static-consumer-batches-{host}-{os.getpid()}-def"
    elsewhere = tmp_path / "static-consumer-batches-otherhost-999999999-abc"  # a shared directory
    other = tmp_path / "unrelated"
    for path in (gone, mine, elsewhere, other):
        path.mkdir()
    maker = FrameMaker(LocalSession(), "parquet", directory=str(tmp_path))
    assert not gone.exists() and mine.exists() and other.exists()
    assert elsewhere.exists()  # another host's process cannot be asked whether it still runs
    maker.close()


class ConnectConf:
    """The part of a Spark Connect session's ``conf`` the handoff uses."""

    def __init__(self, threshold: str | None) -> None:
        self.values = (
            {} if threshold is None else {"spark.sql.session.localRelationCacheThreshold": threshold}
        )

    def get(self, key: str) -> str:
        return self.values[key]  # KeyError: a server without the setting

    def set(self, key: str, value: str) -> None:
        self.values[key] = value


class ConnectSession:
    def __init__(self, threshold: str | None) -> None:
        self.conf = ConnectConf(threshold)

    def createDataFrame(self, data: Any) -> Any:  # noqa: N802 - Spark's name
        return data


@pytest.mark.parametrize(
    ("before", "after"),
    [("1048576", str(64 * 1024 * 1024)), (str(1 << 30), str(1 << 30)), (None, None)],
)
def test_spark_connect_batches_go_inside_the_plan_below_64_mib(before: str | None, after: str | None) -> None:
    session = ConnectSession(before)
    FrameMaker(session, "arrow")  # type: ignore[arg-type]
    assert session.conf.values.get("spark.sql.session.localRelationCacheThreshold") == after
