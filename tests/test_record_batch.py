"""RecordBatch: the column form of a batch of records must say exactly what the records say."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from static_consumer.types import Record, RecordBatch

headers = st.lists(st.tuples(st.sampled_from(["a", "trace"]), st.none() | st.binary(max_size=4)), max_size=2)
records = st.lists(
    st.builds(
        Record,
        topic=st.sampled_from(["t", "u"]),
        partition=st.integers(0, 3),
        offset=st.integers(0, 10_000),
        key=st.none() | st.binary(max_size=6),
        value=st.none() | st.binary(max_size=20),
        timestamp_ms=st.none() | st.integers(0, 2**41),
        timestamp_type=st.integers(0, 2),
        headers=headers.map(tuple),
    ),
    max_size=40,
)


@given(records)
def test_records_survive_the_round_trip(rs: list[Record]) -> None:
    batch = RecordBatch.from_records(rs)
    assert len(batch) == len(rs)
    assert batch.records() == rs
    assert list(batch) == rs
    assert (batch.headers is None) == all(not r.headers for r in rs)


@given(records)
def test_bounds_positions_and_size_match_the_records(rs: list[Record]) -> None:
    batch = RecordBatch.from_records(rs)
    positions = {(r.topic, r.partition) for r in rs}
    assert batch.positions() == positions
    lowest, highest = batch.offset_bounds()
    assert lowest == {p: min(r.offset for r in rs if (r.topic, r.partition) == p) for p in positions}
    assert highest == {p: max(r.offset for r in rs if (r.topic, r.partition) == p) for p in positions}
    assert batch.highest_offsets() == highest
    assert batch.payload_bytes() == sum(
        len(r.key or b"") + len(r.value or b"") + sum(len(n) + len(v or b"") for n, v in r.headers)
        for r in rs
    )


@given(records, st.sets(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 3))))
def test_select_keeps_exactly_the_records_of_the_wanted_partitions(
    rs: list[Record], keep: set[tuple[str, int]]
) -> None:
    picked = RecordBatch.from_records(rs).select(keep)
    assert picked.records() == [r for r in rs if (r.topic, r.partition) in keep]
