"""Exactly-once writes from ``fn``, keyed by what was read: no pod's checkpoint involved.

The rows ``fn`` writes carry the Kafka coordinates of the record each came from (``keys``: by default
``topic``, ``partition`` and ``offset``, the names of Spark's Kafka source). A sink knows which records
it holds by those, so any pod that writes a range the sink already holds (after a crash between the
write and the Kafka commit, whether the partition came back to the same pod or moved to another one,
or from a zombie that lost its partitions but still writes) has those rows skipped, and only the rest
written. ``info.offsets`` (the ranges the batch read) says which partitions a write covers.

- :func:`write_delta`: ``MERGE INTO <table> USING <batch> ON <keys> WHEN NOT MATCHED THEN INSERT *``,
  limited to the batch's partitions and offset ranges so Delta's data skipping reads only the files
  that may hold them. Delta serialises concurrent writers (a MERGE reads the table: a commit of
  another writer in between makes it fail, and it is retried, a bounded number of times).
- :func:`write_parquet`: a plain Parquet directory with a commit log recording, per partition, the
  next offset it holds (see :mod:`static_consumer.spark._parquet_log`); rows below it are filtered out
  before Spark writes, and a write overtaken by another writer of the same partitions is written again.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from static_consumer._base.errors import ConfigurationError
from static_consumer._base.records import TopicPartition
from static_consumer.spark._errors import SinkConflictError
from static_consumer.spark._parquet_log import META, ParquetLog, Positions, overtaken
from static_consumer.spark._work import BatchInfo

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

KEY_COLUMNS = ("topic", "partition", "offset")
DELTA_ATTEMPTS = 10
PARQUET_ATTEMPTS = 10

# What Delta says (error classes, or exception names on older servers) when another writer's commit
# came first: the transaction is refused as a whole, so trying again is safe.
_CONFLICT = (
    "DELTA_CONCURRENT",
    "ConcurrentAppendException",
    "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentTransactionException",
    "DELTA_PROTOCOL_CHANGED",
    "ProtocolChangedException",
    "DELTA_METADATA_CHANGED",
    "MetadataChangedException",
)
_MISSING = (
    "DELTA_MISSING_DELTA_TABLE",
    "DELTA_TABLE_NOT_FOUND",
    "TABLE_OR_VIEW_NOT_FOUND",
    "DELTA_PATH_DOES_NOT_EXIST",
    "PATH_NOT_FOUND",
    "is not a Delta table",
)
_EXISTS = ("DELTA_PATH_EXISTS", "TABLE_OR_VIEW_ALREADY_EXISTS", "TABLE_ALREADY_EXISTS", "already exists")
_UNRESOLVED = ("UNRESOLVED_COLUMN", "DELTA_MERGE_UNRESOLVED_EXPRESSION", "cannot resolve")

Ranges = Mapping[TopicPartition, tuple[int, int]]


def write_delta(
    df: DataFrame,
    info: BatchInfo,
    path: str | None = None,
    *,
    table: str | None = None,
    keys: Sequence[str] = KEY_COLUMNS,
    partition_by: Sequence[str] = (),
    attempts: int = DELTA_ATTEMPTS,
    sleep: Callable[[float], object] = time.sleep,
) -> int:
    """Insert the rows of ``df`` whose ``keys`` (topic, partition, offset) the Delta table at ``path``
    (or the catalog table ``table``) does not hold yet; returns how many were inserted.

    The first write creates the table (``partition_by`` its partition columns: with several pods,
    partitioning by the Kafka partition column keeps their MERGEs from conflicting). A MERGE refused
    for a concurrent commit is retried up to ``attempts`` times (then :class:`SinkConflictError`). The
    session needs Delta's jars and settings (``spark_session(delta=True)``, or a Spark Connect server
    started with them).
    """
    if (path is None) == (table is None):
        raise ConfigurationError("write_delta needs exactly one of path= and table=")
    ranges = _ranges(info)
    if not ranges:
        return 0
    target = table if table is not None else f"delta.`{str(path).replace('`', '``')}`"
    spark = df.sparkSession
    view = f"static_consumer_batch_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(view)
    statement = merge_statement(target, view, keys, ranges)
    try:
        for attempt in range(1, attempts + 1):
            try:
                [row] = spark.sql(statement).collect()
                return int(row["num_inserted_rows"])
            except Exception as exc:
                text = error_text(exc)
                if _has(text, _MISSING):
                    _create(df, path, table, partition_by)
                    continue
                if _has(text, _UNRESOLVED) and any(k in text for k in keys):
                    raise ConfigurationError(
                        f"write_delta matches rows on the columns {list(keys)}: keep them in the DataFrame "
                        "(the record's topic, partition and offset), or name yours with keys="
                    ) from exc
                if not _has(text, _CONFLICT):
                    raise
                if attempt == attempts:
                    raise SinkConflictError(
                        f"{target}: the MERGE of batch {info.batch_id} met a concurrent commit {attempts} "
                        "times; nothing of it was written"
                    ) from exc
                wait = min(5.0, 0.2 * 2 ** (attempt - 1)) * (0.5 + random.random())  # noqa: S311
                log.info(
                    "%s: a concurrent commit came first (%s); merging again in %.1fs", target, text[:80], wait
                )
                sleep(wait)
        raise SinkConflictError(f"{target}: the table could not be created or found in {attempts} attempts")
    finally:
        spark.catalog.dropTempView(view)


def merge_statement(target: str, view: str, keys: Sequence[str], ranges: Ranges) -> str:
    """The MERGE of a batch: rows of the batch whose keys the table lacks are inserted. Besides the keys,
    the condition names the batch's topics, partitions and offset ranges on the table's side only, so
    Delta reads just the files whose statistics may overlap them, and (with the table partitioned by
    one of these columns) conflicts only with writers of the same partitions."""
    topic, partition, offset = (f"`{k.replace('`', '``')}`" for k in keys)
    same = " AND ".join(f"t.{c} = s.{c}" for c in (topic, partition, offset))
    topics = ", ".join(sorted({_literal(tp.topic) for tp in ranges}))
    partitions = ", ".join(str(p) for p in sorted({tp.partition for tp in ranges}))
    spans = " OR ".join(
        f"(t.{topic} = {_literal(tp.topic)} AND t.{partition} = {tp.partition} "
        f"AND t.{offset} BETWEEN {first} AND {last})"
        for tp, (first, last) in sorted(ranges.items())
    )
    return (
        f"MERGE INTO {target} AS t USING {view} AS s ON {same} "
        f"AND t.{topic} IN ({topics}) AND t.{partition} IN ({partitions}) AND ({spans}) "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def _create(df: DataFrame, path: str | None, table: str | None, partition_by: Sequence[str]) -> None:
    """Create the table empty with the batch's schema (the MERGE then inserts the batch); another
    writer creating it at the same moment wins or loses without harm."""
    writer = df.limit(0).write.format("delta").mode("error")  # "errorifexists" in classic Spark only
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    try:
        if table is not None:
            writer.saveAsTable(table)
        else:
            writer.save(path)
        log.info("created the Delta table %s", table or path)
    except Exception as exc:
        if not _has(error_text(exc), (*_EXISTS, *_CONFLICT)):
            raise


def write_parquet(
    df: DataFrame,
    info: BatchInfo,
    path: str | os.PathLike[str],
    *,
    keys: Sequence[str] = KEY_COLUMNS,
    partition_by: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    attempts: int = PARQUET_ATTEMPTS,
) -> bool:
    """Append the rows of ``df`` whose records the Parquet directory ``path`` does not hold yet (see
    the module docs); returns False when it held them all and nothing was written.

    ``path`` must be a file system this process sees as the executors do (local, NFS, a mounted
    volume); on object stores use Delta. Readers never see the staging directory but may see a
    write's files appear one by one. Another writer publishing the same partitions first makes this
    one write again without the rows it published, up to ``attempts`` times (then
    :class:`SinkConflictError`).
    """
    sink = ParquetLog(path)
    ranges = _ranges(info)
    for _ in range(attempts):
        held = sink.positions()
        if all(last < held.get(tp, 0) for tp, (_, last) in ranges.items()):
            log.info("batch %d is in %s already: skipped", info.batch_id, sink.root)
            return False
        frame = df
        if any(first < held.get(tp, 0) for tp, (first, _) in ranges.items()):
            frame = df.filter(unheld_rows(held, ranges, keys))
        staged = sink.staging()
        published = False
        try:
            writer = frame.write.mode("overwrite")
            for name, value in (options or {}).items():
                writer = writer.option(name, value)
            if partition_by:
                writer = writer.partitionBy(*partition_by)
            writer.parquet(str(staged))
            _check_keys(staged, keys, partition_by)
            with sink.locked():
                now = sink.positions()
                late = overtaken(held, now, ranges)
                if late:
                    log.info(
                        "%s: another writer published %s first; writing again",
                        sink.root,
                        sorted(map(str, late)),
                    )
                    continue
                positions = dict(now)
                positions.update({tp: max(now.get(tp, 0), last + 1) for tp, (_, last) in ranges.items()})
                published = True  # from here a crash rolls forward: the staged files must stay
                sink.publish(staged, positions)
                return True
        finally:
            if not published:
                shutil.rmtree(staged, ignore_errors=True)
    raise SinkConflictError(
        f"{sink.root}: other writers published batch {info.batch_id}'s partitions first {attempts} times; "
        "nothing of it was written"
    )


def unheld_rows(held: Positions, ranges: Ranges, keys: Sequence[str]) -> str:
    """A Spark SQL condition that keeps the rows whose record the sink does not hold yet."""
    topic, partition, offset = (f"`{k.replace('`', '``')}`" for k in keys)
    below = " OR ".join(
        f"({topic} = {_literal(tp.topic)} AND {partition} = {tp.partition} AND {offset} < {held[tp]})"
        for tp, (first, _) in sorted(ranges.items())
        if first < held.get(tp, 0)
    )
    return f"NOT ({below})"


def _check_keys(staged: Path, keys: Sequence[str], partition_by: Sequence[str]) -> None:
    """Every write must carry the key columns, also when nothing needed filtering this time."""
    files = sorted(staged.rglob("*.parquet"))
    if not files:
        return
    names = set(pq.read_schema(files[0]).names) | set(partition_by)
    missing = [k for k in keys if k not in names]
    if missing:
        raise ConfigurationError(
            f"write_parquet knows the rows by the columns {list(keys)}; {missing} are not in the DataFrame: "
            "keep the record's topic, partition and offset, or name yours with keys="
        )


def _ranges(info: BatchInfo) -> dict[TopicPartition, tuple[int, int]]:
    return {tp: (r.first, r.last) for tp, r in info.offsets.items()}


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def error_text(exc: BaseException) -> str:
    """The error, its class and the errors it came from (Delta's names show up in either)."""
    parts: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(parts) < 10:
        parts.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    return " | ".join(parts)


def _has(text: str, marks: Sequence[str]) -> bool:
    return any(mark in text for mark in marks)


__all__ = [
    "DELTA_ATTEMPTS",
    "KEY_COLUMNS",
    "META",
    "PARQUET_ATTEMPTS",
    "error_text",
    "merge_statement",
    "unheld_rows",
    "write_delta",
    "write_parquet",
]
