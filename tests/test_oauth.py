"""OAUTHBEARER without a broker: one provider adapted to all three clients, refreshing, and the token never
shown (repr, JSON dumps, redacted client configs, kafka-python's DEBUG logs). The settings rules are in
test_settings.py."""

from __future__ import annotations

import logging
from typing import Any

import confluent_kafka
import pytest
from kafka.net.sasl.oauth import AbstractTokenProvider

from static_consumer import OAuthBearerToken
from static_consumer._config import admin_config, consumer_config, kafka_python_config
from static_consumer._oauth import REFRESH_AT, _Refreshing, kafka_python_token_provider, librdkafka_oauth_cb
from static_consumer._secrets import redact_items
from static_consumer.settings import ConsumerSettings

TOKEN = "eyJhbGciOiJub25lIn0.token-value-Kp31."


def provider() -> OAuthBearerToken:
    return OAuthBearerToken(TOKEN, expires_at=4_000_000_000.0, principal="svc", extensions={"ext": "1"})


OAUTH: dict[str, Any] = {
    "bootstrap_servers": "127.0.0.1:1",
    "group_id": "orders",
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "OAUTHBEARER",
    "sasl_oauth_token_provider": provider,
}


def test_the_provider_and_its_tokens_are_never_shown() -> None:
    s = ConsumerSettings(**OAUTH)
    texts = [repr(s), str(s), s.model_dump_json(), repr(s.model_dump()), repr(provider())]
    assert all(TOKEN not in t for t in texts)
    assert "sasl_oauth_token_provider" not in s.model_dump_json()  # code only: never serialized
    assert "expires_at=4000000000.0" in repr(provider())  # the expiry is no secret


def test_one_provider_feeds_all_three_clients() -> None:
    s = ConsumerSettings(**OAUTH)
    for cfg in (consumer_config(s, "orders-0"), admin_config(s)):
        assert cfg["sasl.mechanisms"] == "OAUTHBEARER"
        assert "sasl.username" not in cfg and "sasl.password" not in cfg
        oauth_cb = cfg["oauth_cb"]
        assert callable(oauth_cb) and oauth_cb("") == (TOKEN, 4_000_000_000.0, "svc", {"ext": "1"})
        assert TOKEN not in repr(redact_items(cfg.items()))
    tokens = kafka_python_config(s)["sasl_oauth_token_provider"]
    assert isinstance(tokens, AbstractTokenProvider)  # kafka-python refuses anything else
    assert (tokens.token(), tokens.extensions()) == (TOKEN, {"ext": "1"})
    assert TOKEN not in repr(tokens)  # kafka-python logs its configuration at DEBUG
    confluent_kafka.Consumer(consumer_config(s, "orders-0")).close()  # librdkafka accepts the config


def test_a_provider_returning_something_else_is_a_type_error_naming_it() -> None:
    oauth_cb = librdkafka_oauth_cb(lambda: TOKEN)  # type: ignore[arg-type, return-value]
    with pytest.raises(TypeError, match="returned str, not an OAuthBearerToken"):
        oauth_cb("")
    with pytest.raises(TypeError, match="non-empty str"):
        OAuthBearerToken("", expires_at=1.0)


def test_kafka_python_gets_the_last_token_until_80_percent_of_its_lifetime() -> None:
    now = [1000.0]
    issued: list[float] = []

    def fresh() -> OAuthBearerToken:
        issued.append(now[0])
        return OAuthBearerToken(f"t{len(issued)}", expires_at=now[0] + 100)

    tokens = _Refreshing(fresh, clock=lambda: now[0])
    assert tokens.current().value == "t1"
    now[0] += REFRESH_AT * 100 - 1
    assert tokens.current().value == "t1"  # still well within its lifetime
    now[0] += 1
    assert tokens.current().value == "t2"  # 80% passed: refreshed before it expires
    assert issued == [1000.0, 1080.0]


def test_an_expired_token_is_asked_for_again_on_the_next_login() -> None:
    calls = []

    def stale() -> OAuthBearerToken:
        calls.append(1)
        return OAuthBearerToken("old", expires_at=500.0)

    tokens = _Refreshing(stale, clock=lambda: 1000.0)
    tokens.current()
    tokens.current()
    assert len(calls) == 2


def test_kafka_python_adapter_is_built_per_client() -> None:
    first, second = kafka_python_token_provider(provider), kafka_python_token_provider(provider)
    assert first is not second and first.token() == second.token() == TOKEN


def test_tokens_handed_to_kafka_python_are_masked_in_its_debug_logs(caplog: pytest.LogCaptureFixture) -> None:
    request_log = logging.getLogger("kafka.net.connection")  # kafka-python logs SASL requests here
    caplog.set_level(logging.DEBUG, logger=request_log.name)  # restored after the test
    tokens = kafka_python_token_provider(provider)
    sent = tokens.token()
    request_log.debug(
        "Request 3: SaslAuthenticateRequest(auth_bytes=%r)", f"n,,\x01auth=Bearer {sent}\x01\x01".encode()
    )
    assert caplog.records and all(TOKEN not in r.getMessage() for r in caplog.records)
    assert "auth=Bearer **********" in caplog.text
