"""Ask the cluster what it can do (ApiVersions, group configs), bounded by ``connect_timeout_s``.

The login check that runs first (``_kafka.login.check_login``, a librdkafka client) reads them: librdkafka
asks every broker for its ApiVersions when it connects and, with ``debug=feature``, logs the answer line
by line; the group configs come from the same client's DescribeConfigs. librdkafka has no API for the
ApiVersions, so when no such line was logged (another librdkafka's text, say) kafka-python asks instead:
the gate never decides without the broker's own answer. kafka-python is imported only on that path (its
import costs more than the rest of a static restart). Every client is closed before returning, also when
the bootstrap fails. The consumer imports this module when it starts (the capability gate), not when
``static_consumer`` is imported.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from static_consumer._base.codes import ErrorKind
from static_consumer._base.errors import (
    AuthenticationError,
    BrokerUnavailableError,
    ConfigurationError,
    StaticConsumerError,
)
from static_consumer._kafka.acls import authorization_error, code_in
from static_consumer._kafka.admin_client import credentials, tls_hint
from static_consumer._kafka.capabilities import GROUP_CONFIGS, BrokerCapabilities
from static_consumer._kafka.login import failed_login
from static_consumer._security.secrets import scrub_for
from static_consumer.settings._views import Cluster

if TYPE_CHECKING:
    import kafka.errors as kafka_errors

log = logging.getLogger(__name__)
CLIENT_ID = "static-consumer-probe"
# Group-level KIP-848 overrides -> the BrokerCapabilities field they replace.
GROUP_OVERRIDES = {
    "consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
}


def probe(
    settings: Cluster, *, group_overrides: bool = False, broker_version: bool = False
) -> BrokerCapabilities:
    """Read ApiVersions and group.* configs from one live broker of the cluster.

    ``group_overrides``: also the group's own KIP-848 session and heartbeat (``consumer.*.ms`` group
    configs), which take precedence over the broker's for that group (the consumer protocol's mode asks).

    ``broker_version``: ask through kafka-python, which also names the Kafka version the ApiVersions
    look like (for the ``check`` command's report); librdkafka's path leaves it None.

    Raises BrokerUnavailableError if the bootstrap servers do not answer within ``connect_timeout_s``,
    AuthenticationError at their first refusal of the SASL credentials, and ConfigurationError if the
    principal may not do what the probe needs.
    Group configs the principal may not describe are left None (the gate then warns instead of
    checking them).
    """
    found: list[BrokerCapabilities] = []

    def from_librdkafka(client: Any, login_log: Any) -> None:
        if not broker_version:
            found.extend(_from_librdkafka(client, login_log.api_versions, settings, group_overrides))

    _log_in_first(settings, from_librdkafka)
    if found:
        return found[0]
    import kafka.errors as kafka_errors

    from static_consumer._kafka.kafka_python import admin_client, explain

    try:
        with admin_client(settings, CLIENT_ID) as admin:
            caps = _read(admin)
            if group_overrides:
                caps = _with_group_overrides(admin, settings.group_id, caps)
            return caps
    except kafka_errors.KafkaError as exc:
        raise _error(explain(exc, settings), settings) from None


def _log_in_first(settings: Cluster, on_accepted: Any) -> None:
    """With SASL, a wrong password ends the start at the brokers' first refusal; with TLS, a certificate
    either side refuses ends it at the failed handshake, and a PLAINTEXT client on a TLS port at the
    broker's disconnect (``failed_login``). A TLS file no client can load, or an OAUTHBEARER provider
    that gives no token, ends it before any connection."""
    failed = failed_login(settings, on_accepted)
    if failed is not None:
        import kafka.errors as kafka_errors

        kind, text = failed
        if kind is ErrorKind.TLS:
            raise ConfigurationError(f"brokers at {settings.bootstrap_servers}: {tls_hint(text)}")
        if kind is ErrorKind.AUTHENTICATION:
            raise _error(kafka_errors.SaslAuthenticationFailedError(text), settings)
        raise _error(kafka_errors.KafkaConnectionError(text), settings)


def _error(exc: kafka_errors.KafkaError, settings: Cluster) -> StaticConsumerError:
    from static_consumer._kafka.kafka_python import kind_of

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


def _from_librdkafka(
    client: Any, api_versions: dict[int, tuple[int, int]], settings: Cluster, group_overrides: bool
) -> list[BrokerCapabilities]:
    """The capabilities from the login check's librdkafka client: the ApiVersions of the broker it logged
    in to (as librdkafka logged them) and the group configs of the lowest live broker id, as the
    kafka-python path reads them. Empty when librdkafka logged no ApiVersions, or when the cluster did not
    answer it (kafka-python then asks, and reports what went wrong as before)."""
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType  # type: ignore[attr-defined]

    if not api_versions:
        log.info("librdkafka logged no ApiVersions: asking the broker with kafka-python")
        return []
    timeout = settings.connect_timeout_s

    def entries(kind: Any, name: str) -> dict[str, Any]:
        described = client.describe_configs([ConfigResource(kind, name)], request_timeout=timeout)
        return dict(next(iter(described.values())).result(timeout))

    broker_id: int | None = None
    try:
        broker_id = min(client.list_topics(timeout=timeout).brokers)
        broker = entries(ResourceType.BROKER, str(broker_id))
    except KafkaException as exc:
        if _kind(exc) is not ErrorKind.AUTHORIZATION:
            log.info(
                "librdkafka could not read the broker configs (%s): asking with kafka-python", _code(exc)
            )
            return []
        # As on kafka-python's path: configs the principal may not describe stay None (the gate warns).
        log.warning("could not describe broker %s group configs: %s", broker_id, _code(exc))
        broker = {}
    except (FutureTimeout, ValueError) as exc:  # no answer in time, or metadata without brokers
        log.info("librdkafka could not read the broker configs (%s): asking with kafka-python", exc)
        return []
    configs: dict[str, Any] = {}
    for name, key in GROUP_CONFIGS.items():
        value = broker[key].value if key in broker else None
        configs[name] = int(value) if value not in (None, "") else None  # older brokers lack KIP-848 keys
    caps = BrokerCapabilities(api_versions=dict(api_versions), **configs)
    if not group_overrides:
        return [caps]
    try:  # the group's own KIP-848 overrides, as in _with_group_overrides
        group = entries(ResourceType.GROUP, settings.group_id)
    except (KafkaException, FutureTimeout) as exc:
        log.info("could not describe group %s configs: %s", settings.group_id, _code(exc))
        return [replace(caps, consumer_session_timeout_ms=None)]
    overrides: dict[str, Any] = {
        field_name: int(group[key].value)
        for key, field_name in GROUP_OVERRIDES.items()
        if key in group and group[key].source == ConfigSource.GROUP_CONFIG.value and group[key].value
    }
    return [replace(caps, **overrides) if overrides else caps]


def _code(exc: BaseException) -> str:
    error: Any = exc.args[0] if exc.args else None
    return str(error.name()) if hasattr(error, "name") else type(exc).__name__


def _kind(exc: BaseException) -> ErrorKind:
    from static_consumer._base.codes import classify

    error: Any = exc.args[0] if exc.args else None
    return classify(error.code()) if hasattr(error, "code") else ErrorKind.OTHER


def _read(admin: Any) -> BrokerCapabilities:
    import kafka.errors as kafka_errors

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
    import kafka.errors as kafka_errors
    from kafka.admin import ConfigResource, ConfigResourceType

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
    overrides = group_overrides(admin, group_id)
    if overrides is None:
        # Refused or unanswered: the group's session is unknown and may be longer than the broker's.
        # Leaving it None makes the wait for a held instance id use the broker's maximum, which bounds
        # every override.
        return replace(caps, consumer_session_timeout_ms=None)
    fields: dict[str, Any] = dict(overrides)
    return replace(caps, **fields) if fields else caps


def group_overrides(admin: Any, group_id: str) -> dict[str, int] | None:
    """The group's own KIP-848 settings (``BrokerCapabilities`` field -> value; empty without any) read
    through an open kafka-python ``admin`` session; None when refused or unanswered (kafka-python hands
    a refused resource back as an empty answer, while an answered one lists every group config)."""
    import kafka.errors as kafka_errors
    from kafka.admin import ConfigResource, ConfigResourceType

    resource = ConfigResource(ConfigResourceType.GROUP, group_id, list(GROUP_OVERRIDES))
    try:
        entries = admin.describe_configs([resource], config_filter="all")["group"][group_id]
    except (kafka_errors.KafkaError, KeyError) as exc:
        entries, reason = {}, type(exc).__name__
    else:
        reason = "no DESCRIBE_CONFIGS on the Group?"
    if not entries:
        log.info("could not describe group %s configs (%s)", group_id, reason)
        return None
    overrides: dict[str, int] = {}
    for key, field_name in GROUP_OVERRIDES.items():
        entry = entries.get(key, {})
        # Without an override the broker answers with the static default, not its own configured value.
        if entry.get("config_source") == "DYNAMIC_GROUP_CONFIG" and entry.get("value"):
            overrides[field_name] = int(entry["value"])
    return overrides


def _scrub(exc: BaseException, settings: Cluster) -> str:
    """The exception text with any configured secret masked (error texts can echo connection config)."""
    return scrub_for(settings, str(exc))


def main(argv: list[str] | None = None) -> None:
    """``python -m static_consumer._kafka.probe HOST:PORT`` prints the capabilities as JSON (the fixture
    format)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    from static_consumer.settings import ConsumerSettings

    settings = ConsumerSettings(bootstrap_servers=args[0], group_id=CLIENT_ID, connect_timeout_s=10)
    print(json.dumps(probe(settings).to_dict(), indent=1))


__all__ = ["group_overrides", "main", "probe"]

if __name__ == "__main__":
    main()
