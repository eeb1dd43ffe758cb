"""The few broker calls outside the consume loop: describe a group, remove members by instance id.

The consumer needs them twice, and imports this module only when it does: removing its own static
member on ``leave_group()`` under the KIP-848 protocol, and telling a listener what the coordinator
still held for its instance id (``Joining.lookup_held``). The operator tools (``static_consumer.admin``)
build on the same calls.

kafka-python does most of the talking because librdkafka has no API to remove members by instance id
and its group description leaves out each member's subscription, which the audit needs. The classic
DescribeGroups API refuses KIP-848 groups, so those are described through confluent-kafka's
``describe_consumer_groups`` (ConsumerGroupDescribe). Every client is closed before returning, and every
broker error leaves this module as a :mod:`static_consumer.errors` class, classified through the error
table, whose message never contains a configured secret.
"""

from __future__ import annotations

import concurrent.futures
import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import Enum
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import MemberToRemove

from static_consumer._kafka import kafka_python as _kafka_python
from static_consumer._kafka.codes import TRANSPORT, ErrorKind, classify
from static_consumer._kafka.groups import GroupDescription, GroupMember, RemovalFailure
from static_consumer._kafka.watch import consumer_group
from static_consumer._security.oauth import first_token, token_error, token_source
from static_consumer._security.secrets import scrub_for
from static_consumer._security.tls import check_tls_files, speaks_tls
from static_consumer.errors import (
    AuthenticationError,
    BrokerUnavailableError,
    CapabilityError,
    ConfigurationError,
    RetriableError,
    StaticConsumerError,
)
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import admin_config
from static_consumer.types import TopicPartition

log = logging.getLogger(__name__)
_LIBRDKAFKA_LOG = logging.getLogger("static_consumer.admin.librdkafka")
CLIENT_ID = "static-consumer-admin"


@contextmanager
def kafka_admin(settings: ConsumerSettings, doing: str) -> Iterator[Any]:
    """A kafka-python KafkaAdminClient for ``doing`` (e.g. "describe group g"), closed on exit.

    Broker errors raised inside the block are translated (see :func:`translate`). The local checks (TLS
    files, the OAUTHBEARER provider's first token) run before any client is built, and a refusal of the
    credentials or a failed TLS handshake ends it at once (see :func:`check_login`), not after
    ``connect_timeout_s``.
    """
    failed = failed_login(settings)
    if failed is not None:
        raise error_for(*failed, settings, doing)
    try:
        with _kafka_python.admin_client(settings, CLIENT_ID) as admin:
            yield admin
    except kafka_errors.KafkaError as exc:
        raise translate(explain(exc, settings), settings, doing) from None


def explain(exc: kafka_errors.KafkaError, settings: ConsumerSettings) -> kafka_errors.KafkaError:
    """The SASL refusal behind a kafka-python timeout or lost connection, if the brokers refuse the
    credentials; else ``exc`` itself.

    kafka-python 3.0 drops the broker's refusal whenever the broker closes the connection right after
    sending it (it reads the data and the end of stream together and keeps only the end), so with SCRAM
    a wrong password mostly surfaces as "Unable to bootstrap". librdkafka reports it reliably.
    """
    if _kafka_python.kind_of(exc) is ErrorKind.UNREACHABLE:
        reason = login_refusal(settings)
        if reason is not None:
            return kafka_errors.SaslAuthenticationFailedError(reason)
    return exc


class Login(Enum):
    """What the brokers made of the configured SASL credentials and TLS files (:func:`check_login`)."""

    ACCEPTED = "accepted"
    REFUSED = "refused"
    TLS_FAILED = "the TLS handshake failed"
    UNREACHABLE = "every broker failed for another reason"
    NO_ANSWER = "no answer within the bound"


# librdkafka's words for a failed handshake on a transport error (-195): an SSL alert from the broker
# (46 certificate unknown: expired or untrusted client certificate; 42 bad certificate: none sent), a
# TLS client that met a PLAINTEXT listener, or a PLAINTEXT client that met a TLS listener (librdkafka
# adds "connecting to a SSL listener?" to a disconnect while it asks for ApiVersions, rdkafka_broker.c).
# A plain disconnect is not one.
_TLS_FAILURE = re.compile(
    r"SSL handshake failed|SSL alert number|ssl/tls alert|connecting to a SSL listener", re.IGNORECASE
)


