"""Secrets never show up in repr/str, JSON dumps, configuration errors, redacted configs or probe errors."""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

import pytest
from fakes import Assign, FakeFactory, OutOfBand, logged_consumer, rec, tp

from static_consumer import OAuthBearerToken
from static_consumer._base.codes import FATAL, ErrorKind
from static_consumer._base.errors import (
    BrokerUnavailableError,
    CommitFailedError,
    ConfigurationError,
    FatalConsumerError,
)
from static_consumer._core.modes import client_config
from static_consumer._core.seam import PollError
from static_consumer._kafka.admin_client import error_for
from static_consumer._kafka.probe import probe
from static_consumer._security.secrets import redact_items
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import admin_config, kafka_python_config
from static_consumer_lab.secure.certs import generate_pki

PASSWORD = "sasl-pw-Zq81"
KEY_PASSWORD = "key-pw-Lm27"
CLIENT_SECRET = "oauth-secret-Xy93"
KEYSTORE_PASSWORD = "keystore-pw-Rt55"
SECRETS = (PASSWORD, KEY_PASSWORD, CLIENT_SECRET, KEYSTORE_PASSWORD)

FULL: dict[str, Any] = {
    "bootstrap_servers": "k:9092",
    "group_id": "orders",
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-256",
    "sasl_username": "svc",
    "sasl_password": PASSWORD,
    "ssl_certificate_location": "/c.pem",
    "ssl_key_location": "/k.pem",
    "ssl_key_password": KEY_PASSWORD,
    "librdkafka": {
        "sasl.oauthbearer.client.secret": CLIENT_SECRET,
        "ssl.keystore.password": KEYSTORE_PASSWORD,
        "fetch.min.bytes": 1,
    },
}


def assert_clean(text: str) -> None:
    leaked = [s for s in SECRETS if s in text]
    assert leaked == [], f"secrets leaked: {leaked}"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STATIC_CONSUMER_"):
            monkeypatch.delenv(name)


def test_settings_repr_str_and_json_hide_every_secret() -> None:
    s = ConsumerSettings(**FULL)
    for text in (repr(s), str(s), f"{s}", f"{s!r}", s.model_dump_json(), repr(s.sasl_password)):
        assert_clean(text)
    assert "fetch.min.bytes" in repr(s)  # only the secret values are hidden, not the passthrough


def test_secrets_are_still_usable() -> None:
    s = ConsumerSettings(**FULL)
    assert s.sasl_password is not None and s.sasl_password.get_secret_value() == PASSWORD
    assert s.librdkafka["sasl.oauthbearer.client.secret"] == CLIENT_SECRET


def test_secrets_from_the_environment_are_hidden_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", PASSWORD)
    passthrough = f'{{"sasl.oauthbearer.client.secret": "{CLIENT_SECRET}"}}'
    monkeypatch.setenv("STATIC_CONSUMER_LIBRDKAFKA", passthrough)
    s = ConsumerSettings.load(**{k: v for k, v in FULL.items() if k not in ("sasl_password", "librdkafka")})
    assert_clean(repr(s))


def test_unparsable_json_from_the_environment_is_a_clean_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_LIBRDKAFKA", f'{{"ssl.keystore.password": "{KEYSTORE_PASSWORD}"')
    with pytest.raises(ConfigurationError, match="must be a JSON object") as info:
        ConsumerSettings(bootstrap_servers="k:1", group_id="g")
    assert_clean("".join(traceback.format_exception(info.value)))


