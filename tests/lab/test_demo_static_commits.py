"""The demo's stateful static member commits only records it processed, without a broker: a partition
whose state is being rebuilt holds its records back while the handler returns, and no commit
may carry their offsets before they were processed, or a SIGKILL during the rebuild loses them. The
member is the demo's own child code (``run_static`` with a workload) on a scripted fake client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes import MODERN, Assign, FakeAdapter, rec, tp

from static_consumer._base.records import TopicPartition
from static_consumer._core.seams import Seams
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.children.static_member import run_static

WARMUP_S = 0.4  # each stale partition's rebuild; the worker rebuilds them one after the other
HANDED_OUT = {0: [10, 11, 12], 1: [20, 21], 2: [30, 31]}  # partitions 0 and 2 are rebuilt, 1 is not


class _Processed:
    """The ``records`` events of the workload: what was processed, as (partition, offset)."""

    def __init__(self) -> None:
        self._done: set[tuple[int, int]] = set()
        self._lock = threading.Lock()

    def __call__(self, kind: str, **fields: Any) -> None:
        if kind == "records":
            with self._lock:
                self._done.update((p, o) for _t, p, o in fields["records"])

    def now(self) -> set[tuple[int, int]]:
        with self._lock:
            return set(self._done)


@dataclass
class _Witnessed(FakeAdapter):
    """A fake client that notes, with every commit it takes, what had been processed by then; and waits
    out ``consume``'s timeout once its script is done, as the real client does on a quiet topic."""

    processed: Callable[[], set[tuple[int, int]]] = set
    seen: list[tuple[dict[TopicPartition, int], set[tuple[int, int]]]] = field(default_factory=list)

    def consume(self, max_records: int, timeout: float) -> Any:
        if not self.script:
            time.sleep(min(timeout, 0.05))
        return super().consume(max_records, timeout)

    def commit(self, offsets: Any) -> None:
        super().commit(offsets)
        self.seen.append((dict(offsets or {}), self.processed()))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_records_held_back_for_a_rebuild_are_committed_only_once_processed(
    tmp_path: Path, protocol: str
) -> None:
    (tmp_path / "armed").touch()
    for partition, holder in ((0, "other"), (1, "me"), (2, "other")):
        (tmp_path / f"t-{partition}").write_text(holder)
    processed = _Processed()
    script = [Assign((tp(0), tp(1), tp(2))), rec(0, 10), rec(1, 20), rec(2, 30), rec(0, 11), None]
    script += [rec(0, 12), rec(1, 21), rec(2, 31), None]
    adapters: list[_Witnessed] = []

    def factory(config: dict[str, Any]) -> _Witnessed:
        adapters.append(_Witnessed(dict(config), processed=processed.now))
        adapters[-1].script.extend(script)
        return adapters[-1]

    spec = {
        **static_spec("127.0.0.1:9092", "g", ["t"], None, env={"POD_NAME": "app-0"}, protocol=protocol),
        "batch": 10,
        "workload": {"member": "me", "state_dir": str(tmp_path), "warmup_s": WARMUP_S},
        # Stopped while partition 2 still rebuilds (partition 0's ended, unless the machine is very
        # slow): its records are then finished by the revoke that close() runs, and committed by it.
        "max_runtime_s": 1.5 * WARMUP_S,
    }
    assert (
        run_static(
            spec, processed, lambda: False, seams=Seams(adapter_factory=factory, probe=lambda _s, **_: MODERN)
        )
        == 0
    )

    (adapter,) = adapters
    assert adapter.seen, "nothing was committed"
    for offsets, done in adapter.seen:
        for partition, next_offset in offsets.items():
            owed = {(partition.partition, o) for o in HANDED_OUT[partition.partition] if o < next_offset}
            assert owed <= done, f"{partition}@{next_offset} committed before {sorted(owed - done)} processed"
    last = {partition: offset for offsets, _done in adapter.seen for partition, offset in offsets.items()}
    assert last == {tp(0): 13, tp(1): 22, tp(2): 32}  # all processed, committed by the close at the latest
    assert processed.now() == {(p, o) for p, offsets in HANDED_OUT.items() for o in offsets}
