"""A subscription to a topic that does not exist ends in MissingTopicError after missing_topic_timeout_s
(the real-broker behaviour, both protocols, is in integration/test_bad_input_broker.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fakes import MODERN, TRANSPORT_ERROR, Assign, FakeAdapter, FakeFactory, rec, tp

from static_consumer import ConfigurationError, MissingTopicError, exit_code_for
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import FatalError, MembershipEvent, MembershipListener
from static_consumer._core.seams import Seams
from static_consumer._core.topics import CHECK_INTERVAL_S
from static_consumer.settings import ConsumerSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Fatal(MembershipListener):
    def __init__(self) -> None:
        self.events: list[MembershipEvent] = []

    def on_fatal(self, event: FatalError) -> None:
        self.events.append(event)


def started(
    missing: set[str],
    clock: Clock,
    listeners: tuple[MembershipListener, ...] = (),
    *,
    read_failures: int = 0,
    **fields: Any,
) -> tuple[StaticConsumer, FakeAdapter]:
    """A started consumer whose client finds ``missing`` absent from the cluster (and fails its first
    ``read_failures`` metadata reads) from the moment it is built: the first look happens at the join."""
    values: dict[str, Any] = {
        "bootstrap_servers": "k:9092",
        "group_id": "g",
        "topics": ("t", "typo", "^x-.*"),
    }
    settings = ConsumerSettings(**{**values, **fields})
    factory = FakeFactory([Assign((tp(0),)), rec(0, 0)] + [None] * 100)

    def build(config: dict[str, Any]) -> FakeAdapter:
        adapter = factory(config)
        adapter.missing_topics = set(missing)
        adapter.topic_read_failures.extend([TRANSPORT_ERROR] * read_failures)
        return adapter

    consumer = StaticConsumer(
        settings,
        env={"POD_NAME": "app-0"},
        listeners=listeners,
        seams=Seams(adapter_factory=build, probe=lambda s, **_: MODERN, clock=clock),
    )
    consumer.start()
    return consumer, factory.last


def test_a_missing_topic_is_warned_about_then_ends_the_consumer_at_the_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, fatal = Clock(), Fatal()
    caplog.set_level(logging.WARNING, logger="static_consumer")
    consumer, adapter = started({"typo", "^x-.*"}, clock, (fatal,), missing_topic_timeout_s=60)
    assert adapter.topic_reads == 1  # looked at the join, before any record was fetched

    assert consumer.consume(10, 0) != []  # the existing topic is consumed meanwhile
    assert "'typo', '^x-.*' match no topic" in caplog.text and "60 s" in caplog.text
    clock.now += 59.9
    consumer.consume(10, 0)
    assert consumer.state is State.RUNNING
    clock.now += 0.1
    with pytest.raises(MissingTopicError) as info:
        consumer.consume(10, 0)

    error = info.value
    assert isinstance(error, ConfigurationError) and exit_code_for(error) == 78 and not error.retriable
    assert "'typo', '^x-.*'" in str(error) and "'t'" not in str(error)
    assert "missing_topic_timeout_s" in str(error) and "STATIC_CONSUMER_TOPICS" in str(error)
    assert consumer.state is State.FAILED
    with pytest.raises(MissingTopicError):  # every later call raises the same error
        consumer.poll(0)
    assert [type(e) for e in fatal.events] == [FatalError]
    consumer.close()
    assert adapter.commits == []  # nothing is committed after the consumer ended


def test_a_topic_created_before_the_deadline_ends_the_watch() -> None:
    clock = Clock()
    consumer, adapter = started({"typo"}, clock, missing_topic_timeout_s=60)
    consumer.consume(10, 0)
    clock.now += 30
    adapter.missing_topics.clear()  # another deployment step created it
    consumer.consume(10, 0)
    reads = adapter.topic_reads
    clock.now += 3600
    consumer.consume(10, 0)
    assert consumer.state is State.RUNNING
    assert adapter.topic_reads == reads  # once everything existed, no more metadata requests
    consumer.close()


def test_metadata_is_read_once_when_every_topic_exists_and_at_intervals_while_one_is_missing() -> None:
    clock = Clock()
    consumer, adapter = started(set(), clock)
    for _ in range(5):
        consumer.consume(10, 0)
        clock.now += CHECK_INTERVAL_S
    assert adapter.topic_reads == 1
    consumer.close()

    consumer, adapter = started({"typo"}, clock, missing_topic_timeout_s=100)
    for _ in range(20):
        consumer.consume(10, 0)
        consumer.consume(10, 0)  # polls in between do not read metadata
        clock.now += CHECK_INTERVAL_S / 2
    assert adapter.topic_reads == 10
    consumer.close()


def test_failed_metadata_reads_never_end_the_consumer() -> None:
    clock = Clock()
    consumer, adapter = started({"typo"}, clock, read_failures=3, missing_topic_timeout_s=10)
    for _ in range(3):
        consumer.consume(10, 0)
        clock.now += CHECK_INTERVAL_S
    assert consumer.state is State.RUNNING  # brokers unreachable: no evidence of a missing topic
    with pytest.raises(MissingTopicError):
        consumer.consume(10, 0)  # the first read that works shows the topic is missing


def test_no_limit_waits_forever_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    caplog.set_level(logging.WARNING, logger="static_consumer")
    consumer, _ = started({"typo"}, clock, missing_topic_timeout_s=None)
    for _ in range(10):
        consumer.consume(10, 0)
        clock.now += 86400
    assert consumer.state is State.RUNNING
    assert caplog.text.count("match no topic") + caplog.text.count("matches no topic") == 1
    assert "without a limit" in caplog.text
    consumer.close()


@pytest.mark.parametrize(("value", "expected"), [("none", None), ("NULL", None), ("300", 300.0)])
def test_the_limit_from_the_environment(
    value: str, expected: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_MISSING_TOPIC_TIMEOUT_S", value)
    settings = ConsumerSettings(bootstrap_servers="k:9092", group_id="g")
    assert settings.missing_topic_timeout_s == expected


def test_ordinal_mode_gives_up_on_a_missing_topic_too() -> None:
    clock = Clock()
    settings = ConsumerSettings(
        bootstrap_servers="k:9092",
        group_id="g",
        topics=("t", "typo"),
        assignment_mode="ordinal",
        replicas=1,
        missing_topic_timeout_s=30,
    )
    adapters: list[FakeAdapter] = []

    def factory(config: dict[str, Any]) -> FakeAdapter:
        adapters.append(FakeAdapter(dict(config), partition_count={"t": 1}, missing_topics={"typo"}))
        return adapters[-1]

    consumer = StaticConsumer(
        settings,
        env={"POD_NAME": "app-0"},
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN, clock=clock),
    )
    consumer.start()
    consumer.consume(10, 0)
    assert consumer.state is State.RUNNING
    clock.now += 30
    with pytest.raises(MissingTopicError, match="'typo'"):
        consumer.consume(10, 0)
    consumer.close()
    assert adapters[-1].calls[-1] == "close"


def test_a_regex_matching_no_visible_topic_names_the_prefixed_acl_that_would_show_them() -> None:
    # A principal sees only the topics it may describe: the regex's topics may exist, hidden.
    clock = Clock()
    fields = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_username": "orders-app",
        "sasl_password": "pw-9",
    }
    consumer, _ = started({"^x-.*"}, clock, missing_topic_timeout_s=1, **fields)
    clock.now += 1
    with pytest.raises(MissingTopicError) as info:
        consumer.consume(10, 0)
    message = str(info.value)
    assert "create the topics" in message and "the brokers hide them from User:orders-app" in message
    assert "grant READ on Topic prefix 'x-' (PREFIXED) for '^x-.*'" in message
    assert "kafka-acls --add --allow-principal User:orders-app --operation Read --topic x- " in message
    assert message.endswith("--resource-pattern-type prefixed)") and "pw-9" not in message
    consumer.close()

    named, _ = started({"typo"}, clock, missing_topic_timeout_s=1)
    clock.now += 1
    with pytest.raises(MissingTopicError) as info:
        named.consume(10, 0)
    assert "hide" not in str(info.value)  # a named topic it may not describe is refused by name instead
    named.close()
