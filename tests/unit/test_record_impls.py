"""The native Record and its pure-Python twin behave as the named tuple Record did, field for field and
operation for operation (Hypothesis), whether built by ``Record(...)`` or made from a client message;
and their adapter helpers (``wrap``, ``column``) give the same results."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import confluent_kafka
import pytest
from hypothesis import given
from hypothesis import strategies as st
from messages import IMPLEMENTATIONS

from static_consumer._base.records import pure as _pyrecord


class Record(NamedTuple):  # the reference: the named tuple Record as it was
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


stamps = st.one_of(st.just((0, None)), st.tuples(st.sampled_from([1, 2]), st.integers(0, 2**62)))
optional_bytes = st.none() | st.binary(max_size=8)
references = st.builds(
    lambda topic, partition, offset, key, value, stamp, headers: Record(
        topic, partition, offset, key, value, stamp[1], stamp[0], headers
    ),
    st.sampled_from(["orders", "payments"]),
    st.integers(0, 3),
    st.integers(0, 2**62),
    optional_bytes,
    optional_bytes,
    stamps,
    st.lists(st.tuples(st.text(max_size=4), optional_bytes), max_size=3).map(tuple),
)


def message_of(ref: Record) -> confluent_kafka.Message:
    return confluent_kafka.Message(
        topic=ref.topic,
        partition=ref.partition,
        offset=ref.offset,
        key=ref.key,
        value=ref.value,
        timestamp=(ref.timestamp_type, 0 if ref.timestamp_ms is None else ref.timestamp_ms),
        headers=list(ref.headers) or None,
    )


def makers(impl: ModuleType) -> dict[str, Callable[[Record], Any]]:
    def wrapped(ref: Record) -> Any:
        msgs = [message_of(ref)]
        assert impl.wrap(msgs, None) == {(ref.topic, ref.partition): ref.offset}
        return msgs[0]

    return {
        "built": lambda ref: impl.Record(*ref),
        "by keyword": lambda ref: impl.Record(**ref._asdict()),
        "wrap_one": lambda ref: impl.wrap_one(message_of(ref)),
        "wrap": wrapped,
    }


def outcome(call: Callable[[], Any]) -> Any:
    """What a call returns, or the type of what it raises."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - compared, not handled
        return type(exc)


def matched(r: Any, cls: type) -> Any:
    match r:
        case cls(topic=t, offset=o, headers=()):  # type: ignore[misc]
            return ("keyword", t, o)
        case cls(t, p, o, k):  # type: ignore[misc]
            return ("positional", t, p, o, k)
    return None


def sequence_matched(r: Any) -> Any:
    match r:
        case (t, p, _, _, _, _, _, ()):
            return ("no headers", t, p)
        case (t, *rest):
            return ("rest", t, len(rest))
    return None


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@given(ref=references, other=references, index=st.integers(-9, 8), cut=st.slices(10))
def test_a_record_behaves_as_the_named_tuple(
    impl: ModuleType, ref: Record, other: Record, index: int, cut: slice
) -> None:
    for kind, make in makers(impl).items():
        r, o = make(ref), make(other)
        assert type(r) is impl.Record, kind
        assert repr(r) == repr(ref) and str(r) == str(ref)
        assert tuple(r) == tuple(ref) and list(r) == list(ref) and len(r) == 8
        assert [getattr(r, f) for f in Record._fields] == list(ref)
        assert hash(r) == hash(ref)
        assert (r == ref, ref == r, r != ref, r == o, r != o) == (
            True,
            True,
            False,
            ref == other,
            ref != other,
        )
        assert outcome(lambda: r < o) == outcome(lambda: ref < other)  # noqa: B023 - called at once
        assert outcome(lambda: r >= tuple(other)) == outcome(lambda: ref >= other)  # noqa: B023
        assert outcome(lambda: r[index]) == outcome(lambda: ref[index])  # noqa: B023
        assert r[cut] == ref[cut]
        assert (r + tuple(other), tuple(other) + r, r * 2) == (ref + other, other + ref, ref * 2)
        assert (other.value in r, r.count(other.value)) == (other.value in ref, ref.count(other.value))
        assert outcome(lambda: r.index(other.key)) == outcome(lambda: ref.index(other.key))  # noqa: B023
        assert r._asdict() == ref._asdict()
        assert r._replace(offset=other.offset, headers=other.headers) == ref._replace(
            offset=other.offset, headers=other.headers
        )
        assert impl.Record._make(ref) == ref
        assert matched(r, impl.Record) == matched(ref, Record)
        assert sequence_matched(r) == sequence_matched(ref)


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@given(ref=references)
def test_a_record_pickles_to_an_equal_built_one(impl: ModuleType, ref: Record) -> None:
    import static_consumer

    with pytest.MonkeyPatch.context() as patch:  # pickles find the Record at static_consumer.Record
        patch.setattr(static_consumer, "Record", impl.Record)
        for make in makers(impl).values():
            again = pickle.loads(pickle.dumps(make(ref)))
            assert again == ref and type(again) is impl.Record


