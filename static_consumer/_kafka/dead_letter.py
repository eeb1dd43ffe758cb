"""Dead-letter topics: the headers a dead-lettered record carries, the check before joining that each
dead-letter topic exists and may be written, and the producer that writes failed records to them.

The producer is confluent-kafka's, built from the consumer's own security settings
(``settings._config.admin_config``) with ``acks=all`` and ``enable.idempotence``, and never creating a
topic (``allow.auto.create.topics=false``: a topic the broker creates on the fly gets its defaults, not
the replication and retention a dead-letter topic needs). :meth:`DeadLetters.send` returns only once the
write is acknowledged, or raises: the runner commits the source offset past the record only after it
returned, so no record is ever both unhandled and committed.

Partitioning: a record goes to its source partition's number when the dead-letter topic has that many
partitions (so one source partition's failures stay in order), else the producer's partitioner picks one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from static_consumer._base.codes import TOPIC_AUTHORIZATION_FAILED, ErrorKind, classify
from static_consumer._base.errors import (
    AuthorizationError,
    DeadLetterError,
    DeadLetterTopicError,
    StaticConsumerError,
)
from static_consumer._base.records import Headers, Record
from static_consumer._kafka.acls import Acl, principal_of
from static_consumer._kafka.admin_client import (
    LIBRDKAFKA_LOG,
    construction_error,
    error_for,
    kafka_exception,
    librdkafka_admin,
)
from static_consumer._security.oauth import first_token
from static_consumer._security.secrets import scrub_for
from static_consumer._security.tls import check_tls_files
from static_consumer.settings._config import admin_config
from static_consumer.settings._views import Cluster

log = logging.getLogger(__name__)


class DeadLetterFields(Cluster, Protocol):
    """The settings as dead-lettering reads them (``ConsumerSettings`` is one): the cluster, and the
    bound of a write."""

    @property
    def dead_letter_timeout_s(self) -> float: ...


PREFIX = "dlt."
ORIGINAL_TOPIC = "dlt.original.topic"
ORIGINAL_PARTITION = "dlt.original.partition"
ORIGINAL_OFFSET = "dlt.original.offset"
ORIGINAL_TIMESTAMP = "dlt.original.timestamp"  # milliseconds since the epoch; absent without one
ORIGINAL_TIMESTAMP_TYPE = "dlt.original.timestamp.type"  # 1 CreateTime, 2 LogAppendTime
GROUP = "dlt.group"
INSTANCE_ID = "dlt.instance.id"  # absent for a dynamic member
EXCEPTION_TYPE = "dlt.exception.type"
EXCEPTION_MESSAGE = "dlt.exception.message"  # secrets masked, at most MESSAGE_LIMIT characters
ATTEMPTS = "dlt.attempts"
HEADERS = (
    ORIGINAL_TOPIC,
    ORIGINAL_PARTITION,
    ORIGINAL_OFFSET,
    ORIGINAL_TIMESTAMP,
    ORIGINAL_TIMESTAMP_TYPE,
    GROUP,
    INSTANCE_ID,
    EXCEPTION_TYPE,
    EXCEPTION_MESSAGE,
    ATTEMPTS,
)
MESSAGE_LIMIT = 2000
_WRITE = "WRITE"


def exception_type(error: BaseException) -> str:
    """``module.QualName`` of ``error`` (``builtins`` left out)."""
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def dead_letter_headers(
    record: Record,
    *,
    error: BaseException,
    attempts: int,
    settings: DeadLetterFields,
    instance_id: str | None,
) -> list[tuple[str, str | bytes | None]]:
    """The record's own headers (earlier ``dlt.*`` ones left out: a record dead-lettered again carries
    its latest failure), then where it came from and why it failed, as UTF-8 text."""
    message = scrub_for(settings, str(error))[:MESSAGE_LIMIT]
    ours: list[tuple[str, str]] = [
        (ORIGINAL_TOPIC, record.topic),
        (ORIGINAL_PARTITION, str(record.partition)),
        (ORIGINAL_OFFSET, str(record.offset)),
    ]
    if record.timestamp_ms is not None:
        ours += [
            (ORIGINAL_TIMESTAMP, str(record.timestamp_ms)),
            (ORIGINAL_TIMESTAMP_TYPE, str(record.timestamp_type)),
        ]
    ours.append((GROUP, settings.group_id))
    if instance_id is not None:
        ours.append((INSTANCE_ID, instance_id))
    ours += [(EXCEPTION_TYPE, exception_type(error)), (EXCEPTION_MESSAGE, message), (ATTEMPTS, str(attempts))]
    kept: list[tuple[str, str | bytes | None]] = list(without_ours(record.headers))
    return kept + [(k, v.encode()) for k, v in ours]


def without_ours(headers: Iterable[tuple[str, bytes | None]] | None) -> Headers:
    """``headers`` without the ``dlt.*`` ones this module adds."""
    return tuple((k, v) for k, v in headers or () if not k.startswith(PREFIX))


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a dead-lettered record came from, read back from its headers."""

    topic: str
    partition: int
    offset: int


