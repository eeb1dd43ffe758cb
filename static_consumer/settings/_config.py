"""Settings -> client configuration dicts (librdkafka consumer, kafka-python, librdkafka admin). Pure.

One settings object drives all three clients, so every security setting is mapped here for each of them:

=============================  ==============================  ===============================
setting                        librdkafka (consumer, admin)    kafka-python (probe, LeaveGroup)
=============================  ==============================  ===============================
security_protocol              security.protocol               security_protocol
sasl_mechanism                 sasl.mechanisms                 sasl_mechanism
sasl_username / sasl_password  sasl.username / sasl.password   sasl_plain_username / _password
sasl_oauth_token_provider      oauth_cb                        sasl_oauth_token_provider
ssl_ca_location                ssl.ca.location                 ssl_cafile
ssl_certificate_location       ssl.certificate.location        ssl_certfile
ssl_key_location / _password   ssl.key.location / .password    ssl_keyfile / ssl_password
ssl_endpoint_identification    ssl.endpoint.identification.    ssl_check_hostname
                               algorithm (https / none)
=============================  ==============================  ===============================

The dicts hold secrets in clear because the clients need them: never log them
(``static_consumer._security.secrets`` masks what must leave the process).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from static_consumer._security.oauth import kafka_python_token_provider, librdkafka_oauth_cb
from static_consumer.settings._defaults import CLIENT_DEFAULTS
from static_consumer.settings._model import ConsumerSettings
from static_consumer.settings._rules import split_servers
from static_consumer.settings._views import Cluster

# librdkafka's OAUTHBEARER token callback: the one value in a client config that is not a scalar.
OAuthCallback = Callable[[str], tuple[str, float, str, dict[str, str]]]
ConfigValue = str | int | float | bool | OAuthCallback

# Passthrough keys that concern the connection rather than consuming, so admin clients need them too.
_CONNECTION_PREFIXES = ("ssl.", "sasl.", "socket.", "client.", "broker.address.", "enable.ssl.")


def _security(settings: Cluster) -> dict[str, ConfigValue]:
    key_password = settings.ssl_key_password
    cfg: dict[str, ConfigValue] = {"security.protocol": settings.security_protocol}
    optional = {
        "sasl.mechanisms": settings.sasl_mechanism,
        "sasl.username": settings.sasl_username,
        "sasl.password": settings.sasl_password.get_secret_value() if settings.sasl_password else None,
        "ssl.ca.location": settings.ssl_ca_location,
        "ssl.certificate.location": settings.ssl_certificate_location,
        "ssl.key.location": settings.ssl_key_location,
        "ssl.key.password": key_password.get_secret_value() if key_password else None,
    }
    cfg.update({k: v for k, v in optional.items() if v is not None})
    if settings.security_protocol.endswith("SSL"):
        cfg["ssl.endpoint.identification.algorithm"] = (
            "https" if settings.ssl_endpoint_identification else "none"
        )
    if settings.sasl_oauth_token_provider is not None:
        cfg["oauth_cb"] = librdkafka_oauth_cb(settings.sasl_oauth_token_provider)
    return cfg


def consumer_config(
    settings: ConsumerSettings, instance_id: str | None, group: Mapping[str, ConfigValue]
) -> dict[str, ConfigValue]:
    """librdkafka consumer config. ``instance_id=None`` makes a dynamic member (no group.instance.id);
    ``group``: the group protocol's own keys, from the consumer's mode (``Mode.group_config``:
    ``group.protocol`` and, under the classic protocol, the assignor, session and heartbeat)."""
    cfg: dict[str, ConfigValue] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": settings.group_id,
    }
    if instance_id is not None:
        cfg["group.instance.id"] = instance_id
    cfg.update(group)
    cfg.update(
        {
            "max.poll.interval.ms": settings.max_poll_interval_ms,
            # The library stores and commits offsets itself, only after a message was processed.
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": settings.auto_offset_reset,
        }
    )
    cfg.update(_security(settings))
    cfg.update({key: default.value for key, default in CLIENT_DEFAULTS.items()})
    # Validated: it cannot override any key set above but the CLIENT_DEFAULTS, which it may.
    cfg.update(settings.librdkafka)
    return cfg


def admin_config(settings: Cluster) -> dict[str, ConfigValue]:
    """confluent-kafka AdminClient/Producer config: bootstrap, security and connection passthrough keys.

    All values are strings, but ``oauth_cb`` (OAUTHBEARER).
    """
    cfg: dict[str, ConfigValue] = {"bootstrap.servers": settings.bootstrap_servers, **_security(settings)}
    for key, value in settings.librdkafka.items():
        if key.startswith(_CONNECTION_PREFIXES):
            cfg[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return cfg


def kafka_python_config(settings: Cluster) -> dict[str, object]:
    """Keyword arguments for kafka-python 3 clients (used by the capability probe)."""
    timeout_ms = max(1, int(settings.connect_timeout_s * 1000))
    cfg: dict[str, object] = {
        "bootstrap_servers": split_servers(settings.bootstrap_servers),
        "security_protocol": settings.security_protocol,
        "request_timeout_ms": timeout_ms,
        # kafka-python 3 replaced api_version_auto_timeout_ms with bootstrap_timeout_ms.
        "bootstrap_timeout_ms": timeout_ms,
    }
    optional = {
        "sasl_mechanism": settings.sasl_mechanism,
        "sasl_plain_username": settings.sasl_username,
        "sasl_plain_password": settings.sasl_password.get_secret_value() if settings.sasl_password else None,
        "ssl_cafile": settings.ssl_ca_location,
        "ssl_certfile": settings.ssl_certificate_location,
        "ssl_keyfile": settings.ssl_key_location,
        "ssl_password": settings.ssl_key_password.get_secret_value() if settings.ssl_key_password else None,
    }
    if settings.ssl_key_location is not None and settings.ssl_key_password is None:
        # kafka-python hands ssl_password to SSLContext.load_cert_chain; with None, OpenSSL asks for the
        # pass phrase of an encrypted key on the terminal (measured: once per connection attempt). An
        # empty one makes it fail instead, like librdkafka does; an unencrypted key ignores it.
        optional["ssl_password"] = ""
    cfg.update({k: v for k, v in optional.items() if v is not None})
    if settings.security_protocol.endswith("SSL"):
        cfg["ssl_check_hostname"] = settings.ssl_endpoint_identification
    if settings.sasl_oauth_token_provider is not None:
        cfg["sasl_oauth_token_provider"] = kafka_python_token_provider(settings.sasl_oauth_token_provider)
    return cfg


__all__ = [
    "CLIENT_DEFAULTS",
    "ConfigValue",
    "admin_config",
    "consumer_config",
    "kafka_python_config",
]
