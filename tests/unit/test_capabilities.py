"""The capability gate against recorded ApiVersions: a real Kafka 4.3.1 broker and a synthetic Kafka 2.2."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from static_consumer._base.errors import (
    BrokerUnavailableError,
    CapabilityError,
    SessionTimeoutOutOfBoundsError,
    StaticMembershipUnsupportedError,
)
from static_consumer._core.gate import StaticDecision
from static_consumer._core.modes import decide
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.probe import probe
from static_consumer.settings import ConsumerSettings

DATA = Path(__file__).parent / "data"


def load(name: str) -> BrokerCapabilities:
    return BrokerCapabilities.from_dict(json.loads((DATA / name).read_text()))


KAFKA_431 = load("apiversions_kafka_4_3_1.json")  # recorded with static_consumer._kafka.probe
KAFKA_22 = load("apiversions_kafka_2_2_synthetic.json")


def make(**overrides: Any) -> ConsumerSettings:
    return ConsumerSettings(**({"bootstrap_servers": "k:9092", "group_id": "orders"} | overrides))


def test_recorded_brokers_have_the_expected_capabilities() -> None:
    assert (KAFKA_431.join_group_max_version, KAFKA_22.join_group_max_version) == (9, 4)
    assert KAFKA_431.supports_classic_static and not KAFKA_22.supports_classic_static
    assert KAFKA_431.supports_consumer_protocol and not KAFKA_22.supports_consumer_protocol
    assert KAFKA_431.supports_leave_group_batch and not KAFKA_22.supports_leave_group_batch
    assert KAFKA_431.group_min_session_timeout_ms == 1000  # the test broker lowers the 6000 default
    assert KAFKA_431.consumer_session_timeout_ms == 45000 and KAFKA_22.consumer_session_timeout_ms is None


def test_fixture_format_round_trips() -> None:
    for caps in (KAFKA_431, KAFKA_22):
        assert BrokerCapabilities.from_dict(json.loads(json.dumps(caps.to_dict()))) == caps


def test_a_broker_without_joingroup_has_no_static_support() -> None:
    caps = BrokerCapabilities(api_versions={})
    assert caps.join_group_max_version is None and not caps.supports_classic_static
    with pytest.raises(StaticMembershipUnsupportedError, match="JoinGroup API"):
        decide(make(), caps)


# --- classic protocol: each policy on each broker ------------------------------------------------


@pytest.mark.parametrize("policy", ["require", "warn"])
def test_new_broker_gives_static_membership(policy: str) -> None:
    decision = decide(make(static_policy=policy), KAFKA_431)
    assert decision == StaticDecision(True, ("JoinGroup v9 >= v5",), ())


def test_dynamic_policy_never_goes_static() -> None:
    for caps in (KAFKA_431, KAFKA_22):
        decision = decide(make(static_policy="dynamic"), caps)
        assert not decision.static and decision.reasons == ("static_policy='dynamic'",)
        assert decision.warnings == ()


def test_old_broker_with_require_names_what_is_missing() -> None:
    with pytest.raises(StaticMembershipUnsupportedError) as info:
        decide(make(), KAFKA_22)
    message = str(info.value)
    assert "JoinGroup v5 (broker max v4)" in message and "Kafka 2.2" in message
    assert "static_policy='warn'" in message
    assert info.value.retriable is False


def test_old_broker_with_warn_falls_back_to_dynamic_with_a_warning() -> None:
    decision = decide(make(static_policy="warn"), KAFKA_22)
    assert not decision.static
    assert any("JoinGroup v5 (broker max v4)" in w and "rebalance" in w for w in decision.warnings)


# --- session timeout bounds: checked whatever the policy, because the join itself would fail ----


@pytest.mark.parametrize("policy", ["require", "warn", "dynamic"])
def test_session_timeout_below_broker_minimum(policy: str) -> None:
    with pytest.raises(SessionTimeoutOutOfBoundsError) as info:
        decide(make(static_policy=policy, session_timeout_ms=500), KAFKA_431)
    assert "[1000, 1800000]" in str(info.value) and "Set session_timeout_ms" in str(info.value)
    assert info.value.kafka_error_code == 26
    # A configuration error (exit 78: change the setting), still caught as a CapabilityError.
    assert info.value.exit_code == 78 and isinstance(info.value, CapabilityError)


def test_session_timeout_above_old_broker_maximum() -> None:
    s = make(static_policy="warn", session_timeout_ms=600000, max_poll_interval_ms=600000)
    with pytest.raises(SessionTimeoutOutOfBoundsError, match=r"\[6000, 300000\]"):
        decide(s, KAFKA_22)


def test_unknown_bounds_are_a_warning_not_a_failure() -> None:
    caps = replace(KAFKA_431, group_min_session_timeout_ms=None, group_max_session_timeout_ms=None)
    decision = decide(make(session_timeout_ms=500), caps)
    assert decision.static and any("not checked before joining" in w for w in decision.warnings)
    assert any("DESCRIBE_CONFIGS on the Cluster" in w for w in decision.warnings)


def test_classic_warns_when_a_restart_outlasts_the_session() -> None:
    short = decide(make(session_timeout_ms=10000, expected_restart_ms=30000), KAFKA_431)
    assert short.static and any("expected_restart_ms (30000 ms)" in w for w in short.warnings)
    assert decide(make(expected_restart_ms=30000), KAFKA_431).warnings == ()


# --- consumer protocol (KIP-848) -------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["require", "warn"])
def test_consumer_protocol_on_new_broker_is_static(policy: str) -> None:
    decision = decide(make(protocol="consumer", static_policy=policy), KAFKA_431)
    assert decision.static and decision.warnings == ()


def test_consumer_protocol_with_dynamic_policy() -> None:
    assert not decide(make(protocol="consumer", static_policy="dynamic"), KAFKA_431).static


@pytest.mark.parametrize("policy", ["require", "warn", "dynamic"])
def test_consumer_protocol_on_old_broker_fails_whatever_the_policy(policy: str) -> None:
    with pytest.raises(CapabilityError) as info:
        decide(make(protocol="consumer", static_policy=policy), KAFKA_22)
    assert "ConsumerGroupHeartbeat" in str(info.value) and "protocol='classic'" in str(info.value)


def test_consumer_protocol_warns_when_the_broker_session_is_shorter_than_a_restart() -> None:
    decision = decide(make(protocol="consumer", expected_restart_ms=60000), KAFKA_431)
    assert decision.static
    assert any("group.consumer.session.timeout.ms (45000 ms)" in w for w in decision.warnings)
    assert decide(make(protocol="consumer", expected_restart_ms=30000), KAFKA_431).warnings == ()


# --- the probe's failure path (no broker needed: nothing listens on port 1) -----------------------


def test_unreachable_bootstrap_is_retriable_and_bounded() -> None:
    threads_before = set(threading.enumerate())
    settings = make(bootstrap_servers="127.0.0.1:1", connect_timeout_s=0.5)
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError) as info:
        probe(settings)
    elapsed = time.monotonic() - started
    assert elapsed < 0.5 + 1.0
    message = str(info.value)
    assert info.value.retriable and "127.0.0.1:1" in message and "connect_timeout_s" in message
    time.sleep(0.05)
    assert set(threading.enumerate()) <= threads_before  # the client's IO thread was stopped