def origin_of(headers: Iterable[tuple[str, bytes | None]] | None) -> Origin | None:
    """The source of a dead-lettered record (its ``dlt.original.*`` headers); None when they are missing
    or unreadable (not a record this library dead-lettered)."""
    found = {k: v for k, v in headers or () if k in (ORIGINAL_TOPIC, ORIGINAL_PARTITION, ORIGINAL_OFFSET)}
    try:
        return Origin(
            found[ORIGINAL_TOPIC].decode(),  # type: ignore[union-attr]
            int(found[ORIGINAL_PARTITION]),  # type: ignore[arg-type]
            int(found[ORIGINAL_OFFSET]),  # type: ignore[arg-type]
        )
    except (KeyError, ValueError, TypeError, AttributeError):
        return None


@dataclass(frozen=True, slots=True)
class Written:
    """Where a dead-lettered record was acknowledged."""

    topic: str
    partition: int
    offset: int


def refused(
    settings: DeadLetterFields, topic: str, doing: str, detail: str, operation: str = _WRITE
) -> AuthorizationError:
    """The :class:`AuthorizationError` for a principal that may not ``operation`` (WRITE) ``topic``."""
    acl, principal = Acl(operation, "Topic", topic), principal_of(settings)
    return AuthorizationError(
        f"{doing}: the brokers refused {principal} ({scrub_for(settings, detail)}): grant {acl} "
        f"({acl.command(principal)}). docs/security.md lists the ACLs each operation needs",
        operation=operation,
        resource="Topic",
        name=topic,
        kafka_code=TOPIC_AUTHORIZATION_FAILED,
    )


def missing(topic: str, doing: str) -> DeadLetterTopicError:
    return DeadLetterTopicError(
        f"{doing}: the dead-letter topic {topic!r} does not exist. Create it (e.g. kafka-topics --create "
        f"--topic {topic} with the source topic's partitions and replication, and a retention long enough "
        "to read it), or change dead_letter_topic or failure_action",
        topic=topic,
    )


def check_topics(settings: DeadLetterFields, topics: Sequence[str]) -> dict[str, int]:
    """Partition count per dead-letter topic, once each exists and the principal may write it (its
    authorized operations include WRITE); raises :class:`DeadLetterTopicError` for a missing one and
    :class:`AuthorizationError` naming WRITE on it otherwise. Asked before the consumer joins."""
    from confluent_kafka import KafkaException, TopicCollection

    if not topics:
        return {}
    doing = "checking the dead-letter topics"
    admin = librdkafka_admin(settings, doing)
    futures = admin.describe_topics(
        TopicCollection(list(topics)),
        request_timeout=settings.connect_timeout_s,
        include_authorized_operations=True,
    )
    out: dict[str, int] = {}
    for topic, future in futures.items():
        try:
            described = future.result()
        except KafkaException as exc:
            kind, text = kafka_exception(exc)
            if kind is ErrorKind.UNKNOWN_TOPIC:
                raise missing(topic, doing) from None
            if kind is ErrorKind.AUTHORIZATION:  # not even DESCRIBE: WRITE would give it
                raise refused(settings, topic, doing, text) from None
            raise error_for(kind, text, settings, doing) from None
        allowed = {getattr(op, "name", str(op)) for op in described.authorized_operations or ()}
        if _WRITE not in allowed and "ALL" not in allowed:
            raise refused(settings, topic, doing, f"allowed: {', '.join(sorted(allowed)) or 'nothing'}")
        out[topic] = len(described.partitions)
    return out


