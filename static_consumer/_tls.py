"""The TLS files of the settings, checked locally before any client uses them.

Each client meets a bad file its own way, and none of them well (measured in docs/security.md): with a
wrong ``ssl_key_password`` librdkafka's constructor raises a raw ``KafkaException`` (-186 _INVALID_ARG),
kafka-python retries until ``connect_timeout_s`` and reports the brokers unreachable, and with an
encrypted key but no password OpenSSL *prompts on the terminal* ("Enter PEM pass phrase:") once per
kafka-python connection attempt. Loading the files once with Python's own ``ssl`` module, with the
password given as a callable (so OpenSSL never prompts), turns each of these into a
``ConfigurationError`` (exit 78) that names the field, in milliseconds and before any network I/O.

A client certificate past its ``notAfter`` is refused by the broker with a bare TLS alert ("certificate
unknown", alert 46) that does not say why; it is checked here when the ``cryptography`` package is
installed (it parses certificates; the standard library does not), and left to the broker otherwise.
"""

from __future__ import annotations

import datetime
import os
import ssl
from typing import TYPE_CHECKING

from static_consumer.errors import ConfigurationError

if TYPE_CHECKING:
    from static_consumer.settings import ConsumerSettings

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


def check_tls_files(settings: ConsumerSettings) -> None:
    """Raise ConfigurationError naming the field when a TLS file of ``settings`` cannot be used."""
    if settings.security_protocol not in TLS_PROTOCOLS:
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if settings.ssl_ca_location:
        try:
            context.load_verify_locations(cafile=settings.ssl_ca_location)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"ssl_ca_location {settings.ssl_ca_location!r} is not a readable PEM CA certificate "
                f"({_reason(exc)})"
            ) from None
    cert, key = settings.ssl_certificate_location, settings.ssl_key_location
    if cert is None:
        return
    for field, path in (("ssl_certificate_location", cert), ("ssl_key_location", key)):
        if path is not None and not os.access(path, os.R_OK):
            raise ConfigurationError(f"{field} {path!r} does not exist or is not readable")
    password = settings.ssl_key_password.get_secret_value() if settings.ssl_key_password else ""
    try:
        # A callable password: OpenSSL asks it instead of the terminal, and an empty answer to an
        # encrypted key fails like a wrong one.
        context.load_cert_chain(certfile=cert, keyfile=key, password=lambda: password)
    except (OSError, ssl.SSLError) as exc:
        hint = (
            "ssl_key_password is wrong"
            if settings.ssl_key_password
            else "the key is encrypted and ssl_key_password is not set"
        )
        raise ConfigurationError(
            f"the client key {key or cert!r} could not be loaded with the certificate {cert!r} "
            f"({_reason(exc)}): {hint}, or the key does not belong to the certificate "
            "(check ssl_key_location, ssl_key_password, ssl_certificate_location)"
        ) from None
    _check_not_expired(cert)


def _check_not_expired(path: str) -> None:
    try:
        from cryptography import x509
    except ImportError:  # optional: without it the broker's alert is all there is
        return
    try:
        with open(path, "rb") as handle:
            certificate = x509.load_pem_x509_certificate(handle.read())
    except (OSError, ValueError):
        return  # ssl already accepted the file; a chain file cryptography cannot read is not our verdict
    now = datetime.datetime.now(datetime.UTC)
    if certificate.not_valid_after_utc < now:
        raise ConfigurationError(
            f"ssl_certificate_location {path!r} expired at {certificate.not_valid_after_utc:%Y-%m-%d %H:%M} "
            "UTC; brokers that require client certificates refuse it (TLS alert 'certificate unknown')"
        )
    if certificate.not_valid_before_utc > now:
        raise ConfigurationError(
            f"ssl_certificate_location {path!r} is not valid before "
            f"{certificate.not_valid_before_utc:%Y-%m-%d %H:%M} UTC (check the clock or the certificate)"
        )


def _reason(exc: BaseException) -> str:
    # ssl.SSLError's str() carries OpenSSL's reason ("[SSL] PEM lib (_ssl.c:3900)"); never the password.
    return str(exc) or type(exc).__name__


__all__ = ["TLS_PROTOCOLS", "check_tls_files"]
