"""Re-driving: dead-lettered records back to their source topics, once the fault that failed them is
fixed (``static-consumer redrive DEAD_LETTER_TOPIC``, docs/failures.md).

Reads the dead-letter topic with a consumer group of its own (``<group>.redrive`` by default: each run
goes on where the previous one stopped), up to the end offsets it finds when it starts, and writes each
record back to the partition of the source topic it came from (its ``dlt.original.*`` headers), with
its key, value and its own headers (the ``dlt.*`` ones left out), through an idempotent ``acks=all``
producer. Offsets of the dead-letter topic are committed only once every record read before them was
acknowledged by its source topic: a run that fails or is killed sends again what it had not committed
(a record may reach its source topic twice; none is lost). Records without the headers (not written by
this library) are counted and passed over.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from static_consumer._base.codes import TOPIC_AUTHORIZATION_FAILED
from static_consumer._base.errors import BrokerUnavailableError, RetriableError
from static_consumer._kafka.admin_client import LIBRDKAFKA_LOG, construction_error, error_for, kafka_exception
from static_consumer._kafka.dead_letter import missing, origin_of, refused, without_ours
from static_consumer._security.oauth import first_token
from static_consumer._security.tls import check_tls_files
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import admin_config

log = logging.getLogger(__name__)
_POLL_S = 0.5


@dataclass
class RedriveResult:
    """What a run did: records sent back per ``topic[partition]``, records passed over (no
    ``dlt.original.*`` headers), and the dead-letter offsets committed (the next to read)."""

    dead_letter_topic: str
    group: str
    sent: dict[str, int] = field(default_factory=dict)
    foreign: int = 0
    committed: dict[int, int] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.sent.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "dead_letter_topic": self.dead_letter_topic,
            "group": self.group,
            "sent": self.sent,
            "total": self.total,
            "foreign": self.foreign,
            "committed": {str(p): o for p, o in sorted(self.committed.items())},
            "dry_run": self.dry_run,
        }


def redrive(
    settings: ConsumerSettings,
    dead_letter_topic: str,
    *,
    group: str | None = None,
    dry_run: bool = False,
    timeout_s: float = 300.0,
    clock: Callable[[], float] = time.monotonic,
) -> RedriveResult:
    """Send the records of ``dead_letter_topic`` (up to its end when the run starts) back to their source
    partitions, committing the dead-letter offsets after each acknowledged batch. ``dry_run``: read and
    count, send and commit nothing. Raises :class:`RetriableError` when the run did not reach the end
    within ``timeout_s`` (what was committed stays committed), and the typed errors of a missing topic
    or ACL (READ on the dead-letter topic and on the group, WRITE on the source topics)."""
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    name = group or f"{settings.group_id}.redrive"
    result = RedriveResult(dead_letter_topic, name, dry_run=dry_run)
    doing = f"re-driving {dead_letter_topic!r}"
    check_tls_files(settings)
    base: dict[str, Any] = {**admin_config(settings), "logger": LIBRDKAFKA_LOG}
    consumer_config = {
        **base,
        "group.id": name,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
    producer_config = {
        **base,
        "acks": "all",
        "enable.idempotence": True,
        "allow.auto.create.topics": False,
        "message.timeout.ms": max(1, int(settings.dead_letter_timeout_s * 1000)),
    }
    first_token(consumer_config, settings, doing)
    try:
        consumer = Consumer(consumer_config)
        producer = None if dry_run else Producer(producer_config)
    except KafkaException as exc:
        raise construction_error(exc, consumer_config, settings, doing) from None
    # A refusal names the run's own group (an ACL the consumer's principal may lack).
    as_run = settings.model_copy(update={"group_id": name})
    try:
        metadata = consumer.list_topics(dead_letter_topic, timeout=settings.connect_timeout_s)
        topic = metadata.topics.get(dead_letter_topic)
        if topic is None or topic.error is not None:
            code = topic.error.code() if topic is not None and topic.error is not None else None
            if code == TOPIC_AUTHORIZATION_FAILED:
                raise refused(settings, dead_letter_topic, doing, "TOPIC_AUTHORIZATION_FAILED", "READ")
            raise missing(dead_letter_topic, doing)
        partitions = [TopicPartition(dead_letter_topic, p) for p in sorted(topic.partitions)]
        ends = {
            tp.partition: consumer.get_watermark_offsets(tp, timeout=settings.connect_timeout_s)[1]
            for tp in partitions
        }
        committed = consumer.committed(partitions, timeout=settings.connect_timeout_s)
        starts = {tp.partition: max(tp.offset, 0) for tp in committed}
        todo = {p for p, end in ends.items() if starts.get(p, 0) < end}
        consumer.assign(
            [TopicPartition(dead_letter_topic, p, starts[p] if starts[p] > 0 else -2) for p in sorted(todo)]
        )
        deadline = clock() + timeout_s
        while todo:
            if clock() > deadline:
                raise RetriableError(
                    f"{doing}: the end was not reached within {timeout_s:g}s ({result.total} records sent "
                    "and committed); run it again"
                )
            messages = consumer.consume(500, _POLL_S)
            batch_next: dict[int, int] = {}
            for message in messages:
                if message.error() is not None:
                    kind, text = kafka_exception(KafkaException(message.error()))
                    raise error_for(kind, text, settings, doing)
                p, offset = message.partition(), message.offset()
                if p is None or offset is None or p not in todo or offset >= ends[p]:
                    continue
                batch_next[p] = offset + 1
                headers = _headers(message.headers())
                origin = origin_of(headers)
                if origin is None:
                    result.foreign += 1
                    continue
                where = f"{origin.topic}[{origin.partition}]"
                result.sent[where] = result.sent.get(where, 0) + 1
                if producer is not None:
                    producer.produce(
                        origin.topic,
                        value=message.value(),
                        key=message.key(),
                        headers=list(without_ours(headers)),
                        partition=origin.partition,
                        on_delivery=_check_delivery(settings, doing),
                    )
            if producer is not None and batch_next:
                left = producer.flush(settings.dead_letter_timeout_s + 1.0)
                if left:
                    raise BrokerUnavailableError(
                        f"{doing}: {left} records not acknowledged by their source topics within "
                        f"dead_letter_timeout_s; nothing of them committed, run it again"
                    )
                consumer.commit(
                    offsets=[TopicPartition(dead_letter_topic, p, o) for p, o in batch_next.items()],
                    asynchronous=False,
                )
            for p, o in batch_next.items():
                if producer is not None:
                    result.committed[p] = o
                if o >= ends[p]:
                    todo.discard(p)
    except KafkaException as exc:
        raise error_for(*kafka_exception(exc), as_run, doing) from None
    finally:
        consumer.close()
    log.info("re-drove %d records from %s (%d passed over)", result.total, dead_letter_topic, result.foreign)
    return result


def _headers(raw: Any) -> list[tuple[str, bytes | None]]:
    """A message's headers as (name, bytes) pairs."""
    pairs = raw.items() if isinstance(raw, dict) else raw or ()
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs]


def _check_delivery(settings: ConsumerSettings, doing: str) -> Callable[[Any, Any], None]:
    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            return
        if err.code() == TOPIC_AUTHORIZATION_FAILED:
            raise refused(settings, msg.topic(), doing, err.str())
        kind, text = kafka_exception(Exception(err))
        raise error_for(kind, f"{err.name()}: {err.str()}", settings, doing)

    return delivered


__all__ = ["RedriveResult", "redrive"]
