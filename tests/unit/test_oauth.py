"""OAUTHBEARER without a broker: one provider adapted to all three clients, refreshing, and the token never
shown (repr, JSON dumps, redacted client configs, kafka-python's DEBUG logs). The settings rules are in
test_settings.py."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from fakes import FakeFactory, logged_consumer
from kafka.net.sasl.oauth import AbstractTokenProvider

from static_consumer import OAuthBearerToken
from static_consumer._base.errors import AuthenticationError
from static_consumer._core.modes import client_config
from static_consumer._security.oauth import (
    REFRESH_AT,
    TokenFailure,
    TokenSource,
    _Refreshing,
    first_token,
    kafka_python_token_provider,
    librdkafka_oauth_cb,
)
from static_consumer._security.secrets import redact_items
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import admin_config, kafka_python_config

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
    for cfg in (client_config(s, "orders-0"), admin_config(s)):
        assert cfg["sasl.mechanisms"] == "OAUTHBEARER"
        assert "sasl.username" not in cfg and "sasl.password" not in cfg
        oauth_cb = cfg["oauth_cb"]
        assert callable(oauth_cb) and oauth_cb("") == (TOKEN, 4_000_000_000.0, "svc", {"ext": "1"})
        assert TOKEN not in repr(redact_items(cfg.items()))
    tokens = kafka_python_config(s)["sasl_oauth_token_provider"]
    assert isinstance(tokens, AbstractTokenProvider)  # kafka-python refuses anything else
    assert (tokens.token(), tokens.extensions()) == (TOKEN, {"ext": "1"})
    assert TOKEN not in repr(tokens)  # kafka-python logs its configuration at DEBUG
    confluent_kafka.Consumer(client_config(s, "orders-0")).close()  # librdkafka accepts the config


def test_a_provider_returning_something_else_is_a_token_failure_naming_it() -> None:
    oauth_cb = librdkafka_oauth_cb(lambda: TOKEN)  # type: ignore[arg-type, return-value]
    with pytest.raises(TokenFailure, match="returned str, not an OAuthBearerToken"):
        oauth_cb("")
    assert oauth_cb.source.failure == "returned str, not an OAuthBearerToken"
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


def test_an_expired_token_is_refused_with_its_expiry_and_asked_for_again() -> None:
    calls = []

    def stale() -> OAuthBearerToken:
        calls.append(1)
        return OAuthBearerToken("old-token-value", expires_at=940.0)

    tokens = _Refreshing(stale, clock=lambda: 1000.0)
    for _ in range(2):  # never handed to a client, and asked again at the next login
        with pytest.raises(TokenFailure, match=r"returned a token that had expired 60 s before \(at 1970"):
            tokens.current()
    assert len(calls) == 2


class Flaky:
    """A provider of tokens that live 100 s on a clock the test moves (``now``), until ``fail`` is set."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.now = 1000.0
        self.fail: Exception | None = None

    def clock(self) -> float:
        return self.now

    def __call__(self) -> OAuthBearerToken:
        if self.fail is not None:
            raise self.fail
        return OAuthBearerToken(self.value, expires_at=self.now + 100)


def test_kafka_python_keeps_the_current_token_while_the_provider_fails_until_it_expires() -> None:
    provider_ = Flaky("first-token-value")
    tokens = _Refreshing(provider_, clock=provider_.clock)
    assert tokens.current().value == "first-token-value"
    provider_.fail = ConnectionError("identity provider unreachable")
    provider_.now += 90  # past 80%: a refresh is due and fails, the token still works
    assert tokens.current().value == "first-token-value"
    assert tokens.source.lost() is None
    provider_.now += 11  # expired
    with pytest.raises(TokenFailure, match="raised ConnectionError: identity provider unreachable"):
        tokens.current()
    assert tokens.source.lost() == "raised ConnectionError: identity provider unreachable"


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


# -- a provider that fails: typed, bounded, with its reason, never a token ------------------------------


def oauth_settings(provider_: Any, **fields: Any) -> ConsumerSettings:
    return ConsumerSettings(**(OAUTH | {"sasl_oauth_token_provider": provider_} | fields))


