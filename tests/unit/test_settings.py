"""ConsumerSettings: validation at construction, environment loading, messages that say what to change."""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from static_consumer._base.errors import ConfigurationError
from static_consumer.settings import CLASSIC_ONLY_KEYS, OWNED_KEYS, ConsumerSettings, OAuthBearerToken
from static_consumer.settings._docgen import render

ROOT = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {"bootstrap_servers": "kafka-0:9092", "group_id": "orders"}


def make(**overrides: Any) -> ConsumerSettings:
    return ConsumerSettings(**(BASE | overrides))


def error_of(**overrides: Any) -> str:
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(**overrides)
    return str(info.value)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STATIC_CONSUMER_"):
            monkeypatch.delenv(name)


def test_defaults_are_static_friendly() -> None:
    s = make()
    assert (s.protocol, s.assignment_strategy, s.static_policy) == ("classic", "range", "require")
    assert s.session_timeout_ms == 45000 and s.max_poll_interval_ms == 300000
    assert s.instance_id is None and s.instance_id_template == "{pod}"
    assert s.topics == () and dict(s.librdkafka) == {}


def test_settings_are_frozen_including_the_passthrough() -> None:
    s = make(librdkafka={"fetch.min.bytes": 1})
    with pytest.raises(ValidationError):
        s.group_id = "other"
    with pytest.raises(TypeError):
        s.librdkafka["group.instance.id"] = "sneaky"  # type: ignore[index]


def test_environment_supplies_every_kind_of_field(monkeypatch: pytest.MonkeyPatch) -> None:
    env = {
        "STATIC_CONSUMER_BOOTSTRAP_SERVERS": "k0:9092, k1:9092",
        "STATIC_CONSUMER_GROUP_ID": "orders",
        "STATIC_CONSUMER_TOPICS": "payments, refunds,",
        "STATIC_CONSUMER_SESSION_TIMEOUT_MS": "60000",
        "STATIC_CONSUMER_ALLOW_UNSTABLE_INSTANCE_ID": "true",
        "STATIC_CONSUMER_CONNECT_TIMEOUT_S": "2.5",
        "STATIC_CONSUMER_LIBRDKAFKA": '{"fetch.min.bytes": 1024, "check.crcs": true, "client.rack": "a"}',
        "STATIC_CONSUMER_INSTANCE_ID": "",  # empty counts as unset (helm templates often render "")
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    s = ConsumerSettings.load()
    assert s.bootstrap_servers == "k0:9092,k1:9092"
    assert s.topics == ("payments", "refunds")
    assert s.session_timeout_ms == 60000 and s.allow_unstable_instance_id is True
    assert s.connect_timeout_s == 2.5 and s.instance_id is None
    assert dict(s.librdkafka) == {"fetch.min.bytes": 1024, "check.crcs": True, "client.rack": "a"}


def test_keyword_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_GROUP_ID", "from-env")
    assert make(group_id="from-kwargs").group_id == "from-kwargs"
    assert ConsumerSettings.load(bootstrap_servers="k:1").group_id == "from-env"


def test_failures_are_configuration_errors_not_pydantic_errors() -> None:
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings.load(bootstrap_servers="k:1", group_id="g", session_timeout_ms="soon")
    assert isinstance(info.value, ValueError)
    assert not isinstance(info.value, ValidationError)
    assert info.value.__cause__ is None and info.value.__context__ is None
    assert "session_timeout_ms (STATIC_CONSUMER_SESSION_TIMEOUT_MS)" in str(info.value)


def test_missing_fields_name_their_environment_variables() -> None:
    message = error_of()
    assert "STATIC_CONSUMER_BOOTSTRAP_SERVERS" in message and "STATIC_CONSUMER_GROUP_ID" in message


def test_unknown_setting_is_refused() -> None:
    assert "unknown setting 'sesion_timeout_ms'" in error_of(**BASE, sesion_timeout_ms=1)


@pytest.mark.parametrize("servers", ["kafka", "kafka:", ":9092", "kafka:0", "kafka:70000", "kafka:ab", " , "])
def test_bootstrap_servers_need_a_port(servers: str) -> None:
    assert "host:port" in error_of(bootstrap_servers=servers, group_id="g")


@pytest.mark.parametrize(
    ("given", "stored"),
    [(" a:1 , b:2 ", "a:1,b:2"), ("[::1]:9092", "[::1]:9092"), ("SSL://k:9093", "SSL://k:9093")],
)
def test_bootstrap_servers_accept_librdkafka_forms(given: str, stored: str) -> None:
    assert make(bootstrap_servers=given).bootstrap_servers == stored


def test_topics_are_checked_and_regex_subscriptions_allowed() -> None:
    assert make(topics=["^orders-.*", "a.b_c-d"]).topics == ("^orders-.*", "a.b_c-d")
    message = error_of(**BASE, topics="good,bad topic,^(")
    assert "'bad topic'" in message and "'^('" in message and "'good'" not in message


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "sticky"])
def test_sticky_assignors_are_refused_with_the_reason(strategy: str) -> None:
    message = error_of(**BASE, assignment_strategy=strategy)
    assert "member id" in message and "'range' or 'roundrobin'" in message


