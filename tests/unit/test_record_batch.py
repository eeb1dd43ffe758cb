"""RecordBatch: the column form of a batch of records must say exactly what the records say."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from static_consumer._base.records import Record, RecordBatch

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


@given(records, st.integers(-1, 45))
def test_split_cuts_the_records_in_order_and_sizes_add_up(rs: list[Record], n: int) -> None:
    batch = RecordBatch.from_records(rs)
    head, tail = batch.split(n)
    assert head.records() == rs[: max(n, 0)] and tail.records() == rs[max(n, 0) :]
    assert batch.payload_sizes() == [RecordBatch.from_records([r]).payload_bytes() for r in rs]
    assert sum(head.payload_sizes()) + sum(tail.payload_sizes()) == batch.payload_bytes()


# -- deferred batches (what the consumer hands out) -------------------------------------------------------

in_client_order = records.map(
    # The client delivers each partition's records in offset order: sort by offset, keep the interleaving.
    lambda rs: sorted(rs, key=lambda r: r.offset)
)


def deferred(rs: list[Record], *, topic: str | None = None) -> tuple[RecordBatch, list[str]]:
    """A deferred batch over ``rs`` and the list of columns its loader was asked for."""
    source = RecordBatch.from_records(rs)
    asked: list[str] = []

    def load(name: str) -> list[object] | None:
        asked.append(name)
        column: list[object] | None = getattr(source, name)
        return column

    return RecordBatch.deferred(len(rs), load, topic=topic), asked


@given(in_client_order)
def test_a_deferred_batch_says_what_its_records_say(rs: list[Record]) -> None:
    batch, _ = deferred(rs)
    eager = RecordBatch.from_records(rs)
    assert batch == eager
    assert batch.records() == rs
    assert batch.positions() == eager.positions()
    assert batch.offset_bounds() == eager.offset_bounds()
    assert batch.highest_offsets() == eager.highest_offsets()
    assert batch.payload_bytes() == eager.payload_bytes()
    assert batch.topic == (rs[0].topic if rs and all(r.topic == rs[0].topic for r in rs) else None)


@given(in_client_order, st.sets(st.tuples(st.sampled_from(["t", "u"]), st.integers(0, 3))))
def test_select_of_a_deferred_batch_keeps_its_order_and_records(
    rs: list[Record], keep: set[tuple[str, int]]
) -> None:
    batch, _ = deferred(rs)
    picked = batch.select(keep)
    wanted = [r for r in rs if (r.topic, r.partition) in keep]
    assert picked.records() == wanted
    assert picked.highest_offsets() == RecordBatch.from_records(wanted).highest_offsets()


@given(in_client_order, st.integers(0, 45))
def test_split_of_a_deferred_batch_keeps_its_records_and_bounds(rs: list[Record], n: int) -> None:
    batch = RecordBatch.of_records(rs)
    head, tail = batch.split(n)
    assert head.records() == rs[:n] and tail.records() == rs[n:]
    assert head.offset_bounds() == RecordBatch.from_records(rs[:n]).offset_bounds()
    assert tail.highest_offsets() == RecordBatch.from_records(rs[n:]).highest_offsets()


def test_a_deferred_batch_builds_only_the_columns_read_once_each() -> None:
    rs = [Record("t", p, o, b"k", b"v" * o, 1_000 + o, 1) for o in range(6) for p in (0, 1)]
    batch, asked = deferred(rs)
    assert len(batch) == 12 and asked == []
    assert sum(map(len, batch.values)) == sum(len(r.value or b"") for r in rs)
    assert batch.values is batch.values
    assert asked == ["values"]
    assert batch.highest_offsets() == {("t", 0): 5, ("t", 1): 5}
    assert sorted(asked) == ["offsets", "partitions", "topics", "values"]


def test_a_known_topic_saves_the_topic_column() -> None:
    rs = [Record("orders", p, o, None, b"v", 1, 1) for o in range(3) for p in (2, 0)]
    batch, asked = deferred(rs, topic="orders")
    assert batch.topic == "orders"
    assert batch.positions() == {("orders", 0), ("orders", 2)}
    lowest, highest = batch.offset_bounds()
    assert lowest == {("orders", 0): 0, ("orders", 2): 0}
    assert highest == {("orders", 0): 2, ("orders", 2): 2}
    assert batch.records() == rs
    assert "topics" not in asked


def test_an_empty_batch_has_no_topic_even_when_the_consumer_reads_one() -> None:
    batch, _ = deferred([], topic="orders")
    assert batch.topic is None and batch.topics == [] and batch.highest_offsets() == {}


def test_columns_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        RecordBatch(["t"], [0], [1, 2], [None], [None], [None], [1])


def test_repr_shows_sizes_not_payloads() -> None:
    batch = RecordBatch.from_records([Record("t", 0, 1, b"secret-key", b"secret-value", None, 0)])
    assert repr(batch) == "RecordBatch(1 records of 1 partitions)"
