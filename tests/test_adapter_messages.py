"""The adapter's batch conversion of confluent-kafka messages equals its per-message conversion."""

from __future__ import annotations

import confluent_kafka
import pytest

from static_consumer._core.confluent import _convert, _message
from static_consumer._core.seam import PollError
from static_consumer.types import Record


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
    got = _convert(batch, topic)
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
    batch = _convert(PLAIN, "orders")
    assert not isinstance(batch, list)
    assert batch.topic == "orders"
    assert batch.highest_offsets() == {("orders", p): max(range(p, 50, 3)) for p in range(3)}
    assert batch.offset_bounds()[0] == {("orders", p): p for p in range(3)}
    assert batch.values == [m.value() for m in PLAIN]
    assert batch.timestamps_ms == [m.timestamp()[1] for m in PLAIN]
    assert batch.headers is None
