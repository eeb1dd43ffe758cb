"""Settings -> client configs. librdkafka itself checks the consumer/admin dicts (no broker is contacted)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from static_consumer._base.errors import ConfigurationError
from static_consumer._core.modes import client_config
from static_consumer._security.secrets import redact_items
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import (
    CLIENT_DEFAULTS,
    admin_config,
    kafka_python_config,
)
from static_consumer.settings._rules import is_owned

UNREACHABLE = "127.0.0.1:1"  # librdkafka connects lazily; nothing listens here and nothing is awaited
SASL: dict[str, Any] = {
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "sasl_username": "svc-orders",
    "sasl_password": "pw-value",
    "ssl_ca_location": "/etc/kafka/ca.pem",
}


def make(**overrides: Any) -> ConsumerSettings:
    return ConsumerSettings(**({"bootstrap_servers": UNREACHABLE, "group_id": "orders"} | overrides))


def librdkafka_accepts(cfg: dict[str, Any]) -> None:
    """Constructing a consumer validates every property name and value; close() before any I/O matters."""
    confluent_kafka.Consumer(cfg).close()


def test_classic_static_member() -> None:
    cfg = client_config(make(topics="t"), "orders-0")
    assert cfg["group.instance.id"] == "orders-0"
    assert cfg["group.protocol"] == "classic"
    assert cfg["partition.assignment.strategy"] == "range"
    assert (cfg["session.timeout.ms"], cfg["heartbeat.interval.ms"]) == (45000, 3000)
    assert cfg["enable.auto.commit"] is False and cfg["enable.auto.offset.store"] is False
    assert (cfg["auto.offset.reset"], cfg["max.poll.interval.ms"]) == ("earliest", 300000)
    librdkafka_accepts(cfg)


def test_dynamic_member_sends_no_instance_id() -> None:
    cfg = client_config(make(), None)
    assert "group.instance.id" not in cfg
    librdkafka_accepts(cfg)


def test_default_heartbeat_fits_a_short_session_timeout() -> None:
    # librdkafka's default 3000 ms heartbeat would not fit a 6000 ms session three times.
    assert client_config(make(session_timeout_ms=6000), "a")["heartbeat.interval.ms"] == 2000
    assert client_config(make(heartbeat_interval_ms=1500), "a")["heartbeat.interval.ms"] == 1500


@pytest.mark.parametrize("remote", [None, "uniform"])
def test_consumer_protocol_leaves_classic_keys_to_the_broker(remote: str | None) -> None:
    cfg = client_config(make(protocol="consumer", remote_assignor=remote), "orders-0")
    assert cfg["group.protocol"] == "consumer"
    for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
        assert key not in cfg
    assert cfg.get("group.remote.assignor") == remote
    librdkafka_accepts(cfg)  # librdkafka refuses classic-only keys under group.protocol=consumer


def test_security_and_passthrough_are_mapped() -> None:
    s = make(**SASL, librdkafka={"fetch.min.bytes": 1024})
    cfg = client_config(s, "orders-0")
    assert cfg["security.protocol"] == "SASL_SSL"
    assert (cfg["sasl.mechanisms"], cfg["sasl.username"], cfg["sasl.password"]) == (
        "SCRAM-SHA-512",
        "svc-orders",
        "pw-value",
    )
    assert cfg["ssl.ca.location"] == "/etc/kafka/ca.pem"
    assert cfg["fetch.min.bytes"] == 1024
    assert cfg["ssl.endpoint.identification.algorithm"] == "https"  # explicit, whatever the default
    assert "ssl.key.password" not in cfg  # unset optional settings are not sent as empty strings
    assert "oauth_cb" not in cfg


def test_mutual_tls_is_mapped() -> None:
    s = make(
        security_protocol="SSL",
        ssl_certificate_location="/c.pem",
        ssl_key_location="/k.pem",
        ssl_key_password="kp",
    )
    cfg = client_config(s, None)
    assert (cfg["ssl.certificate.location"], cfg["ssl.key.location"], cfg["ssl.key.password"]) == (
        "/c.pem",
        "/k.pem",
        "kp",
    )


def test_admin_config_has_connection_settings_only() -> None:
    without_ca = SASL | {"ssl_ca_location": None}  # librdkafka would load the CA file right away
    passthrough = {"fetch.min.bytes": 1024, "socket.keepalive.enable": True}
    s = make(**without_ca, ssl_endpoint_identification=False, librdkafka=passthrough)
    cfg = admin_config(s)
    assert cfg["bootstrap.servers"] == UNREACHABLE and cfg["sasl.password"] == "pw-value"
    assert cfg["ssl.endpoint.identification.algorithm"] == "none"
    assert cfg["socket.keepalive.enable"] == "true"
    assert "fetch.min.bytes" not in cfg and "group.id" not in cfg
    assert all(isinstance(v, str) for v in cfg.values())
    AdminClient(cfg)  # librdkafka validates the properties on construction


def test_kafka_python_config_is_accepted_by_kafka_python() -> None:
    cfg = kafka_python_config(make(**SASL, connect_timeout_s=2.5))
    # KafkaAdminClient raises on unknown keys; kafka-python 3 has no api_version_auto_timeout_ms.
    assert set(cfg) <= set(KafkaAdminClient.DEFAULT_CONFIG)
    assert cfg["bootstrap_servers"] == [UNREACHABLE]
    assert cfg["request_timeout_ms"] == cfg["bootstrap_timeout_ms"] == 2500
    assert (cfg["sasl_mechanism"], cfg["sasl_plain_username"], cfg["sasl_plain_password"]) == (
        "SCRAM-SHA-512",
        "svc-orders",
        "pw-value",
    )
    assert cfg["ssl_cafile"] == "/etc/kafka/ca.pem"


@pytest.mark.parametrize("verify", [True, False])
def test_hostname_verification_is_the_same_for_all_three_clients(verify: bool) -> None:
    s = make(security_protocol="SSL", ssl_endpoint_identification=verify)
    algorithm = "https" if verify else "none"
    assert client_config(s, None)["ssl.endpoint.identification.algorithm"] == algorithm
    assert admin_config(s)["ssl.endpoint.identification.algorithm"] == algorithm
    assert kafka_python_config(s)["ssl_check_hostname"] is verify
    librdkafka_accepts(client_config(s, None))


def test_plaintext_sends_no_tls_settings() -> None:
    s = make()
    assert "ssl.endpoint.identification.algorithm" not in client_config(s, None)
    assert "ssl_check_hostname" not in kafka_python_config(s)


def test_the_hostname_check_passthrough_is_refused_for_the_field() -> None:
    with pytest.raises(ConfigurationError, match="set ssl_endpoint_identification instead"):
        make(security_protocol="SSL", librdkafka={"ssl.endpoint.identification.algorithm": "none"})


def test_redacted_masks_secret_values_and_keeps_the_rest() -> None:
    cfg = {
        "sasl.password": "p",
        "ssl_password": "k",
        "sasl.oauthbearer.client.secret": "s",
        "ssl.key.location": "/k.pem",
        "ssl_keyfile": "/k.pem",
        "group.id": "orders",
    }
    out = redact_items(cfg.items())
    assert out == {
        "sasl.password": "**********",
        "ssl_password": "**********",
        "sasl.oauthbearer.client.secret": "**********",
        "ssl.key.location": "/k.pem",
        "ssl_keyfile": "/k.pem",
        "group.id": "orders",
    }
    assert cfg["sasl.password"] == "p"  # the input is not modified


def test_kafka_python_never_prompts_for_the_pass_phrase_of_an_encrypted_key(tmp_path: Path) -> None:
    from static_consumer_lab.secure.certs import generate_pki

    pki = generate_pki(tmp_path)
    s = make(
        security_protocol="SSL",
        ssl_certificate_location=str(pki.client_cert),
        ssl_key_location=str(pki.client_key_encrypted),
    )
    cfg = kafka_python_config(s)
    assert cfg["ssl_password"] == ""  # with None, OpenSSL would read a pass phrase from the terminal
    with pytest.raises(ssl.SSLError):  # what kafka-python does with it: fails instead of prompting
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            cfg["ssl_certfile"], cfg["ssl_keyfile"], cfg["ssl_password"]
        )
    unencrypted = make(
        security_protocol="SSL",
        ssl_certificate_location=str(pki.client_cert),
        ssl_key_location=str(pki.client_key),
    )
    cfg = kafka_python_config(unencrypted)
    ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
        cfg["ssl_certfile"], cfg["ssl_keyfile"], cfg["ssl_password"]
    )


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_library_sets_its_fetch_defaults_and_the_passthrough_overrides_them(protocol: str) -> None:
    for key, default in CLIENT_DEFAULTS.items():
        assert not is_owned(key, protocol), f"{key} must stay settable through the librdkafka passthrough"
        assert client_config(make(protocol=protocol), "orders-0")[key] == default.value
        assert default.value != default.librdkafka_default, f"{key}: a default equal to librdkafka's is noise"
        overridden = make(protocol=protocol, librdkafka={key: default.librdkafka_default})
        assert client_config(overridden, "orders-0")[key] == default.librdkafka_default
        assert key not in admin_config(make(protocol=protocol)), "a consumer default, not an admin client's"
    librdkafka_accepts(client_config(make(protocol=protocol), "orders-0"))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_passthrough_is_checked_on_top_of_the_library_defaults(protocol: str) -> None:
    # reconnect.backoff.max.ms 50 is refused against librdkafka's reconnect.backoff.ms of 100; the consumer
    # gets the library's 20, so the settings take it and librdkafka accepts the config they make.
    settings = make(protocol=protocol, librdkafka={"reconnect.backoff.max.ms": 50})
    cfg = client_config(settings, "orders-0")
    assert (cfg["reconnect.backoff.ms"], cfg["reconnect.backoff.max.ms"]) == (20, 50)
    librdkafka_accepts(cfg)
    # Below the library's default it is refused, and the error names the default the user did not set.
    with pytest.raises(ConfigurationError) as refused:
        make(protocol=protocol, librdkafka={"reconnect.backoff.max.ms": 10})
    assert "reconnect.backoff.max.ms" in str(refused.value)
    assert "the library sets `reconnect.backoff.ms` to 20 unless `librdkafka` sets it" in str(refused.value)
    both = make(protocol=protocol, librdkafka={"reconnect.backoff.ms": 5, "reconnect.backoff.max.ms": 10})
    librdkafka_accepts(client_config(both, "orders-0"))


def test_the_fetch_defaults_are_documented_with_their_reason() -> None:
    from static_consumer.settings._docgen import render

    page = render()
    for key, default in CLIENT_DEFAULTS.items():
        row = next(line for line in page.splitlines() if line.startswith(f"| `{key}` |"))
        assert f"`{default.value}`" in row and f"`{default.librdkafka_default}`" in row
        assert default.reason.split(". ")[0] in row
