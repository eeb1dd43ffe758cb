"""The adapter's batch conversion of confluent-kafka messages equals its per-message conversion."""

from __future__ import annotations

import gc
from collections.abc import Callable
from types import SimpleNamespace

import confluent_kafka
import pytest

from static_consumer._base.records import Record
from static_consumer._base.records.impl import NATIVE
from static_consumer._core.confluent import _convert, _message, _records
from static_consumer._core.seam import PollError


def _msg(offset: int, **kw: object) -> confluent_kafka.Message:
    fields: dict[str, object] = {
        "topic": "orders",
        "partition": offset % 3,
        "offset": offset,
        "key": f"k{offset}".encode(),
        "value": b"v" * (offset % 7),
        "timestamp": (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_700_000_000_000 + offset),
        "headers": None,
    }
    fields.update(kw)
    return confluent_kafka.Message(**fields)


PLAIN = [_msg(i) for i in range(50)]


@pytest.mark.parametrize(
    "batch",
    [
        pytest.param(PLAIN, id="plain"),
        pytest.param([], id="empty"),
        pytest.param([*PLAIN[:5], _msg(5, key=None, value=None), *PLAIN[6:9]], id="null-key-value"),
        pytest.param([*PLAIN[:3], _msg(3, headers=[("h", b"1"), ("n", None)])], id="headers"),
        pytest.param([_msg(i, headers=[("trace", b"%d" % i)]) for i in range(5)], id="all-headers"),
        pytest.param(
            [*PLAIN[:3], _msg(3, timestamp=(confluent_kafka.TIMESTAMP_NOT_AVAILABLE, 0))], id="no-timestamp"
        ),
        pytest.param(
            [_msg(0, timestamp=(confluent_kafka.TIMESTAMP_LOG_APPEND_TIME, 5)), *PLAIN[1:4]], id="log-append"
        ),
        pytest.param(
            [
                *PLAIN[:2],
                confluent_kafka.Message(
                    topic="orders",
                    partition=0,
                    offset=9,
                    error=confluent_kafka.KafkaError(confluent_kafka.KafkaError._PARTITION_EOF),
                ),
                *PLAIN[2:4],
            ],
            id="error-in-the-middle",
        ),
    ],
)
@pytest.mark.parametrize("topic", [None, "orders"], ids=["topic-unknown", "topic-known"])
def test_batch_conversion_matches_per_message_conversion(
    batch: list[confluent_kafka.Message], topic: str | None
) -> None:
    got = _convert(list(batch), topic)  # the adapter replaces the client's messages in place
    converted = got if isinstance(got, list) else got.records()
    assert converted == [_message(m) for m in batch]
    assert [type(item) for item in converted] == [
        PollError if m.error() is not None else Record for m in batch
    ]


def test_batch_records_carry_every_field() -> None:
    batch = _convert([_msg(4)])
    assert not isinstance(batch, list)
    [record] = batch.records()
    assert record == Record("orders", 1, 4, b"k4", b"vvvv", 1_700_000_000_004, 1, ())
    assert record.topic_partition == ("orders", 1)


def test_batch_offsets_and_columns_match_the_messages() -> None:
    batch = _convert(list(PLAIN), "orders")
    assert not isinstance(batch, list)
    assert batch.topic == "orders"
    assert batch.highest_offsets() == {("orders", p): max(range(p, 50, 3)) for p in range(3)}
    assert batch.offset_bounds()[0] == {("orders", p): p for p in range(3)}
    assert batch.values == [m.value() for m in PLAIN]
    assert batch.timestamps_ms == [m.timestamp()[1] for m in PLAIN]
    assert batch.headers is None


def _collections_while(convert: Callable[[list[confluent_kafka.Message]], list[Record]]) -> int:
    """Garbage collections during a consume loop of 20 batches of 500 messages: each batch made as the
    client makes them, converted, every value read, and kept until the next batch replaces it. Counted
    after a few batches: the first has no predecessor to free, and CPython's free lists of small tuples
    fill up first (a tuple taken from or put back on one does not move the collector's count)."""
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    def batch(number: int) -> list[Record]:
        msgs = [_msg(number * 500 + i) for i in range(500)]
        records = convert(msgs)
        assert sum(len(r.value or b"") for r in records) > 0
        return records

    kept = [batch(0)]  # the user's variable: a batch lives until the next one replaces it
    gc.collect()  # an empty young generation; a full collection also empties the free lists
    for number in range(1, 5):
        kept[0] = batch(number)
    gc.callbacks.append(count)
    try:
        for number in range(5, 25):
            kept[0] = batch(number)
    finally:
        gc.callbacks.remove(count)
    return len(started)


@pytest.mark.skipif(not NATIVE, reason="the pure-Python Record is a garbage-collected object")
def test_a_consume_loop_runs_almost_no_garbage_collection() -> None:
    # One garbage-collected object per record next to the client's messages passes the collector's
    # threshold (700 objects) every batch; native Records are no such objects, and the records of
    # consume() and consume_batch() add no collection to what the client's messages cause.
    assert _collections_while(lambda msgs: [SimpleNamespace(value=m.value()) for m in msgs]) >= 20  # type: ignore[misc]
    assert _collections_while(lambda msgs: _records(msgs, "orders")) <= 2  # type: ignore[arg-type, return-value]
    assert _collections_while(lambda msgs: list(_convert(msgs, "orders"))) <= 2  # type: ignore[arg-type]
