"""Throwaway TLS material for the secure listeners: a CA, broker and client certificates, all PEM.

Generated at start in a temporary directory with the ``cryptography`` package (the ``testing`` extra), so
no keytool/openssl step and nothing long-lived. Besides the good material there are the pieces the
failure cases need: a second CA nobody trusts, a broker certificate for another host name, an expired
client certificate and a password-protected copy of the client key.
"""

from __future__ import annotations

import datetime
import ipaddress
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: ``cryptography`` is needed only when certificates are made
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey

HOST = "127.0.0.1"
# The host name the mismatching broker certificate is issued for instead; .invalid never resolves (RFC 2606).
OTHER_HOST = "kafka.invalid"
_VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True)
class Pki:
    """Paths of the generated PEM files (and the client key's password; kept out of the repr)."""

    directory: Path
    ca: Path  # the CA every broker and client certificate is signed by
    other_ca: Path  # a CA that signed nothing here: trusting only it is the "unknown CA" case
    broker: Path  # broker key + certificate for 127.0.0.1 / localhost (Kafka's PEM keystore format)
    other_host_broker: Path  # broker key + certificate issued for OTHER_HOST only
    client_cert: Path
    client_key: Path  # unencrypted PKCS#8
    client_key_encrypted: Path  # the same key, encrypted with ``client_key_password``
    expired_client_cert: Path  # signed by ``ca``, valid until yesterday (uses ``client_key``)
    client_key_password: str = field(repr=False)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def generate_pki(directory: Path, *, client_key_password: str | None = None) -> Pki:
    """Write a fresh CA, broker and client material into ``directory`` (created if missing)."""
    from cryptography.hazmat.primitives import serialization

    directory.mkdir(parents=True, exist_ok=True)
    password = client_key_password or f"key-pw-{secrets.token_hex(12)}"
    ca_key, ca_cert = _ca("static-consumer test CA")
    _, other_ca_cert = _ca("static-consumer untrusted CA")
    broker_key = _key()
    broker_cert = _leaf(ca_key, ca_cert, broker_key, "kafka-broker", hosts=(HOST, "localhost"), server=True)
    other_cert = _leaf(ca_key, ca_cert, broker_key, OTHER_HOST, hosts=(OTHER_HOST,), server=True)
    client_key = _key()
    client_cert = _leaf(ca_key, ca_cert, client_key, "static-consumer-client", hosts=(), server=False)
    expired = _leaf(
        ca_key, ca_cert, client_key, "static-consumer-client", hosts=(), server=False, expired=True
    )

    def write(name: str, *chunks: bytes) -> Path:
        path = directory / name
        path.write_bytes(b"".join(chunks))
        path.chmod(0o600)
        return path

    pem = serialization.Encoding.PEM
    plain_key = serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    encrypted = serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(password.encode())
    return Pki(
        directory=directory,
        ca=write("ca.pem", ca_cert.public_bytes(pem)),
        other_ca=write("other-ca.pem", other_ca_cert.public_bytes(pem)),
        broker=write("broker.pem", broker_key.private_bytes(pem, *plain_key), broker_cert.public_bytes(pem)),
        other_host_broker=write(
            "other-host-broker.pem", broker_key.private_bytes(pem, *plain_key), other_cert.public_bytes(pem)
        ),
        client_cert=write("client.pem", client_cert.public_bytes(pem)),
        client_key=write("client.key", client_key.private_bytes(pem, *plain_key)),
        client_key_encrypted=write("client-encrypted.key", client_key.private_bytes(pem, *encrypted)),
        expired_client_cert=write("client-expired.pem", expired.public_bytes(pem)),
        client_key_password=password,
    )


def _key() -> EllipticCurvePrivateKey:
    from cryptography.hazmat.primitives.asymmetric import ec

    # EC P-256: generated in microseconds (RSA takes tens of milliseconds) and accepted by the JVM,
    # OpenSSL (librdkafka) and Python's ssl module (kafka-python) alike.
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def self_signed_pem(common_name: str, not_before: datetime.datetime, not_after: datetime.datetime) -> bytes:
    """A self-signed PEM certificate valid from ``not_before`` to ``not_after`` (dates to check)."""
    from cryptography.hazmat.primitives import serialization

    _, cert = _ca(common_name, not_before, not_after)
    return cert.public_bytes(serialization.Encoding.PEM)


def _ca(
    common_name: str,
    not_before: datetime.datetime | None = None,
    not_after: datetime.datetime | None = None,
) -> tuple[EllipticCurvePrivateKey, x509.Certificate]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    key = _key()
    name = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before or _now() - datetime.timedelta(hours=1))
        .not_valid_after(not_after or _now() + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    key: EllipticCurvePrivateKey,
    common_name: str,
    *,
    hosts: tuple[str, ...],
    server: bool,
    expired: bool = False,
) -> x509.Certificate:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = _now()
    begins, ends = (
        (now - 3 * _VALIDITY, now - datetime.timedelta(days=1))
        if expired
        else (
            now - datetime.timedelta(hours=1),
            now + _VALIDITY,
        )
    )
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(begins)
        .not_valid_after(ends)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if hosts:
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


__all__ = ["HOST", "OTHER_HOST", "Pki", "generate_pki", "self_signed_pem"]
