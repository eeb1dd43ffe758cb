"""Rules behind :class:`~static_consumer.settings.ConsumerSettings`: owned keys, secrets, cross-field checks.

Kept apart from the model so the model file stays a readable list of fields. Pure functions only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Protocol

from pydantic import ValidationError

from static_consumer._security.secrets import SecretFields
from static_consumer._security.tls import TlsFields

ENV_PREFIX = "STATIC_CONSUMER_"

# librdkafka keys this library derives from typed fields, with the field to use instead. A passthrough
# that sets one raises rather than silently overriding: a stray partition.assignment.strategy would
# quietly break instance-id ordering, a stray enable.auto.commit would commit unprocessed messages.
OWNED_KEYS: Mapping[str, str] = MappingProxyType(
    {
        "bootstrap.servers": "bootstrap_servers",
        "metadata.broker.list": "bootstrap_servers",
        "group.id": "group_id",
        "group.instance.id": "instance_id / instance_id_template",
        "group.protocol": "protocol",
        "partition.assignment.strategy": "assignment_strategy",
        "group.remote.assignor": "remote_assignor",
        "session.timeout.ms": "session_timeout_ms",
        "heartbeat.interval.ms": "heartbeat_interval_ms",
        "max.poll.interval.ms": "max_poll_interval_ms",
        "enable.auto.commit": "nothing: the library commits after processing",
        "auto.commit.enable": "nothing: the library commits after processing",
        "enable.auto.offset.store": "nothing: the library stores offsets after processing",
        "auto.offset.reset": "auto_offset_reset",
        "security.protocol": "security_protocol",
        "sasl.mechanism": "sasl_mechanism",
        "sasl.mechanisms": "sasl_mechanism",
        "sasl.username": "sasl_username",
        "sasl.password": "sasl_password",
        "ssl.ca.location": "ssl_ca_location",
        "ssl.certificate.location": "ssl_certificate_location",
        "ssl.key.location": "ssl_key_location",
        "ssl.key.password": "ssl_key_password",
        "ssl.endpoint.identification.algorithm": "ssl_endpoint_identification",
    }
)

# Under KIP-848 the broker decides these; librdkafka refuses them with group.protocol=consumer.
CLASSIC_ONLY_KEYS = frozenset(
    {"partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms", "group.protocol.type"}
)
_CONSUMER_PROTOCOL_INSTEAD = {
    "session_timeout_ms": "the broker's group.consumer.session.timeout.ms",
    "heartbeat_interval_ms": "the broker's group.consumer.heartbeat.interval.ms",
    "assignment_strategy": "remote_assignor (group.remote.assignor)",
}

# The wait for a held instance id (UNRELEASED_INSTANCE_ID) exists under KIP-848 only.
_CONSUMER_PROTOCOL_ONLY = ("release_margin_s", "release_max_wait_s")

_KAFKA_NAME = re.compile(r"[A-Za-z0-9._-]+")

# STATIC_CONSUMER_* variables that are not settings: read by the test harness and the Spark bridge.
OTHER_ENV_VARS = frozenset(
    {
        "STATIC_CONSUMER_BROKER",
        "STATIC_CONSUMER_CACHE_DIR",
        "STATIC_CONSUMER_DEBIAN_MIRROR",  # read by the Kafka image build (testing/container/build-base.sh)
        "STATIC_CONSUMER_DELTA_VERSION",
        "STATIC_CONSUMER_KAFKA_VERSION",
        "STATIC_CONSUMER_KEEP_BROKER_DATA",
        "STATIC_CONSUMER_PURE_PYTHON",
        "STATIC_CONSUMER_SPARK_KAFKA_VERSION",
    }
)


class Fields(TlsFields, SecretFields, Protocol):
    """The settings as the rules read them (``ConsumerSettings`` is one), the TLS files and secrets
    included. A Protocol, so the rules do not import the model whose validator calls them."""

    @property
    def model_fields_set(self) -> set[str]: ...

    @property
    def protocol(self) -> str: ...

    @property
    def assignment_mode(self) -> str: ...

    @property
    def static_policy(self) -> str: ...

    @property
    def instance_id(self) -> str | None: ...

    @property
    def replicas(self) -> int | None: ...

    @property
    def topics(self) -> Sequence[str]: ...

    @property
    def session_timeout_ms(self) -> int: ...

    @property
    def heartbeat_interval_ms(self) -> int | None: ...

    @property
    def max_poll_interval_ms(self) -> int: ...

    @property
    def remote_assignor(self) -> str | None: ...

    @property
    def sasl_mechanism(self) -> str | None: ...

    @property
    def sasl_username(self) -> str | None: ...

    @property
    def sasl_oauth_token_provider(self) -> object | None: ...

    @property
    def ssl_endpoint_identification(self) -> bool: ...


def env_var(field_name: str) -> str:
    """The environment variable that sets ``field_name``."""
    return ENV_PREFIX + field_name.upper()


def unknown_env_vars(environ: Mapping[str, str], fields: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(variable, closest field or None)`` for each ``STATIC_CONSUMER_*`` variable in ``environ`` that
    sets no field. pydantic-settings ignores such variables, so a misspelling would go unnoticed."""
    names = {name.upper(): name for name in fields}
    out: list[tuple[str, str | None]] = []
    for variable in sorted(environ):
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in OTHER_ENV_VARS:
            continue
        suffix = upper.removeprefix(ENV_PREFIX)
        if suffix not in names:  # names are matched case-insensitively, as pydantic-settings does
            close = difflib.get_close_matches(suffix, names, n=1, cutoff=0.6)
            out.append((variable, names[close[0]] if close else None))
    return out


