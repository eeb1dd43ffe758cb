"""What a child consumer does with its records when its spec has a ``workload`` (the bounce demo's model).

Spec ``workload`` keys (all optional):

- ``member``: the member's stable name (the pod); whose local state a partition's marker names;
- ``processing_ms``: time spent per record (sleeping, paced per batch: the CPU stays free for the broker);
- ``state_dir`` and ``warmup_s``: a member that receives a partition whose latest state it does not hold
  spends ``warmup_s`` rebuilding that partition's state before it processes the partition's records
  (0: stateless), once a file ``armed`` exists in ``state_dir`` (so a caller can leave a group's
  formation out);
- ``alive_s``: emit an ``alive`` event this often, so a process that dies without a word is known to
  have been alive until at most that long before.

State is modelled the way a StatefulSet pod with a persistent volume holds it: a member holds a
partition's latest state if it was the last member to own that partition. ``state_dir`` holds one marker
file per partition naming that member, shared by the group's processes on this machine. A restarted
member that gets its own partitions back rebuilds nothing; a member handed a partition someone else
processed since rebuilds it.

A rebuild blocks only its own partition, as an application that pauses a partition while a worker restores
its state does: a worker thread rebuilds the member's stale partitions one after the other and then
processes the records that came for each meanwhile (they wait in the member, in order); the poll thread
goes on with every other partition. Whoever commits commits only what was processed
(:meth:`Workload.take_done`): records still waiting for a rebuild are not, so a SIGKILL during the rebuild
leaves them to the partition's next owner. When their partition is revoked, records still waiting are
finished first (``finish_on_revoke``, the static members: their revoke commits them) or dropped (the
dynamic controls), and the partition's next owner reads them again.

Events: ``records`` carries, next to ``records`` ([topic, partition, offset] triples), ``created_ms`` (the
record's producer timestamp) and ``done_ms`` (when its processing finished), both epoch milliseconds;
``rebuild`` carries the rebuilt ``partitions``, ``started`` and ``ts`` (its end), and ``seconds``.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

Emit = Callable[..., None]
Partition = tuple[str, int]
Rec = tuple[str, int, int, int | None]  # topic, partition, offset, producer timestamp ms
FINISH_WAIT_S = 60.0  # a revoke waits at most this long for a partition's rebuild and backlog


class Workload:
    def __init__(self, spec: Mapping[str, Any], emit: Emit, *, finish_on_revoke: bool = False) -> None:
        self._emit = emit
        self.member = str(spec.get("member", ""))
        self._per_record_s = float(spec.get("processing_ms", 0.0)) / 1000.0
        self._warmup_s = float(spec.get("warmup_s", 0.0))
        self._state_dir = Path(spec["state_dir"]) if spec.get("state_dir") else None
        self._alive_s = float(spec.get("alive_s", 0.0))
        self._finish_on_revoke = finish_on_revoke
        self._last_alive = 0.0
        self._lock = threading.Lock()
        self._owned: set[Partition] = set()
        self._pending: set[Partition] = set()
        # Partitions not ready (rebuilding, or their waiting records being processed): their records wait.
        self._waiting: dict[Partition, list[Rec]] = {}
        self._done: dict[Partition, int] = {}  # next offsets processed and not yet taken
        self._jobs: queue.Queue[Partition] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._running: Partition | None = None  # the partition whose waiting records the worker processes

    def assigned(self, partitions: Iterable[Partition]) -> None:
        """Called from the rebalance callback: the partitions are checked before the next batch."""
        with self._lock:
            for partition in partitions:
                self._owned.add(partition)
                self._pending.add(partition)

    def revoked(self, partitions: Iterable[Partition]) -> None:
        """Called from the rebalance callback, before the partitions go: what the worker is processing of
        them is finished first (so a commit after this call covers it); what waits is finished too
        (``finish_on_revoke``) or dropped."""
        gone = set(partitions)
        with self._lock:
            self._owned -= gone
            self._pending -= gone
            if not self._finish_on_revoke:
                for partition in gone:
                    self._waiting.pop(partition, None)
        deadline = time.monotonic() + FINISH_WAIT_S  # the worker finishes them (it ignores _owned here)
        while time.monotonic() < deadline:
            with self._lock:
                if self._running not in gone and not (self._finish_on_revoke and gone & self._waiting.keys()):
                    return
            time.sleep(0.01)

    def _marker(self, partition: Partition) -> Path:
        assert self._state_dir is not None
        return self._state_dir / f"{partition[0]}-{partition[1]}"

    def settle(self) -> None:
        """Check newly owned partitions: those whose state this member does not hold go to the rebuild
        worker (their records wait meanwhile); then the member claims them all."""
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = sorted(self._pending), set()
            if self._state_dir is None:
                return
            armed = self._warmup_s > 0 and (self._state_dir / "armed").exists()
            stale = [p for p in pending if armed and not self._holds(p) and p not in self._waiting]
            for partition in stale:
                self._waiting[partition] = []
                self._jobs.put(partition)
            for partition in pending:
                self._marker(partition).write_text(self.member)
            if stale and self._worker is None:
                self._worker = threading.Thread(target=self._rebuild_forever, daemon=True)
                self._worker.start()

    def _holds(self, partition: Partition) -> bool:
        marker = self._marker(partition)
        return marker.exists() and marker.read_text() == self.member

    def _kept(self, partition: Partition) -> bool:
        """Whether a waiting partition's records are still this member's to process."""
        return partition in self._owned or self._finish_on_revoke

    def _rebuild_forever(self) -> None:
        while True:
            partition = self._jobs.get()
            with self._lock:
                if partition not in self._waiting:  # revoked and dropped meanwhile
                    continue
            started = time.time()
            time.sleep(self._warmup_s)
            self._emit(
                "rebuild", partitions=[list(partition)], started=started, seconds=time.time() - started
            )
            while True:  # the records that came meanwhile, in order, until none wait
                with self._lock:
                    waiting = self._waiting.get(partition)
                    if not waiting or not self._kept(partition):
                        self._waiting.pop(partition, None)
                        self._running = None
                        break
                    self._waiting[partition] = []
                    self._running = partition
                self._run(waiting)

    def process(self, records: list[Rec]) -> None:
        """Process ``records`` (one ``records`` event), except those of partitions not ready yet: they
        wait for their partition's rebuild."""
        ready: list[Rec] = []
        with self._lock:
            for record in records:
                waiting = self._waiting.get((record[0], record[1]))
                if waiting is not None:
                    waiting.append(record)
                else:
                    ready.append(record)
        self._run(ready)

    def _run(self, records: list[Rec]) -> None:
        if not records:
            return
        done: list[int] = []
        began = time.monotonic()
        for n in range(1, len(records) + 1):
            # Paced against the batch's start, so oversleeping on a busy machine is made up for by the
            # next records instead of adding up.
            ahead = began + n * self._per_record_s - time.monotonic()
            if ahead > 0.001:
                time.sleep(ahead)
            done.append(int(time.time() * 1000))
        with self._lock:
            for topic, partition, offset, _created in records:
                key = (topic, partition)
                self._done[key] = max(offset + 1, self._done.get(key, 0))
        self._emit(
            "records",
            records=[[t, p, o] for t, p, o, _c in records],
            created_ms=[c for _t, _p, _o, c in records],
            done_ms=done,
        )

    def take_done(self, partitions: Iterable[Partition] | None = None) -> dict[Partition, int]:
        """Next offsets of what was processed since the last call (of ``partitions``, or all): what a
        loop that commits only processed records commits."""
        with self._lock:
            keys = list(self._done) if partitions is None else [p for p in partitions if p in self._done]
            return {key: self._done.pop(key) for key in keys}

    def tick(self) -> None:
        now = time.monotonic()
        if self._alive_s > 0 and now - self._last_alive >= self._alive_s:
            self._last_alive = now
            self._emit("alive")
