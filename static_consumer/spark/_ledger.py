"""The runner's checkpoint: which records its sink holds, and the batch it may hold (an offset log).

Spark's foreachBatch gets exactly-once from a sink that skips a batch id it already wrote, because the
offset log in the query's checkpoint makes a restarted query replay the unfinished batch with the same
id and the same records. This is the same for the bridge, per instance id, in one JSON file
(``<checkpoint>/<group>/<instance id>/offsets.json``, replaced atomically):

- ``done``: the position (next offset) of every partition whose records ``fn`` has written, and the
  version of that batch. Records below a position are already in the sink: after a crash between
  ``fn`` and the Kafka commit they come again, and are dropped here.
- ``pending``: the batch handed to ``fn`` that has not returned yet, written before ``fn`` runs. After a
  crash it is replayed with the same records and the same :class:`BatchKey`, so a sink that skips a
  version it already has (Delta's ``txnAppId``/``txnVersion``, :func:`~static_consumer.spark.write_parquet`)
  holds it once.

A batch's version is derived from the offsets: the sum of the positions of every partition this
checkpoint has seen, after the batch. Positions only grow, so versions grow, and a replayed batch
gets the version it had. ``app_id`` is drawn when the checkpoint is created: a new checkpoint never
reuses the versions of a lost one (a sink would skip its batches), the same rule Delta gives for a
streaming query's checkpoint.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import Any, TextIO

from static_consumer._base.records import RecordBatch, TopicPartition
from static_consumer.spark._batch import OffsetRange, PendingBatch
from static_consumer.spark._errors import CheckpointError

log = logging.getLogger(__name__)

FORMAT = 1
_LOCK_WAIT_S = 30.0


@dataclass(frozen=True)
class BatchKey:
    """A batch's identity across restarts: pass ``app_id`` and ``version`` to Delta as ``txnAppId`` and
    ``txnVersion``, or skip a batch whose version a sink already holds for ``app_id``."""

    app_id: str
    version: int


@dataclass
class Plan:
    """A batch handed to ``fn``: its records per partition and every position once it is written."""

    version: int
    ranges: dict[TopicPartition, OffsetRange]
    positions: dict[TopicPartition, int]
    reached: dict[TopicPartition, int] = field(default_factory=dict)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


class Ledger:
    """The checkpoint of one runner; see the module docs. Runner thread only."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        group: str,
        instance_id: str | None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if instance_id is None:
            raise CheckpointError(
                "a checkpoint belongs to one instance id: give the consumer a group.instance.id "
                "(static membership) to use checkpoint="
            )
        self._group, self._instance_id = group, instance_id
        self._dir = Path(root) / _safe(group) / _safe(instance_id)
        self._path = self._dir / "offsets.json"
        self._clock = clock
        self._lock = self._take_lock()
        state = self._load(group, instance_id)
        self.app_id: str = state["app_id"]
        self._version: int = state["done"]["version"]
        self._positions = _positions(state["done"]["positions"])
        pending = state.get("pending")
        self._plan: Plan | None = None
        if pending is not None and pending["version"] > self._version:
            self._plan = Plan(
                pending["version"], _ranges(pending["ranges"]), _positions(pending["positions"])
            )
            log.info(
                "checkpoint %s: batch %d may not have been written; replaying it",
                self._path,
                self._plan.version,
            )
        self.replay = PendingBatch()
        self._replay_since: float | None = None
        self.skipped = 0

    # -- files -----------------------------------------------------------------------------------------

    def _take_lock(self) -> TextIO:
        """Only one runner per checkpoint: a previous incarnation still exiting gets a little while."""
        self._dir.mkdir(parents=True, exist_ok=True)
        lock = open(self._dir / ".lock", "w")  # noqa: SIM115 - held until close()
        deadline = self._clock() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return lock
            except BlockingIOError:
                if self._clock() >= deadline:
                    lock.close()
                    raise CheckpointError(
                        f"another process holds the checkpoint {self._dir} (same group and instance id)"
                    ) from None
                time.sleep(0.2)

    def close(self) -> None:
        if not self._lock.closed:
            self._lock.close()  # releases the lock

    def _load(self, group: str, instance_id: str) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads(self._path.read_text())
        except FileNotFoundError:
            token = uuid.uuid4().hex[:12]
            state = {
                "format": FORMAT,
                "group": group,
                "instance_id": instance_id,
                "app_id": f"static-consumer:{group}:{instance_id}:{token}",
                "done": {"version": 0, "positions": {}},
                "pending": None,
            }
            self._write(state)
            return state
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"cannot read the checkpoint {self._path}: {exc}") from exc
        if state.get("format") != FORMAT or (state.get("group"), state.get("instance_id")) != (
            group,
            instance_id,
        ):
            raise CheckpointError(
                f"{self._path} is not a format-{FORMAT} checkpoint of group {group!r}, "
                f"instance {instance_id!r}"
            )
        return state

    def _write(self, state: Mapping[str, Any]) -> None:
        """Replace the file atomically: a crash leaves the old state or the new one, never a mix."""
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as out:
            json.dump(state, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self._path)
        fd = os.open(self._dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _save(self, pending: Plan | None) -> None:
        state: dict[str, Any] = {
            "format": FORMAT,
            "group": self._group,
            "instance_id": self._instance_id,
            "app_id": self.app_id,
            "done": {"version": self._version, "positions": _dump_positions(self._positions)},
            "pending": None,
        }
        if pending is not None:
            state["pending"] = {
                "version": pending.version,
                "ranges": {
                    t: {str(p): [r.first, r.last] for (tt, p), r in pending.ranges.items() if tt == t}
                    for t in {tp.topic for tp in pending.ranges}
                },
                "positions": _dump_positions(pending.positions),
            }
        self._write(state)

    # -- records ---------------------------------------------------------------------------------------

    @property
    def replaying(self) -> bool:
        return self._plan is not None

    def admit(self, chunk: RecordBatch) -> RecordBatch:
        """The records of ``chunk`` for the next batch: records the sink already holds are dropped,
        records of the batch being replayed are set aside in :attr:`replay`."""
        if not len(chunk):
            return chunk
        lowest, highest = chunk.offset_bounds()
        plan, cut = self._plan, False
        for key, low in lowest.items():
            tp = TopicPartition(*key)
            if low < self._positions.get(tp, 0):
                cut = True
            if plan is not None and tp in plan.ranges:
                plan.reached[tp] = max(plan.reached.get(tp, -1), highest[key])
                cut = cut or low <= plan.ranges[tp].last
        if not cut:
            return chunk
        topics = chunk.topics if chunk.topic is None else [chunk.topic] * len(chunk)
        keep, into_replay = [], []
        for topic, partition, offset in zip(topics, chunk.partitions, chunk.offsets, strict=True):
            tp = TopicPartition(topic, partition)
            if offset < self._positions.get(tp, 0):
                keep.append(False)
                into_replay.append(False)
                self.skipped += 1
                continue
            planned = plan.ranges.get(tp) if plan is not None else None
            replayed = planned is not None and offset <= planned.last
            keep.append(not replayed)
            into_replay.append(replayed)
        if any(into_replay):
            self.replay.add(_subset(chunk, into_replay))
        return _subset(chunk, keep)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions this member gave up leave the batch being replayed (their next owner reads them)."""
        if self._plan is None:
            return
        gone = set(partitions) & set(self._plan.ranges)
        for tp in gone:
            del self._plan.ranges[tp]
        if gone:
            self.replay.drop(gone)
            log.warning("partitions %s left the batch being replayed", sorted(map(str, gone)))

    def replay_due(self, owned: frozenset[TopicPartition], patience_s: float) -> bool:
        """Whether the batch being replayed is complete (or waited ``patience_s`` for records that do not
        come, e.g. compacted away) and can be handed to ``fn``."""
        plan = self._plan
        if plan is None or not owned:
            return False  # nothing to replay, or not assigned yet
        if self._replay_since is None:
            self._replay_since = self._clock()
            self.forget([tp for tp in plan.ranges if tp not in owned])
        complete = all(plan.reached.get(tp, -1) >= r.last for tp, r in plan.ranges.items())
        return complete or self._clock() - self._replay_since >= patience_s

    def take_replay(
        self, max_records: int, max_bytes: int
    ) -> tuple[PendingBatch, BatchKey, Plan, PendingBatch] | None:
        """The batch to replay with its key, and the records of it beyond ``max_records``/``max_bytes``
        (limits lowered since the crash; they go into the next batch, which has a key of its own); None
        when nothing of it is left (it is then dropped)."""
        plan, rest = self._plan, self.replay
        assert plan is not None
        self._plan, self.replay, self._replay_since = None, PendingBatch(), None
        batch = rest.take(max_records, max_bytes)
        seen = batch.offsets()
        if not seen:
            log.warning("nothing of the batch %d to replay is left here; dropping it", plan.version)
            self._save(None)
            return None
        short = {tp for tp, r in plan.ranges.items() if tp not in seen or seen[tp].last < r.last}
        positions = dict(self._positions)
        positions.update({tp: r.next_offset for tp, r in seen.items()})
        if short:
            # Same version (a sink may hold the batch); only what came is marked written, so the rest,
            # if it comes later, is written again rather than lost.
            log.warning(
                "replaying batch %d without the records it had of %s (they did not come back)",
                plan.version,
                sorted(map(str, short)),
            )
        replayed = Plan(plan.version, dict(seen), positions)
        return batch, BatchKey(self.app_id, plan.version), replayed, rest

    def plan(self, ranges: Mapping[TopicPartition, OffsetRange]) -> tuple[BatchKey, Plan]:
        """Name a new batch and record it as pending before ``fn`` sees it."""
        positions = dict(self._positions)
        positions.update({tp: r.next_offset for tp, r in ranges.items()})
        # The sum grows with every batch; only after a shortened replay can it fall behind.
        version = max(sum(positions.values()), self._version + 1)
        plan = Plan(version, dict(ranges), positions)
        self._save(plan)
        return BatchKey(self.app_id, version), plan

    def done(self, plan: Plan) -> None:
        """``fn`` returned: the batch's records are in the sink."""
        self._version, self._positions = plan.version, dict(plan.positions)
        self._save(None)


def _subset(chunk: RecordBatch, mask: list[bool]) -> RecordBatch:
    if all(mask):
        return chunk

    def pick(column: list[Any]) -> list[Any]:
        return list(compress(column, mask))

    headers = chunk.headers
    return RecordBatch(
        pick(chunk.topics),
        pick(chunk.partitions),
        pick(chunk.offsets),
        pick(chunk.keys),
        pick(chunk.values),
        pick(chunk.timestamps_ms),
        pick(chunk.timestamp_types),
        None if headers is None else pick(headers),
    )


def _positions(raw: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): int(n) for t, parts in raw.items() for p, n in parts.items()}


def _ranges(raw: Mapping[str, Mapping[str, list[int]]]) -> dict[TopicPartition, OffsetRange]:
    return {TopicPartition(t, int(p)): OffsetRange(*r) for t, parts in raw.items() for p, r in parts.items()}


def _dump_positions(positions: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp, n in sorted(positions.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = n
    return out


__all__ = ["BatchKey", "Ledger", "Plan"]
