"""What a child consumer does with its records when its spec has a ``workload`` (the bounce demo's model).

Spec ``workload`` keys (all optional):

- ``member``: the member's stable name (the pod); whose local state a partition's marker names;
- ``processing_ms``: time spent per record (sleeping, paced per batch: the CPU stays free for the broker);
- ``state_dir`` and ``warmup_s``: a member that receives a partition whose latest state it does not hold
  spends ``warmup_s`` per such partition rebuilding it before it processes anything (0: stateless),
  once a file ``armed`` exists in ``state_dir`` (so a caller can leave a group's formation out);
- ``alive_s``: emit an ``alive`` event this often, so a process that dies without a word is known to
  have been alive until at most that long before.

State is modelled the way a StatefulSet pod with a persistent volume holds it: a member holds a
partition's latest state if it was the last member to own that partition. ``state_dir`` holds one marker
file per partition naming that member, shared by the group's processes on this machine. A restarted
member that gets its own partitions back rebuilds nothing; a member handed a partition someone else
processed since rebuilds it.

Events: ``records`` carries, next to ``records`` ([topic, partition, offset] triples), ``created_ms`` (the
record's producer timestamp) and ``done_ms`` (when its processing finished), both epoch milliseconds;
``rebuild`` carries the rebuilt ``partitions``, ``started`` and ``ts`` (its end), and ``seconds``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

Emit = Callable[..., None]
Partition = tuple[str, int]


class Workload:
    def __init__(self, spec: Mapping[str, Any], emit: Emit) -> None:
        self._emit = emit
        self.member = str(spec.get("member", ""))
        self._per_record_s = float(spec.get("processing_ms", 0.0)) / 1000.0
        self._warmup_s = float(spec.get("warmup_s", 0.0))
        self._state_dir = Path(spec["state_dir"]) if spec.get("state_dir") else None
        self._alive_s = float(spec.get("alive_s", 0.0))
        self._last_alive = 0.0
        self._pending: set[Partition] = set()

    def assigned(self, partitions: Iterable[Partition]) -> None:
        """Called from the rebalance callback: the partitions are checked before the next batch."""
        self._pending.update(partitions)

    def revoked(self, partitions: Iterable[Partition]) -> None:
        self._pending.difference_update(partitions)

    def _marker(self, partition: Partition) -> Path:
        assert self._state_dir is not None
        return self._state_dir / f"{partition[0]}-{partition[1]}"

    def settle(self) -> None:
        """Rebuild the state of newly owned partitions this member does not hold; then claim them."""
        if not self._pending:
            return
        pending, self._pending = sorted(self._pending), set()
        if self._state_dir is None:
            return
        stale = [p for p in pending if not self._holds(p)]
        if stale and self._warmup_s > 0 and (self._state_dir / "armed").exists():
            started = time.time()
            time.sleep(self._warmup_s * len(stale))
            self._emit(
                "rebuild",
                partitions=[list(p) for p in stale],
                started=started,
                seconds=time.time() - started,
            )
        for partition in pending:
            self._marker(partition).write_text(self.member)

    def _holds(self, partition: Partition) -> bool:
        marker = self._marker(partition)
        return marker.exists() and marker.read_text() == self.member

    def process(self, records: list[tuple[str, int, int, int | None]]) -> None:
        """``records``: (topic, partition, offset, producer timestamp ms); emits one ``records`` event."""
        done: list[int] = []
        began = time.monotonic()
        for n in range(1, len(records) + 1):
            # Paced against the batch's start, so oversleeping on a busy machine is made up for by the
            # next records instead of adding up.
            ahead = began + n * self._per_record_s - time.monotonic()
            if ahead > 0.001:
                time.sleep(ahead)
            done.append(int(time.time() * 1000))
        self._emit(
            "records",
            records=[[t, p, o] for t, p, o, _c in records],
            created_ms=[c for _t, _p, _o, c in records],
            done_ms=done,
        )

    def tick(self) -> None:
        now = time.monotonic()
        if self._alive_s > 0 and now - self._last_alive >= self._alive_s:
            self._last_alive = now
            self._emit("alive")
