"""TLS files are checked locally before any client uses them (static_consumer._tls): each mistake is a
ConfigurationError naming the field, at once, never a terminal prompt for a key password, never the
password in the message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from static_consumer import ConsumerSettings, exit_code_for
from static_consumer._tls import check_tls_files
from static_consumer.errors import ConfigurationError
from static_consumer.testing.certs import Pki, generate_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return generate_pki(tmp_path_factory.mktemp("pki"))


def _settings(pki: Pki, **fields: Any) -> ConsumerSettings:
    base: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9093",
        "group_id": "g",
        "topics": ["t"],
        "instance_id": "a-0",
        "security_protocol": "SSL",
        "ssl_ca_location": str(pki.ca),
        "ssl_certificate_location": str(pki.client_cert),
        "ssl_key_location": str(pki.client_key),
    }
    return ConsumerSettings(**(base | fields))


def _refused(settings: ConsumerSettings) -> str:
    with pytest.raises(ConfigurationError) as caught:
        check_tls_files(settings)
    assert exit_code_for(caught.value) == 78
    return str(caught.value)


def test_good_files_pass(pki: Pki) -> None:
    check_tls_files(_settings(pki))
    check_tls_files(
        _settings(
            pki, ssl_key_location=str(pki.client_key_encrypted), ssl_key_password=pki.client_key_password
        )
    )


def test_only_tls_protocols_are_checked(pki: Pki) -> None:
    sasl = {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"}
    plain = ConsumerSettings(
        bootstrap_servers="127.0.0.1:9092", group_id="g", topics=["t"], instance_id="a-0"
    )
    check_tls_files(plain)
    check_tls_files(plain.model_copy(update={"security_protocol": "SASL_PLAINTEXT", **sasl}))


def test_a_wrong_key_password_names_the_field_and_not_the_password(pki: Pki) -> None:
    text = _refused(
        _settings(pki, ssl_key_location=str(pki.client_key_encrypted), ssl_key_password="not-the-password")
    )
    assert "ssl_key_password is wrong" in text and str(pki.client_key_encrypted) in text
    assert "not-the-password" not in text and pki.client_key_password not in text


def test_an_encrypted_key_without_a_password_fails_instead_of_prompting(pki: Pki) -> None:
    # OpenSSL would ask "Enter PEM pass phrase:" on the terminal; with the callable it never does.
    text = _refused(_settings(pki, ssl_key_location=str(pki.client_key_encrypted)))
    assert "encrypted and ssl_key_password is not set" in text


def test_a_key_that_does_not_match_the_certificate_is_refused(pki: Pki) -> None:
    # The broker's PEM keystore holds another key: the pair does not match.
    text = _refused(_settings(pki, ssl_key_location=str(pki.broker)))
    assert "does not belong to the certificate" in text


def test_an_expired_client_certificate_is_refused_with_its_date(pki: Pki) -> None:
    text = _refused(_settings(pki, ssl_certificate_location=str(pki.expired_client_cert)))
    assert "expired at" in text and "ssl_certificate_location" in text


def test_missing_or_unreadable_files_name_the_field(pki: Pki, tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pem")
    assert "ssl_ca_location" in _refused(_settings(pki, ssl_ca_location=missing))
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    assert "ssl_ca_location" in _refused(_settings(pki, ssl_ca_location=str(not_pem)))
    assert missing in _refused(_settings(pki, ssl_certificate_location=missing))
