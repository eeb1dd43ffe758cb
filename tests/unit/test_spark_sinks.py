"""Exactly-once sinks without a JVM, keyed by what was read: the Parquet commit log (skip what the
directory holds whoever wrote it, write only the rest of a range partly held, write again when another
writer of the same partitions publishes first, roll an interrupted publication forward) on a stand-in
writer that writes Parquet with pyarrow, and the MERGE of a Delta write with its retries."""

from __future__ import annotations

import fcntl
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import static_consumer.spark._parquet_log as parquet_log
from static_consumer._base.errors import ConfigurationError
from static_consumer._base.records import TopicPartition
from static_consumer.spark import BatchInfo, OffsetRange, SinkConflictError, write_delta, write_parquet
from static_consumer.spark.sinks import META, merge_statement

_BELOW = re.compile(r"\(`topic` = '([^']*)' AND `partition` = (\d+) AND `offset` < (\d+)\)")


class Writer:
    """The part of DataFrameWriter the sinks use."""

    def __init__(self, frame: Frame) -> None:
        self.frame = frame

    def mode(self, mode: str) -> Writer:
        self.frame.calls.append(("mode", mode))
        return self

    def option(self, key: str, value: Any) -> Writer:
        self.frame.calls.append(("option", (key, value)))
        return self

    def partitionBy(self, *columns: str) -> Writer:  # noqa: N802 - Spark's name
        self.frame.calls.append(("partitionBy", columns))
        return self

    def parquet(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)  # mode("overwrite")
        Path(path).mkdir(parents=True)
        table = self.frame.table
        half = len(table) // 2  # two files, like two tasks
        pq.write_table(table.slice(0, half), f"{path}/part-00000-x-c000.snappy.parquet")
        pq.write_table(table.slice(half), f"{path}/part-00001-x-c000.snappy.parquet")
        Path(path, "_SUCCESS").touch()
        if self.frame.meanwhile is not None:
            meanwhile, self.frame.meanwhile = self.frame.meanwhile, None
            meanwhile()  # another pod publishes while this one's Spark job runs