# librdkafka 2.16's log line (not an error_cb error) when a broker hangs up while it asks for ApiVersions,
# the first request on a connection: what a TLS listener does to a PLAINTEXT client (measured on Kafka 4.3:
# "Disconnected: connection closed by peer: receive 0 after POLLIN (after 2ms in state
# APIVERSION_QUERY)", repeated at every reconnect; older librdkafka added "connecting to a SSL listener?").
_HUNG_UP = re.compile(r"([^\s/]+):(\d+)/[^:]*: Disconnected\b.*in state APIVERSION_QUERY")


class _LoginLog:
    """librdkafka's log for the login check: forwarded to the admin logger, and the addresses that hung
    up during ApiVersions noted (confluent-kafka calls ``log(level, fmt, *args)`` on any object)."""

    def __init__(self) -> None:
        self.hung_up: list[tuple[str, int]] = []

    def log(self, level: int, fmt: str, *args: object) -> None:
        _LIBRDKAFKA_LOG.log(level, fmt, *args)
        match = _HUNG_UP.search(fmt % args if args else fmt)
        if match is not None:
            self.hung_up.append((match.group(1), int(match.group(2))))


def _tls_listener(settings: ConsumerSettings, hung_up: list[tuple[str, int]]) -> str | None:
    """With a non-TLS ``security_protocol``: the reason, when a broker that hung up during ApiVersions
    answers a TLS handshake (checked once, with Python's ``ssl``, only after librdkafka saw the hang-up)."""
    if settings.security_protocol.endswith("SSL") or not hung_up:
        return None
    host, port = hung_up[0]
    if not speaks_tls(host, port, min(2.0, settings.connect_timeout_s)):
        return None
    return f"{host}:{port} hung up on the ApiVersions request and answers a TLS handshake: a TLS listener"


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


def login_refusal(settings: ConsumerSettings, timeout_s: float | None = None) -> str | None:
    """The brokers' reason for refusing the configured SASL credentials; None when they accept them,
    cannot be reached, or SASL is not configured. Waits at most ``timeout_s`` (``connect_timeout_s``)."""
    login, reason = check_login(settings, timeout_s)
    return reason if login is Login.REFUSED else None


def failed_login(settings: ConsumerSettings) -> tuple[ErrorKind, str] | None:
    """Log in with librdkafka before kafka-python does: the kind and text of a login that failed for
    certain (refused, a failed TLS handshake, a PLAINTEXT client on a TLS port, or no answer within
    ``connect_timeout_s``), else None.

    kafka-python 3.0 mostly drops the brokers' refusal (see :func:`explain`) and waits out
    ``connect_timeout_s``: a wrong SCRAM password took 30.5 s with the defaults (one run, Kafka 4.3);
    librdkafka reports it after one round trip. A certificate the client does not trust (unknown CA, a
    broker certificate for another host) or one the broker refuses (expired, missing) is the same story:
    kafka-python logs the handshake error and waits out the bound, librdkafka reports it in
    milliseconds. A PLAINTEXT client on a TLS port: kafka-python waits out the bound, librdkafka says
    "connecting to a SSL listener?". The price is one more connection (and login) per call. After no
    answer at all, kafka-python would only wait for the same bound again."""
    login, reason = check_login(settings)
    if login is Login.REFUSED:
        return ErrorKind.AUTHENTICATION, reason or "the credentials were refused"
    if login is Login.TLS_FAILED:
        return ErrorKind.TLS, reason or "the TLS handshake failed"
    if login is Login.NO_ANSWER:
        return ErrorKind.UNREACHABLE, "no broker answered"
    return None