@pytest.mark.parametrize(
    "broken",
    [
        {"sasl_username": None},  # cross-field error while the password is set
        {"security_protocol": "PLAINTEXT"},  # sasl_* and ssl_* refused
        {"session_timeout_ms": "soon"},  # field error next to the secrets
        {"librdkafka": {"sasl.oauthbearer.client.secret": [CLIENT_SECRET], "group.id": "x"}},  # bad type
        {"sasl_password": [PASSWORD]},  # the secret itself has the wrong type
        {"ssl_key_password": {"nested": KEY_PASSWORD}},
    ],
)
def test_configuration_errors_never_echo_secrets(broken: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(**(FULL | broken))
    assert_clean(str(info.value))
    assert_clean("".join(traceback.format_exception(info.value)))  # no chained ValidationError either


def test_redacted_client_configs_hide_secrets_the_raw_ones_need() -> None:
    s = ConsumerSettings(**FULL)
    raw = client_config(s, "orders-0")
    assert raw["sasl.password"] == PASSWORD and raw["ssl.key.password"] == KEY_PASSWORD
    for cfg in (raw, admin_config(s), kafka_python_config(s)):
        assert_clean(repr(redact_items(cfg.items())))
    assert redact_items(raw.items())["ssl.key.location"] == "/k.pem"  # paths stay visible for debugging


def test_probe_errors_never_show_the_password() -> None:
    s = ConsumerSettings(
        **{k: v for k, v in FULL.items() if not k.startswith(("ssl_", "librdkafka"))}
        | {
            "security_protocol": "SASL_PLAINTEXT",
            "bootstrap_servers": "127.0.0.1:1",
            "connect_timeout_s": 0.3,
        }
    )
    with pytest.raises(BrokerUnavailableError) as info:
        probe(s)
    assert_clean(str(info.value))
    assert_clean("".join(traceback.format_exception(info.value)))


# -- what a dying consumer writes: exception, FatalError event, JSONL event log -------------------------


def _dying_consumer(settings: ConsumerSettings, reason: str, log_path: Path) -> tuple[str, list[Any], str]:
    """A consumer whose client reports a fatal error with ``reason``: the exception text, the FatalError
    events its listeners got, and the event log's lines."""
    fatal = PollError(FATAL, "_FATAL", reason, fatal=True, retriable=False)
    with logged_consumer(settings, FakeFactory([OutOfBand(fatal)]), log_path) as (c, seen):
        with pytest.raises(FatalConsumerError) as caught:
            c.consume(10, 0.0)
    return str(caught.value), seen.events, log_path.read_text()


def test_a_fatal_error_never_writes_the_sasl_password_to_the_exception_or_the_event_log(
    tmp_path: Path,
) -> None:
    pki = generate_pki(tmp_path / "pki", client_key_password=KEY_PASSWORD)
    fields = {k: v for k, v in FULL.items() if k != "librdkafka"} | {
        "topics": ("t",),
        "sasl_mechanism": "PLAIN",
        "ssl_certificate_location": str(pki.client_cert),
        "ssl_key_location": str(pki.client_key_encrypted),
    }
    reason = f"Fatal error: SASL PLAIN of svc:{PASSWORD} with key password {KEY_PASSWORD} refused"
    text, events, lines = _dying_consumer(ConsumerSettings(**fields), reason, tmp_path / "events.jsonl")
    assert "refused" in text and "refused" in events[0].error and '"error"' in lines
    for shown in (text, events[0].error, lines):
        assert_clean(shown)


def test_a_fatal_error_never_writes_an_oauthbearer_token_to_the_exception_or_the_event_log(
    tmp_path: Path,
) -> None:
    token = "eyJhbGciOiJub25lIn0.token-in-a-fatal-error-Rk4."

    def provider() -> OAuthBearerToken:
        return OAuthBearerToken(token, expires_at=4e9)

    settings = ConsumerSettings(
        bootstrap_servers="k:9093",
        group_id="orders",
        topics=("t",),
        security_protocol="SASL_SSL",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )
    text, events, lines = _dying_consumer(
        settings, f"Fatal error: token {token} rejected", tmp_path / "e.jsonl"
    )
    assert "rejected" in text and "rejected" in lines
    assert [t for t in (text, events[0].error, lines) if token in t] == []


def test_broker_errors_of_the_admin_path_never_show_the_sasl_ssl_password() -> None:
    settings = ConsumerSettings(
        **{k: v for k, v in FULL.items() if k != "librdkafka"} | {"sasl_mechanism": "PLAIN"}
    )
    for kind in (ErrorKind.AUTHENTICATION, ErrorKind.TLS, ErrorKind.CONFIGURATION, ErrorKind.OTHER):
        error = error_for(kind, f"broker said: {PASSWORD} / {KEY_PASSWORD}", settings, "describe group g")
        assert "broker said" in str(error)
        assert_clean(str(error))


# -- every secret kind, every way a client's error text leaves the process ------------------------------

OAUTH_TOKEN = "eyJhbGciOiJub25lIn0.token-of-every-path-Vb61."


@pytest.fixture(scope="module")
def encrypted_key(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pki = generate_pki(tmp_path_factory.mktemp("pki"), client_key_password=KEY_PASSWORD)
    return {
        "security_protocol": "SSL",
        "ssl_certificate_location": str(pki.client_cert),
        "ssl_key_location": str(pki.client_key_encrypted),
        "ssl_key_password": KEY_PASSWORD,
    }


def _secured(kind: str, encrypted_key: dict[str, Any]) -> tuple[ConsumerSettings, str]:
    """Settings holding one kind of secret, and that secret."""
    base: dict[str, Any] = {"bootstrap_servers": "k:9093", "group_id": "orders", "topics": ("t",)}
    if kind == "ssl_key_password":
        return ConsumerSettings(**base, **encrypted_key), KEY_PASSWORD
    if kind == "sasl_password":
        sasl = {"sasl_mechanism": "PLAIN", "sasl_username": "svc", "sasl_password": PASSWORD}
        return ConsumerSettings(**base, security_protocol="SASL_SSL", **sasl), PASSWORD

    def provider() -> OAuthBearerToken:
        return OAuthBearerToken(OAUTH_TOKEN, expires_at=4e9)

    oauth = {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": provider}
    return ConsumerSettings(**base, security_protocol="SASL_SSL", **oauth), OAUTH_TOKEN


@pytest.mark.parametrize("kind", ["ssl_key_password", "sasl_password", "oauth_token"])
def test_no_secret_kind_reaches_a_log_an_exception_or_the_event_log(
    kind: str, encrypted_key: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A client error whose text quotes the secret (a passthrough setting or a broker message could):
    a refused commit, a warning logged while polling, and a fatal error (exception, FatalError event,
    JSONL event log), with the settings' repr and JSON dump beside them."""
    settings, secret = _secured(kind, encrypted_key)
    said = f"broker said {secret!s} / {secret.encode()!r}"
    warning = PollError(-195, "_TRANSPORT", f"{said} (transport)", fatal=False, retriable=False)
    refused = PollError(27, "REBALANCE_IN_PROGRESS", f"{said} (commit)", fatal=False, retriable=False)
    fatal = PollError(FATAL, "_FATAL", f"Fatal error: {said}", fatal=True, retriable=False)
    caplog.set_level("DEBUG")
    factory = FakeFactory([Assign((tp(0),)), rec(0, 1), warning, OutOfBand(fatal)])
    with logged_consumer(settings, factory, tmp_path / "events.jsonl") as (c, seen):
        record = c.poll(0.1)
        factory.last.commit_failures.append(refused)
        with pytest.raises(CommitFailedError) as commit:
            c.commit(record)
        assert c.poll(0.1) is None  # the transport error: logged, still polling
        with pytest.raises(FatalConsumerError) as died:
            c.poll(0.1)
    lines = (tmp_path / "events.jsonl").read_text()
    texts = {
        "commit exception": "".join(traceback.format_exception(commit.value)),
        "fatal exception": "".join(traceback.format_exception(died.value)),
        "FatalError event": seen.events[0].error,
        "event log": lines,
        "log records": caplog.text,
        "repr": repr(settings) + str(settings) + settings.model_dump_json(),
    }
    assert "(commit)" in texts["commit exception"] and "(transport)" in caplog.text
    assert "broker said" in texts["fatal exception"] and "broker said" in lines
    assert [
        where for where, text in texts.items() if secret in text or repr(secret.encode())[2:-1] in text
    ] == []
