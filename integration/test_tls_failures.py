"""TLS and OAUTHBEARER mistakes users make, on a real broker's secure listeners: each ends
``start()``, the admin functions and the ``static-consumer`` command with a ConfigurationError (exit
78; AuthenticationError, its subclass, for credentials) whose message names the reason and the setting
to check, at the failed handshake or before any connection, not after ``connect_timeout_s`` as "brokers
unreachable" (75), and never with a secret in it.

The timeout here is 20 s; every case must fail well before it (the handshake fails in milliseconds; the
bound below only separates "at the handshake" from "waited out the timeout" on a loaded machine). The
OAUTHBEARER cases use 6 s, under the 10 s that confluent-kafka's constructors wait for a token.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from static_consumer import ConsumerSettings, MembershipListener, StaticConsumer, exit_code_for
from static_consumer._base.errors import AuthenticationError, ConfigurationError
from static_consumer._base.records import Record
from static_consumer._core.events import FatalError
from static_consumer._kafka.describe import describe_consumer_protocol
from static_consumer._kafka.probe import probe
from static_consumer._security import tls as _tls
from static_consumer.admin.members import describe_group, remove_members, scale_down
from static_consumer.telemetry import EventLog
from static_consumer_lab.brokers import JvmKafkaCluster, create_topic, produce
from static_consumer_lab.secure.listeners import MTLS, OAUTH, OTHER_HOST, SASL_SSL, SSL
from static_consumer_lab.secure.tokens import UnsecuredTokens

CONNECT_TIMEOUT_S = 20.0
FAST_S = 12.0  # well under CONNECT_TIMEOUT_S: the failure came from the handshake, not the timeout
OAUTH_TIMEOUT_S = 6.0  # the OAUTHBEARER cases must end within it (confluent-kafka alone waits 10 s)


def _settings(
    cluster: JvmKafkaCluster, listener: str, *, token_provider: Any = None, **fields: Any
) -> ConsumerSettings:
    assert cluster.tls is not None
    security = cluster.tls.settings_fields(
        listener, cluster.bootstrap_for(listener), token_provider=token_provider
    )
    base: dict[str, Any] = {
        "group_id": "tls-failures",
        "topics": ("tls-failures",),
        "instance_id": "tls-0",
        "connect_timeout_s": CONNECT_TIMEOUT_S,
    }
    return ConsumerSettings(**(base | security | fields))


def _fails(
    call: Callable[[], object], error: type[ConfigurationError] = ConfigurationError, bound_s: float = FAST_S
) -> tuple[str, float]:
    """``call`` raises ``error`` (exit 78) within ``bound_s``: its message and how long it took."""
    began = time.monotonic()
    with pytest.raises(error) as caught:
        call()
    took = time.monotonic() - began
    assert exit_code_for(caught.value) == 78
    assert took < bound_s, f"took {took:.1f}s: waited out a timeout instead of failing at once"
    return str(caught.value), took


def _start(settings: ConsumerSettings) -> None:
    consumer = StaticConsumer(settings)
    try:
        consumer.start()
    finally:
        consumer.close()


def _start_fails(settings: ConsumerSettings) -> tuple[str, float]:
    return _fails(lambda: _start(settings))


def test_an_untrusted_broker_certificate_names_the_ca_setting(kafka_secure_cluster: JvmKafkaCluster) -> None:
    assert kafka_secure_cluster.tls is not None
    other_ca = str(kafka_secure_cluster.tls.pki.other_ca)
    text, took = _start_fails(_settings(kafka_secure_cluster, SSL, ssl_ca_location=other_ca))
    assert "TLS handshake failed" in text and "ssl_ca_location" in text, text
    print(f"unknown CA: ConfigurationError after {took:.2f}s")


def test_a_certificate_for_another_host_fails_unless_host_checks_are_off(
    kafka_secure_cluster: JvmKafkaCluster,
) -> None:
    text, took = _start_fails(_settings(kafka_secure_cluster, OTHER_HOST))
    assert "TLS handshake failed" in text and "ssl_endpoint_identification" in text, text
    print(f"hostname mismatch: ConfigurationError after {took:.2f}s")
    consumer = StaticConsumer(_settings(kafka_secure_cluster, OTHER_HOST, ssl_endpoint_identification=False))
    try:
        consumer.start()  # deliberately unverified host: the same listener works
    finally:
        consumer.close()


def test_a_client_certificate_the_broker_refuses_names_the_certificate_settings(
    kafka_secure_cluster: JvmKafkaCluster,
) -> None:
    # No client certificate on the mutual-TLS listener: the broker answers with a TLS alert.
    fields = {"ssl_certificate_location": None, "ssl_key_location": None}
    text, took = _start_fails(_settings(kafka_secure_cluster, MTLS, **fields))
    assert "refused the client certificate" in text and "ssl_certificate_location" in text, text
    print(f"no client certificate: ConfigurationError after {took:.2f}s")


def test_local_file_mistakes_fail_before_any_connection(kafka_secure_cluster: JvmKafkaCluster) -> None:
    assert kafka_secure_cluster.tls is not None
    pki = kafka_secure_cluster.tls.pki
    cases = {
        "expired client certificate": (
            {"ssl_certificate_location": str(pki.expired_client_cert)},
            "expired at",
        ),
        "wrong key password": (
            {"ssl_key_location": str(pki.client_key_encrypted), "ssl_key_password": "wrong-pw-31337"},
            "ssl_key_password is wrong",
        ),
        "encrypted key, no password": (
            {"ssl_key_location": str(pki.client_key_encrypted)},
            "ssl_key_password is not set",
        ),
    }
    for case, (fields, expected) in cases.items():
        text, took = _start_fails(_settings(kafka_secure_cluster, MTLS, **fields))
        assert expected in text and "wrong-pw-31337" not in text, (case, text)
        print(f"{case}: ConfigurationError after {took:.3f}s")


def test_a_tls_client_on_a_plaintext_port_is_told_so(kafka_secure_cluster: JvmKafkaCluster) -> None:
    plaintext = kafka_secure_cluster.bootstrap_servers
    text, took = _start_fails(_settings(kafka_secure_cluster, SSL, bootstrap_servers=plaintext))
    assert "PLAINTEXT listener" in text, text
    print(f"TLS client on a PLAINTEXT port: ConfigurationError after {took:.2f}s")


def test_a_plaintext_client_on_a_tls_port_names_security_protocol(
    kafka_secure_cluster: JvmKafkaCluster,
) -> None:
    tls_port = kafka_secure_cluster.bootstrap_for(SSL)
    settings = ConsumerSettings(
        bootstrap_servers=tls_port,
        group_id="tls-failures",
        topics=("tls-failures",),
        instance_id="tls-0",
        connect_timeout_s=CONNECT_TIMEOUT_S,
    )
    text, took = _start_fails(settings)
    assert "TLS listener" in text and "security_protocol='SSL'" in text, text
    print(f"PLAINTEXT client on a TLS port: ConfigurationError after {took:.2f}s")
    text, took = _fails(lambda: describe_group(settings))
    assert text.startswith("describe group tls-failures:") and "security_protocol" in text, text
    print(f"PLAINTEXT client on a TLS port, describe_group: ConfigurationError after {took:.2f}s")


def test_an_expired_client_certificate_is_refused_by_the_broker_when_not_caught_locally(
    kafka_secure_cluster: JvmKafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local check reads the certificate's dates; a certificate it cannot read (another encoding, a
    future format) reaches the broker, whose bare TLS alert is still a typed error naming the setting."""
    assert kafka_secure_cluster.tls is not None
    monkeypatch.setattr(_tls, "validity", lambda _pem: None)  # our reader only; librdkafka is untouched
    expired = str(kafka_secure_cluster.tls.pki.expired_client_cert)
    text, took = _start_fails(_settings(kafka_secure_cluster, MTLS, ssl_certificate_location=expired))
    assert "refused the client certificate" in text and "not expired" in text, text
    assert "SSL alert number 46" in text, text  # certificate unknown: what the broker says about it
    print(f"expired client certificate, broker alert: ConfigurationError after {took:.2f}s")


