"""Admin clients and the words for their errors: every confluent-kafka AdminClient the library builds
comes from :func:`librdkafka_admin`, after the local checks, and every broker error met outside the
consume loop leaves ``_kafka`` as a :mod:`static_consumer._base.errors` class through :func:`error_for`,
classified by the error table, its message free of configured secrets.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from static_consumer._base.codes import ErrorKind, classify
from static_consumer._base.connections import LibrdkafkaLog
from static_consumer._base.errors import (
    AuthenticationError,
    BrokerUnavailableError,
    CapabilityError,
    ConfigurationError,
    RetriableError,
    StaticConsumerError,
)
from static_consumer._kafka.acls import authorization_error, code_in
from static_consumer._security.oauth import first_token, token_error, token_source
from static_consumer._security.secrets import scrub_for
from static_consumer._security.tls import check_tls_files
from static_consumer.settings._config import admin_config
from static_consumer.settings._views import Cluster

# The admin clients' librdkafka lines; a failed broker connection is told on static_consumer.connections.
LIBRDKAFKA_LOG = logging.getLogger("static_consumer.admin.librdkafka")


def librdkafka_log(settings: Cluster) -> LibrdkafkaLog:
    """The ``logger`` of an admin client for ``settings``: its lines on :data:`LIBRDKAFKA_LOG`, secrets
    masked, failed connections told on ``static_consumer.connections``."""
    return LibrdkafkaLog(LIBRDKAFKA_LOG, lambda text: scrub_for(settings, text))


def librdkafka_admin(settings: Cluster, doing: str, **callbacks: Any) -> Any:
    """A confluent-kafka AdminClient for ``settings`` (``callbacks`` such as ``error_cb`` added to its
    config), built only after the local checks, its constructor's errors classified.

    The TLS files are checked first: with a wrong ``ssl_key_password`` the constructor raised a raw
    ``KafkaException`` (-186). With OAUTHBEARER the client's first token is fetched first: confluent-kafka
    otherwise waits a fixed 10 s in the constructor for a provider that failed, and drops its reason.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    check_tls_files(settings)
    config: dict[str, Any] = {**admin_config(settings), "logger": librdkafka_log(settings), **callbacks}
    first_token(config, settings, doing)
    try:
        return AdminClient(config)
    except KafkaException as exc:
        raise construction_error(exc, config, settings, doing) from None


def construction_error(
    exc: Exception, config: Mapping[str, Any], settings: Cluster, doing: str
) -> StaticConsumerError:
    """The project error for a librdkafka client that could not be built from ``config``: the token
    provider's reason when it failed, else the error classified through the table."""
    source = token_source(config)
    if source is not None and source.failure is not None:
        return token_error(settings, source.failure, doing)
    return error_for(*kafka_exception(exc), settings, doing)


def kafka_exception(exc: Exception) -> tuple[ErrorKind, str]:
    """The kind (through the error table) and text of a confluent-kafka ``KafkaException``."""
    error: Any = exc.args[0] if exc.args else None
    text = error.str() if hasattr(error, "str") else str(exc)
    kind = classify(error.code()) if hasattr(error, "code") else ErrorKind.OTHER
    if kind is ErrorKind.OTHER and hasattr(error, "retriable") and error.retriable():
        kind = ErrorKind.TRANSIENT
    return kind, text


def credentials(settings: Cluster) -> tuple[str, str]:
    """Who the client logs in as, and the settings to check when the brokers refuse it."""
    if settings.sasl_mechanism == "OAUTHBEARER":
        return (
            "the OAUTHBEARER token of sasl_oauth_token_provider",
            "check the token's issuer, audience, scope and lifetime against the brokers' OAUTHBEARER "
            "settings",
        )
    return (
        f"{settings.sasl_username!r} with {settings.sasl_mechanism}",
        "check sasl_username, sasl_password and sasl_mechanism",
    )


def error_for(
    kind: ErrorKind, text: str, settings: Cluster, doing: str, *, reads_group: bool = False
) -> StaticConsumerError:
    """The project error for a classified broker error met while ``doing`` something; ``reads_group``:
    ``doing`` needs READ on the group, so a refusal on the group names READ whichever request it was."""
    text = scrub_for(settings, text)
    if kind is ErrorKind.AUTHENTICATION:
        who, check = credentials(settings)
        return AuthenticationError(f"{doing}: the brokers refused to authenticate {who} ({text}); {check}")
    if kind is ErrorKind.AUTHORIZATION:
        return authorization_error(settings, code_in(text), text, doing, reads_group=reads_group)
    if kind is ErrorKind.TLS:
        return ConfigurationError(f"{doing}: {tls_hint(text)}")
    if kind is ErrorKind.CONFIGURATION:
        return ConfigurationError(
            f"{doing}: the client refused its configuration ({text}); check the ssl_* and sasl_* settings "
            "and the librdkafka passthrough"
        )
    if kind is ErrorKind.UNSUPPORTED:
        return CapabilityError(f"{doing}: the broker does not support the request ({text})")
    if kind is ErrorKind.UNREACHABLE:
        return BrokerUnavailableError(
            f"{doing}: no answer from {settings.bootstrap_servers} within {settings.connect_timeout_s:g}s "
            f"({text}); check bootstrap_servers and that the brokers are reachable, or raise "
            "connect_timeout_s"
        )
    if kind is ErrorKind.TRANSIENT:
        return RetriableError(
            f"{doing}: {text}; a transient broker error (e.g. the coordinator moving), try again"
        )
    return StaticConsumerError(f"{doing}: {text}")


def tls_hint(reason: str) -> str:
    """The TLS failure ``reason`` (librdkafka's text) with what to check for it."""
    if "TLS listener" in reason or "SSL listener" in reason:
        return (
            f"the port is a TLS listener but security_protocol is not SSL/SASL_SSL ({reason}); set "
            "security_protocol='SSL' (or 'SASL_SSL' with SASL) and ssl_ca_location, or use the brokers' "
            "PLAINTEXT port"
        )
    if "PLAINTEXT" in reason:
        check = "the port is a PLAINTEXT listener: use its TLS port, or security_protocol='PLAINTEXT'"
    elif "alert" in reason.lower():
        check = (
            "the broker refused the client certificate: check ssl_certificate_location (signed by a CA the "
            "broker trusts, not expired) and ssl_key_location"
        )
    else:
        check = (
            "the broker's certificate could not be verified: check ssl_ca_location (the CA that signed "
            "it) and that bootstrap_servers names a host in the certificate; ssl_endpoint_identification"
            "=False skips the host check deliberately"
        )
    return f"the TLS handshake failed ({reason}); {check}"


__all__ = [
    "LIBRDKAFKA_LOG",
    "construction_error",
    "credentials",
    "error_for",
    "kafka_exception",
    "librdkafka_admin",
    "librdkafka_log",
    "tls_hint",
]
