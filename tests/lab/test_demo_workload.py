"""The demo's workload model, without a broker: a state rebuild holds back only the partition being
rebuilt (the member goes on with its other partitions, and the waiting records are processed, in order,
once the rebuild ends); what waits when the partition is revoked is dropped by a loop that commits only
what it processed and finished by one that commits what it handed out; and each strategy's numbers are
measured over its own bounce window."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from demo_events import ev, make_run

from static_consumer_lab.children.workload import Workload
from static_consumer_lab.demo.recount import recount
from static_consumer_lab.demo.rundata import load, write_run
from static_consumer_lab.demo.tally import tally

T = "t"


class _Events:
    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, kind: str, **fields: Any) -> None:
        with self.lock:
            self.items.append({"kind": kind, "ts": time.time(), **fields})

    def processed(self) -> list[tuple[int, int]]:
        with self.lock:
            return [(p, o) for e in self.items if e["kind"] == "records" for _t, p, o in e["records"]]

    def wait_for(self, what: Any, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not what() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert what(), "timed out"


def _workload(tmp_path: Path, emit: _Events, member: str = "b", **options: Any) -> Workload:
    (tmp_path / "armed").touch()
    (tmp_path / f"{T}-0").write_text("a")  # partition 0's state is another member's
    (tmp_path / f"{T}-1").write_text(member)  # partition 1's is this member's
    spec = {"member": member, "processing_ms": 0.0, "state_dir": str(tmp_path), "warmup_s": 0.3}
    return Workload(spec, emit, **options)


def test_a_rebuild_holds_back_only_its_partition_and_its_records_follow_in_order(tmp_path: Path) -> None:
    emit = _Events()
    work = _workload(tmp_path, emit)
    work.assigned([(T, 0), (T, 1)])
    work.settle()
    work.process([(T, 0, 10, 1), (T, 1, 20, 1), (T, 0, 11, 1)])
    # Partition 1 (state held) is processed at once, while partition 0 rebuilds.
    assert emit.processed() == [(1, 20)] and work.take_done() == {(T, 1): 21}
    work.process([(T, 0, 12, 1), (T, 1, 21, 1)])
    assert emit.processed() == [(1, 20), (1, 21)]
    emit.wait_for(lambda: len(emit.processed()) == 5)
    assert emit.processed()[2:] == [(0, 10), (0, 11), (0, 12)]
    rebuilds = [e for e in emit.items if e["kind"] == "rebuild"]
    assert [e["partitions"] for e in rebuilds] == [[[T, 0]]] and rebuilds[0]["seconds"] >= 0.3
    assert work.take_done() == {(T, 1): 22, (T, 0): 13}
    work.process([(T, 0, 13, 1)])  # ready now: processed at once
    assert emit.processed()[-1] == (0, 13)
    assert (tmp_path / f"{T}-0").read_text() == "b"  # the member holds partition 0's state now


def test_records_waiting_at_a_revoke_are_dropped_when_only_processed_records_are_committed(
    tmp_path: Path,
) -> None:
    emit = _Events()
    work = _workload(tmp_path, emit)
    work.assigned([(T, 0)])
    work.settle()
    work.process([(T, 0, 10, 1)])
    work.revoked([(T, 0)])
    time.sleep(0.5)
    assert emit.processed() == [] and work.take_done() == {}  # the next owner reads offset 10 again


def test_records_waiting_at_a_revoke_are_finished_first_when_the_loop_committed_them(tmp_path: Path) -> None:
    emit = _Events()
    work = _workload(tmp_path, emit, finish_on_revoke=True)
    work.assigned([(T, 0)])
    work.settle()
    work.process([(T, 0, 10, 1)])
    work.revoked([(T, 0)])  # returns once they are processed
    assert emit.processed() == [(0, 10)]


def test_a_member_getting_its_own_partition_back_rebuilds_nothing(tmp_path: Path) -> None:
    emit = _Events()
    work = _workload(tmp_path, emit)
    work.assigned([(T, 1)])
    work.settle()
    work.process([(T, 1, 5, 1)])
    assert emit.processed() == [(1, 5)] and not [e for e in emit.items if e["kind"] == "rebuild"]


def test_each_strategy_is_measured_over_its_own_window(tmp_path: Path) -> None:
    run = make_run(
        {"a#1": [ev("assigned", 1, 0), ev("revoked", 6, 0), ev("assigned", 8, 0), ev("reaped", 40, code=0)]},
        window=(5.0, 30.0),
        partitions=1,
    )
    (strategy,) = run.strategies
    own = replace(run, strategies=[replace(strategy, window=(5.0, 10.0))])
    for count in (tally, recount):
        assert count(run)["s"].window_s == 25.0 and count(own)["s"].window_s == 5.0
        assert count(own)["s"].unowned_s == 2.0
    write_run(tmp_path, own)
    assert load(tmp_path).strategies[0].window == (5.0, 10.0)
