"""Bad input fails with a clear, typed error in bounded time.

Unit tests cover the rules themselves: Kafka's instance-id rule and its messages
(tests/unit/test_identity.py), every library-owned passthrough key and the classic-only keys under KIP-848
(tests/unit/test_settings.py). These tests cover what those cannot: the order in which StaticConsumer.start()
checks things (identity before any network I/O), the bound on an unreachable bootstrap, and the environment
route.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from static_consumer import (
    BrokerUnavailableError,
    ConfigurationError,
    ConsumerSettings,
    InvalidInstanceIdError,
    StaticConsumer,
    exit_code_for,
)
from static_consumer_lab.brokers import create_topic, describe_consumer_group, produce

CONNECT_TIMEOUT_S = 3.0
SLACK_S = 10.0  # interpreter, DNS-free connect refusals and client teardown; generous on purpose


@pytest.fixture
def dead_bootstrap() -> Iterator[str]:
    """127.0.0.1:<port> where nothing listens: bound (so no other test takes it) but never listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def _settings(bootstrap: str, **overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": "bad-input",
        "topics": ("t",),
        "instance_id": "orders-0",
        "connect_timeout_s": CONNECT_TIMEOUT_S,
    }
    return ConsumerSettings(**{**values, **overrides})


def _start(settings: ConsumerSettings, env: dict[str, str] | None = None) -> tuple[BaseException, float]:
    consumer = StaticConsumer(settings, env=env or {})
    began = time.monotonic()
    with pytest.raises(Exception) as info:
        consumer.start()
    elapsed = time.monotonic() - began
    consumer.close()
    return info.value, elapsed


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_unreachable_bootstrap_is_broker_unavailable_within_the_connect_timeout(
    protocol: str, dead_bootstrap: str
) -> None:
    threads_before = threading.active_count()
    error, elapsed = _start(_settings(dead_bootstrap, protocol=protocol))
    print(f"{protocol}: BrokerUnavailableError after {elapsed:.1f} s (connect_timeout_s={CONNECT_TIMEOUT_S})")
    assert isinstance(error, BrokerUnavailableError), repr(error)
    assert elapsed <= CONNECT_TIMEOUT_S + SLACK_S
    assert error.retriable and exit_code_for(error) == 75
    message = str(error)
    assert dead_bootstrap in message and "connect_timeout_s" in message  # says what to check or raise
    # The probe closed its clients: a supervisor that retries start() does not pile up threads.
    deadline = time.monotonic() + 10
    while threading.active_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert threading.active_count() <= threads_before, [t.name for t in threading.enumerate()]


@pytest.mark.parametrize(
    ("settings", "env"),
    [
        ({"instance_id": "orders/0 x"}, {}),  # explicit id Kafka would reject
        # a Deployment pod name changes on every rollout
        ({"instance_id": None}, {"POD_NAME": "orders-7d9f8b6c5d-x2x4z"}),
        ({"instance_id": None}, {}),  # no identity at all
    ],
    ids=["illegal-characters", "deployment-pod-name", "no-identity"],
)
def test_identity_errors_come_before_any_network_io(
    settings: dict[str, Any], env: dict[str, str], dead_bootstrap: str
) -> None:
    # With an unreachable bootstrap and a long connect timeout, anything that touched the network first
    # would take connect_timeout_s and fail with BrokerUnavailableError instead.
    error, elapsed = _start(_settings(dead_bootstrap, connect_timeout_s=30, **settings), env)
    assert isinstance(error, InvalidInstanceIdError), repr(error)
    assert exit_code_for(error) == 78
    assert elapsed < 10


