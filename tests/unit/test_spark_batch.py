"""Batch bookkeeping: revoked partitions leave the batch, commits skip moved partitions, sizing adapts."""

from __future__ import annotations

import pytest

from static_consumer._base.records import Record, RecordBatch, TopicPartition
from static_consumer.spark import BatchLimits, OffsetRange
from static_consumer.spark._batch import BatchSizer, PendingBatch, commit_offsets

P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


def rec(partition: int, offset: int, value: bytes = b"v") -> Record:
    return Record("t", partition, offset, None, value, 1, 1)


def test_offsets_are_first_and_last_per_partition_and_commit_the_next_one() -> None:
    batch = PendingBatch()
    batch.add([rec(1, 5), rec(0, 10), rec(1, 6), rec(0, 11), rec(0, 12)])
    assert batch.offsets() == {P0: OffsetRange(10, 12), P1: OffsetRange(5, 6)}
    assert commit_offsets(batch.offsets(), frozenset({P0, P1})) == {P0: 13, P1: 7}


def test_dropping_revoked_partitions_keeps_the_others_and_their_size() -> None:
    batch = PendingBatch()
    batch.add([rec(0, 0, b"aaaa"), rec(1, 0, b"bb"), rec(0, 1, b"c")])
    assert batch.drop([P0]) == 2
    assert [(r.partition, r.offset) for r in batch.records] == [(1, 0)]
    assert batch.bytes == 2
    assert batch.drop([P0]) == 0


def test_records_of_partitions_not_owned_are_not_added() -> None:
    batch = PendingBatch()
    assert batch.add([rec(0, 0), rec(1, 0)], owned=frozenset({P1})) == 1
    assert batch.offsets() == {P1: OffsetRange(0, 0)}


def test_commits_skip_partitions_no_longer_owned() -> None:
    ranges = {P0: OffsetRange(0, 4), P1: OffsetRange(0, 9)}
    assert commit_offsets(ranges, frozenset({P1})) == {P1: 10}


def test_a_batch_is_full_at_either_limit() -> None:
    batch = PendingBatch()
    batch.add([rec(0, 0, b"x" * 10)])
    assert not batch.full(max_records=2, max_bytes=11)
    assert batch.full(max_records=1, max_bytes=11)
    assert batch.full(max_records=2, max_bytes=10)


def test_slow_batches_shrink_the_next_ones_and_fast_ones_grow_them_back() -> None:
    sizer = BatchSizer(BatchLimits(max_records=100_000, min_records=1_000), max_poll_interval_s=60.0)
    warning = sizer.observe(100_000, seconds=40.0)  # over half of the 60 s budget
    assert warning is not None and "max_poll_interval_ms" in warning
    # Sized so a batch at the observed rate takes a quarter of the budget (half the slow threshold).
    assert sizer.max_records == 37_500
    assert sizer.observe(37_500, seconds=2.0) is None
    assert sizer.max_records == 75_000
    sizer.observe(75_000, seconds=2.0)
    assert sizer.max_records == 100_000  # never above the configured limit


def test_shrinking_stops_at_min_records() -> None:
    sizer = BatchSizer(BatchLimits(max_records=4_000, min_records=1_000), max_poll_interval_s=10.0)
    for _ in range(5):
        sizer.observe(sizer.max_records, seconds=9.0)
    assert sizer.max_records == 1_000


def test_warn_policy_keeps_the_size_and_says_what_to_change() -> None:
    sizer = BatchSizer(BatchLimits(on_slow="warn"), max_poll_interval_s=10.0)
    warning = sizer.observe(100_000, seconds=6.0)
    assert warning is not None and "raise max_poll_interval_ms" in warning
    assert sizer.max_records == 100_000


def test_a_partial_batch_that_was_fast_does_not_grow_the_limit() -> None:
    sizer = BatchSizer(BatchLimits(max_records=8_000, min_records=1_000), max_poll_interval_s=10.0)
    sizer.observe(8_000, seconds=9.0)
    shrunk = sizer.max_records
    sizer.observe(10, seconds=0.01)  # a small batch (time limit) says nothing about a full one
    assert sizer.max_records == shrunk


@pytest.mark.parametrize(
    "kwargs",
    [{"max_records": 0}, {"max_wait_s": 0}, {"slow_fraction": 1.0}, {"min_records": 10, "max_records": 5}],
)
def test_invalid_limits_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="BatchLimits"):
        BatchLimits(**kwargs)  # type: ignore[arg-type]


def test_small_batches_need_no_min_records() -> None:
    assert BatchLimits(max_records=500).shrink_floor == 500
    assert BatchLimits().shrink_floor == 1_000


def test_chunks_from_several_calls_are_one_batch_for_offsets_drops_and_size() -> None:
    batch = PendingBatch()
    batch.add(RecordBatch.from_records([rec(0, 3, b"aa"), rec(1, 8)]))
    batch.add(RecordBatch.from_records([rec(0, 4), rec(1, 9, b"bbb"), rec(0, 5)]))
    assert len(batch) == 5 and batch.bytes == 2 + 1 + 1 + 3 + 1
    assert batch.offsets() == {P0: OffsetRange(3, 5), P1: OffsetRange(8, 9)}
    assert batch.drop([P1]) == 2
    assert [(r.partition, r.offset) for r in batch.records] == [(0, 3), (0, 4), (0, 5)]
    assert (len(batch), batch.bytes) == (3, 4)
    assert batch.drop([P0]) == 3
    assert (len(batch), batch.bytes, batch.chunks) == (0, 0, [])


def test_take_hands_out_the_oldest_records_within_the_limits_and_keeps_the_rest() -> None:
    batch = PendingBatch()
    batch.add([rec(0, i, b"x" * 10) for i in range(5)])
    batch.add([rec(1, i, b"x" * 10) for i in range(5)])
    first = batch.take(7, 1_000)
    assert [(r.partition, r.offset) for r in first.records] == [(0, i) for i in range(5)] + [(1, 0), (1, 1)]
    assert (first.count, first.bytes) == (7, 70) and (batch.count, batch.bytes) == (3, 30)
    by_bytes = batch.take(100, 25)
    assert [(r.partition, r.offset) for r in by_bytes.records] == [(1, 2), (1, 3)]
    assert batch.offsets() == {P1: OffsetRange(4, 4)} and batch.bytes == 10


def test_take_gives_a_record_over_the_byte_limit_alone_and_never_nothing() -> None:
    batch = PendingBatch()
    batch.add([rec(0, 0, b"x" * 50), rec(0, 1, b"x")])
    assert [r.offset for r in batch.take(10, 20).records] == [0]
    assert [r.offset for r in batch.take(10, 20).records] == [1]
    assert len(batch.take(10, 20)) == 0


def test_prepended_records_come_out_first() -> None:
    newer, older = PendingBatch(), PendingBatch()
    newer.add([rec(0, 5), rec(0, 6)])
    older.add([rec(0, 3), rec(0, 4)])
    newer.prepend(older)
    assert [r.offset for r in newer.take(3, 1_000).records] == [3, 4, 5]
    assert newer.offsets() == {P0: OffsetRange(6, 6)} and newer.count == 1
