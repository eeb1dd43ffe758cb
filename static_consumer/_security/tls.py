"""The TLS files of the settings, checked locally before any client uses them (and, for a PLAINTEXT client
a port hung up on, whether that port speaks TLS: :func:`speaks_tls`).

Each client meets a bad file its own way, and none of them well (measured in docs/security.md): with a
wrong ``ssl_key_password`` librdkafka's constructor raises a raw ``KafkaException`` (-186 _INVALID_ARG),
kafka-python retries until ``connect_timeout_s`` and reports the brokers unreachable, and with an
encrypted key but no password OpenSSL *prompts on the terminal* ("Enter PEM pass phrase:") once per
kafka-python connection attempt. Loading the files once with Python's own ``ssl`` module, with the
password given as a callable (so OpenSSL never prompts), turns each of these into a
``ConfigurationError`` (exit 78) that names the field, in milliseconds and before any network I/O.

A client certificate past its ``notAfter`` is refused by the broker with a bare TLS alert ("certificate
unknown", alert 46) that does not say why (an untrusted certificate gets the same alert). Its validity
dates are read here from the PEM file itself: the standard library's ``ssl`` module loads certificates
but does not show their dates, so :func:`validity` reads them from the DER structure (RFC 5280: the
``validity`` field of ``tbsCertificate``), with no dependency on the ``cryptography`` package.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import os
import re
import socket
import ssl
from typing import Protocol

from static_consumer._base.errors import ConfigurationError
from static_consumer._security.secrets import Secret

TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})


class TlsFields(Protocol):
    """The settings fields :func:`check_tls_files` reads (``ConsumerSettings`` has them)."""

    @property
    def security_protocol(self) -> str: ...

    @property
    def ssl_ca_location(self) -> str | None: ...

    @property
    def ssl_certificate_location(self) -> str | None: ...

    @property
    def ssl_key_location(self) -> str | None: ...

    @property
    def ssl_key_password(self) -> Secret | None: ...


def check_tls_files(settings: TlsFields) -> None:
    """Raise ConfigurationError naming the field when a TLS file of ``settings`` cannot be used."""
    if settings.security_protocol not in TLS_PROTOCOLS:
        return
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if settings.ssl_ca_location:
        try:
            context.load_verify_locations(cafile=settings.ssl_ca_location)
        except (OSError, ssl.SSLError, ValueError) as exc:  # ValueError: a NUL byte in the path
            raise ConfigurationError(
                f"ssl_ca_location {settings.ssl_ca_location!r} is not a readable PEM CA certificate "
                f"({_reason(exc)})"
            ) from None
    cert, key = settings.ssl_certificate_location, settings.ssl_key_location
    if cert is None:
        return
    for field, path in (("ssl_certificate_location", cert), ("ssl_key_location", key)):
        if path is not None and not _readable(path):
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


def speaks_tls(host: str, port: int, timeout_s: float) -> bool:
    """Whether ``host:port`` completes a TLS handshake (no certificate checked, nothing sent after it):
    the proof that a port which hangs up on a PLAINTEXT client is a TLS listener. False when it does
    not answer, refuses, or answers otherwise."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as raw:
            with context.wrap_socket(raw, server_hostname=host):
                return True
    except (OSError, ValueError):  # ssl.SSLError and timeouts are OSErrors
        return False


def _readable(path: str) -> bool:
    try:
        return os.access(path, os.R_OK)
    except ValueError:  # a NUL byte in the path
        return False


def _check_not_expired(path: str) -> None:
    try:
        with open(path, "rb") as handle:
            dates = validity(handle.read())
    except OSError:
        return  # ssl already read the file; a race with a rotation is not our verdict
    if dates is None:
        return  # not a PEM certificate this parser reads; ssl accepted it, the broker decides
    not_before, not_after = dates
    now = datetime.datetime.now(datetime.UTC)
    if not_after < now:
        raise ConfigurationError(
            f"ssl_certificate_location {path!r} expired at {not_after:%Y-%m-%d %H:%M} UTC; brokers that "
            "require client certificates refuse it (TLS alert 'certificate unknown')"
        )
    if not_before > now:
        raise ConfigurationError(
            f"ssl_certificate_location {path!r} is not valid before {not_before:%Y-%m-%d %H:%M} UTC "
            "(check the clock or the certificate)"
        )


_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----(.+?)-----END CERTIFICATE-----", re.S)
_SEQUENCE, _CONTEXT_0, _UTC_TIME, _GENERALIZED_TIME = 0x30, 0xA0, 0x17, 0x18


def validity(pem: bytes) -> tuple[datetime.datetime, datetime.datetime] | None:
    """``(notBefore, notAfter)`` of the first certificate in ``pem`` (the client's own one comes first
    in a chain file), in UTC; None when there is no certificate this reader understands."""
    match = _PEM.search(pem)
    if match is None:
        return None
    try:
        der = base64.b64decode(b"".join(match.group(1).split()), validate=True)
        certificate = _children(_only(der, _SEQUENCE))
        fields = _children(_value(certificate[0], _SEQUENCE))  # tbsCertificate
        if fields and fields[0][0] == _CONTEXT_0:
            fields = fields[1:]  # [0] version; then serial, signature, issuer, validity
        not_before, not_after = _children(_value(fields[3], _SEQUENCE))
        return _time(not_before), _time(not_after)
    except (ValueError, IndexError, binascii.Error):
        return None


_Element = tuple[int, bytes]  # (tag, contents) of one DER element


def _read(data: bytes, at: int) -> tuple[_Element, int]:
    """The DER element starting at ``at`` and the offset after it (single-byte tags: all X.509 needs)."""
    tag, length = data[at], data[at + 1]
    at += 2
    if length & 0x80:
        size = length & 0x7F
        if not 0 < size <= 4:
            raise ValueError("unsupported DER length")
        length = int.from_bytes(data[at : at + size], "big")
        at += size
    if at + length > len(data):
        raise ValueError("truncated DER")
    return (tag, data[at : at + length]), at + length


def _children(contents: bytes) -> list[_Element]:
    elements, at = [], 0
    while at < len(contents):
        element, at = _read(contents, at)
        elements.append(element)
    return elements


def _only(data: bytes, tag: int) -> bytes:
    element, _ = _read(data, 0)
    return _value(element, tag)


def _value(element: _Element, tag: int) -> bytes:
    if element[0] != tag:
        raise ValueError(f"expected DER tag {tag:#x}, found {element[0]:#x}")
    return element[1]


def _time(element: _Element) -> datetime.datetime:
    tag, raw = element
    text = raw.decode("ascii")
    if tag == _UTC_TIME:  # YYMMDDHHMMSSZ; RFC 5280: YY >= 50 is 19YY
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif tag != _GENERALIZED_TIME:  # YYYYMMDDHHMMSSZ
        raise ValueError(f"not a time: tag {tag:#x}")
    parsed = datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ")
    return parsed.replace(tzinfo=datetime.UTC)


def _reason(exc: BaseException) -> str:
    # ssl.SSLError's str() carries OpenSSL's reason ("[SSL] PEM lib (_ssl.c:3900)"); never the password.
    return str(exc) or type(exc).__name__


__all__ = ["TLS_PROTOCOLS", "TlsFields", "check_tls_files", "speaks_tls", "validity"]
