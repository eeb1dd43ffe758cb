"""Exactly-once sinks without a JVM: the Parquet commit protocol (skip a committed key, undo an interrupted
move) on a stand-in writer that writes Parquet with pyarrow, and the options of a Delta write."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from static_consumer.errors import ConfigurationError
from static_consumer.spark import BatchInfo, BatchKey, write_delta, write_parquet
from static_consumer.spark.sinks import META


class Writer:
    """The part of DataFrameWriter the sinks use."""

    def __init__(self, table: pa.Table, calls: list[tuple[str, Any]], fail_at: str | None = None):
        self.table, self.calls, self.fail_at = table, calls, fail_at

    def format(self, name: str) -> Writer:
        self.calls.append(("format", name))
        return self

    def mode(self, mode: str) -> Writer:
        self.calls.append(("mode", mode))
        return self

    def option(self, key: str, value: Any) -> Writer:
        self.calls.append(("option", (key, value)))
        return self

    def partitionBy(self, *columns: str) -> Writer:  # noqa: N802 - Spark's name
        self.calls.append(("partitionBy", columns))
        return self

    def parquet(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)  # mode("overwrite")
        Path(path).mkdir(parents=True)
        half = len(self.table) // 2  # two files, like two tasks
        pq.write_table(self.table.slice(0, half), f"{path}/part-00000-x-c000.snappy.parquet")
        pq.write_table(self.table.slice(half), f"{path}/part-00001-x-c000.snappy.parquet")
        Path(path, "_SUCCESS").touch()

    def save(self, path: str) -> None:
        self.calls.append(("save", path))

    def saveAsTable(self, name: str) -> None:  # noqa: N802 - Spark's name
        self.calls.append(("saveAsTable", name))


class Frame:
    def __init__(self, offsets: list[int]) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.table = pa.table({"partition": [0] * len(offsets), "offset": offsets})

    @property
    def write(self) -> Writer:
        return Writer(self.table, self.calls)


def info(version: int | None, app_id: str = "static-consumer:g:orders-0:abc") -> BatchInfo:
    key = None if version is None else BatchKey(app_id, version)
    return BatchInfo(0, 1, 1, {}, "orders-0", 0.0, key=key)


def offsets(path: Path) -> list[int]:
    return sorted(ds.dataset(str(path), format="parquet").to_table().column("offset").to_pylist())


def test_a_replayed_batch_is_skipped_once_committed(tmp_path: Path) -> None:
    df: Any = Frame([0, 1, 2, 3])
    assert write_parquet(df, info(4), tmp_path) is True
    assert write_parquet(df, info(4), tmp_path) is False  # the same key after a restart
    assert write_parquet(Frame([4, 5]), info(6), tmp_path) is True  # type: ignore[arg-type]
    assert offsets(tmp_path) == [0, 1, 2, 3, 4, 5]
    assert not (tmp_path / META / "staging").exists() or not any((tmp_path / META / "staging").iterdir())
    names = sorted(p.name for p in tmp_path.glob("*.parquet"))
    assert len(names) == 4 and all("-4.snappy.parquet" in n or "-6.snappy.parquet" in n for n in names)


def test_files_of_an_interrupted_move_are_replaced_not_doubled(tmp_path: Path) -> None:
    df: Any = Frame([0, 1, 2, 3])
    write_parquet(df, info(4), tmp_path)
    # Simulate a crash after the move of batch 8 and before its commit: its files are in place, the
    # intent names them, and no commit records version 8.
    commits = tmp_path / META / "commits"
    [commit] = list(commits.iterdir())
    saved = commit.read_text()
    write_parquet(Frame([4, 5, 6, 7]), info(8), tmp_path)  # type: ignore[arg-type]
    commit.write_text(saved)
    intent = tmp_path / META / "publishing" / commit.name
    intent.write_text(
        '{"version": 8, "files": '
        + str(sorted(p.name for p in tmp_path.glob("*-8.snappy.parquet"))).replace("'", '"')
        + "}"
    )
    assert offsets(tmp_path) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert write_parquet(Frame([4, 5, 6, 7]), info(8), tmp_path) is True  # type: ignore[arg-type]
    assert offsets(tmp_path) == [0, 1, 2, 3, 4, 5, 6, 7]  # replaced, not doubled
    assert not intent.exists()


def test_two_writers_of_one_directory_keep_their_own_versions(tmp_path: Path) -> None:
    write_parquet(Frame([0, 1]), info(10, "app-a"), tmp_path)  # type: ignore[arg-type]
    assert write_parquet(Frame([7, 8]), info(3, "app-b"), tmp_path) is True  # type: ignore[arg-type]
    assert offsets(tmp_path) == [0, 1, 7, 8]


def test_partitioned_output_keeps_the_partition_directories(tmp_path: Path) -> None:
    class Partitioned(Writer):
        def parquet(self, path: str) -> None:
            shutil.rmtree(path, ignore_errors=True)
            Path(path, "day=1").mkdir(parents=True)
            pq.write_table(self.table, f"{path}/day=1/part-00000-x-c000.snappy.parquet")

    frame = Frame([0, 1])
    frame_any: Any = type("F", (), {"write": property(lambda self: Partitioned(frame.table, frame.calls))})()
    write_parquet(frame_any, info(2), tmp_path, partition_by=["day"])
    assert ("partitionBy", ("day",)) in frame.calls
    assert [p.parent.name for p in tmp_path.glob("day=1/*.parquet")] == ["day=1"]


def test_delta_writes_carry_the_key_as_txn_app_id_and_version() -> None:
    df: Any = Frame([0])
    write_delta(df, info(42), "/data/orders", options={"mergeSchema": "true"})
    assert df.calls == [
        ("format", "delta"),
        ("mode", "append"),
        ("option", ("txnAppId", "static-consumer:g:orders-0:abc")),
        ("option", ("txnVersion", "42")),
        ("option", ("mergeSchema", "true")),
        ("save", "/data/orders"),
    ]
    write_delta(df, info(43), table="orders")
    assert df.calls[-1] == ("saveAsTable", "orders")


def test_exactly_once_writes_need_a_checkpoint(tmp_path: Path) -> None:
    df: Any = Frame([0])
    with pytest.raises(ConfigurationError, match="checkpoint="):
        write_parquet(df, info(None), tmp_path)
    with pytest.raises(ConfigurationError, match="checkpoint="):
        write_delta(df, info(None), "/data/orders")
    with pytest.raises(ConfigurationError, match="exactly one of path= and table="):
        write_delta(df, info(1))