class DeadLetters:
    """Writes failed records to their dead-letter topics, each acknowledged before :meth:`send`
    returns. ``partitions``: the topics' partition counts, from :func:`check_topics`."""

    def __init__(self, settings: DeadLetterFields, partitions: Mapping[str, int] | None = None) -> None:
        from confluent_kafka import KafkaException, Producer

        self._settings = settings
        self._timeout_s = settings.dead_letter_timeout_s
        self.partitions = dict(partitions or {})
        doing = "building the dead-letter producer"
        check_tls_files(settings)
        config: dict[str, Any] = {
            **admin_config(settings),
            "acks": "all",
            "enable.idempotence": True,
            "allow.auto.create.topics": False,
            "message.timeout.ms": max(1, int(self._timeout_s * 1000)),
            "logger": LIBRDKAFKA_LOG,
        }
        first_token(config, settings, doing)
        try:
            self._producer = Producer(config)
        except KafkaException as exc:
            raise construction_error(exc, config, settings, doing) from None
        self._lock = threading.Lock()  # one send at a time: each waits for its own acknowledgement

    def send(
        self, record: Record, topic: str, *, error: BaseException, attempts: int, instance_id: str | None
    ) -> Written:
        """Write ``record`` to ``topic`` and wait for the acknowledgement (``acks=all``), at most
        ``dead_letter_timeout_s``. Raises :class:`DeadLetterError` (retriable), or
        :class:`AuthorizationError` / :class:`DeadLetterTopicError` for a topic refused or gone."""
        headers = dead_letter_headers(
            record, error=error, attempts=attempts, settings=self._settings, instance_id=instance_id
        )
        count = self.partitions.get(topic)
        partition = record.partition if count is not None and record.partition < count else -1
        result: list[Any] = []
        where = (record.topic, record.partition, record.offset)
        doing = f"dead-lettering {record.topic}[{record.partition}]@{record.offset} to {topic!r}"
        with self._lock:
            try:
                self._producer.produce(
                    topic,
                    value=record.value,
                    key=record.key,
                    headers=headers,
                    partition=partition,
                    on_delivery=lambda err, msg: result.append((err, msg)),
                )
            except BufferError as exc:
                raise DeadLetterError(f"{doing}: {exc}", topic=topic, record=where) from None
            left = self._producer.flush(self._timeout_s + 1.0)
        if left or not result:
            raise DeadLetterError(
                f"{doing}: not acknowledged within dead_letter_timeout_s ({self._timeout_s:g}s); nothing "
                "past the record is committed",
                topic=topic,
                record=where,
            )
        err, msg = result[0]
        if err is not None:
            raise self._refusal(err, topic, doing, where)
        return Written(msg.topic(), msg.partition(), msg.offset())

    def _refusal(self, err: Any, topic: str, doing: str, where: tuple[str, int, int]) -> StaticConsumerError:
        kind, text = classify(err.code()), scrub_for(self._settings, f"{err.name()}: {err.str()}")
        if kind is ErrorKind.AUTHORIZATION:
            return refused(self._settings, topic, doing, text)
        if kind is ErrorKind.UNKNOWN_TOPIC:
            return missing(topic, doing)
        if kind in (ErrorKind.AUTHENTICATION, ErrorKind.TLS, ErrorKind.CONFIGURATION):
            return error_for(kind, text, self._settings, doing)
        return DeadLetterError(
            f"{doing}: {text}; nothing past the record is committed", topic=topic, record=where
        )

    def close(self) -> None:
        """Wait (bounded) for anything still queued; every send already waited for its own."""
        self._producer.flush(min(self._timeout_s, 5.0))


__all__ = [
    "ATTEMPTS",
    "DeadLetterFields",
    "EXCEPTION_MESSAGE",
    "EXCEPTION_TYPE",
    "GROUP",
    "HEADERS",
    "INSTANCE_ID",
    "MESSAGE_LIMIT",
    "ORIGINAL_OFFSET",
    "ORIGINAL_PARTITION",
    "ORIGINAL_TIMESTAMP",
    "ORIGINAL_TIMESTAMP_TYPE",
    "ORIGINAL_TOPIC",
    "PREFIX",
    "DeadLetters",
    "Origin",
    "Written",
    "check_topics",
    "dead_letter_headers",
    "exception_type",
    "origin_of",
    "without_ours",
    "refused",
]
