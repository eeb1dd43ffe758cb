"""A group that refuses the member's group protocol (KIP-848 migration policy, no common assignor) ends
the consumer with GroupProtocolMismatchError (exit 69) instead of a join refused forever.

The texts are librdkafka 2.16's against Kafka 4.3.1 with ``group.consumer.migration.policy=disabled``
(integration/test_migration.py runs the same on a broker)."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
from fakes import MODERN, Assign, FakeFactory, rec, tp

from static_consumer._base.codes import ErrorKind, classify
from static_consumer._base.errors import EXIT_UNAVAILABLE, ConsumerClosedError, GroupProtocolMismatchError
from static_consumer._core.confluent import poll_error
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import FatalError, MembershipListener
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer.settings import ConsumerSettings

# A consumer-protocol member joining a classic group with live members, upgrade forbidden.
NOT_A_CONSUMER_GROUP = (
    "Fatal error: Broker: The group id does not exist: ConsumerGroupHeartbeat fatal error: "
    "Broker: The group id does not exist"
)
# A classic member joining a KIP-848 group with live members under the policy 'disabled' (every 2 s).
INCONSISTENT = PollError(
    23, "INCONSISTENT_GROUP_PROTOCOL", "JoinGroup failed: Broker: Inconsistent group protocol", False, False
)


def test_the_table_and_the_adapter_read_both_refusals() -> None:
    assert classify(23) is ErrorKind.PROTOCOL_REFUSED
    error = poll_error(confluent_kafka.KafkaError(confluent_kafka.KafkaError._FATAL, NOT_A_CONSUMER_GROUP))
    assert (error.fatal, error.cause, error.kind) == (True, 69, ErrorKind.PROTOCOL_REFUSED)
    other = poll_error(confluent_kafka.KafkaError(confluent_kafka.KafkaError._FATAL, "Fatal error: Local: x"))
    assert other.kind is ErrorKind.FATAL


class Fatals(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[FatalError] = []

    def on_fatal(self, event: FatalError) -> None:
        self.seen.append(event)


def _consumer(script: list[Any], **settings: Any) -> tuple[StaticConsumer, Fatals]:
    fatals = Fatals()
    values: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "orders", "topics": ("t",)}
    consumer = StaticConsumer(
        ConsumerSettings(**values, **settings),
        listeners=[fatals],
        env={"POD_NAME": "orders-2"},
        seams=Seams(adapter_factory=FakeFactory(script), probe=lambda s, **_: MODERN),
    )
    return consumer, fatals


@pytest.mark.parametrize(
    ("protocol", "refusal", "says"),
    [
        ("classic", INCONSISTENT, "'disabled', which refuses classic members"),
        ("consumer", poll_error(confluent_kafka.KafkaError(-150, NOT_A_CONSUMER_GROUP)), "'upgrade' or"),
    ],
)
def test_a_refused_protocol_ends_the_consumer_with_a_typed_error(
    protocol: str, refusal: PollError, says: str
) -> None:
    consumer, fatals = _consumer([refusal, Assign(tp(0)), rec(0, 1)], protocol=protocol)
    with consumer:
        with pytest.raises(GroupProtocolMismatchError) as raised:
            consumer.poll(0.1)  # the first refusal: not retried for ever
        error = raised.value
        assert error.exit_code == EXIT_UNAVAILABLE and not error.retriable
        message = str(error)
        assert "'orders'" in message and f"protocol={protocol!r}" in message and says in message
        assert "group.consumer.migration.policy" in message and "docs/migration.md" in message
        assert consumer.state is State.FAILED and len(fatals.seen) == 1
        with pytest.raises((GroupProtocolMismatchError, ConsumerClosedError)):
            consumer.poll(0.1)  # nothing more is handed out