batches = st.lists(references, max_size=30).map(lambda refs: sorted(refs, key=lambda r: r.offset))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
@given(refs=batches, one_topic=st.booleans())
def test_wrap_and_column_agree_with_the_named_tuples(
    impl: ModuleType, refs: list[Record], one_topic: bool
) -> None:
    if one_topic:
        refs = [r._replace(topic="orders") for r in refs]
    msgs = [message_of(r) for r in refs]
    highest = impl.wrap(msgs, "orders" if one_topic else None)
    expected: dict[tuple[str, int], int] = {}
    for r in refs:  # the client's order: each partition's records come in offset order
        expected[(r.topic, r.partition)] = r.offset
    assert highest == expected
    assert msgs == refs and all(type(r) is impl.Record for r in msgs)
    for index, name in enumerate(Record._fields):
        assert impl.column(msgs, index) == [getattr(r, name) for r in refs]


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_wrap_leaves_a_batch_with_an_error_event_alone(impl: ModuleType) -> None:
    error = confluent_kafka.KafkaError(confluent_kafka.KafkaError._PARTITION_EOF)
    msgs = [message_of(Record("t", 0, 1, None, None, None, 0)), confluent_kafka.Message(error=error)]
    before = list(msgs)
    assert impl.wrap(msgs, "t") is None and msgs == before


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_wrap_leaves_the_batch_alone_when_a_value_cannot_become_bytes(impl: ModuleType) -> None:
    # Values are read as the records are made (a text value, from a consumer with deserializers, that
    # is no UTF-8 fails there): the list keeps its messages, none half replaced.
    msgs = [
        confluent_kafka.Message(topic="t", partition=0, offset=i, value="v" if i < 2 else "\udcff")
        for i in range(3)
    ]
    before = list(msgs)
    with pytest.raises(UnicodeEncodeError):
        impl.wrap(msgs, "t")
    assert all(a is b for a, b in zip(msgs, before, strict=True))


@pytest.mark.parametrize("impl", IMPLEMENTATIONS)
def test_text_keys_values_and_headers_become_bytes(impl: ModuleType) -> None:
    # A consumer with deserializers could hand out str; the Record's fields are bytes, as before.
    msg = confluent_kafka.Message(
        topic="t", partition=0, offset=1, key="ké", value="v", timestamp=(1, 5), headers={"h": "x", "n": None}
    )
    assert impl.wrap_one(msg) == ("t", 0, 1, "ké".encode(), b"v", 5, 1, (("h", b"x"), ("n", None)))


def test_the_timestamp_constant_is_librdkafkas() -> None:
    # Both implementations take type 0 for "no timestamp" without importing confluent_kafka.
    assert confluent_kafka.TIMESTAMP_NOT_AVAILABLE == _pyrecord._TIMESTAMP_NOT_AVAILABLE == 0