def check_login(settings: ConsumerSettings, timeout_s: float | None = None) -> tuple[Login, str | None]:
    """Log in with librdkafka and ask for metadata: what the brokers made of the credentials and the TLS
    handshake, with their reason when they refused (secrets masked). Returns at the first refusal,
    acceptance or broker failure, else after ``timeout_s`` (``connect_timeout_s``).

    Runs for PLAINTEXT too: a PLAINTEXT client on a TLS port looks like an unreachable broker to both
    clients (kafka-python waits out ``connect_timeout_s``); librdkafka logs that the broker hung up
    during ApiVersions, and a TLS handshake with that broker then tells it apart (:func:`_tls_listener`).

    A handshake failure counts once it repeated, or once every broker is down with it: librdkafka
    reconnects within a backoff, and one handshake cut short by a broker restarting is not a verdict.
    Raises ConfigurationError (or AuthenticationError for an OAUTHBEARER provider that gives no token)
    before connecting when the local checks fail (:func:`librdkafka_admin`)."""
    from confluent_kafka import KafkaException

    refusals: list[str] = []
    handshakes: list[str] = []
    unreachable: list[str] = []

    def on_error(err: Any) -> None:
        kind, text = classify(err.code()), err.str()
        if kind is ErrorKind.AUTHENTICATION:  # one authentication round trip after connecting
            refusals.append(text)
        elif kind is ErrorKind.TLS or (err.code() == TRANSPORT and _TLS_FAILURE.search(text)):
            handshakes.append(text)
        elif kind is ErrorKind.UNREACHABLE:
            unreachable.append(text)

    log = _LoginLog()
    doing = f"brokers at {settings.bootstrap_servers}"
    client = librdkafka_admin(settings, doing, error_cb=on_error, logger=log)
    deadline = time.monotonic() + (settings.connect_timeout_s if timeout_s is None else timeout_s)
    while time.monotonic() < deadline:
        try:
            client.list_topics(timeout=max(0.01, min(0.25, deadline - time.monotonic())))
            return Login.ACCEPTED, None  # metadata answered: the credentials are accepted
        except KafkaException:
            pass
        client.poll(0)  # serves error_cb and the log
        if refusals:
            return Login.REFUSED, scrub_for(settings, refusals[0])
        if handshakes and (len(handshakes) > 1 or unreachable):
            return Login.TLS_FAILED, scrub_for(settings, handshakes[-1])
        if len(log.hung_up) > 1 or (log.hung_up and unreachable):
            listener = _tls_listener(settings, log.hung_up)
            if listener is not None:
                return Login.TLS_FAILED, listener
        if unreachable:
            return Login.UNREACHABLE, None
    if handshakes:
        return Login.TLS_FAILED, scrub_for(settings, handshakes[-1])
    return Login.NO_ANSWER, None


