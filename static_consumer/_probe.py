"""Ask the cluster what it can do (ApiVersions, group configs), bounded by ``connect_timeout_s``.

kafka-python does the talking because librdkafka exposes neither ApiVersions nor broker configs in a
form the gate can use. Every client is closed before returning, also when the bootstrap fails.
"""

from __future__ import annotations

import logging
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from static_consumer._config import kafka_python_config
from static_consumer.capabilities import GROUP_CONFIGS, BrokerCapabilities
from static_consumer.errors import BrokerUnavailableError, ConfigurationError
from static_consumer.settings import REDACTED, ConsumerSettings

log = logging.getLogger(__name__)
CLIENT_ID = "static-consumer-probe"


def probe(settings: ConsumerSettings) -> BrokerCapabilities:
    """Read ApiVersions and group.* configs from one live broker of the cluster.

    Raises BrokerUnavailableError if the bootstrap servers do not answer within ``connect_timeout_s``
    and ConfigurationError if they refuse the credentials. Group configs the principal may not describe
    are left None (the gate then warns instead of checking them).
    """
    created: list[Any] = []

    def recording_factory(**configs: Any) -> Any:
        # KafkaAdminClient starts its IO thread before bootstrapping and does not stop it when the
        # bootstrap times out; holding the network client lets us close it on that path too.
        client = KafkaAdminClient.DEFAULT_CONFIG["kafka_client"](**configs)
        created.append(client)
        return client

    cfg = kafka_python_config(settings) | {"client_id": CLIENT_ID, "kafka_client": recording_factory}
    admin = None
    try:
        admin = KafkaAdminClient(**cfg)
        return _read(admin)
    except (kafka_errors.SaslAuthenticationFailedError, kafka_errors.AuthorizationError) as exc:
        raise ConfigurationError(
            f"the brokers at {settings.bootstrap_servers} refused the credentials "
            f"({_scrub(exc, settings)}); check security_protocol, sasl_* and ssl_* settings"
        ) from None
    except kafka_errors.KafkaError as exc:
        raise BrokerUnavailableError(
            f"could not read broker capabilities from {settings.bootstrap_servers} within "
            f"{settings.connect_timeout_s:g}s ({_scrub(exc, settings)}); check "
            "bootstrap_servers and that the brokers are reachable, or raise connect_timeout_s"
        ) from None
    finally:
        if admin is not None:
            admin.close()
        else:
            for client in created:
                client.close()


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
    out: dict[str, int | None] = {}
    for name, key in GROUP_CONFIGS.items():
        value = entries.get(key, {}).get("value")
        out[name] = int(value) if value not in (None, "") else None  # older brokers lack KIP-848 keys
    return out


def _scrub(exc: BaseException, settings: ConsumerSettings) -> str:
    """The exception text with any configured secret masked (error texts can echo connection config)."""
    text = str(exc)
    for secret in (settings.sasl_password, settings.ssl_key_password):
        if secret is not None and secret.get_secret_value():
            text = text.replace(secret.get_secret_value(), REDACTED)
    return text


def main(argv: list[str] | None = None) -> None:
    """``python -m static_consumer._probe HOST:PORT`` prints the capabilities as JSON (fixture format)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    settings = ConsumerSettings(bootstrap_servers=args[0], group_id=CLIENT_ID, connect_timeout_s=10)
    print(json.dumps(probe(settings).to_dict(), indent=1))


__all__ = ["main", "probe"]

if __name__ == "__main__":
    main()
