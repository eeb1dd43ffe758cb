"""The runner's checkpoint (no JVM, no broker): restart-stable batch keys derived from offsets, replay of
the unfinished batch with the same records, records the sink already holds dropped, one runner per
checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes import rec, tp

from static_consumer._base.records import RecordBatch
from static_consumer.spark import CheckpointError, OffsetRange
from static_consumer.spark._ledger import Ledger

P0, P1 = tp(0), tp(1)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def chunk(*pairs: tuple[int, int]) -> RecordBatch:
    return RecordBatch.from_records([rec(p, o) for p, o in pairs])


def pairs(batch: RecordBatch) -> list[tuple[int, int]]:
    return list(zip(batch.partitions, batch.offsets, strict=True))


def test_versions_are_the_sum_of_positions_and_survive_a_restart(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, "g", "orders-0")
    key1, plan1 = ledger.plan({P0: OffsetRange(0, 9), P1: OffsetRange(0, 4)})
    assert key1.version == 10 + 5
    ledger.done(plan1)
    key2, plan2 = ledger.plan({P1: OffsetRange(5, 7)})
    assert key2.version == 10 + 8  # p0 keeps its position
    ledger.done(plan2)
    app_id = ledger.app_id
    ledger.close()

    again = Ledger(tmp_path, "g", "orders-0")
    assert again.app_id == app_id and not again.replaying
    key3, _ = again.plan({P0: OffsetRange(10, 10)})
    assert (key3.app_id, key3.version) == (app_id, 11 + 8)


def test_the_unfinished_batch_is_replayed_with_the_same_records_and_key(tmp_path: Path) -> None:
    clock = Clock()
    ledger = Ledger(tmp_path, "g", "orders-0", clock=clock)
    done_key, plan = ledger.plan({P0: OffsetRange(0, 2)})
    ledger.done(plan)
    crashed_key, _ = ledger.plan({P0: OffsetRange(3, 5), P1: OffsetRange(0, 1)})  # fn ran; then kill -9
    ledger.close()

    again = Ledger(tmp_path, "g", "orders-0", clock=clock)
    assert again.replaying
    # Kafka's committed offset was 3 for p0 (the first batch) and 0 for p1; more records came since.
    kept = again.admit(chunk((0, 3), (0, 4), (1, 0), (0, 5), (0, 6), (1, 1), (1, 2)))
    assert pairs(kept) == [(0, 6), (1, 2)]  # newer than the batch: they wait for the next one
    assert again.replay_due(frozenset({P0, P1}), patience_s=30.0)
    taken = again.take_replay(1_000, 1 << 30)
    assert taken is not None
    batch, key, replayed, rest = taken
    assert not rest
    assert key == crashed_key and key.version > done_key.version
    assert sorted(r for c in batch.chunks for r in pairs(c)) == [(0, 3), (0, 4), (0, 5), (1, 0), (1, 1)]
    again.done(replayed)
    after, _ = again.plan({P0: OffsetRange(6, 6), P1: OffsetRange(2, 2)})
    assert after.version == 7 + 3


def test_records_the_sink_holds_are_dropped_when_they_come_again(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path, "g", "orders-0")
    _, plan = ledger.plan({P0: OffsetRange(0, 4)})
    ledger.done(plan)  # written by fn; the Kafka commit did not happen (kill -9 right after)
    kept = ledger.admit(chunk((0, 3), (0, 4), (0, 5)))
    assert pairs(kept) == [(0, 5)] and ledger.skipped == 2
    untouched = chunk((0, 5), (0, 6))
    assert ledger.admit(untouched) is untouched  # nothing to drop: the batch is passed on as it is


def test_a_replay_waits_for_the_assignment_and_leaves_out_partitions_gone_elsewhere(tmp_path: Path) -> None:
    clock = Clock()
    ledger = Ledger(tmp_path, "g", "orders-0", clock=clock)
    ledger.plan({P0: OffsetRange(0, 1), P1: OffsetRange(0, 1)})
    ledger.close()
    again = Ledger(tmp_path, "g", "orders-0", clock=clock)
    assert not again.replay_due(frozenset(), patience_s=30.0)  # not assigned yet: wait
    again.admit(chunk((0, 0), (0, 1)))
    assert again.replay_due(frozenset({P0}), patience_s=30.0)  # p1 went to another member
    taken = again.take_replay(1_000, 1 << 30)
    assert taken is not None and set(taken[2].ranges) == {P0}


def test_a_replay_whose_records_do_not_all_come_back_marks_only_what_came(tmp_path: Path) -> None:
    clock = Clock()
    ledger = Ledger(tmp_path, "g", "orders-0", clock=clock)
    key, _ = ledger.plan({P0: OffsetRange(0, 9)})
    ledger.close()
    again = Ledger(tmp_path, "g", "orders-0", clock=clock)
    again.admit(chunk((0, 0), (0, 1)))  # offsets 2-9 were compacted away meanwhile
    assert not again.replay_due(frozenset({P0}), patience_s=30.0)
    clock.now += 31.0
    assert again.replay_due(frozenset({P0}), patience_s=30.0)
    taken = again.take_replay(1_000, 1 << 30)
    assert taken is not None
    _, replay_key, replayed, _ = taken
    assert replay_key == key  # the same key: a sink holding the batch skips it
    assert replayed.positions == {P0: 2}  # records 2-9 are written if they ever come, not lost
    again.done(replayed)
    later, _ = again.plan({P0: OffsetRange(2, 3)})
    assert later.version == key.version + 1  # never a version the sink may hold already


def test_a_checkpoint_serves_one_runner_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import static_consumer.spark._ledger as module

    monkeypatch.setattr(module, "_LOCK_WAIT_S", 0.3)
    first = Ledger(tmp_path, "g", "orders-0")
    with pytest.raises(CheckpointError, match="another process holds"):
        Ledger(tmp_path, "g", "orders-0")
    first.close()
    Ledger(tmp_path, "g", "orders-0").close()


def test_a_checkpoint_needs_an_instance_id_and_refuses_someone_elses_file(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="group.instance.id"):
        Ledger(tmp_path, "g", None)
    Ledger(tmp_path, "g", "orders-0").close()
    state = tmp_path / "g" / "orders-0" / "offsets.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "group": "other"}))
    with pytest.raises(CheckpointError, match="not a format-1 checkpoint"):
        Ledger(tmp_path, "g", "orders-0")


def test_a_new_checkpoint_draws_a_new_app_id(tmp_path: Path) -> None:
    # A sink skips versions it holds for an app id; a lost checkpoint must not make it skip new batches.
    first = Ledger(tmp_path / "a", "g", "orders-0")
    second = Ledger(tmp_path / "b", "g", "orders-0")
    assert first.app_id != second.app_id and first.app_id.startswith("static-consumer:g:orders-0:")


def test_a_replay_over_lowered_limits_is_cut_and_the_rest_goes_to_the_next_batch(tmp_path: Path) -> None:
    clock = Clock()
    ledger = Ledger(tmp_path, "g", "orders-0", clock=clock)
    key, _ = ledger.plan({P0: OffsetRange(0, 5)})  # planned under max_records=6; the pod restarts with 4
    ledger.close()
    again = Ledger(tmp_path, "g", "orders-0", clock=clock)
    again.admit(chunk(*[(0, i) for i in range(6)]))
    assert again.replay_due(frozenset({P0}), patience_s=30.0)
    taken = again.take_replay(4, 1 << 30)
    assert taken is not None
    batch, replay_key, replayed, rest = taken
    assert replay_key == key and [r for c in batch.chunks for r in pairs(c)] == [(0, i) for i in range(4)]
    assert replayed.positions == {P0: 4}  # the cut-off records are written again with the next batch
    assert [r for c in rest.chunks for r in pairs(c)] == [(0, 4), (0, 5)]