def test_invalid_instance_id_never_reaches_the_real_broker(
    kafka_bootstrap_servers: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    group = kafka_group_id_factory()
    error, _ = _start(_settings(kafka_bootstrap_servers, group_id=group, instance_id="a" * 250))
    assert isinstance(error, InvalidInstanceIdError) and "249" in str(error)
    assert list(describe_consumer_group(kafka_bootstrap_servers, group).members) == []


@pytest.mark.parametrize(
    ("passthrough", "field"),
    [
        ('{"group.instance.id": "orders-9"}', "instance_id"),
        ('{"enable.auto.commit": true}', "the library commits after processing"),
        ('{"partition.assignment.strategy": "cooperative-sticky"}', "assignment_strategy"),
    ],
)
def test_conflicting_passthrough_from_the_environment_is_a_configuration_error(
    passthrough: str, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/unit/test_settings.py covers the keyword route for every owned key; this is the deployment route.
    monkeypatch.setenv("STATIC_CONSUMER_LIBRDKAFKA", passthrough)
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(bootstrap_servers="kafka-0:9092", group_id="g", topics=("t",))
    assert field in str(info.value) and info.value.exit_code == 78


MISSING_TOPIC_TIMEOUT_S = 4.0
# Start (probe, join) plus the wait plus one metadata check: generous, the machine is shared.
MISSING_TOPIC_BOUND_S = MISSING_TOPIC_TIMEOUT_S + 40.0


def _consume_until_error_or(consumer: StaticConsumer, bound_s: float) -> tuple[BaseException | None, float]:
    """Poll as run_until_sigterm does until an exception or ``bound_s``; (the exception, seconds)."""
    began = time.monotonic()
    try:
        consumer.start()
        while time.monotonic() - began < bound_s:
            consumer.consume(100, 0.5)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc, time.monotonic() - began
    finally:
        consumer.close()
    return None, time.monotonic() - began


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_missing_topic_and_a_regex_matching_nothing_end_in_a_configuration_error(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    existing = kafka_topic_factory(partitions=2)
    missing, pattern = f"missing-{uuid.uuid4().hex[:8]}", f"^nomatch-{uuid.uuid4().hex[:8]}-.*"
    # The pod route: the bound comes from the environment variable, which settings must read.
    monkeypatch.setenv("STATIC_CONSUMER_MISSING_TOPIC_TIMEOUT_S", str(MISSING_TOPIC_TIMEOUT_S))
    settings = _settings(
        kafka_bootstrap_servers,
        group_id=kafka_group_id_factory(),
        topics=(existing, missing, pattern),
        protocol=protocol,
    )

    error, elapsed = _consume_until_error_or(StaticConsumer(settings, env={}), MISSING_TOPIC_BOUND_S)

    print(f"{protocol}: {type(error).__name__} after {elapsed:.1f} s: {error}")
    assert isinstance(error, ConfigurationError), f"no configuration error within {elapsed:.0f} s: {error!r}"
    assert exit_code_for(error) == 78
    message = str(error)
    assert repr(missing) in message and repr(pattern) in message and repr(existing) not in message
    assert "missing_topic_timeout_s" in message
    assert elapsed >= MISSING_TOPIC_TIMEOUT_S  # it waited for the topics to be created first


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_topics_created_during_the_wait_are_consumed_without_an_error(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_group_id_factory: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The trade-off of a bounded wait: a topic another deployment step creates a little later is fine.
    later = f"later-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("STATIC_CONSUMER_MISSING_TOPIC_TIMEOUT_S", str(MISSING_TOPIC_TIMEOUT_S * 3))
    settings = _settings(
        kafka_bootstrap_servers,
        group_id=kafka_group_id_factory(),
        topics=(later, f"^{later}-.*"),
        protocol=protocol,
        librdkafka={"topic.metadata.refresh.interval.ms": 1000},  # so librdkafka sees the new topics soon
    )
    consumer = StaticConsumer(settings, env={})
    records = []
    began = time.monotonic()
    try:
        consumer.start()
        consumer.consume(10, 1.0)
        create_topic(kafka_bootstrap_servers, later, 1)
        create_topic(kafka_bootstrap_servers, f"{later}-x", 1)
        produce(kafka_bootstrap_servers, later, 5)
        produce(kafka_bootstrap_servers, f"{later}-x", 5)
        # Past the bound, and until both topics were consumed from.
        while time.monotonic() - began < MISSING_TOPIC_BOUND_S:
            records.extend(consumer.consume(100, 0.5))
            if time.monotonic() - began > MISSING_TOPIC_TIMEOUT_S * 3 + 1 and len(records) >= 10:
                break
    finally:
        consumer.close()
    assert {r.topic for r in records} == {later, f"{later}-x"}, len(records)
    assert time.monotonic() - began > MISSING_TOPIC_TIMEOUT_S * 3
