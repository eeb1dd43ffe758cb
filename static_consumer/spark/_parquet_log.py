"""The commit log of a Parquet directory written by :func:`~static_consumer.spark.write_parquet`.

What the directory holds is recorded by what was read: per (topic, partition), the next offset after the
last record written there (``positions``). Any pod that writes a range the directory already holds
finds it here, whoever wrote it and whatever its own checkpoint says. Everything lives under
``<path>/_static_consumer/`` (Spark's readers skip names starting with ``_``):

- ``positions.json``: ``{"format": 2, "positions": {topic: {partition: next offset}}}``, replaced
  atomically (write, fsync, rename).
- ``lock``: an exclusive ``flock`` held while a write is published (a few renames and two small
  files, never while Spark writes); the kernel releases it when a process dies, also after ``kill -9``.
  Over NFS the client maps ``flock`` to a POSIX lock on the server.
- ``staging/<id>/``: one write's files from Spark, before they are published.
- ``publishing.json``: the publication in progress: every move (staged file -> its name in the
  directory) and the positions after it. Written before the first move, deleted after the positions
  were replaced; a writer that finds it (a publisher died between the two) finishes it first: the
  moves still to do, then the positions. Publication is therefore all or nothing, rolled forward.

A write reads the positions without the lock, lets Spark write the rows not held yet into staging, then
takes the lock and reads them again: if another writer published rows of the same partitions in the
meantime that this write also has, it publishes nothing and the caller writes again (without those
rows); else it publishes. A zombie (a pod that lost its partitions but still writes) is stopped the
same way.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from static_consumer._base.records import TopicPartition
from static_consumer.spark._errors import SinkConflictError

log = logging.getLogger(__name__)

META = "_static_consumer"
FORMAT = 2
LOCK_WAIT_S = 60.0
STALE_STAGING_S = 24 * 3600.0  # a write's staging directory untouched this long belongs to a dead writer

Positions = dict[TopicPartition, int]


class ParquetLog:
    """The commit log of one Parquet directory ``root``; see the module docs."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.meta = self.root / META
        self._positions_file = self.meta / "positions.json"
        self._intent_file = self.meta / "publishing.json"

    def positions(self) -> Positions:
        """What the directory holds: the next offset per partition (partitions never written: absent)."""
        try:
            state: dict[str, Any] = json.loads(self._positions_file.read_text())
        except FileNotFoundError:
            return {}
        if state.get("format") != FORMAT:
            raise ValueError(f"{self._positions_file} is not a format-{FORMAT} positions file")
        raw: Mapping[str, Mapping[str, int]] = state["positions"]
        return {TopicPartition(t, int(p)): int(n) for t, parts in raw.items() for p, n in parts.items()}

    def staging(self) -> Path:
        """A new directory for one write's files."""
        path = self.meta / "staging" / uuid.uuid4().hex[:16]
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @contextmanager
    def locked(self, clock: Any = time.monotonic, sleep: Any = time.sleep) -> Iterator[None]:
        """Hold the directory's lock (bounded wait); finish an interrupted publication first."""
        self.meta.mkdir(parents=True, exist_ok=True)
        with open(self.meta / "lock", "a") as lock:
            deadline = clock() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if clock() >= deadline:
                        raise SinkConflictError(
                            f"{self.root}: another writer held the lock for {LOCK_WAIT_S:.0f} s"
                        ) from None
                    sleep(0.05)
            try:
                self._finish_interrupted()
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def publish(self, staged: Path, positions: Positions) -> int:
        """Move the files of ``staged`` into the directory and record ``positions`` (under the lock).
        Returns the number of files published."""
        write_id = staged.name
        moves: list[tuple[str, str]] = []
        files = sorted(
            p for p in staged.rglob("*.parquet") if p.is_file() and not p.name.startswith((".", "_"))
        )
        for i, source in enumerate(files):
            suffix = source.name[source.name.index(".") :]
            target = source.parent.relative_to(staged) / f"part-{i:05d}-{write_id}{suffix}"
            moves.append((str(source.relative_to(self.meta)), str(target)))
        intent = {"format": FORMAT, "moves": moves, "positions": _dump(positions)}
        _write_atomically(self._intent_file, intent)  # the commit point: from here on it rolls forward
        self._finish(intent)
        return len(moves)

    def _finish_interrupted(self) -> None:
        try:
            intent: dict[str, Any] = json.loads(self._intent_file.read_text())
        except FileNotFoundError:
            return
        log.warning(
            "%s: finishing a publication a writer left halfway (%d files)", self.root, len(intent["moves"])
        )
        self._finish(intent)

    def _finish(self, intent: Mapping[str, Any]) -> None:
        staged_dirs: set[Path] = set()
        for source, target in intent["moves"]:
            src, dst = self.meta / source, self.root / target
            staged_dirs.add(self.meta / Path(source).parts[0] / Path(source).parts[1])
            if src.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
            elif not dst.exists():
                raise FileNotFoundError(f"{self.root}: {source} was neither staged nor published")
        _write_atomically(self._positions_file, {"format": FORMAT, "positions": intent["positions"]})
        self._intent_file.unlink()
        for path in staged_dirs:
            shutil.rmtree(path, ignore_errors=True)
        self._sweep_stale()

    def _sweep_stale(self) -> None:
        """Staging directories of writers that died before publishing (untouched for a day)."""
        now = time.time()
        for path in (self.meta / "staging").glob("*"):
            try:
                if now - path.stat().st_mtime > STALE_STAGING_S:
                    shutil.rmtree(path, ignore_errors=True)
            except FileNotFoundError:
                pass


def overtaken(
    before: Positions, now: Positions, ranges: Mapping[TopicPartition, Sequence[int]]
) -> list[TopicPartition]:
    """Partitions of which another writer published rows this write also has, between ``before`` (the
    positions its rows were chosen by) and ``now``; ``ranges`` are (first, last) offsets per partition."""
    return [
        tp
        for tp, (first, _) in ranges.items()
        if now.get(tp, 0) > before.get(tp, 0) and now.get(tp, 0) > first
    ]


def _dump(positions: Positions) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, n in sorted(positions.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = n
    return out


def _write_atomically(path: Path, content: Mapping[str, Any]) -> None:
    """Write, fsync, rename, fsync the directory: a crash leaves the old content or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(content, out, separators=(",", ":"))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["FORMAT", "LOCK_WAIT_S", "META", "ParquetLog", "Positions", "overtaken"]