def test_a_raising_provider_is_an_authentication_error_with_its_reason_and_never_the_token() -> None:
    leaked = "eyJhbGciOiJub25lIn0.earlier-token-Zq81."
    tokens = kafka_python_token_provider(lambda: OAuthBearerToken(leaked, expires_at=4e9))
    tokens.token()  # handed out once: from now on it is masked wherever a text leaves the process

    def provider_() -> OAuthBearerToken:
        raise RuntimeError(f"identity provider refused the refresh of {leaked}")

    s = oauth_settings(provider_)
    for config in (admin_config(s), kafka_python_config(s), client_config(s, "orders-0")):
        with pytest.raises(AuthenticationError) as caught:
            first_token(config, s, "describe group orders")
        text = str(caught.value)
        assert caught.value.exit_code == 78 and not caught.value.retriable
        assert text.startswith("describe group orders: sasl_oauth_token_provider gave no OAUTHBEARER token")
        assert "(it raised RuntimeError: identity provider refused the" in text
        assert leaked not in text and "**********" in text


def test_an_expired_token_from_the_provider_is_an_authentication_error_naming_the_expiry() -> None:
    s = oauth_settings(lambda: OAuthBearerToken("expired-token-value", expires_at=time.time() - 60))
    with pytest.raises(AuthenticationError, match=r"returned a token that had expired (59|60|61) s before"):
        first_token(admin_config(s), s)


def test_a_provider_that_hangs_fails_within_connect_timeout() -> None:
    release = threading.Event()

    def hangs() -> OAuthBearerToken:
        release.wait(30)
        return provider()

    s = oauth_settings(hangs, connect_timeout_s=0.2)
    began = time.monotonic()
    try:
        with pytest.raises(
            AuthenticationError, match=r"did not return a token within connect_timeout_s=0.2 s"
        ):
            first_token(admin_config(s), s)
    finally:
        release.set()
    assert time.monotonic() - began < 10  # bounded by connect_timeout_s, not a client's 10 s wait


def test_the_first_token_is_fetched_once_and_handed_to_the_clients_first_call() -> None:
    calls: list[int] = []

    def counted() -> OAuthBearerToken:
        calls.append(1)
        return provider()

    s = oauth_settings(counted)
    config = admin_config(s)
    first_token(config, s)
    assert len(calls) == 1
    oauth_cb = config["oauth_cb"]
    assert callable(oauth_cb) and oauth_cb("")[0] == TOKEN and len(calls) == 1  # the primed one
    assert oauth_cb("")[0] == TOKEN and len(calls) == 2  # a refresh asks the provider again


def test_a_source_is_lost_only_once_the_last_token_expired_while_the_provider_failed() -> None:
    provider_ = Flaky("good-token-value")
    source = TokenSource(provider_, clock=provider_.clock)
    assert source.lost() is None and source.failure is None
    source.fetch()
    provider_.fail = OSError("token endpoint returned 503")
    provider_.now += 80
    with pytest.raises(TokenFailure):
        source.fetch()  # librdkafka's refresh at 80%
    assert source.failure == "raised OSError: token endpoint returned 503" and source.lost() is None
    provider_.now += 21
    assert source.lost() == "raised OSError: token endpoint returned 503"
    provider_.fail = None
    source.fetch()  # the provider works again: nothing is lost
    assert source.lost() is None and source.failure is None


def test_a_running_consumer_ends_with_authentication_error_once_its_token_expired_while_the_provider_failed(
    tmp_path: Path,
) -> None:
    """librdkafka keeps the current token after a failed refresh and asks again every 10 s; the consumer
    goes on while that token works and ends once it expired (here: the wall clock moved past it)."""
    failing = [False]

    def provider_() -> OAuthBearerToken:
        if failing[0]:
            raise RuntimeError("client secret was rotated")
        return OAuthBearerToken("live-token-value-Ab12", expires_at=time.time() + 3600)

    settings = oauth_settings(provider_, topics=("t",))
    factory = FakeFactory([None] * 5)
    with logged_consumer(settings, factory, tmp_path / "events.jsonl") as (c, fatal):
        oauth_cb = factory.last.config["oauth_cb"]  # what librdkafka calls
        oauth_cb("")  # the first token, fetched before the client was built
        failing[0] = True
        with pytest.raises(TokenFailure):
            oauth_cb("")  # the refresh at 80% of the lifetime fails ...
        assert c.consume(10, 0.0) == []  # ... and the consumer goes on with the current token
        oauth_cb.source.clock = lambda: time.time() + 3601  # the token has expired
        with pytest.raises(AuthenticationError) as caught:
            c.consume(10, 0.0)
        with pytest.raises(AuthenticationError):
            c.consume(10, 0.0)  # the consumer is over, every later call says why
    text = str(caught.value)
    assert caught.value.exit_code == 78
    assert "OAUTHBEARER token expired" in text and "raised RuntimeError: client secret was rotated" in text
    assert fatal.events and "client secret was rotated" in fatal.events[0].error
    assert "live-token-value-Ab12" not in (tmp_path / "events.jsonl").read_text() + text
