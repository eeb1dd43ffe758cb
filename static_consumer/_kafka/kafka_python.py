"""kafka-python admin sessions for the probe and the broker calls: closed, classified, quiet about secrets.

Imported only where kafka-python is used (the capability probe, the group reads, member removal, the
operator tools), never by the consume path. Two kafka-python 3.0 behaviours are guarded against here
(both seen against a Kafka 4.3 SASL listener):

- Its bootstrap retries a refused SASL authentication until the bootstrap timeout and then reports only
  "Unable to bootstrap", so a wrong password would look like an unreachable broker: callers ask
  librdkafka after such a failure (:func:`explain`).
- At DEBUG it logs its whole configuration (SASL password included) and every request, including the
  SASL PLAIN authentication bytes, which hold the password. While a client lives, a filter on the
  ``kafka`` loggers masks the configured secrets in every record.
- It logs 15-20 INFO lines per client (bootstrap, connections, its network thread) and 3-4 lines at
  WARNING and ERROR per failed connection attempt. The records of the library's own clients (those of
  their network thread, named after the client id, and of the threads that build, use and close them)
  are at DEBUG on their ``kafka.*`` loggers, and their failed connections are told by
  ``static_consumer.connections`` (:class:`SessionRecords`); the library reports what its calls came to
  itself. Records of the application's own kafka-python clients, on its own threads, are left as they
  are.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import kafka.errors as kafka_errors
from kafka.admin import KafkaAdminClient

from static_consumer._base.codes import CODES, ErrorKind, classify
from static_consumer._base.connections import CONNECTIONS, ConnectionLog, reason_of
from static_consumer._base.errors import StaticConsumerError
from static_consumer._kafka.admin_client import error_for
from static_consumer._kafka.login import failed_login, login_refusal
from static_consumer._security.oauth import first_token, token_error, token_source
from static_consumer._security.secrets import install_filter, scrub_for, scrubbed_logs, secrets_of
from static_consumer._security.tls import check_tls_files
from static_consumer.settings._config import kafka_python_config
from static_consumer.settings._views import Cluster

CLIENT_ID = "static-consumer-admin"
# kafka-python's own errors that carry no broker code: the cluster did not answer in time.
_UNREACHABLE = (kafka_errors.KafkaTimeoutError, kafka_errors.KafkaConnectionError)
# How kafka-python renders a broker error as text ("[Error 69] GroupIdNotFoundError: ..."), e.g. the
# group-level error of a DescribeGroups answer.
_ERRNO_TEXT = re.compile(r"\[Error (-?\d+)\]")


def kind_of(exc: BaseException) -> ErrorKind:
    """Classify a kafka-python exception through the error table (its ``errno``)."""
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and errno in CODES:
        return classify(errno)
    if isinstance(exc, _UNREACHABLE):
        return ErrorKind.UNREACHABLE
    return ErrorKind.TRANSIENT if getattr(exc, "retriable", False) is True else ErrorKind.OTHER


def kind_of_text(text: str) -> ErrorKind:
    """Classify a broker error that kafka-python hands over as text."""
    match = _ERRNO_TEXT.search(text)
    return classify(int(match.group(1))) if match else ErrorKind.OTHER


class SessionRecords(logging.Filter):
    """On the ``kafka`` loggers while one of the library's kafka-python clients lives: the records of its
    network thread (``kafka-io-<client_id>``) and of the threads that build and close it (:meth:`own`)
    at DEBUG (dropped where DEBUG is not enabled), and each connection it lost told by ``connections``.
    Other threads' records pass untouched.

    kafka-python names a node's address only where it starts connecting to it (``Attempting bootstrap
    to %s at %s:%s``, ``Initializing connection for node_id %s at %s:%s``: the node id, host and port as
    the record's arguments), and a failed attempt in ``%s: Connection lost: %s`` (the connection, with
    its ``node_id``, and the exception); both are read from the records' arguments, not their text."""

    def __init__(
        self,
        client_id: str,
        bootstrap: str,
        scrub: Callable[[str], str],
        connections: ConnectionLog = CONNECTIONS,
    ) -> None:
        super().__init__()
        self._thread = f"kafka-io-{client_id}"
        self._bootstrap = bootstrap
        self._scrub = scrub
        self._connections = connections
        self._nodes: dict[str, str] = {}
        self._owners: set[int] = set()

    def own(self) -> None:
        """The calling thread's records are the client's too (it builds, uses or closes the client)."""
        self._owners.add(threading.get_ident())

    def filter(self, record: logging.LogRecord) -> bool:
        if record.threadName != self._thread and record.thread not in self._owners:
            return True
        self._note(record)
        if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        return True

    def _note(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) >= 3 and isinstance(args[1], str) and str(args[2]).isdigit():
            self._nodes[str(args[0])] = f"{args[1]}:{args[2]}"
        elif (
            record.levelno >= logging.WARNING
            and len(args) == 2
            and hasattr(args[0], "node_id")
            and isinstance(args[1], BaseException)
        ):
            address = self._nodes.get(str(args[0].node_id), self._bootstrap)
            self._connections.failed(address, self._scrub(reason_of(str(args[1]))), source=record.name)


