"""What users rely on in a Record and in the list consume() returns; pinned so a faster design keeps it.

Both Record implementations (the native one and its pure-Python twin), and both ways a Record comes to
be (built by ``Record(...)``, or made by the adapter from a client message), keep what the named tuple
Record offered: attribute access, construction by position or keyword, value equality (also with a
plain tuple), hashing, ordering, its repr, tuple unpacking, indexing and slicing, ``len``, ``in``,
``+`` and ``*`` with tuples, the namedtuple helpers, pickling and copying, and both class and sequence
patterns in ``match``. One thing changed on purpose: a Record is no tuple (``isinstance(r, tuple)`` is
False), so that a record made from a message can answer from it (docs/benchmarks.md, "Record").
consume() returns a RecordList: a list in every respect, which also carries the highest offset per
partition for commit(records) and forgets it when the list changes.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle
import weakref
from collections.abc import Callable, Hashable, Sequence
from types import ModuleType
from typing import Any

import confluent_kafka
import pytest
from messages import IMPLEMENTATIONS, message

import static_consumer._base.records.impl as _record
from static_consumer._base.records import Record, RecordBatch, RecordList, TopicPartition
from static_consumer._core.confluent import _convert, _records

FIELDS = ("orders", 2, 41, b"k", b"v", 1_700_000_000_123, 1, (("trace", b"abc"),))
AS_MESSAGE = {
    "topic": "orders",
    "partition": 2,
    "offset": 41,
    "key": b"k",
    "value": b"v",
    "timestamp": (1, 1_700_000_000_123),
    "headers": [("trace", b"abc")],
}


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request: pytest.FixtureRequest) -> ModuleType:
    module: ModuleType = request.param
    return module


@pytest.fixture
def pickled_as(impl: ModuleType, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``impl``, as the Record that pickles find at static_consumer.Record."""
    import static_consumer

    monkeypatch.setattr(static_consumer, "Record", impl.Record)
    return impl


@pytest.fixture(params=["built", "from-a-message"])
def made(request: pytest.FixtureRequest, impl: ModuleType) -> Callable[..., Any]:
    """Makes a Record of ``FIELDS`` (with changes), as users build one or as the adapter makes one."""

    def build(**changes: Any) -> Any:
        fields = dict(zip(impl.Record._fields, FIELDS, strict=True), **changes)
        if request.param == "built":
            return impl.Record(**fields)
        ms = fields["timestamp_ms"]
        stamp = (0, 0) if ms is None else (fields["timestamp_type"], ms)
        msg = confluent_kafka.Message(
            topic=fields["topic"],
            partition=fields["partition"],
            offset=fields["offset"],
            key=fields["key"],
            value=fields["value"],
            timestamp=stamp,
            headers=list(fields["headers"]) or None,
        )
        return impl.wrap_one(msg)

    return build


def test_fields_by_name_and_position(made: Callable[..., Any], impl: ModuleType) -> None:
    r = made()
    assert (r.topic, r.partition, r.offset, r.key, r.value) == ("orders", 2, 41, b"k", b"v")
    assert (r.timestamp_ms, r.timestamp_type, r.headers) == (1_700_000_000_123, 1, (("trace", b"abc"),))
    assert r[4] == b"v" and r[-1] == r.headers and len(r) == 8 and r[1:3] == (2, 41)
    topic, partition, offset, *_ = r
    assert (topic, partition, offset) == ("orders", 2, 41)
    assert tuple(r) == FIELDS and list(reversed(r)) == list(reversed(FIELDS))
    assert r.topic_partition == TopicPartition("orders", 2)
    assert (
        impl.Record._fields
        == impl.Record.__match_args__
        == (
            "topic",
            "partition",
            "offset",
            "key",
            "value",
            "timestamp_ms",
            "timestamp_type",
            "headers",
        )
    )
    assert impl.Record._field_defaults == {"headers": ()}
    with pytest.raises(IndexError):
        r[8]
    with pytest.raises(AttributeError):
        r.value = b"other"


def test_construction_equality_hash_order_and_repr(made: Callable[..., Any], impl: ModuleType) -> None:
    r = made()
    by_keyword = impl.Record(
        topic="orders",
        partition=2,
        offset=41,
        key=b"k",
        value=b"v",
        timestamp_ms=1_700_000_000_123,
        timestamp_type=1,
        headers=(("trace", b"abc"),),
    )
    assert by_keyword == r and hash(by_keyword) == hash(r) == hash(FIELDS)
    assert r == FIELDS and FIELDS == r and r != FIELDS[:7] and r != list(FIELDS)
    assert impl.Record("t", 0, 1, None, None, None, 0).headers == ()  # headers default to none
    assert r != r._replace(offset=42) and {r, by_keyword} == {r}
    assert r < r._replace(offset=42) and r >= FIELDS and sorted([made(offset=42), r]) == [r, made(offset=42)]
    assert repr(made(key=None, timestamp_ms=None, timestamp_type=0, headers=())) == (
        "Record(topic='orders', partition=2, offset=41, key=None, value=b'v', timestamp_ms=None, "
        "timestamp_type=0, headers=())"
    )
    assert r._asdict() == dict(zip(impl.Record._fields, FIELDS, strict=True))
    assert impl.Record._make(FIELDS) == r and r._replace(value=b"w").value == b"w"
    with pytest.raises(ValueError, match="unexpected field names"):
        r._replace(bogus=1)
    with pytest.raises(TypeError):
        impl.Record("t", 0, 1)