class Frame:
    """A DataFrame stand-in over a pyarrow table of (topic, partition, offset) rows."""

    def __init__(self, rows: list[tuple[int, int]], *, topic: str = "t", columns: Any = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.meanwhile: Callable[[], None] | None = None
        self.table = columns or pa.table(
            {
                "topic": [topic] * len(rows),
                "partition": [p for p, _ in rows],
                "offset": [o for _, o in rows],
            }
        )

    @property
    def write(self) -> Writer:
        return Writer(self)

    def filter(self, condition: str) -> Frame:
        self.calls.append(("filter", condition))
        assert condition.startswith("NOT (")
        below = {(t, int(p)): int(n) for t, p, n in _BELOW.findall(condition)}
        topics, partitions, offsets = (
            self.table.column(c).to_pylist() for c in ("topic", "partition", "offset")
        )
        keep = [
            not ((t, p) in below and o < below[(t, p)])
            for t, p, o in zip(topics, partitions, offsets, strict=True)
        ]
        kept = Frame([], columns=self.table.filter(pa.array(keep)))
        kept.calls, kept.meanwhile = self.calls, self.meanwhile
        return kept


def tp(partition: int) -> TopicPartition:
    return TopicPartition("t", partition)


def batch(rows: list[tuple[int, int]], batch_id: int = 0) -> tuple[Any, BatchInfo]:
    """A frame of ``rows`` and the info of a batch that read exactly them."""
    ranges: dict[TopicPartition, OffsetRange] = {}
    for p, o in rows:
        r = ranges.get(tp(p))
        ranges[tp(p)] = OffsetRange(min(o, r.first), max(o, r.last)) if r else OffsetRange(o, o)
    return Frame(rows), BatchInfo(batch_id, len(rows), len(rows), ranges, "orders-0", 0.0)


def held(path: Path) -> list[tuple[int, int]]:
    table = ds.dataset(str(path), format="parquet").to_table()
    return sorted(zip(table.column("partition").to_pylist(), table.column("offset").to_pylist(), strict=True))


def positions(path: Path) -> dict[str, dict[str, int]]:
    found: dict[str, dict[str, int]] = json.loads((path / META / "positions.json").read_text())["positions"]
    return found


def test_a_range_the_directory_holds_is_skipped_whichever_pod_writes_it(tmp_path: Path) -> None:
    assert write_parquet(*batch([(0, 0), (1, 0), (0, 1)]), tmp_path) is True  # pod a
    assert write_parquet(*batch([(0, 0), (1, 0), (0, 1)]), tmp_path) is False  # pod b, after a's crash
    assert write_parquet(*batch([(0, 1)]), tmp_path) is False
    assert held(tmp_path) == [(0, 0), (0, 1), (1, 0)]
    assert positions(tmp_path) == {"t": {"0": 2, "1": 1}}
    assert not any((tmp_path / META / "staging").iterdir())


def test_only_the_rows_not_held_of_a_range_partly_held_are_written(tmp_path: Path) -> None:
    write_parquet(*batch([(0, i) for i in range(5)] + [(1, 0)]), tmp_path)
    # Another pod read p0 from the committed offset 2 with other boundaries, and p2 for the first time.
    frame, info = batch([(0, i) for i in range(2, 8)] + [(1, 0), (1, 1), (2, 0)])
    assert write_parquet(frame, info, tmp_path) is True
    assert held(tmp_path) == sorted([(0, i) for i in range(8)] + [(1, 0), (1, 1), (2, 0)])
    assert positions(tmp_path) == {"t": {"0": 8, "1": 2, "2": 1}}
    [condition] = [c for kind, c in frame.calls if kind == "filter"]
    assert "`partition` = 0 AND `offset` < 5" in condition and "`partition` = 1 AND `offset` < 1" in condition
    assert "`partition` = 2" not in condition


def test_a_write_overtaken_by_another_writer_of_its_partitions_is_written_again_without_their_rows(
    tmp_path: Path,
) -> None:
    frame, info = batch([(0, i) for i in range(6)] + [(1, 0)])
    # While this pod's Spark job runs, a zombie that still had p0 publishes offsets 0-3 of it.
    frame.meanwhile = lambda: write_parquet(*batch([(0, i) for i in range(4)]), tmp_path)
    assert write_parquet(frame, info, tmp_path) is True
    assert held(tmp_path) == sorted([(0, i) for i in range(6)] + [(1, 0)])
    assert positions(tmp_path) == {"t": {"0": 6, "1": 1}}


def test_writers_of_other_partitions_do_not_make_a_write_start_again(tmp_path: Path) -> None:
    frame, info = batch([(0, 0), (0, 1)])
    frame.meanwhile = lambda: write_parquet(*batch([(1, 0), (1, 1)]), tmp_path)
    assert write_parquet(frame, info, tmp_path) is True
    assert [kind for kind, _ in frame.calls].count("mode") == 1  # one Spark write
    assert positions(tmp_path) == {"t": {"0": 2, "1": 2}}


def test_a_publication_interrupted_halfway_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    write_parquet(*batch([(0, 0), (0, 1)]), tmp_path)
    sink = parquet_log.ParquetLog(tmp_path)
    staged = sink.staging()
    staged.mkdir()
    pq.write_table(Frame([(0, 2), (0, 3)]).table, staged / "part-00000-x.snappy.parquet")
    pq.write_table(Frame([(0, 4)]).table, staged / "part-00001-x.snappy.parquet")
    finish = sink._finish
    sink._finish = lambda intent: None  # type: ignore[method-assign]  # the publisher dies after the intent
    sink.publish(staged, {tp(0): 5})
    sink._finish = finish  # type: ignore[method-assign]
    first = sorted(staged.glob("*.parquet"))[0]
    target = json.loads((tmp_path / META / "publishing.json").read_text())["moves"][0][1]
    first.rename(tmp_path / target)  # and one of its files was moved already
    assert write_parquet(*batch([(0, 3), (0, 4), (0, 5)]), tmp_path) is True
    assert held(tmp_path) == [(0, i) for i in range(6)]  # finished once, then only offset 5 added
    assert not (tmp_path / META / "publishing.json").exists()


def test_rows_without_their_keys_are_refused(tmp_path: Path) -> None:
    _, info = batch([(0, 0)])
    frame: Any = Frame([], columns=pa.table({"body": ["x"]}))
    with pytest.raises(ConfigurationError, match="topic, partition and offset"):
        write_parquet(frame, info, tmp_path)
    assert not (tmp_path / META / "positions.json").exists()
    renamed: Any = Frame([], columns=pa.table({"tp": ["t"], "kp": [0], "ko": [0]}))
    assert write_parquet(renamed, info, tmp_path, keys=("tp", "kp", "ko")) is True


def test_partitioned_output_keeps_the_partition_directories(tmp_path: Path) -> None:
    class Partitioned(Writer):
        def parquet(self, path: str) -> None:
            shutil.rmtree(path, ignore_errors=True)
            Path(path, "day=1").mkdir(parents=True)
            pq.write_table(self.frame.table, f"{path}/day=1/part-00000-x-c000.snappy.parquet")

    frame, info = batch([(0, 0), (0, 1)])
    frame_any: Any = type("F", (), {"write": property(lambda self: Partitioned(frame))})()
    write_parquet(frame_any, info, tmp_path, partition_by=["day"])
    assert ("partitionBy", ("day",)) in frame.calls
    assert [p.parent.name for p in tmp_path.glob("day=1/*.parquet")] == ["day=1"]


def test_a_lock_held_too_long_is_a_retriable_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parquet_log, "LOCK_WAIT_S", 0.2)
    (tmp_path / META).mkdir()
    with open(tmp_path / META / "lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX)  # another process publishing (flock locks are per open file)
        with pytest.raises(SinkConflictError, match="held the lock") as raised:
            write_parquet(*batch([(0, 0)]), tmp_path)
    assert raised.value.retriable
    assert not any((tmp_path / META / "staging").iterdir())  # nothing left behind


# -- Delta ------------------------------------------------------------------------------------------------


class FakeSession:
    """Answers spark.sql() with scripted results or errors, and notes every statement."""

    def __init__(self, *results: Any) -> None:
        self.results = list(results)
        self.statements: list[str] = []
        self.catalog = self
        self.dropped: list[str] = []

    def sql(self, statement: str) -> Any:
        self.statements.append(statement)
        result = self.results.pop(0)
        if isinstance(result, BaseException):
            raise result
        return type("R", (), {"collect": lambda _self: [{"num_inserted_rows": result}]})()

    def dropTempView(self, name: str) -> None:  # noqa: N802 - Spark's name
        self.dropped.append(name)


class DeltaFrame:
    def __init__(self, session: FakeSession) -> None:
        self.sparkSession = session
        self.calls: list[tuple[str, Any]] = []

    def createOrReplaceTempView(self, name: str) -> None:  # noqa: N802 - Spark's name
        self.calls.append(("view", name))

    def limit(self, n: int) -> Any:
        frame = self

        class Create:
            def format(self, name: str) -> Any:
                return self

            def mode(self, mode: str) -> Any:
                frame.calls.append(("create", mode))
                return self

            def partitionBy(self, *columns: str) -> Any:  # noqa: N802 - Spark's name
                frame.calls.append(("partitionBy", columns))
                return self

            def save(self, path: str) -> None:
                frame.calls.append(("save", path))

        return type("L", (), {"write": Create()})()


def test_the_merge_names_the_keys_and_the_batchs_ranges_on_the_tables_side() -> None:
    statement = merge_statement(
        "delta.`/d`", "v", ("topic", "partition", "offset"), {tp(1): (5, 9), tp(0): (0, 3)}
    )
    assert statement == (
        "MERGE INTO delta.`/d` AS t USING v AS s ON t.`topic` = s.`topic` AND t.`partition` = s.`partition` "
        "AND t.`offset` = s.`offset` AND t.`topic` IN ('t') AND t.`partition` IN (0, 1) AND "
        "((t.`topic` = 't' AND t.`partition` = 0 AND t.`offset` BETWEEN 0 AND 3) OR "
        "(t.`topic` = 't' AND t.`partition` = 1 AND t.`offset` BETWEEN 5 AND 9)) "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def test_a_delta_write_creates_the_table_then_merges_and_retries_concurrent_commits() -> None:
    session = FakeSession(
        RuntimeError("[DELTA_MISSING_DELTA_TABLE] `/d` is not a Delta table."),
        RuntimeError("[DELTA_CONCURRENT_APPEND.WITHOUT_HINT] Files were added by a concurrent update."),
        7,
    )
    df: Any = DeltaFrame(session)
    sleeps: list[float] = []
    assert write_delta(df, batch([(0, 0)])[1], "/d", partition_by=["partition"], sleep=sleeps.append) == 7
    assert df.calls[1:] == [("create", "error"), ("partitionBy", ("partition",)), ("save", "/d")]
    assert len(session.statements) == 3 and len(sleeps) == 1
    assert session.dropped == [df.calls[0][1]]  # the batch's view is dropped again


def test_a_delta_write_gives_up_after_its_attempts_and_names_missing_keys() -> None:
    conflict = RuntimeError("ConcurrentAppendException: Files were added")
    session = FakeSession(conflict, conflict, conflict)
    with pytest.raises(SinkConflictError, match="3 times"):
        write_delta(DeltaFrame(session), batch([(0, 0)])[1], "/d", attempts=3, sleep=lambda _: None)  # type: ignore[arg-type]
    unresolved = FakeSession(
        RuntimeError("[UNRESOLVED_COLUMN.WITH_SUGGESTION] `s`.`offset` cannot be resolved")
    )
    with pytest.raises(ConfigurationError, match="keys="):
        write_delta(DeltaFrame(unresolved), batch([(0, 0)])[1], "/d")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="exactly one of path= and table="):
        write_delta(DeltaFrame(FakeSession()), batch([(0, 0)])[1])  # type: ignore[arg-type]
