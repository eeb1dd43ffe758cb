"""TLS files are checked locally before any client uses them (static_consumer._security.tls): each mistake is
a ConfigurationError naming the field, at once, never a terminal prompt for a key password, never the
password in the message."""

from __future__ import annotations

import datetime
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from static_consumer import ConsumerSettings, exit_code_for
from static_consumer._base.errors import ConfigurationError
from static_consumer._security.tls import _check_not_expired, check_tls_files, speaks_tls, validity
from static_consumer_lab.secure.certs import Pki, generate_pki, self_signed_pem


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


def test_an_expired_certificate_is_refused_without_the_cryptography_package(pki: Pki) -> None:
    """The path users get: ``cryptography`` is only in the testing/dev extras, so the check runs in a
    child process where importing it fails."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["cryptography"] = None  # import cryptography -> ImportError
        try:
            import cryptography  # noqa: F401
            raise SystemExit("cryptography is still importable")
        except ImportError:
            pass
        from static_consumer import ConsumerSettings
        from static_consumer._security.tls import _check_not_expired, check_tls_files, speaks_tls, validity
        from static_consumer._base.errors import ConfigurationError
        settings = ConsumerSettings(
            bootstrap_servers="127.0.0.1:9093", group_id="g", security_protocol="SSL",
            ssl_ca_location={str(pki.ca)!r}, ssl_certificate_location={str(pki.expired_client_cert)!r},
            ssl_key_location={str(pki.client_key)!r},
        )
        try:
            check_tls_files(settings)
        except ConfigurationError as exc:
            print(exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "expired at" in done.stdout and "ssl_certificate_location" in done.stdout, done.stdout


def _certificate(not_before: datetime.datetime, not_after: datetime.datetime) -> bytes:
    return self_signed_pem("validity-test", not_before, not_after)


@pytest.mark.parametrize(
    ("not_before", "not_after"),
    [
        ((2024, 1, 2, 3, 4, 5), (2026, 7, 8, 9, 10, 11)),  # UTCTime both
        ((1999, 12, 31, 23, 59, 59), (2049, 12, 31, 23, 59, 59)),  # UTCTime: 99 -> 1999, 49 -> 2049
        ((2025, 1, 1, 0, 0, 0), (2051, 6, 1, 12, 0, 0)),  # from 2050 on: GeneralizedTime
    ],
)
def test_validity_reads_the_dates_the_certificate_holds(
    not_before: tuple[int, ...], not_after: tuple[int, ...]
) -> None:
    start, end = (datetime.datetime(*t, tzinfo=datetime.UTC) for t in (not_before, not_after))
    pem = _certificate(start, end)
    assert validity(b"a comment before the block\n" + pem + pem) == (start, end)


def test_validity_of_what_is_not_a_pem_certificate_is_none(pki: Pki) -> None:
    assert validity(pki.client_key.read_bytes()) is None
    assert validity(b"-----BEGIN CERTIFICATE-----\nbm90IERFUg==\n-----END CERTIFICATE-----\n") is None
    assert validity(b"") is None


def test_a_certificate_not_valid_yet_is_refused(pki: Pki, tmp_path: Path) -> None:
    now = datetime.datetime.now(datetime.UTC)
    future = tmp_path / "future.pem"
    future.write_bytes(_certificate(now + datetime.timedelta(days=1), now + datetime.timedelta(days=2)))
    with pytest.raises(ConfigurationError, match="is not valid before"):
        _check_not_expired(str(future))


def test_speaks_tls_tells_a_tls_listener_from_a_plaintext_one_and_from_nothing(pki: Pki) -> None:
    """What a PLAINTEXT client's login check asks after a broker hung up on it during ApiVersions."""
    import socket
    import ssl
    import threading

    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(pki.broker)

    def listener(tls: bool) -> tuple[socket.socket, int]:
        sock = socket.create_server(("127.0.0.1", 0))

        def serve() -> None:
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return  # closed
                try:
                    if tls:
                        server_context.wrap_socket(conn, server_side=True).close()
                    else:
                        conn.recv(1024)  # a PLAINTEXT broker waits for a request; this one hangs up
                except (OSError, ssl.SSLError):
                    pass
                conn.close()

        threading.Thread(target=serve, daemon=True).start()
        return sock, sock.getsockname()[1]

    tls_sock, tls_port = listener(tls=True)
    plain_sock, plain_port = listener(tls=False)
    try:
        assert speaks_tls("127.0.0.1", tls_port, 5.0)
        assert not speaks_tls("127.0.0.1", plain_port, 5.0)
    finally:
        tls_sock.close()
        plain_sock.close()
    assert not speaks_tls("127.0.0.1", plain_port, 1.0)  # nothing listens any more
