"""BatchLimits hold for every batch the runner hands to fn (fake adapter, no JVM): after a replay and by
bytes; a single record over max_bytes goes alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import Assign, rec, tp
from test_spark_runner import make_runner

from static_consumer.spark import BatchInfo, BatchLimits

P0, P1 = tp(0), tp(1)


class Crash(BaseException):
    """Stands in for kill -9 right after fn wrote its batch."""


def sizes(batches: list[tuple[list[tuple[int, int]], BatchInfo]]) -> list[int]:
    return [info.records for _, info in batches]


def test_batches_after_a_replay_hold_max_records(tmp_path: Path) -> None:
    # What the issue saw with max_records=20,000: batches of 30,000-60,000 right after a replay, because
    # records newer than the replayed batch piled up (unbounded) while it was completed.
    limits = BatchLimits(max_records=3, min_records=1, poll_records=10, max_wait_s=1.0)
    first, _, _, _ = make_runner(
        [Assign((P0, P1)), *[rec(p, i) for i in range(3) for p in (0, 1)]], limits=limits, checkpoint=tmp_path
    )

    def die_in_batch_1(df: Any, info: BatchInfo) -> None:
        if info.batch_id == 1:
            raise Crash

    first._attempts._fn = die_in_batch_1
    with pytest.raises(Crash):
        first.run()

    # The restart: batch 1 (p0@1, p1@1, p0@2 in some order) is replayed, while p1's and p0's newer
    # records arrive in the same polls.
    later = [rec(p, i) for i in range(1, 12) for p in (0, 1)]
    second, factory, sink, _ = make_runner([Assign((P0, P1)), *later], limits=limits, checkpoint=tmp_path)
    second.run(idle_timeout_s=5.0)
    assert sizes(sink.batches) and max(sizes(sink.batches)) <= 3, sizes(sink.batches)
    seen = sorted(pair for pairs, _ in sink.batches for pair in pairs)
    assert len(seen) == len(set(seen))  # nothing twice
    assert factory.last.commits  # and the batches were committed


def test_batches_hold_max_bytes() -> None:
    limits = BatchLimits(max_records=100, max_bytes=250, min_records=1, poll_records=10, max_wait_s=1.0)
    script = [Assign((P0,)), *[rec(0, i, value=b"x" * 100) for i in range(10)]]
    runner, _, sink, _ = make_runner(script, limits=limits)
    runner.run(idle_timeout_s=5.0)
    assert sizes(sink.batches) == [2, 2, 2, 2, 2]
    assert all(info.bytes <= 250 for _, info in sink.batches)
    seen = [pair for pairs, _ in sink.batches for pair in pairs]
    assert seen == [(0, i) for i in range(10)]  # in order, nothing lost at the cuts


def test_a_record_larger_than_max_bytes_goes_alone() -> None:
    limits = BatchLimits(max_records=100, max_bytes=50, min_records=1, poll_records=10, max_wait_s=1.0)
    script = [Assign((P0,)), rec(0, 0, value=b"x" * 10), rec(0, 1, value=b"x" * 80), rec(0, 2, value=b"x")]
    runner, _, sink, _ = make_runner(script, limits=limits)
    runner.run(idle_timeout_s=5.0)
    assert [pairs for pairs, _ in sink.batches] == [[(0, 0)], [(0, 1)], [(0, 2)]]


def test_a_replay_holds_limits_lowered_since_the_crash(tmp_path: Path) -> None:
    # The sinks recognise what they hold by (topic, partition, offset range), not by the batch's key, so
    # a replay can be cut: its head keeps the crashed batch's key, its tail comes in the next batch.
    script = [Assign((P0,)), *[rec(0, i) for i in range(6)]]
    first, _, _, _ = make_runner(
        script,
        limits=BatchLimits(max_records=6, min_records=6, poll_records=6, max_wait_s=1.0),
        checkpoint=tmp_path,
    )

    def die(df: Any, info: BatchInfo) -> None:
        raise Crash

    first._attempts._fn = die
    with pytest.raises(Crash):
        first.run()

    lowered = BatchLimits(max_records=4, min_records=1, poll_records=10, max_wait_s=1.0)
    second, _, sink, _ = make_runner(script, limits=lowered, checkpoint=tmp_path)
    second.run(idle_timeout_s=5.0)
    assert sizes(sink.batches) == [4, 2]
    assert [pairs for pairs, _ in sink.batches] == [[(0, i) for i in range(4)], [(0, 4), (0, 5)]]