def test_heartbeat_must_be_below_session_timeout() -> None:
    assert make(session_timeout_ms=9000, heartbeat_interval_ms=3000).heartbeat_interval_ms == 3000
    message = error_of(**BASE, session_timeout_ms=9000, heartbeat_interval_ms=9000)
    assert "must be below session_timeout_ms" in message


def test_max_poll_interval_must_cover_session_timeout() -> None:
    message = error_of(**BASE, session_timeout_ms=120000, max_poll_interval_ms=60000)
    assert "raise max_poll_interval_ms or lower session_timeout_ms" in message


POSITIVE = [
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "max_poll_interval_ms",
    "expected_restart_ms",
    "replicas",
    "connect_timeout_s",
    "shutdown_timeout_s",
]


@pytest.mark.parametrize("field", POSITIVE)
def test_durations_and_counts_must_be_positive(field: str) -> None:
    assert field in error_of(**BASE, **{field: 0})


@pytest.mark.parametrize(
    ("field", "value", "instead"),
    [
        ("session_timeout_ms", 30000, "group.consumer.session.timeout.ms"),
        ("heartbeat_interval_ms", 1000, "group.consumer.heartbeat.interval.ms"),
        ("assignment_strategy", "range", "remote_assignor"),
    ],
)
def test_consumer_protocol_refuses_explicit_classic_fields(field: str, value: object, instead: str) -> None:
    message = error_of(**BASE, protocol="consumer", **{field: value})
    assert field in message and instead in message


def test_consumer_protocol_refuses_classic_fields_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_SESSION_TIMEOUT_MS", "30000")
    assert "session_timeout_ms is not used" in error_of(**BASE, protocol="consumer")


def test_consumer_protocol_accepts_defaults_and_a_remote_assignor() -> None:
    assert make(protocol="consumer", remote_assignor="uniform").remote_assignor == "uniform"
    assert "remote_assignor only applies" in error_of(**BASE, remote_assignor="uniform")


@pytest.mark.parametrize("key", sorted(OWNED_KEYS))
def test_owned_passthrough_keys_name_the_field_to_use(key: str) -> None:
    message = error_of(**BASE, librdkafka={key: "x"})
    assert f"librdkafka[{key!r}]" in message and OWNED_KEYS[key] in message


def test_owned_keys_are_matched_case_insensitively() -> None:
    assert "instance_id" in error_of(**BASE, librdkafka={"Group.Instance.Id": "x"})


@pytest.mark.parametrize("key", sorted(CLASSIC_ONLY_KEYS))
def test_classic_only_passthrough_keys_are_broker_side_under_consumer_protocol(key: str) -> None:
    assert "the broker decides it" in error_of(**BASE, protocol="consumer", librdkafka={key: "1"})


def test_unrelated_passthrough_keys_are_kept() -> None:
    s = make(librdkafka={"fetch.min.bytes": 1, "group.protocol.type": "consumer", "client.rack": "z"})
    assert dict(s.librdkafka)["client.rack"] == "z"


def test_instance_id_with_dynamic_policy_is_contradictory() -> None:
    assert "remove one of them" in error_of(**BASE, static_policy="dynamic", instance_id="orders-0")