KEY_MISTAKES = {
    "wrong key password": ("wrong-pw-31337", "ssl_key_password is wrong"),
    "encrypted key, no password": (None, "ssl_key_password is not set"),
}


@pytest.mark.parametrize("mistake", list(KEY_MISTAKES))
def test_a_key_no_client_can_load_ends_the_admin_functions_with_78(
    mistake: str, kafka_secure_cluster: JvmKafkaCluster
) -> None:
    """The admin path built an AdminClient (the login check) before the files were checked: a raw
    KafkaException (-186), exit 70 from the command."""
    assert kafka_secure_cluster.tls is not None
    pki = kafka_secure_cluster.tls.pki
    password, expected = KEY_MISTAKES[mistake]
    settings = _settings(
        kafka_secure_cluster, MTLS, ssl_key_location=str(pki.client_key_encrypted), ssl_key_password=password
    )
    calls: dict[str, Callable[[], object]] = {
        "probe": lambda: probe(settings),
        "describe_group": lambda: describe_group(settings),
        "describe_consumer_protocol": lambda: describe_consumer_protocol(settings, "g"),
        "remove_members": lambda: remove_members(settings, ["tls-0"]),
        "scale_down": lambda: scale_down(settings, replicas=0, statefulset="tls"),
    }
    for name, call in calls.items():
        text, took = _fails(call)
        assert expected in text and "ssl_key_location" in text, (name, text)
        assert "wrong-pw-31337" not in text and pki.client_key_password not in text, (name, text)
        print(f"{mistake}, {name}: ConfigurationError after {took:.3f}s")


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STATIC_CONSUMER_")}
    return subprocess.run(
        [sys.executable, "-m", "static_consumer.admin.cli", *args],
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _cli_env(settings: ConsumerSettings) -> dict[str, str]:
    """The STATIC_CONSUMER_* variables of the connection settings of ``settings`` (passwords included,
    as a pod gets them from its Secret)."""
    env: dict[str, str] = {}
    for field, value in settings.model_dump(exclude={"sasl_oauth_token_provider"}).items():
        connection = field.startswith(("bootstrap", "security", "sasl_", "ssl_", "connect_"))
        if value is None or not connection:
            continue
        secret = getattr(getattr(settings, field), "get_secret_value", None)
        env[f"STATIC_CONSUMER_{field.upper()}"] = str(secret() if secret else value)
    return env


def test_the_command_exits_78_over_tls_and_never_prints_a_secret(
    kafka_secure_cluster: JvmKafkaCluster,
) -> None:
    """``static-consumer describe -v`` (client details logged to stderr): a key no client can load on the
    mutual-TLS listener, and a wrong SASL password on SASL_SSL."""
    cluster = kafka_secure_cluster
    assert cluster.tls is not None
    pki, users = cluster.tls.pki, cluster.tls.users.users
    wrong_key = _settings(
        cluster, MTLS, ssl_key_location=str(pki.client_key_encrypted), ssl_key_password="wrong-pw-31337"
    )
    wrong_sasl = _settings(cluster, SASL_SSL, sasl_password="wrong-sasl-pw-4242")
    secrets = ["wrong-pw-31337", "wrong-sasl-pw-4242", pki.client_key_password, *users.values()]
    cases = {
        "mTLS, wrong key password": (wrong_key, "ConfigurationError", "ssl_key_password is wrong"),
        "SASL_SSL, wrong password": (wrong_sasl, "AuthenticationError", "refused to authenticate"),
    }
    for case, (settings, error, expected) in cases.items():
        began = time.monotonic()
        done = _cli(_cli_env(settings), "describe", "tls-failures", "-v")
        took = time.monotonic() - began
        shown = done.stdout + done.stderr
        assert done.returncode == 78, (case, shown[-2000:])
        assert f"{error}: " in done.stderr and expected in done.stderr, (case, done.stderr[-2000:])
        assert [s for s in secrets if s in shown] == [], case
        print(f"static-consumer describe, {case}: exit 78 after {took:.2f}s (process included)")


OAUTH_FAILURES: dict[str, tuple[Callable[[], UnsecuredTokens], str]] = {
    "raises": (
        lambda: UnsecuredTokens(fail=RuntimeError("identity provider unreachable")),
        "raised RuntimeError: identity provider unreachable",
    ),
    "expired token": (lambda: UnsecuredTokens(lifetime_s=-60.0), "returned a token that had expired"),
}


@pytest.mark.parametrize("case", list(OAUTH_FAILURES))
def test_an_oauthbearer_provider_without_a_token_ends_every_client_at_once(
    case: str, kafka_secure_cluster: JvmKafkaCluster
) -> None:
    """librdkafka's consumer and AdminClient and kafka-python (probe, LeaveGroup): each ends with an
    AuthenticationError naming the provider's reason within connect_timeout_s (confluent-kafka alone
    waited 10 s and raised "OAuth token not set within 10 seconds timeout", exit 70)."""
    make, expected = OAUTH_FAILURES[case]
    tokens = make()
    settings = _settings(
        kafka_secure_cluster, OAUTH, token_provider=tokens, connect_timeout_s=OAUTH_TIMEOUT_S
    )
    calls: dict[str, Callable[[], object]] = {
        "StaticConsumer.start": lambda: _start(settings),
        "probe": lambda: probe(settings),
        "describe_group": lambda: describe_group(settings),
        "describe_consumer_protocol": lambda: describe_consumer_protocol(settings, "g"),
        "remove_members": lambda: remove_members(settings, ["tls-0"]),
    }
    for name, call in calls.items():
        text, took = _fails(call, AuthenticationError, OAUTH_TIMEOUT_S)
        assert f"sasl_oauth_token_provider gave no OAUTHBEARER token to log in with (it {expected}" in text
        assert [t.value for t in tokens.issued if t.value in text] == [], (name, text)
        print(f"OAUTHBEARER provider {case}, {name}: AuthenticationError after {took:.3f}s")


class _Fatal(MembershipListener):
    def __init__(self) -> None:
        self.events: list[FatalError] = []

    def on_fatal(self, event: FatalError) -> None:
        self.events.append(event)


def test_a_running_consumer_whose_provider_starts_failing_ends_once_its_token_expired(
    kafka_secure_cluster: JvmKafkaCluster, kafka_group_id_factory: Callable[..., str], tmp_path: Path
) -> None:
    """Tokens live 6 s. After the provider starts failing, librdkafka keeps the current token and asks
    again every 10 s; the consumer goes on consuming while it works and ends with AuthenticationError
    (78) once it expired, naming the reason. The admin calls of the same pod fail at once."""
    cluster = kafka_secure_cluster
    group = kafka_group_id_factory()
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", 1)
    tokens = UnsecuredTokens("alice", lifetime_s=6.0)
    settings = _settings(
        cluster, OAUTH, token_provider=tokens, group_id=group, topics=(topic,), session_timeout_ms=10_000
    )
    fatal = _Fatal()
    received: list[Record] = []
    with EventLog(tmp_path / "events.jsonl", look_up_held=False) as event_log:
        consumer = StaticConsumer(settings, listeners=[fatal, event_log], env={})
        with consumer:
            produce(cluster.bootstrap_servers, topic, 10)
            deadline = time.monotonic() + 30
            while len(received) < 10 and time.monotonic() < deadline:
                received += consumer.consume(10, 0.2)
            assert len(received) == 10
            tokens.fail = RuntimeError("identity provider unreachable")
            failing_since = time.monotonic()
            text, took = _fails(lambda: describe_group(settings), AuthenticationError, OAUTH_TIMEOUT_S)
            assert "raised RuntimeError: identity provider unreachable" in text
            print(
                f"provider failing, describe_group of the running pod: AuthenticationError after {took:.3f}s"
            )
            produce(cluster.bootstrap_servers, topic, 10, start=10)
            with pytest.raises(AuthenticationError) as caught:
                while time.monotonic() - failing_since < 60:
                    received += consumer.consume(10, 0.2)
            ended = time.monotonic() - failing_since
    text = str(caught.value)
    assert "OAUTHBEARER token expired" in text and "identity provider unreachable" in text, text
    assert ended < 6.0 + 5.0, f"ended {ended:.1f}s after the provider failed; its token lived 6 s"
    assert fatal.events and "identity provider unreachable" in fatal.events[0].error
    logged = (tmp_path / "events.jsonl").read_text()
    assert [t.value for t in tokens.issued if t.value in text + logged] == []
    print(
        f"provider failing mid-run: consumer ended {ended:.1f}s later (tokens live 6 s), "
        f"{len(received)} records received, provider called {tokens.calls} times"
    )