def librdkafka_admin(settings: ConsumerSettings, doing: str, **callbacks: Any) -> Any:
    """A confluent-kafka AdminClient for ``settings`` (``callbacks`` such as ``error_cb`` added to its
    config), built only after the local checks, its constructor's errors classified.

    The TLS files are checked first: with a wrong ``ssl_key_password`` the constructor raised a raw
    ``KafkaException`` (-186). With OAUTHBEARER the client's first token is fetched first: confluent-kafka
    otherwise waits a fixed 10 s in the constructor for a provider that failed, and drops its reason.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    check_tls_files(settings)
    config: dict[str, Any] = {**admin_config(settings), "logger": _LIBRDKAFKA_LOG, **callbacks}
    first_token(config, settings, doing)
    try:
        return AdminClient(config)
    except KafkaException as exc:
        raise construction_error(exc, config, settings, doing) from None


def construction_error(
    exc: Exception, config: Mapping[str, Any], settings: ConsumerSettings, doing: str
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


def credentials(settings: ConsumerSettings) -> tuple[str, str]:
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


def translate(exc: BaseException, settings: ConsumerSettings, doing: str) -> StaticConsumerError:
    """The project error for a kafka-python error met while ``doing`` something."""
    return error_for(_kafka_python.kind_of(exc), str(exc) or type(exc).__name__, settings, doing)


def error_for(kind: ErrorKind, text: str, settings: ConsumerSettings, doing: str) -> StaticConsumerError:
    """The project error for a classified broker error met while ``doing`` something."""
    text = scrub_for(settings, text)
    if kind is ErrorKind.AUTHENTICATION:
        who, check = credentials(settings)
        return AuthenticationError(f"{doing}: the brokers refused to authenticate {who} ({text}); {check}")
    if kind is ErrorKind.AUTHORIZATION:
        return ConfigurationError(
            f"{doing}: the brokers refused ({text}); check security_protocol, sasl_* and ssl_* settings, "
            "and that the principal may describe the group and its topics"
        )
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


# ---------------------------------------------------------------------------------------- describe
def describe_group(settings: ConsumerSettings, group_id: str | None = None) -> GroupDescription:
    """Members, instance ids, hosts and assignments of the group, as the coordinator sees them now."""
    group = group_id or settings.group_id
    with kafka_admin(settings, f"describe group {group}") as admin:
        return describe(admin, settings, group)


def describe(admin: Any, settings: ConsumerSettings, group_id: str) -> GroupDescription:
    """Describe ``group_id``: DescribeGroups first (it carries subscriptions), ConsumerGroupDescribe for
    KIP-848 groups, which the classic API answers with GROUP_ID_NOT_FOUND."""
    raw = admin.describe_groups([group_id])[group_id]
    if raw.get("error") is None or raw.get("members"):
        return _from_describe_groups(group_id, raw)
    error = str(raw["error"])
    if "GroupIdNotFound" not in error:
        raise error_for(_kafka_python.kind_of_text(error), error, settings, f"describe group {group_id}")
    # Either no such group or a KIP-848 group; ConsumerGroupDescribe tells them apart (Dead = unknown).
    return describe_consumer_protocol(settings, group_id)


def _from_describe_groups(group_id: str, raw: Mapping[str, Any]) -> GroupDescription:
    members = []
    for m in raw.get("members") or ():
        metadata, assignment = m.get("member_metadata"), m.get("member_assignment")
        subscription = tuple(sorted(metadata["topics"])) if isinstance(metadata, dict) else None
        owned: list[TopicPartition] = []
        if isinstance(assignment, dict):
            for entry in assignment.get("assigned_partitions") or ():
                owned.extend(TopicPartition(entry["topic"], int(p)) for p in entry["partitions"])
        members.append(
            GroupMember(
                member_id=m["member_id"],
                instance_id=m.get("group_instance_id") or None,
                client_id=m.get("client_id", ""),
                host=str(m.get("client_host", "")).lstrip("/"),
                subscription=subscription,
                assignment=tuple(sorted(owned)),
            )
        )
    return GroupDescription(
        group_id=group_id,
        state=raw.get("group_state") or "Unknown",
        group_type="classic",
        assignor=raw.get("protocol_data") or None,
        members=tuple(members),
    )


def describe_consumer_protocol(settings: ConsumerSettings, group_id: str) -> GroupDescription:
    """Describe a group through confluent-kafka (ConsumerGroupDescribe for KIP-848 groups)."""
    from confluent_kafka import KafkaException

    doing = f"describe group {group_id}"
    timeout = settings.connect_timeout_s
    client = librdkafka_admin(settings, doing)
    try:
        future = client.describe_consumer_groups([group_id], request_timeout=timeout)[group_id]
        desc = future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise BrokerUnavailableError(
            f"{doing}: no answer from {settings.bootstrap_servers} within {timeout:g}s"
        ) from None
    except KafkaException as exc:
        raise error_for(*kafka_exception(exc), settings, doing) from None
    return consumer_group(group_id, desc)


# ---------------------------------------------------------------------------------------- remove
def leave(
    admin: Any, group_id: str, instance_ids: Iterable[str], reason: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[RemovalFailure, ...]]:
    """One LeaveGroup (v3+) batch removing ``instance_ids``: ``(removed, absent, failed)``."""
    ids = list(instance_ids)
    if not ids:
        return (), (), ()
    try:
        outcome = admin.remove_group_members(
            group_id, [MemberToRemove(group_instance_id=i, reason=reason) for i in ids]
        )
    except kafka_errors.UnsupportedVersionError:
        raise CapabilityError(
            "removing members by group.instance.id needs LeaveGroup v3 (Kafka 2.3+), which the broker "
            "lacks; wait for the session timeout instead, or upgrade the brokers"
        ) from None
    removed, absent, failed = [], [], []
    for instance_id in ids:
        error = outcome.get(instance_id, kafka_errors.NoError)
        if error is kafka_errors.NoError:
            removed.append(instance_id)
        elif error is kafka_errors.UnknownMemberIdError:
            absent.append(instance_id)  # left (or expired) between the describe and the removal
        else:
            retriable = bool(getattr(error, "retriable", False))
            failed.append(RemovalFailure(instance_id, error.__name__, retriable))
    return tuple(removed), tuple(absent), tuple(failed)


def remove_static_member(settings: ConsumerSettings, instance_id: str) -> bool:
    """Remove this consumer's own static member (one LeaveGroup v3+ by instance id). True if it was
    removed, False if the broker no longer knew it; raises StaticConsumerError when refused or unreachable."""
    group = settings.group_id
    with kafka_admin(settings, f"remove {instance_id!r} from group {group!r}") as admin:
        removed, _, failed = leave(admin, group, [instance_id], "static_consumer leave_group()")
    if failed:
        raise RetriableError(
            f"the broker refused to remove {instance_id!r} from group {group!r}: {failed[0].error}"
        )
    return bool(removed)


__all__ = [
    "CLIENT_ID",
    "Login",
    "check_login",
    "construction_error",
    "credentials",
    "kafka_exception",
    "librdkafka_admin",
    "failed_login",
    "describe",
    "describe_consumer_protocol",
    "describe_group",
    "error_for",
    "explain",
    "kafka_admin",
    "leave",
    "login_refusal",
    "remove_static_member",
    "translate",
]