def test_ordinal_mode_needs_replicas_and_group_mode_refuses_them() -> None:
    assert make(assignment_mode="ordinal", replicas=3).replicas == 3
    assert "needs replicas" in error_of(**BASE, assignment_mode="ordinal")
    assert "only used with assignment_mode='ordinal'" in error_of(**BASE, replicas=3)


def test_sasl_needs_mechanism_user_and_password() -> None:
    message = error_of(**BASE, security_protocol="SASL_SSL", sasl_username="svc")
    assert "needs sasl_mechanism, sasl_password" in message
    ok = make(
        security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="u", sasl_password="p"
    )
    assert ok.sasl_password is not None and ok.sasl_password.get_secret_value() == "p"


def test_security_settings_that_would_be_ignored_are_refused() -> None:
    assert "set security_protocol to SASL_SSL" in error_of(**BASE, sasl_username="u")
    assert "traffic is not encrypted" in error_of(**BASE, ssl_ca_location="/ca.pem")
    assert "needs both" in error_of(**BASE, security_protocol="SSL", ssl_certificate_location="/c.pem")


def test_hostname_verification_is_on_by_default_and_off_only_with_tls() -> None:
    assert make(security_protocol="SSL").ssl_endpoint_identification is True
    assert (
        make(
            security_protocol="SASL_SSL",
            sasl_mechanism="PLAIN",
            sasl_username="u",
            sasl_password="p",
            ssl_endpoint_identification=False,
        ).ssl_endpoint_identification
        is False
    )
    message = error_of(**BASE, ssl_endpoint_identification=False)
    assert "ssl_* settings are ignored with security_protocol=PLAINTEXT" in message


def _token() -> OAuthBearerToken:
    return OAuthBearerToken("token-value-Kp31", expires_at=4_000_000_000.0)


OAUTH: dict[str, Any] = BASE | {
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "OAUTHBEARER",
    "sasl_oauth_token_provider": _token,
}


def test_oauthbearer_needs_the_provider_and_nothing_else() -> None:
    assert ConsumerSettings(**OAUTH).sasl_oauth_token_provider is _token
    assert "needs sasl_oauth_token_provider" in error_of(**OAUTH | {"sasl_oauth_token_provider": None})
    message = error_of(**OAUTH | {"sasl_username": "u", "sasl_password": "p"})
    assert "sasl_username and sasl_password are not used with sasl_mechanism=OAUTHBEARER" in message
    plain = OAUTH | {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"}
    assert "only used with sasl_mechanism=OAUTHBEARER, not PLAIN" in error_of(**plain)
    assert "set security_protocol to SASL_SSL" in error_of(**OAUTH | {"security_protocol": "SSL"})


def test_the_token_provider_cannot_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_SASL_OAUTH_TOKEN_PROVIDER", "mymodule:fetch_token")
    message = error_of(**{k: v for k, v in OAUTH.items() if k != "sasl_oauth_token_provider"})
    assert "STATIC_CONSUMER_SASL_OAUTH_TOKEN_PROVIDER" in message and "can only be set in code" in message


def test_a_token_provider_that_is_not_callable_is_refused_without_echoing_it() -> None:
    class Holder:
        def __repr__(self) -> str:
            return "token-value-Kp31"

    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(**OAUTH | {"sasl_oauth_token_provider": Holder()})
    assert "sasl_oauth_token_provider" in str(info.value)
    assert "token-value-Kp31" not in "".join(traceback.format_exception(info.value))


def test_all_combination_problems_are_reported_at_once() -> None:
    message = error_of(**BASE, assignment_mode="ordinal", sasl_username="u", librdkafka={"group.id": "x"})
    assert message.count("\n  - ") == 3


def test_every_field_is_documented() -> None:
    undocumented = [n for n, f in ConsumerSettings.model_fields.items() if not f.description]
    assert undocumented == []


def test_committed_configuration_doc_matches_the_generator() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render(), "regenerate it: make docs"


def test_docgen_module_prints_the_page() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "static_consumer.settings._docgen"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0 and result.stdout == render()
    assert "`STATIC_CONSUMER_SESSION_TIMEOUT_MS` | int | `45000` |" in result.stdout
