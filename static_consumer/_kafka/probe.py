"""Ask the cluster what it can do (ApiVersions, group configs), bounded by ``connect_timeout_s``.

kafka-python does the talking because librdkafka exposes neither ApiVersions nor broker configs in a
form the gate can use. Every client is closed before returning, also when the bootstrap fails. The
consumer imports this module when it starts (the capability gate), not when ``static_consumer`` is
imported, so kafka-python stays out of a process that only builds settings or runs on a fake adapter.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import ConfigResource, ConfigResourceType

from static_consumer._kafka.acls import authorization_error, code_in
from static_consumer._kafka.admin_client import credentials, tls_hint
from static_consumer._kafka.codes import ErrorKind
from static_consumer._kafka.kafka_python import admin_client, explain, kind_of
from static_consumer._kafka.login import failed_login
from static_consumer._security.secrets import scrub_for
from static_consumer.capabilities import GROUP_CONFIGS, BrokerCapabilities
from static_consumer.errors import (
    AuthenticationError,
    BrokerUnavailableError,
    ConfigurationError,
    StaticConsumerError,
)
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)
CLIENT_ID = "static-consumer-probe"
# Group-level KIP-848 overrides -> the BrokerCapabilities field they replace.
GROUP_OVERRIDES = {
    "consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
}


def probe(settings: ConsumerSettings) -> BrokerCapabilities:
    """Read ApiVersions and group.* configs from one live broker of the cluster.

    Raises BrokerUnavailableError if the bootstrap servers do not answer within ``connect_timeout_s``,
    AuthenticationError at their first refusal of the SASL credentials, and ConfigurationError if the
    principal may not do what the probe needs.
    Group configs the principal may not describe are left None (the gate then warns instead of
    checking them).
    """
    _log_in_first(settings)
    try:
        with admin_client(settings, CLIENT_ID) as admin:
            caps = _read(admin)
            if settings.protocol == "consumer":
                caps = _with_group_overrides(admin, settings.group_id, caps)
            return caps
    except kafka_errors.KafkaError as exc:
        raise _error(explain(exc, settings), settings) from None


def _log_in_first(settings: ConsumerSettings) -> None:
    """With SASL, a wrong password ends the start at the brokers' first refusal; with TLS, a certificate
    either side refuses ends it at the failed handshake, and a PLAINTEXT client on a TLS port at the
    broker's disconnect (``failed_login``). A TLS file no client can load, or an OAUTHBEARER provider
    that gives no token, ends it before any connection."""
    failed = failed_login(settings)
    if failed is not None:
        kind, text = failed
        if kind is ErrorKind.TLS:
            raise ConfigurationError(f"brokers at {settings.bootstrap_servers}: {tls_hint(text)}")
        if kind is ErrorKind.AUTHENTICATION:
            raise _error(kafka_errors.SaslAuthenticationFailedError(text), settings)
        raise _error(kafka_errors.KafkaConnectionError(text), settings)


def _error(exc: kafka_errors.KafkaError, settings: ConsumerSettings) -> StaticConsumerError:
    kind = kind_of(exc)
    if kind is ErrorKind.AUTHENTICATION:
        who, check = credentials(settings)
        return AuthenticationError(
            f"the brokers at {settings.bootstrap_servers} refused to authenticate {who} over "
            f"{settings.security_protocol} ({_scrub(exc, settings)}); {check}"
        )
    if kind is ErrorKind.AUTHORIZATION:
        text = _scrub(exc, settings)
        return authorization_error(
            settings, code_in(text), text, f"the brokers at {settings.bootstrap_servers}"
        )
    return BrokerUnavailableError(
        f"could not read broker capabilities from {settings.bootstrap_servers} within "
        f"{settings.connect_timeout_s:g}s ({_scrub(exc, settings)}); check "
        "bootstrap_servers and that the brokers are reachable, or raise connect_timeout_s"
    )


def _read(admin: Any) -> BrokerCapabilities:
    cluster = admin.describe_cluster()
    brokers = sorted(b["broker_id"] for b in cluster["brokers"] if not b.get("is_fenced"))
    if not brokers:
        raise kafka_errors.KafkaConnectionError("the cluster metadata lists no unfenced broker")
    # One broker (the lowest id) answers for the cluster: group configs are cluster-wide in practice and
    # mixed API versions only occur mid-upgrade, when JoinGroup v5 (Kafka 2.3) is long available anyway.
    broker_id = brokers[0]
    version_data = admin.get_broker_version_data(broker_id)
    configs = _group_configs(admin, broker_id)
    return BrokerCapabilities(
        api_versions={int(k): (int(v[0]), int(v[1])) for k, v in version_data.api_versions.items()},
        broker_version=version_data.broker_version_str,
        **configs,
    )


def _group_configs(admin: Any, broker_id: int) -> dict[str, int | None]:
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id), list(GROUP_CONFIGS.values()))
    try:
        described = admin.describe_configs([resource], config_filter="all")
        entries = described["broker"][str(broker_id)]
    except (kafka_errors.AuthorizationError, kafka_errors.BrokerResponseError, KeyError) as exc:
        log.warning("could not describe broker %s group configs: %s", broker_id, type(exc).__name__)
        entries = {}
    if not entries:
        # kafka-python hands a refused resource back as an empty answer (no DESCRIBE_CONFIGS on the
        # Cluster); the gate then warns that the bounds are unchecked (docs/security.md).
        log.info(
            "broker %s did not describe its group configs (no DESCRIBE_CONFIGS on the Cluster?)", broker_id
        )
    out: dict[str, int | None] = {}
    for name, key in GROUP_CONFIGS.items():
        value = entries.get(key, {}).get("value")
        out[name] = int(value) if value not in (None, "") else None  # older brokers lack KIP-848 keys
    return out


def _with_group_overrides(admin: Any, group_id: str, caps: BrokerCapabilities) -> BrokerCapabilities:
    """KIP-848 groups may override the broker's session timeout and heartbeat interval
    (``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms`` set on the group). The group's
    session decides how long a crashed member's instance id stays held, so it replaces the broker value."""
    keys = list(GROUP_OVERRIDES)
    resource = ConfigResource(ConfigResourceType.GROUP, group_id, keys)
    try:
        entries = admin.describe_configs([resource], config_filter="all")["group"][group_id]
    except (kafka_errors.KafkaError, KeyError) as exc:
        entries, reason = {}, type(exc).__name__
    else:
        reason = "no DESCRIBE_CONFIGS on the Group?"
    if not entries:
        # Refused or unanswered (kafka-python hands a refused resource back as an empty answer, while an
        # answered one lists every group config): the group's session is unknown and may be longer than
        # the broker's. Leaving it None makes the wait for a held instance id use the broker's maximum,
        # which bounds every override.
        log.info("could not describe group %s configs (%s)", group_id, reason)
        return replace(caps, consumer_session_timeout_ms=None)
    overrides: dict[str, Any] = {}
    for key, field_name in GROUP_OVERRIDES.items():
        entry = entries.get(key, {})
        # Without an override the broker answers with the static default, not its own configured value.
        if entry.get("config_source") == "DYNAMIC_GROUP_CONFIG" and entry.get("value"):
            overrides[field_name] = int(entry["value"])
    return replace(caps, **overrides) if overrides else caps


def _scrub(exc: BaseException, settings: ConsumerSettings) -> str:
    """The exception text with any configured secret masked (error texts can echo connection config)."""
    return scrub_for(settings, str(exc))


def main(argv: list[str] | None = None) -> None:
    """``python -m static_consumer._kafka.probe HOST:PORT`` prints the capabilities as JSON (the fixture
    format)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    settings = ConsumerSettings(bootstrap_servers=args[0], group_id=CLIENT_ID, connect_timeout_s=10)
    print(json.dumps(probe(settings).to_dict(), indent=1))


__all__ = ["main", "probe"]

if __name__ == "__main__":
    main()
