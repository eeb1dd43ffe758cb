"""TLS mistakes users make, on a real broker's TLS listeners (issue 18): each ends ``start()`` with a
ConfigurationError (exit 78) whose message names the reason and the setting to check, at the failed
handshake or before any connection, not after ``connect_timeout_s`` as "brokers unreachable" (75).

The timeout here is 20 s; every case must fail well before it (the handshake fails in milliseconds; the
bound below only separates "at the handshake" from "waited out the timeout" on a loaded machine).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from static_consumer import ConsumerSettings, StaticConsumer, exit_code_for
from static_consumer.errors import ConfigurationError
from static_consumer.testing import JvmKafkaCluster
from static_consumer.testing.tls import MTLS, OTHER_HOST, SSL

CONNECT_TIMEOUT_S = 20.0
FAST_S = 12.0  # well under CONNECT_TIMEOUT_S: the failure came from the handshake, not the timeout


def _settings(cluster: JvmKafkaCluster, listener: str, **fields: Any) -> ConsumerSettings:
    assert cluster.tls is not None
    security = cluster.tls.settings_fields(listener, cluster.bootstrap_for(listener))
    return ConsumerSettings(
        group_id="tls-failures",
        topics=["tls-failures"],
        instance_id="tls-0",
        connect_timeout_s=CONNECT_TIMEOUT_S,
        **(security | fields),
    )


def _start_fails(settings: ConsumerSettings) -> tuple[str, float]:
    began = time.monotonic()
    consumer = StaticConsumer(settings)
    try:
        with pytest.raises(ConfigurationError) as caught:
            consumer.start()
    finally:
        consumer.close()
    took = time.monotonic() - began
    assert exit_code_for(caught.value) == 78
    assert took < FAST_S, f"took {took:.1f}s: waited out the timeout instead of failing at the handshake"
    return str(caught.value), took


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
