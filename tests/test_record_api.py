"""What users rely on in a Record and in the list consume() returns; pinned so a faster design keeps it.

Record is a NamedTuple: attribute access, construction by position or keyword, value equality (also
with a plain tuple), hashing, its repr, tuple unpacking and indexing, the namedtuple helpers, and both
class and sequence patterns in ``match``. Records the adapter builds from the client's messages are
exactly such Records. consume() returns a RecordList: a list in every respect, which also carries the
highest offset per partition for commit(records) and forgets it when the list changes.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import confluent_kafka
import pytest

from static_consumer._core.confluent import _convert, _records
from static_consumer.types import Record, RecordBatch, RecordList, TopicPartition

R = Record("orders", 2, 41, b"k", b"v", 1_700_000_000_123, 1, (("trace", b"abc"),))


def test_fields_by_name_and_position() -> None:
    assert (R.topic, R.partition, R.offset, R.key, R.value) == ("orders", 2, 41, b"k", b"v")
    assert (R.timestamp_ms, R.timestamp_type, R.headers) == (1_700_000_000_123, 1, (("trace", b"abc"),))
    assert R[4] == b"v" and R[-1] == R.headers and len(R) == 8
    topic, partition, offset, *_ = R
    assert (topic, partition, offset) == ("orders", 2, 41)
    assert R.topic_partition == TopicPartition("orders", 2)
    assert Record._fields == (
        "topic",
        "partition",
        "offset",
        "key",
        "value",
        "timestamp_ms",
        "timestamp_type",
        "headers",
    )


def test_construction_equality_hash_and_repr() -> None:
    by_keyword = Record(
        topic="orders",
        partition=2,
        offset=41,
        key=b"k",
        value=b"v",
        timestamp_ms=1_700_000_000_123,
        timestamp_type=1,
        headers=(("trace", b"abc"),),
    )
    assert by_keyword == R and hash(by_keyword) == hash(R)
    assert R == ("orders", 2, 41, b"k", b"v", 1_700_000_000_123, 1, (("trace", b"abc"),))
    assert Record("t", 0, 1, None, None, None, 0).headers == ()  # headers default to none
    assert R != R._replace(offset=42) and {R, by_keyword} == {R}
    assert repr(Record("t", 0, 1, None, b"v", None, 0)) == (
        "Record(topic='t', partition=0, offset=1, key=None, value=b'v', timestamp_ms=None, "
        "timestamp_type=0, headers=())"
    )
    assert R._asdict()["value"] == b"v" and isinstance(R, tuple)
    with pytest.raises(AttributeError):
        R.value = b"other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(R)) == R and copy.copy(R) == R


def test_pattern_matching() -> None:
    match R:
        case Record(topic="orders", partition=p, value=v):
            assert (p, v) == (2, b"v")
        case _:
            pytest.fail("keyword class pattern")
    match R:
        case Record(t, p, o):
            assert (t, p, o) == ("orders", 2, 41)
        case _:
            pytest.fail("positional class pattern")
    match R:
        case (t, _, _, _, value, *_):
            assert (t, value) == ("orders", b"v")
        case _:
            pytest.fail("sequence pattern")


def _msg(offset: int, partition: int, **kw: object) -> confluent_kafka.Message:
    fields: dict[str, object] = {
        "topic": "orders",
        "partition": partition,
        "offset": offset,
        "key": b"k%d" % offset,
        "value": b"v%d" % offset,
        "timestamp": (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + offset),
        "headers": None,
    }
    fields.update(kw)
    return confluent_kafka.Message(**fields)


@pytest.mark.parametrize("topic", [None, "orders"], ids=["topic-unknown", "topic-known"])
def test_the_adapter_builds_plain_records(topic: str | None) -> None:
    msgs = [_msg(o, o % 2) for o in range(6)]
    expected = [
        Record("orders", o % 2, o, b"k%d" % o, b"v%d" % o, 1_700_000_000_000 + o, 1) for o in range(6)
    ]
    records = _records(list(msgs), topic)
    assert records == expected and all(type(r) is Record for r in records)
    assert records.highest_offsets() == {("orders", 0): 4, ("orders", 1): 5}
    batch = _convert(msgs, topic)
    assert isinstance(batch, RecordBatch) and list(batch) == expected
    assert all(type(r) is Record for r in batch)


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
