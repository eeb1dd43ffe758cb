"""What the user asked for: one frozen, validated settings object.

Every field can come from the environment as ``STATIC_CONSUMER_<FIELD>`` (``topics`` as ``a,b``,
``librdkafka`` as a JSON object). Validation happens once, in the constructor, and every failure is a
:class:`~static_consumer._base.errors.ConfigurationError` whose message names the field, its environment
variable and what to change. The constructor itself wraps pydantic's ``ValidationError`` (so no code
path can get a raw pydantic error); ``ConsumerSettings.load(**overrides)`` is the same call, typed for
the case where required fields come from the environment.

Mistakes the model alone would not see are caught here too: the ``librdkafka`` passthrough goes through
librdkafka's own configuration parser (``_passthrough``, no connection made), and a ``STATIC_CONSUMER_*``
variable that is no setting (a misspelling, which pydantic-settings ignores) is logged once, with the
closest setting's variable.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    Field,
    FieldSerializationInfo,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict, SettingsError

from static_consumer._base.errors import ConfigurationError
from static_consumer._security.oauth import OAuthBearerToken
from static_consumer._security.secrets import redact_items
from static_consumer.settings._failures import failure_problems
from static_consumer.settings._passthrough import librdkafka_problems
from static_consumer.settings._rules import (
    ENV_PREFIX,
    combination_problems,
    describe,
    env_var,
    is_owned,
    is_server,
    is_topic,
    split_servers,
    unknown_env_vars,
)

log = logging.getLogger(__name__)
LibrdkafkaValue = str | int | float | bool
# librdkafka's ranges for the properties these fields set (session.timeout.ms, heartbeat.interval.ms,
# max.poll.interval.ms): checked here so the message names the field instead of a librdkafka key.
_LIBRDKAFKA_MAX_SESSION_MS = 3_600_000
_LIBRDKAFKA_MAX_POLL_INTERVAL_MS = 86_400_000
_INT32_MAX = 2**31 - 1  # a StatefulSet's replicas is an int32
# Longer than any sane wait: a bigger value is mostly milliseconds written into a seconds field.
_MAX_WAIT_S = 3600.0
_MAX_TOPIC_WAIT_S = 86400.0  # topics may come from a slow deployment step, but not after a day
_warned_env: set[str] = set()  # misspelled variables already logged in this process
_ENV_HINT = "STATIC_CONSUMER_LIBRDKAFKA must be a JSON object, e.g. '{\"fetch.min.bytes\": 1024}'"


class ConsumerSettings(BaseSettings):
    """Settings for a static-membership consumer. Frozen; see docs/configuration.md for every field."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", env_ignore_empty=True, validate_default=True
    )

    bootstrap_servers: str = Field(description="Comma-separated `host:port` list of bootstrap brokers.")
    group_id: str = Field(min_length=1, description="Consumer group id (`group.id`).")
    topics: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(), description="Topics to consume; comma-separated in the environment. `^regex` allowed."
    )
    instance_id: str | None = Field(
        default=None,
        description="Explicit `group.instance.id`. Overrides the id derived from the pod name. Checked "
        "against Kafka's rules (1-249 chars of `[A-Za-z0-9._-]`, not `.` or `..`) when the identity "
        "is resolved.",
    )
    instance_id_template: str = Field(
        default="{pod}",
        description="How to build `group.instance.id` from a StatefulSet pod name. Placeholders: `{pod}`, "
        "`{statefulset}`, `{ordinal}`, `{group}`; must contain `{pod}` or `{ordinal}` so replicas differ.",
    )
    allow_unstable_instance_id: bool = Field(
        default=False,
        description="Accept pod names that change on every rollout (Deployment/ReplicaSet pods). Such ids "
        "defeat static membership; prefer a StatefulSet or an explicit `instance_id`.",
    )
    protocol: Literal["classic", "consumer"] = Field(
        default="classic",
        description="Group protocol: `classic` (JoinGroup/SyncGroup) or `consumer` (KIP-848, Kafka 4.0+).",
    )
    session_timeout_ms: int = Field(
        default=45000,
        gt=0,
        le=_LIBRDKAFKA_MAX_SESSION_MS,
        description="Classic protocol: how long the broker waits for a silent member (e.g. a restarting pod) "
        "before rebalancing. Must lie within the broker's group.min/max.session.timeout.ms. Not settable "
        "with protocol `consumer` (broker-side `group.consumer.session.timeout.ms`).",
    )
    heartbeat_interval_ms: int | None = Field(
        default=None,
        gt=0,
        le=_LIBRDKAFKA_MAX_SESSION_MS,
        description="Classic protocol: heartbeat interval; must be below `session_timeout_ms`. "
        "Default: min(3000, session_timeout_ms / 3).",
    )
    max_poll_interval_ms: int = Field(
        default=300000,
        gt=0,
        le=_LIBRDKAFKA_MAX_POLL_INTERVAL_MS,
        description="Longest allowed gap between polls before the member is considered stuck; at least "
        "`session_timeout_ms`.",
    )
    assignment_strategy: Literal["range", "roundrobin"] = Field(
        default="range",
        description="Classic protocol: client-side assignor. Both order members by instance id, so a "
        "restarted static member gets its partitions back. `cooperative-sticky` is refused.",
    )
    remote_assignor: Literal["uniform", "range"] | None = Field(
        default=None, description="Consumer protocol only: broker-side assignor (`group.remote.assignor`)."
    )
    static_policy: Literal["require", "warn", "dynamic"] = Field(
        default="require",
        description="`require`: fail if the broker cannot do static membership; `warn`: fall back to a "
        "dynamic member with a warning; `dynamic`: never send `group.instance.id`.",
    )
    expected_restart_ms: int | None = Field(
        default=None,
        gt=0,
        description="How long a pod restart takes. A warning is emitted when the session timeout is "
        "shorter, because the group would rebalance during every restart.",
    )
    assignment_mode: Literal["group", "ordinal"] = Field(
        default="group",
        description="`group`: the broker group assigns partitions; `ordinal`: each StatefulSet replica "
        "takes its share by ordinal (manual assignment, needs `replicas`).",
    )
    replicas: int | None = Field(
        default=None, ge=1, le=_INT32_MAX, description="Ordinal mode only: the StatefulSet replica count."
    )
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        default="earliest", description="Where to start when the group has no committed offset."
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT", description="How to talk to the brokers."
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = Field(
        default=None,
        description="Required with `SASL_PLAINTEXT`/`SASL_SSL`. `OAUTHBEARER` takes its token from "
        "`sasl_oauth_token_provider`.",
    )
    sasl_username: str | None = Field(
        default=None, description="SASL user; required with SASL `PLAIN` and `SCRAM-*`."
    )
    sasl_password: SecretStr | None = Field(
        default=None,
        description="SASL password; required with SASL `PLAIN` and `SCRAM-*`. Never shown in repr, logs or "
        "errors.",
    )
    sasl_oauth_token_provider: Callable[[], OAuthBearerToken] | None = Field(
        default=None,
        exclude=True,
        repr=False,
        description="**Code only** (a callable cannot come from the environment): returns an "
        "`OAuthBearerToken(value, expires_at)` for `sasl_mechanism='OAUTHBEARER'`. The consumer, the "
        "capability probe and the admin tools all use it, and call it again before the token expires "
        "(at 80% of its lifetime). Never serialized or shown.",
    )
    ssl_ca_location: str | None = Field(default=None, description="CA certificate file (PEM) for SSL.")
    ssl_certificate_location: str | None = Field(
        default=None, description="Client certificate file (PEM) for mutual TLS; needs `ssl_key_location`."
    )
    ssl_key_location: str | None = Field(
        default=None, description="Client private key file (PEM) for mutual TLS."
    )
    ssl_key_password: SecretStr | None = Field(
        default=None, description="Password of the client private key. Never shown."
    )
    ssl_endpoint_identification: bool = Field(
        default=True,
        description="Check that the broker's certificate names the host connected to (librdkafka "
        "`ssl.endpoint.identification.algorithm=https`, kafka-python `ssl_check_hostname`). Turn it off "
        "only deliberately, for brokers reached by an address their certificates do not name; the "
        "traffic stays encrypted but a man in the middle is no longer detected.",
    )
    connect_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="Bound for reaching the bootstrap servers (probe and first metadata).",
    )
    shutdown_timeout_s: float = Field(
        default=25.0,
        gt=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="Bound for the SIGTERM path (finish the batch, commit, close). Keep it below the pod's "
        "terminationGracePeriodSeconds.",
    )
    release_margin_s: float = Field(
        default=5.0,
        gt=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="Consumer protocol: after a crash the broker holds this member's instance id until its "
        "session times out, and a restart waits for that. A holder still listed this long after a full "
        "session (counted from when the restart first saw it) is alive (a duplicate process): the wait "
        "then gives up with exit 75. Raise it for brokers too loaded to expire members on time; it never "
        "delays a restart, only that verdict.",
    )
    release_max_wait_s: float | None = Field(
        default=None,
        gt=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="Consumer protocol: bound for the wait for a held instance id when the group cannot be "
        "described or its coordinator keeps moving (each move restarts the old member's session). It never "
        "cuts short a holder the wait can see before its session + `release_margin_s`, and `start()` "
        "refuses a value below the group's session timeout + `release_margin_s`. Default: 3 x (the group's "
        "session timeout + `release_margin_s`).",
    )
    restart_state_dir: str | None = Field(
        default=None,
        min_length=1,
        description="Consumer protocol, static members: a directory that survives a container restart in "
        "the same pod (an `emptyDir` volume; a local directory outside a container). Each process that "
        "runs a member records there, under a lock it holds while it runs, the member ids its clients "
        "join with; a crash restart that finds the lock free and the recorded member still holding its "
        "instance id sends that member's static leave for it and joins at once, with the same partitions, "
        "instead of waiting out the dead member's session (docs/semantics.md). Unset: off. Ignored under "
        "the classic protocol, whose restarts take their id back at once.",
    )
    duplicate_policy: Literal["exit", "wait"] = Field(
        default="exit",
        description="What a static member does when a live process holds its instance id (two replicas "
        "with one id): `exit` ends it with `FencedInstanceError` (exit 82), which a StatefulSet restarts, "
        "and under the classic protocol the restart fences the other holder in turn, a loop "
        "(docs/kubernetes.md). `wait` stands by instead: no client, partitions reported lost, a "
        "`StandingBy` event (readiness off), watching the group until the id is free, then joining; "
        "`duplicate_max_wait_s` bounds it.",
    )
    duplicate_max_wait_s: float = Field(
        default=3600.0,
        gt=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="With `duplicate_policy='wait'`: how long a member stands by for its instance id "
        "before it ends with `FencedInstanceError` (exit 82).",
    )
    missing_topic_timeout_s: float | None = Field(
        default=120.0,
        gt=0,
        le=_MAX_TOPIC_WAIT_S,
        allow_inf_nan=False,
        description="How long a started consumer waits for a named topic that does not exist, or a `^regex` "
        "that matches no topic, before `poll()`/`consume()` raise `MissingTopicError` (exit 78). Long enough "
        "for topics another deployment step creates; a typo fails the pod instead of leaving it idle. Unset "
        "(`none` in the environment): wait forever, with a warning.",
    )
    failure_retries: int = Field(
        default=3,
        ge=0,
        le=100,
        description="When a batch handler raises (in `run_until_sigterm`, the pool's workers, the asyncio "
        "and the Spark runner): how many more times the runner calls it with the same records, waiting "
        "`failure_backoff_s`, then twice as long each time up to `failure_max_backoff_s`. Retries stop early "
        "when the next attempt would begin more than half of `max_poll_interval_ms` after the batch was "
        "handed out, so retrying never costs the member its partitions. Then `failure_action` applies "
        "(docs/failures.md).",
    )
    failure_backoff_s: float = Field(
        default=1.0,
        ge=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="The wait before the first retry of a failed batch or record; doubled for each next one.",
    )
    failure_max_backoff_s: float = Field(
        default=10.0,
        ge=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="The longest wait between two attempts; at least `failure_backoff_s`.",
    )
    failure_action: Literal["stop", "dead_letter", "skip"] = Field(
        default="stop",
        description="What the runners do with a record still failing after the retries. `stop`: raise the "
        "handler's error, nothing past the record committed (the pod exits 70 and reads it again after its "
        "restart). `dead_letter`: write it to `dead_letter_topic` (acknowledged before the source offset is "
        "committed past it) and go on. `skip`: log it, emit `RecordSkipped` and go on. Default `stop`: no "
        "record is ever committed unhandled unless you chose where failed records go (docs/failures.md).",
    )
    dead_letter_topic: str = Field(
        default="{topic}-dlt",
        description="With `failure_action='dead_letter'`: the dead-letter topic; `{topic}` is the source "
        "topic. It must exist (the library never creates it) and be writable: checked before joining.",
    )
    dead_letter_timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=_MAX_WAIT_S,
        allow_inf_nan=False,
        description="With `failure_action='dead_letter'`: how long a dead-letter write may take to be "
        "acknowledged (`acks=all`) before the runner stops with `DeadLetterError` (exit 75), committing "
        "nothing past the record.",
    )
    librdkafka: Mapping[str, LibrdkafkaValue] = Field(
        default_factory=dict,
        description="Extra librdkafka properties (a JSON object in the environment; read-only once built). "
        "Checked by librdkafka's own parser when the settings are built (unknown keys, values out of "
        "range), without connecting. Keys the library owns are refused with the field to use instead; "
        "secret-looking values are never shown.",
    )

    if not TYPE_CHECKING:  # runtime-only, so type checkers keep the field-derived signature

        def __init__(self, **values: Any) -> None:
            hints = _misspelled_env_hints(type(self).model_fields)
            message = None
            try:
                super().__init__(**values)
            except ValidationError as exc:
                message = describe(exc, type(self).model_fields)
            except SettingsError as exc:  # an environment value that is not valid JSON
                message = f"invalid consumer settings:\n  - {exc}; {_ENV_HINT}"
            if message is not None:
                # Raised outside the except block: the ValidationError (which can hold raw input values,
                # secrets included) must not ride along as __context__.
                raise ConfigurationError("\n".join([message, *(f"  - {hint}" for hint in hints)]))

    @classmethod
    def load(cls, **overrides: Any) -> ConsumerSettings:
        """Build from the environment, with ``overrides`` winning. Same as the constructor, but typed
        for the usual case where required fields come from ``STATIC_CONSUMER_*`` variables."""
        return cls(**overrides)

    @field_validator("bootstrap_servers")
    @classmethod
    def _check_servers(cls, value: str) -> str:
        servers = split_servers(value)
        bad = [s for s in servers if not is_server(s)]
        if not servers or bad:
            raise ValueError(
                f"every entry must be host:port (got {bad or value!r}), e.g. 'kafka-0:9092,kafka-1:9092'"
            )
        return ",".join(servers)

    @field_validator("group_id")
    @classmethod
    def _check_group_id(cls, value: str) -> str:
        # librdkafka trims ASCII whitespace from the value, so use the id it will use; a blank one
        # leaves the consumer without a group, which makes confluent-kafka abort the process.
        stripped = value.strip(" \t\n\r\f\v")
        if not stripped:
            raise ValueError("is blank: set the consumer group id")
        return stripped

    @field_validator("topics", mode="before")
    @classmethod
    def _split_topics(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(t.strip() for t in value.split(",") if t.strip())
        return value

    @field_validator("topics")
    @classmethod
    def _check_topics(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        bad = [t for t in value if not is_topic(t)]
        if bad:
            raise ValueError(
                f"invalid topic names {bad}: use 1-249 characters of [A-Za-z0-9._-], "
                "or a '^regex' subscription"
            )
        return value

    @field_validator("sasl_oauth_token_provider", mode="before")
    @classmethod
    def _provider_in_code(cls, value: object) -> object:
        if isinstance(value, str):  # i.e. from STATIC_CONSUMER_SASL_OAUTH_TOKEN_PROVIDER
            raise ValueError(
                "a token provider is a callable and can only be set in code: "
                "ConsumerSettings(sasl_oauth_token_provider=fetch_token, ...); unset the variable"
            )
        return value

    @field_validator("assignment_strategy", mode="before")
    @classmethod
    def _refuse_cooperative(cls, value: object) -> object:
        if isinstance(value, str) and "sticky" in value:
            raise ValueError(
                f"{value!r} orders members by member id, which is random on every restart, so a restarted "
                "static member can get different partitions; use 'range' or 'roundrobin', which order by "
                "group.instance.id"
            )
        return value

    @field_validator("missing_topic_timeout_s", mode="before")
    @classmethod
    def _none_from_the_environment(cls, value: object) -> object:
        return None if isinstance(value, str) and value.strip().lower() in ("none", "null") else value

    @field_validator("librdkafka")
    @classmethod
    def _freeze_passthrough(cls, value: Mapping[str, LibrdkafkaValue]) -> Mapping[str, LibrdkafkaValue]:
        return MappingProxyType(dict(value))

    @field_serializer("librdkafka")
    def _dump_passthrough(
        self, value: Mapping[str, LibrdkafkaValue], info: FieldSerializationInfo
    ) -> dict[str, Any]:
        # Like SecretStr: Python dumps keep values usable, JSON dumps (logs, APIs) hide secret ones.
        if info.mode_is_json():
            return redact_items(value.items())
        return dict(value)

    @model_validator(mode="after")
    def _check_combinations(self) -> ConsumerSettings:
        problems = combination_problems(self) + failure_problems(self)
        # Keys the library owns are reported above; librdkafka judges the others.
        others = {k: v for k, v in self.librdkafka.items() if not is_owned(k, self.protocol)}
        problems += librdkafka_problems(others, self.protocol, env_var("librdkafka"))
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            if name == "librdkafka" and isinstance(value, Mapping):
                value = redact_items(value.items())
            yield name, value


def _misspelled_env_hints(fields: Mapping[str, object]) -> list[str]:
    """Log each ``STATIC_CONSUMER_*`` variable that is not a setting (once per process); return the
    hints, for the error message should the settings be refused (a misspelled required field)."""
    hints = []
    for name, closest in unknown_env_vars(os.environ, fields):
        guess = f"did you mean {env_var(closest)} ({closest})?" if closest else "see docs/configuration.md"
        hint = f"environment variable {name} is not a setting and is ignored; {guess}"
        hints.append(hint)
        if name not in _warned_env:
            _warned_env.add(name)
            log.warning("%s", hint)
    return hints


__all__ = ["ConsumerSettings", "LibrdkafkaValue"]