def is_owned(key: str, protocol: str) -> bool:
    """Whether the passthrough ``key`` is refused as the library's own (see :data:`OWNED_KEYS`)."""
    k = key.strip().lower()
    return k in OWNED_KEYS or (protocol == "consumer" and k in CLASSIC_ONLY_KEYS)


def split_servers(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


def is_server(entry: str) -> bool:
    """``host:port`` (optionally ``proto://host:port`` or ``[v6]:port``), as librdkafka accepts."""
    host, sep, port = entry.split("://", 1)[-1].rpartition(":")
    return bool(sep and host.strip("[]") and port.isdigit() and 0 < int(port) < 65536)


def is_topic(name: str) -> bool:
    """A legal Kafka topic name, or a librdkafka ``^regex`` subscription that compiles."""
    if name.startswith("^"):
        try:
            re.compile(name)
        except re.error:
            return False
        return True
    return 0 < len(name) <= 249 and name not in (".", "..") and _KAFKA_NAME.fullmatch(name) is not None


def combination_problems(s: Fields) -> list[str]:
    """Cross-field rules. Each message says what to change."""
    out: list[str] = []
    if s.protocol == "classic":
        if s.remote_assignor is not None:
            out.append("remote_assignor only applies to protocol='consumer'; remove it or switch protocol")
        for name in _CONSUMER_PROTOCOL_ONLY:
            if name in s.model_fields_set:
                out.append(
                    f"{name} only applies to protocol='consumer' (the classic protocol hands a restarted "
                    "static member its id at once); remove it or switch protocol"
                )
        if s.heartbeat_interval_ms is not None and s.heartbeat_interval_ms >= s.session_timeout_ms:
            out.append(
                f"heartbeat_interval_ms ({s.heartbeat_interval_ms}) must be below session_timeout_ms "
                f"({s.session_timeout_ms}); a third of it is usual"
            )
        if s.max_poll_interval_ms < s.session_timeout_ms:
            out.append(
                f"max_poll_interval_ms ({s.max_poll_interval_ms}) must be >= session_timeout_ms "
                f"({s.session_timeout_ms}); raise max_poll_interval_ms or lower session_timeout_ms"
            )
    else:
        # model_fields_set includes values from the environment, so an env var counts as "explicitly set".
        for name, instead in _CONSUMER_PROTOCOL_INSTEAD.items():
            if name in s.model_fields_set:
                out.append(f"{name} is not used with protocol='consumer' (it is {instead}); remove it")
    if s.static_policy == "dynamic" and s.instance_id is not None:
        out.append("instance_id is set but static_policy='dynamic' never sends it; remove one of them")
    if s.assignment_mode == "ordinal" and s.replicas is None:
        out.append("assignment_mode='ordinal' needs replicas (the StatefulSet replica count)")
    if s.assignment_mode == "ordinal" and any(t.startswith("^") for t in s.topics):
        out.append(
            "assignment_mode='ordinal' plans partitions of named topics; replace the '^regex' topics "
            "with their names"
        )
    if s.assignment_mode == "group" and s.replicas is not None:
        out.append("replicas is only used with assignment_mode='ordinal'; remove it or switch the mode")
    return out + _security_problems(s) + _passthrough_problems(s)


def _security_problems(s: Fields) -> list[str]:
    out: list[str] = []
    sasl_fields = ("sasl_mechanism", "sasl_username", "sasl_password", "sasl_oauth_token_provider")
    if s.security_protocol.startswith("SASL_"):
        out += _sasl_problems(s)
    elif sasl_set := [n for n in sasl_fields if getattr(s, n) is not None]:
        out.append(
            f"{', '.join(sasl_set)}: sasl_* settings are ignored with security_protocol="
            f"{s.security_protocol}; set security_protocol to SASL_SSL (or SASL_PLAINTEXT) or remove them"
        )
    ssl_fields = ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location", "ssl_key_password")
    ssl_set = [n for n in ssl_fields if getattr(s, n) is not None]
    if not s.ssl_endpoint_identification:
        ssl_set.append("ssl_endpoint_identification")
    if not s.security_protocol.endswith("SSL") and ssl_set:
        # Refused rather than ignored: the user believes the traffic is encrypted and it is not.
        out.append(
            f"{', '.join(ssl_set)}: ssl_* settings are ignored with security_protocol="
            f"{s.security_protocol} (traffic is not encrypted); set security_protocol to SSL or SASL_SSL, "
            "or remove them"
        )
    if (s.ssl_certificate_location is None) != (s.ssl_key_location is None):
        out.append("mutual TLS needs both ssl_certificate_location and ssl_key_location")
    if s.ssl_key_password is not None and s.ssl_key_location is None:
        out.append("ssl_key_password is set without ssl_key_location")
    return out


def _sasl_problems(s: Fields) -> list[str]:
    protocol = f"security_protocol={s.security_protocol}"
    if s.sasl_mechanism is None:
        missing = ["sasl_mechanism"]
        if s.sasl_oauth_token_provider is None:
            missing += [n for n in ("sasl_username", "sasl_password") if getattr(s, n) is None]
        return [f"{protocol} needs {', '.join(missing)}"]
    if s.sasl_mechanism == "OAUTHBEARER":
        out = []
        if s.sasl_oauth_token_provider is None:
            out.append(
                "sasl_mechanism=OAUTHBEARER needs sasl_oauth_token_provider, a callable returning an "
                "OAuthBearerToken; it can only be set in code (it is no environment variable)"
            )
        given = [n for n in ("sasl_username", "sasl_password") if getattr(s, n) is not None]
        if given:
            out.append(
                f"{' and '.join(given)} are not used with sasl_mechanism=OAUTHBEARER (the token "
                "authenticates); remove them"
            )
        return out
    missing = [n for n in ("sasl_username", "sasl_password") if getattr(s, n) is None]
    out = [f"{protocol} needs {', '.join(missing)}"] if missing else []
    if s.sasl_oauth_token_provider is not None:
        out.append(
            f"sasl_oauth_token_provider is only used with sasl_mechanism=OAUTHBEARER, not "
            f"{s.sasl_mechanism}; remove it or switch the mechanism"
        )
    return out


def _passthrough_problems(s: Fields) -> list[str]:
    out: list[str] = []
    for key in s.librdkafka:
        k = key.strip().lower()
        if s.protocol == "consumer" and k in CLASSIC_ONLY_KEYS:
            out.append(
                f"librdkafka[{key!r}] is a classic-protocol setting; with protocol='consumer' the broker "
                "decides it (group.consumer.* broker configs, remote_assignor); remove it"
            )
        elif k in OWNED_KEYS:
            out.append(f"librdkafka[{key!r}] is managed by static_consumer; set {OWNED_KEYS[k]} instead")
    return out


def describe(exc: ValidationError, fields: Iterable[str]) -> str:
    """A readable message from a ValidationError that never echoes input values (they may be secrets)."""
    known = set(fields)
    lines: list[str] = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        msg = str(err["msg"]).removeprefix("Value error, ")
        loc = err["loc"]
        if not loc:  # a model-level (cross-field) check: one problem per line
            lines.extend(msg.splitlines())
            continue
        name, where = str(loc[0]), ".".join(str(part) for part in loc)
        if name not in known:
            lines.append(f"unknown setting {where!r}; see docs/configuration.md for the valid names")
        elif err["type"] == "missing":
            lines.append(f"{name} is required: pass {name}=... or set {env_var(name)}")
        else:
            lines.append(f"{where} ({env_var(name)}): {msg}")
    return "invalid consumer settings:\n" + "\n".join(f"  - {line}" for line in lines)