@contextmanager
def quiet_session(settings: Cluster, client_id: str) -> Iterator[SessionRecords]:
    """:class:`SessionRecords` on the ``kafka`` loggers while the block runs, the calling thread owned."""
    records = SessionRecords(client_id, settings.bootstrap_servers, lambda text: scrub_for(settings, text))
    records.own()
    loggers = install_filter(records)
    try:
        yield records
    finally:
        for logger in loggers:
            logger.removeFilter(records)


@contextmanager
def admin_client(settings: Cluster, client_id: str) -> Iterator[Any]:
    """A KafkaAdminClient for ``settings``, closed on exit (also when its bootstrap fails).

    Raises kafka-python errors (a refused SASL login mostly as a bootstrap timeout, see module docs), or
    AuthenticationError when the OAUTHBEARER provider gives no usable token.
    """
    check_tls_files(settings)  # never let OpenSSL prompt for a key password on the terminal
    created: list[Any] = []

    def recording_factory(**configs: Any) -> Any:
        # KafkaAdminClient starts its network thread before bootstrapping and does not stop it when the
        # bootstrap fails; holding the network client lets us close it on that path too.
        client = KafkaAdminClient.DEFAULT_CONFIG["kafka_client"](**configs)
        created.append(client)
        return client

    cfg = kafka_python_config(settings) | {"client_id": client_id, "kafka_client": recording_factory}
    first_token(cfg, settings)  # a provider that gives no token ends here, with its reason
    tokens = token_source(cfg)
    with scrubbed_logs(secrets_of(settings)), quiet_session(settings, client_id) as records:
        admin = None
        try:
            admin = KafkaAdminClient(**cfg)
            yield admin
        except kafka_errors.KafkaError:
            # kafka-python turns a provider failing at a later login into a failed connection.
            lost = tokens.lost() if tokens is not None else None
            if lost is not None:
                raise token_error(settings, lost) from None
            raise
        finally:
            records.own()  # the thread that closes it (another one, for a client kept open)
            if admin is not None:
                admin.close()
            else:
                for client in created:
                    client.close()


@contextmanager
def kafka_admin(settings: Cluster, doing: str, *, reads_group: bool = False) -> Iterator[Any]:
    """A kafka-python KafkaAdminClient for ``doing`` (e.g. "describe group g"), closed on exit.

    Broker errors raised inside the block are translated (see :func:`translate`). ``reads_group``: the
    block needs READ on the group (a LeaveGroup), so a refused FindCoordinator names READ too, where
    DESCRIBE would only move the refusal to the LeaveGroup. The local checks (TLS files, the OAUTHBEARER
    provider's first token) run before any client is built, and a refusal of the credentials or a failed
    TLS handshake ends it at once (see ``login.check_login``), not after ``connect_timeout_s``.
    """
    failed = failed_login(settings)
    if failed is not None:
        raise error_for(*failed, settings, doing)
    try:
        with admin_client(settings, CLIENT_ID) as admin:
            yield admin
    except kafka_errors.KafkaError as exc:
        raise translate(explain(exc, settings), settings, doing, reads_group=reads_group) from None


def explain(exc: kafka_errors.KafkaError, settings: Cluster) -> kafka_errors.KafkaError:
    """The SASL refusal behind a kafka-python timeout or lost connection, if the brokers refuse the
    credentials; else ``exc`` itself.

    kafka-python 3.0 drops the broker's refusal whenever the broker closes the connection right after
    sending it (it reads the data and the end of stream together and keeps only the end), so with SCRAM
    a wrong password mostly surfaces as "Unable to bootstrap". librdkafka reports it reliably.
    """
    if kind_of(exc) is ErrorKind.UNREACHABLE:
        reason = login_refusal(settings)
        if reason is not None:
            return kafka_errors.SaslAuthenticationFailedError(reason)
    return exc


def translate(
    exc: BaseException, settings: Cluster, doing: str, *, reads_group: bool = False
) -> StaticConsumerError:
    """The project error for a kafka-python error met while ``doing`` something."""
    return error_for(kind_of(exc), str(exc) or type(exc).__name__, settings, doing, reads_group=reads_group)


__all__ = [
    "CLIENT_ID",
    "SessionRecords",
    "admin_client",
    "explain",
    "kafka_admin",
    "kind_of",
    "kind_of_text",
    "translate",
]
