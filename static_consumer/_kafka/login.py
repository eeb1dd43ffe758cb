"""Logging in with librdkafka before anything else talks to the brokers: what they made of the SASL
credentials and the TLS handshake, with their reason, within ``connect_timeout_s``.

kafka-python 3.0 mostly drops a broker's refusal of the credentials and waits out its bootstrap timeout
(``kafka_python.explain``); librdkafka reports it after one round trip. The price is one more
connection (and login) per call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from enum import Enum
from typing import Any

from static_consumer._base.codes import TRANSPORT, ErrorKind, classify
from static_consumer._base.connections import LibrdkafkaLog
from static_consumer._kafka.admin_client import LIBRDKAFKA_LOG, librdkafka_admin, librdkafka_log
from static_consumer._security.secrets import scrub_for
from static_consumer._security.tls import speaks_tls
from static_consumer.settings._defaults import CLIENT_DEFAULTS
from static_consumer.settings._views import Cluster


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


# With debug=feature librdkafka logs a broker's ApiVersions response as it reads it, one line per API:
# "<broker>: Broker API support:" then "<broker>:   ApiKey JoinGroup (11) Versions 0..9"
# (rd_kafka_ApiVersionRequest's reply handler, rdkafka_request.c; the same text since librdkafka 0.9).
_API_VERSION = re.compile(r"\]: (\S+):\s+ApiKey \S+ \((\d+)\) Versions (\d+)\.\.(\d+)\s*$")


class _LoginLog:
    """librdkafka's log for the login check: forwarded to ``sink`` (the admin clients' log), the addresses
    that hung up during ApiVersions noted, and with ``debug=feature`` the ApiVersions of the first broker
    that answered (confluent-kafka calls ``log(level, fmt, *args)`` on any object)."""

    def __init__(self, sink: LibrdkafkaLog | None = None) -> None:
        self.hung_up: list[tuple[str, int]] = []
        self.api_versions: dict[int, tuple[int, int]] = {}
        self._api_broker: str | None = None
        self._sink = LibrdkafkaLog(LIBRDKAFKA_LOG) if sink is None else sink

    def log(self, level: int, fmt: str, *args: object) -> None:
        self._sink.log(level, fmt, *args)
        line = fmt % args if args else fmt
        match = _HUNG_UP.search(line)
        if match is not None:
            self.hung_up.append((match.group(1), int(match.group(2))))
        api = _API_VERSION.search(line)
        if api is not None and self._api_broker in (None, api.group(1)):
            self._api_broker = api.group(1)
            self.api_versions[int(api.group(2))] = (int(api.group(3)), int(api.group(4)))


def _tls_listener(settings: Cluster, hung_up: list[tuple[str, int]]) -> str | None:
    """With a non-TLS ``security_protocol``: the reason, when a broker that hung up during ApiVersions
    answers a TLS handshake (checked once, with Python's ``ssl``, only after librdkafka saw the hang-up)."""
    if settings.security_protocol.endswith("SSL") or not hung_up:
        return None
    host, port = hung_up[0]
    if not speaks_tls(host, port, min(2.0, settings.connect_timeout_s)):
        return None
    return f"{host}:{port} hung up on the ApiVersions request and answers a TLS handshake: a TLS listener"


def login_refusal(settings: Cluster, timeout_s: float | None = None) -> str | None:
    """The brokers' reason for refusing the configured SASL credentials; None when they accept them,
    cannot be reached, or SASL is not configured. Waits at most ``timeout_s`` (``connect_timeout_s``)."""
    login, reason = check_login(settings, timeout_s)
    return reason if login is Login.REFUSED else None


# Called with the login check's client and log once the brokers accepted the login (see check_login).
OnAccepted = Callable[[Any, _LoginLog], None]


def failed_login(settings: Cluster, on_accepted: OnAccepted | None = None) -> tuple[ErrorKind, str] | None:
    """Log in with librdkafka before kafka-python does: the kind and text of a login that failed for
    certain (refused, a failed TLS handshake, a PLAINTEXT client on a TLS port, or no answer within
    ``connect_timeout_s``), else None.

    kafka-python 3.0 mostly drops the brokers' refusal (see ``kafka_python.explain``) and waits out
    ``connect_timeout_s``: a wrong SCRAM password took 30.5 s with the defaults (one run, Kafka 4.3);
    librdkafka reports it after one round trip. A certificate the client does not trust (unknown CA, a
    broker certificate for another host) or one the broker refuses (expired, missing) is the same story:
    kafka-python logs the handshake error and waits out the bound, librdkafka reports it in
    milliseconds. A PLAINTEXT client on a TLS port: kafka-python waits out the bound, librdkafka says
    "connecting to a SSL listener?". The price is one more connection (and login) per call. After no
    answer at all, kafka-python would only wait for the same bound again."""
    login, reason = check_login(settings, on_accepted=on_accepted)
    if login is Login.REFUSED:
        return ErrorKind.AUTHENTICATION, reason or "the credentials were refused"
    if login is Login.TLS_FAILED:
        return ErrorKind.TLS, reason or "the TLS handshake failed"
    if login is Login.NO_ANSWER:
        return ErrorKind.UNREACHABLE, "no broker answered"
    return None


# This short-lived client's connection to the broker the metadata names, after its bootstrap connection
# closed, waits out librdkafka's connection suppression ("still suppressed for 49ms" in its debug log,
# with the default reconnect.backoff.ms of 100) on every start's path: the gate's first metadata answer
# took 50-62 ms in each of 8 fresh processes; with a 10 or 20 ms backoff 19.9-21.7 ms (medians of 7,
# one run). The consumer's own client gets the same value as a library default (CLIENT_DEFAULTS).
QUICK_RECONNECT = {"reconnect.backoff.ms": CLIENT_DEFAULTS["reconnect.backoff.ms"].value}


def check_login(
    settings: Cluster, timeout_s: float | None = None, *, on_accepted: OnAccepted | None = None
) -> tuple[Login, str | None]:
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

    log = _LoginLog(librdkafka_log(settings))
    doing = f"brokers at {settings.bootstrap_servers}"
    # on_accepted reads librdkafka's own ApiVersions (the capability probe): logged with debug=feature.
    debug = {} if on_accepted is None else {"debug": "feature"}
    client = librdkafka_admin(settings, doing, error_cb=on_error, logger=log, **debug, **QUICK_RECONNECT)
    deadline = time.monotonic() + (settings.connect_timeout_s if timeout_s is None else timeout_s)
    while time.monotonic() < deadline:
        try:
            client.list_topics(timeout=max(0.01, min(0.25, deadline - time.monotonic())))
        except KafkaException:
            pass
        else:  # metadata answered: the credentials are accepted
            if on_accepted is not None:
                client.poll(0)  # serves the log: the ApiVersions came before the metadata
                on_accepted(client, log)
            return Login.ACCEPTED, None
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


__all__ = ["Login", "OnAccepted", "check_login", "failed_login", "login_refusal"]
