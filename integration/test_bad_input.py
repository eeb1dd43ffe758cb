"""Bad input fails with a clear, typed error in bounded time (issue 3, scenario h).

Unit tests cover the rules themselves: Kafka's instance-id rule and its messages (tests/test_identity.py),
every library-owned passthrough key and the classic-only keys under KIP-848 (tests/test_settings.py).
These tests cover what those cannot: the order in which StaticConsumer.start() checks things (identity
before any network I/O), the bound on an unreachable bootstrap, and the environment route.
"""

from __future__ import annotations

import socket
import threading
import time
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
from static_consumer.testing import describe_group

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
    assert list(describe_group(kafka_bootstrap_servers, group).members) == []


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
    # tests/test_settings.py covers the keyword route for every owned key; this is the deployment route.
    monkeypatch.setenv("STATIC_CONSUMER_LIBRDKAFKA", passthrough)
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(bootstrap_servers="kafka-0:9092", group_id="g", topics=("t",))
    assert field in str(info.value) and info.value.exit_code == 78
