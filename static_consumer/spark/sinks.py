"""Exactly-once writes from ``fn``: a sink that holds each batch key at most once.

Both functions take the ``info`` the runner passed to ``fn``; its ``key`` (a runner with a
``checkpoint``) is the same when a batch is replayed after a crash, so a batch that was written before
the crash is not written again, and one that was only partly written is replaced.

- :func:`write_delta`: Delta Lake's idempotent writes. The key goes in as ``txnAppId``/``txnVersion``;
  Delta commits the data and the version in one transaction and skips a write whose version is not
  above the last one it holds for that app id.
- :func:`write_parquet`: plain Parquet files under a directory, with a commit protocol of its own (the
  path must be a file system this process sees, as the executors do: local, NFS, a mounted volume):
  Spark writes the batch into a staging directory under ``<path>/_static_consumer/``, the files are
  moved into ``<path>`` under names carrying the key, and a small commit file records the key's
  version. A batch whose version is committed is skipped; files of a move that a crash interrupted are
  deleted before the batch is written again. Readers of ``<path>`` never see the staging directory
  (Spark skips names starting with ``_``) but may see a batch's files appear one by one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from static_consumer.errors import ConfigurationError
from static_consumer.spark._ledger import BatchKey
from static_consumer.spark._work import BatchInfo

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

META = "_static_consumer"


def batch_key(info: BatchInfo) -> BatchKey:
    """``info.key``, or a :class:`ConfigurationError` saying how to get one."""
    if info.key is None:
        raise ConfigurationError(
            "exactly-once writes need a restart-stable batch key: create the runner with "
            "MicroBatchRunner(..., checkpoint='/durable/path') (and a static instance id)"
        )
    return info.key


def write_delta(
    df: DataFrame,
    info: BatchInfo,
    path: str | None = None,
    *,
    table: str | None = None,
    mode: str = "append",
    options: Mapping[str, str] | None = None,
) -> None:
    """Write ``df`` to the Delta table at ``path`` (or the catalog table ``table``) once per batch key.

    The session needs Delta's jars and settings (``spark_session(delta=True)``, or a Spark Connect
    server started with them).
    """
    if (path is None) == (table is None):
        raise ConfigurationError("write_delta needs exactly one of path= and table=")
    key = batch_key(info)
    writer = df.write.format("delta").mode(mode)
    writer = writer.option("txnAppId", key.app_id).option("txnVersion", str(key.version))
    for name, value in (options or {}).items():
        writer = writer.option(name, value)
    if table is not None:
        writer.saveAsTable(table)
    else:
        writer.save(path)


def write_parquet(
    df: DataFrame,
    info: BatchInfo,
    path: str | os.PathLike[str],
    *,
    partition_by: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
) -> bool:
    """Append ``df`` to the Parquet directory ``path`` once per batch key (see the module docs).
    Returns False when the batch was already there and nothing was written."""
    key = batch_key(info)
    root = Path(path)
    token = hashlib.sha256(key.app_id.encode()).hexdigest()[:16]
    meta = root / META
    commit_file, intent_file = meta / "commits" / f"{token}.json", meta / "publishing" / f"{token}.json"
    last = _read(commit_file)
    if last is not None and key.version <= last["version"]:
        log.info("batch version %d is in %s already: skipped", key.version, root)
        return False
    _roll_back(root, intent_file, last)
    staging = meta / "staging" / f"{token}-{key.version}"
    writer = df.write.mode("overwrite")
    for name, value in (options or {}).items():
        writer = writer.option(name, value)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(str(staging))
    staged = sorted(
        p for p in staging.rglob("*.parquet") if not p.name.startswith((".", "_")) and p.is_file()
    )
    moves = []
    for i, source in enumerate(staged):
        suffix = source.name[source.name.index(".") :]
        target = source.parent.relative_to(staging) / f"part-{i:05d}-{token}-{key.version}{suffix}"
        moves.append((source, target))
    # The intent names every file before the first one appears, so a crash in between can be undone.
    _write(intent_file, {"version": key.version, "files": [str(target) for _, target in moves]})
    for source, target in moves:
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, root / target)
    _write(commit_file, {"app_id": key.app_id, "version": key.version})
    intent_file.unlink(missing_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    return True


def _roll_back(root: Path, intent_file: Path, last: Mapping[str, Any] | None) -> None:
    """Delete the files of a move that never reached its commit (a crash between the two)."""
    intent = _read(intent_file)
    if intent is None:
        return
    if last is None or intent["version"] > last["version"]:
        for name in intent["files"]:
            (root / name).unlink(missing_ok=True)
        log.warning(
            "removed %d files of batch version %d from %s: their write was interrupted before its commit",
            len(intent["files"]),
            intent["version"],
            root,
        )
    intent_file.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return found


def _write(path: Path, content: Mapping[str, Any]) -> None:
    """Atomically (write, fsync, rename): a crash leaves the old content or the new, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(content, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)


__all__ = ["META", "batch_key", "write_delta", "write_parquet"]