def test_tuple_operations(made: Callable[..., Any]) -> None:
    r = made()
    assert r + (1,) == (*FIELDS, 1) and (1,) + r == (1, *FIELDS) and r * 2 == FIELDS * 2 == 2 * r
    assert b"v" in r and r.count(b"v") == 1 and r.index(b"v") == 4
    assert isinstance(r, Sequence) and isinstance(r, Hashable) and bool(r)


def test_a_record_is_no_tuple_any_more(made: Callable[..., Any]) -> None:
    # The one change from the named tuple: code that needs a tuple converts, tuple(record).
    assert not isinstance(made(), tuple) and tuple(made()) == FIELDS


def test_pickle_and_copy(made: Callable[..., Any], pickled_as: ModuleType) -> None:
    r, impl = made(), pickled_as
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(r, protocol))
        assert again == r and type(again) is impl.Record
    assert copy.copy(r) == r and copy.deepcopy(r) == r


def test_pattern_matching(made: Callable[..., Any], impl: ModuleType) -> None:
    r = made()
    match r:
        case impl.Record(topic="orders", partition=p, value=v):
            assert (p, v) == (2, b"v")
        case _:
            pytest.fail("keyword class pattern")
    match r:
        case impl.Record(t, p, o):
            assert (t, p, o) == ("orders", 2, 41)
        case _:
            pytest.fail("positional class pattern")
    match r:
        case (t, _, _, _, value, *_):
            assert (t, value) == ("orders", b"v")
        case _:
            pytest.fail("sequence pattern")


def test_a_record_in_a_reference_cycle_is_collected(impl: ModuleType) -> None:
    # A value that can refer back to its record (NamedTuple allowed any value): collectable.
    class Marker:
        pass

    marker = Marker()
    holder: list[object] = [marker]
    record = impl.Record("t", 0, 1, None, holder, None, 0)
    holder.append(record)
    gone = weakref.ref(marker)
    del marker, holder, record
    gc.collect()
    assert gone() is None


def test_the_native_record_is_used_when_built() -> None:
    from messages import NATIVE_MODULE

    forced = os.environ.get(_record.PURE_PYTHON_ENV, "") not in ("", "0")
    if os.environ.get("CI") == "true":
        assert NATIVE_MODULE is not None, "CI installs with a C compiler: the native Record must be built"
    assert _record.NATIVE == (NATIVE_MODULE is not None and not forced)
    assert Record is (NATIVE_MODULE.Record if _record.NATIVE and NATIVE_MODULE else _record.Record)


@pytest.mark.parametrize("topic", [None, "orders"], ids=["topic-unknown", "topic-known"])
def test_the_adapter_makes_plain_records(topic: str | None) -> None:
    msgs = [message(o, o % 2) for o in range(6)]
    expected = [
        Record("orders", o % 2, o, b"k%d" % o, b"v%d" % o, 1_700_000_000_000 + o, 1) for o in range(6)
    ]
    records = _records(list(msgs), topic)
    assert records == expected and all(type(r) is Record for r in records)
    assert isinstance(records, RecordList)
    assert records.highest_offsets() == {("orders", 0): 4, ("orders", 1): 5}
    batch = _convert(list(msgs), topic)
    assert isinstance(batch, RecordBatch) and list(batch) == expected
    assert all(type(r) is Record for r in batch)


R = Record(*FIELDS)


def test_a_record_list_is_a_list() -> None:
    rs = RecordList([R, R._replace(offset=42)])
    assert rs == [R, R._replace(offset=42)] and isinstance(rs, list)
    assert repr(rs) == repr([R, R._replace(offset=42)])
    assert pickle.loads(pickle.dumps(rs)) == rs and rs[1:] == [R._replace(offset=42)]
    assert rs.highest_offsets() == {("orders", 2): 42}


CHANGES: list[Callable[[RecordList], object]] = [
    lambda rs: rs.pop(),
    lambda rs: rs.remove(rs[-1]),
    lambda rs: rs.__delitem__(-1),
    lambda rs: rs.__delitem__(slice(1, None)),
    lambda rs: rs.__setitem__(-1, R),
    lambda rs: rs.__setitem__(slice(None), [R]),
    lambda rs: rs.clear(),
    lambda rs: rs.append(R._replace(offset=99)),
    lambda rs: rs.extend([R._replace(offset=99)]),
    lambda rs: rs.insert(0, R._replace(offset=99)),
    lambda rs: rs.__iadd__([R._replace(offset=99)]),
    lambda rs: rs.__imul__(0),
]


@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_record_list_recomputes_its_highest_offsets(change: Callable[[RecordList], object]) -> None:
    rs = RecordList([R, R._replace(offset=42)], highest={("orders", 2): 42})
    change(rs)
    expected: dict[tuple[str, int], int] = {}
    for r in rs:
        expected[(r.topic, r.partition)] = max(r.offset, expected.get((r.topic, r.partition), -1))
    assert rs.highest_offsets() == expected


def test_reordering_keeps_the_highest_offsets() -> None:
    rs = RecordList([R, R._replace(offset=42)], highest={("orders", 2): 42})
    rs.sort(key=lambda r: -r.offset)
    rs.reverse()
    assert rs.highest_offsets() == {("orders", 2): 42}
