"""The seam between the consumer core and librdkafka (confluent-kafka).

This is the only module of the consumer path that imports ``confluent_kafka``. Everything above it
speaks the project's own types (:class:`Record`, :class:`RecordBatch`, :class:`TopicPartition`, and
the seam's :class:`PollError` and :class:`ConsumerAdapter` in ``seam``), so the core runs on a fake
adapter in unit tests. Error codes are classified through ``static_consumer._base.codes``; what stays
here is how librdkafka reports them (the broker cause of a ``_FATAL`` is only in its text).

Facts this module relies on (librdkafka 2.16 against Kafka 4.3, checked on a real broker):

- Fencing arrives as a *message* from ``poll()`` whose error code is ``_FATAL`` (-150) while its
  ``fatal()`` is False; the broker's reason is only in the text, e.g. "Fatal error: Broker: Static
  consumer fenced by other consumer with same group.instance.id: ...". ``error_cb`` is not called.
  After it, ``poll()`` returns None, ``commit()`` raises ``_FATAL`` and ``close()`` returns at once.
- Under ``group.protocol=consumer`` a joiner whose instance id is still held gets the same kind of
  ``_FATAL`` message with "The instance ID is still used by another member in the consumer group"
  (UNRELEASED_INSTANCE_ID, 111); that librdkafka instance is dead, so a retry needs a new one.
- Under ``group.protocol=consumer`` a joiner of a classic group with live members, when the brokers'
  ``group.consumer.migration.policy`` forbids the upgrade, gets ``_FATAL`` with "The group id does not
  exist" (GROUP_ID_NOT_FOUND, 69). A classic joiner of a KIP-848 group under the policy ``disabled``
  gets INCONSISTENT_GROUP_PROTOCOL (23) as a non-fatal error from ``poll()``, and librdkafka sends the
  refused JoinGroup again every 2 s, forever (Kafka 4.3.1).
- A consumer that only ``assign()``s never joins its group: ``max.poll.interval.ms`` does not apply, and
  ``incremental_assign``/``incremental_unassign`` work outside a rebalance callback (ordinal mode).
- A principal without an ACL: a refused FindCoordinator, JoinGroup (GROUP_AUTHORIZATION_FAILED) or Fetch
  (TOPIC_AUTHORIZATION_FAILED, with the topic on the error event) comes from ``poll()`` as a non-fatal
  error, and librdkafka tries again forever; under ``group.protocol=consumer`` a refused
  ConsumerGroupHeartbeat is ``_FATAL`` with "Group authorization failed" in the text, or non-fatal
  "Topic authorization failed" (a subscribed topic the principal may not describe), every heartbeat.
- Under ``group.protocol=classic`` a refused Heartbeat (GROUP_AUTHORIZATION_FAILED: the group's READ
  revoked while the member runs) reaches neither ``poll()`` nor ``error_cb``: librdkafka only logs it,
  in its ``cgrp`` debug context ("Group "g" heartbeat error response in state up (...): Broker: Group
  authorization failed", facility HEARTBEAT), keeps heartbeating every ``heartbeat.interval.ms`` and
  ends the member only when ``session.timeout.ms`` passed without a successful one (then its JoinGroup
  is refused). So a classic member's client runs with that context on, and the adapter reports the
  line as an out-of-band error, the way ``error_cb`` reports others (:class:`_ClientLog`).
- ``close()`` sends no LeaveGroup for a static member. ``unsubscribe()`` does under the classic protocol,
  but under the consumer protocol it sends a static leave (epoch -2) and the broker keeps the member
  until its session timeout, so removal there goes through an admin LeaveGroup by instance id.
"""

from __future__ import annotations

import logging
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import confluent_kafka

from static_consumer._base.codes import (
    FATAL,
    FENCED_INSTANCE_ID,
    GROUP_AUTHORIZATION_FAILED,
    GROUP_ID_NOT_FOUND,
    TOPIC_AUTHORIZATION_FAILED,
    UNRELEASED_INSTANCE_ID,
    name_of,
)
from static_consumer._base.connections import LibrdkafkaLog
from static_consumer._base.records import Record, RecordBatch, RecordList, TopicPartition
from static_consumer._base.records.impl import wrap, wrap_one
from static_consumer._core.seam import AdapterError, CommitResult, PollError, RebalanceCallback
from static_consumer._security.secrets import ISSUED_TOKENS, is_secret_key, scrub
from static_consumer.settings._config import ConfigValue

# librdkafka's own log lines (SESSTMOUT, MAXPOLL, FATAL, ...) go to this logger instead of stderr; a
# failed broker connection goes there at DEBUG and is told on ``static_consumer.connections``.
LIBRDKAFKA_LOGGER = logging.getLogger("static_consumer.librdkafka")

# The broker error behind a _FATAL is only in its text; librdkafka builds that text from its own
# description of the broker code, so match those descriptions rather than hand-copied strings.
_CAUSES = {
    code: confluent_kafka.KafkaError(code).str().removeprefix("Broker: ")
    for code in (
        FENCED_INSTANCE_ID,
        UNRELEASED_INSTANCE_ID,
        GROUP_ID_NOT_FOUND,
        GROUP_AUTHORIZATION_FAILED,
        TOPIC_AUTHORIZATION_FAILED,
    )
}


def poll_error(err: confluent_kafka.KafkaError, topic: str | None = None) -> PollError:
    """Translate a librdkafka error into the project's type (the seam classifies it by the table);
    ``topic``: the topic librdkafka attached to the error event, if any (a refused Fetch has one)."""
    code, reason = err.code(), err.str()
    cause = None
    if code == FATAL:
        cause = next((c for c, text in _CAUSES.items() if text in reason), None)
        lowered = reason.lower()
        if cause is None and "fenced" in lowered and "instance" in lowered:
            cause = FENCED_INSTANCE_ID  # a fencing text of another librdkafka version
    elif code == FENCED_INSTANCE_ID:
        # A commit that reaches the broker after the fence raises the broker code itself, with fatal()
        # False; librdkafka turns it into a fatal error right after, so it is fatal here too.
        cause = FENCED_INSTANCE_ID
    return PollError(
        code=code,
        name=err.name(),
        reason=reason,
        fatal=bool(err.fatal()) or code in (FATAL, FENCED_INSTANCE_ID),
        retriable=bool(err.retriable()),
        cause=cause,
        topic=topic,
    )


_HEARTBEAT_REFUSED = _CAUSES[GROUP_AUTHORIZATION_FAILED]


def _with_cgrp_debug(cfg: dict[str, Any]) -> bool:
    """Turn on librdkafka's ``cgrp`` debug context for a classic group member (the only place a refused
    Heartbeat shows). True when the application asked for no debug output at all: the debug lines are
    then only read, never logged (without ``debug`` librdkafka logs none either)."""
    if "group.id" not in cfg or str(cfg.get("group.protocol", "classic")) != "classic":
        return False
    contexts = [c.strip() for c in str(cfg.get("debug", "")).split(",") if c.strip()]
    if not {"cgrp", "all"} & set(contexts):
        cfg["debug"] = ",".join([*contexts, "cgrp"])
    return not contexts


class _ClientLog:
    """librdkafka's log lines, served by ``poll()``/``consume()`` like ``error_cb``: handed to ``lines``
    (debug lines only when the application asked for them), a refused classic Heartbeat also reported to
    ``errors`` (see the module docstring)."""

    def __init__(self, errors: list[PollError], lines: LibrdkafkaLog, *, quiet: bool) -> None:
        self._errors, self._lines, self._quiet = errors, lines, quiet

    def log(self, level: int, fmt: str, *args: object) -> None:
        # confluent-kafka's arguments: the facility, the client's name and the text
        facility, text = (args[0], str(args[-1])) if len(args) == 3 else ("", "")
        if facility == "HEARTBEAT" and "heartbeat error response" in text and _HEARTBEAT_REFUSED in text:
            code, reason = GROUP_AUTHORIZATION_FAILED, f"Heartbeat failed: {text.rsplit('): ', 1)[-1]}"
            self._errors.append(PollError(code, name_of(code), reason, fatal=False, retriable=False))
        if level > logging.DEBUG or not self._quiet:
            self._lines.log(level, fmt, *args)


def _record(msg: confluent_kafka.Message) -> Record:
    """A Record of one message without error (the poll path)."""
    if msg.topic() is None or msg.partition() is None or msg.offset() is None:  # only error events
        raise AdapterError(PollError(-1, "NOT_A_RECORD", f"message without position: {msg!r}", False, False))
    return wrap_one(msg)


def _message(msg: confluent_kafka.Message) -> Record | PollError:
    err = msg.error()
    return _record(msg) if err is None else poll_error(err, msg.topic())


def _records(msgs: list[confluent_kafka.Message], topic: str | None) -> RecordList | list[Record | PollError]:
    """A consumed batch as a RecordList (with the highest offset per partition that ``commit(records)``
    needs), or message by message when it holds an error event (rare: fencing, partition EOF, ...).

    The consume loop's hot path. ``wrap`` replaces the messages by Records in place, in one pass in C
    when the native Record is built: each Record holds its message and answers its fields from it (keys
    and values are taken as the client gives them: a plain ``Consumer`` yields bytes or None). Records
    are not tracked by the garbage collector, so a batch allocates no more container objects than the
    client's messages: the collector's young generation stays below its threshold (700) and a consume
    loop runs as few collections as a raw client loop (``tests/unit/test_adapter_messages.py`` counts them).
    """
    highest = wrap(msgs, topic)
    if highest is None:  # an error event among them
        return [_message(m) for m in msgs]
    return RecordList(cast("list[Record]", msgs), highest)  # now the Records, in place


def _convert(
    msgs: list[confluent_kafka.Message], topic: str | None = None
) -> RecordBatch | list[Record | PollError]:
    """A consumed batch as a deferred :class:`RecordBatch` over its Records (see :func:`_records`), or
    message by message when it holds an error event. ``topic``: the one topic the consumer reads, if known.
    """
    highest = wrap(msgs, topic)
    if highest is None:
        return [_message(m) for m in msgs]
    return RecordBatch.of_records(cast("list[Record]", msgs), topic=topic, highest=highest)


def _matches(entry: str, topics: Iterable[str]) -> bool:
    """Whether a subscription entry (a name, or a ``^regex`` as librdkafka takes it) matches a topic."""
    if not entry.startswith("^"):
        return entry in topics
    pattern = re.compile(entry)
    return any(pattern.search(topic) for topic in topics)


def _ours(parts: Sequence[confluent_kafka.TopicPartition]) -> list[TopicPartition]:
    return [TopicPartition(p.topic, p.partition) for p in parts]


def _offset(value: int) -> int | None:
    return value if value >= 0 else None  # librdkafka's logical offsets (INVALID, BEGINNING...) are < 0


def _starts(partitions: Mapping[TopicPartition, int | None]) -> list[confluent_kafka.TopicPartition]:
    # OFFSET_STORED: librdkafka fetches the committed offset and falls back to auto.offset.reset.
    return [
        confluent_kafka.TopicPartition(
            tp.topic, tp.partition, confluent_kafka.OFFSET_STORED if offset is None else offset
        )
        for tp, offset in partitions.items()
    ]


# confluent-kafka hands out librdkafka's consumer group metadata only serialized, and librdkafka has no
# other API for the generation: "CGMDv2:" then the generation as a host-order int32 (librdkafka's
# rd_kafka_consumer_group_metadata_write), -1 before the first join. Another magic: unknown layout.
_CGMD_MAGIC = b"CGMDv2:"
_INT32 = struct.Struct("=i")


def parse_generation(metadata: object) -> int | None:
    """The generation in serialized consumer group metadata; None if absent or of an unknown format."""
    if not isinstance(metadata, bytes) or not metadata.startswith(_CGMD_MAGIC):
        return None
    end = len(_CGMD_MAGIC) + _INT32.size
    if len(metadata) < end:
        return None
    (generation,) = _INT32.unpack(metadata[len(_CGMD_MAGIC) : end])
    return generation if generation >= 0 else None


def _raise(exc: confluent_kafka.KafkaException) -> AdapterError:
    err = exc.args[0] if exc.args and isinstance(exc.args[0], confluent_kafka.KafkaError) else None
    if err is None:
        return AdapterError(PollError(-1, "UNKNOWN", str(exc), fatal=False, retriable=False))
    return AdapterError(poll_error(err))


class ConfluentAdapter:
    """:class:`ConsumerAdapter` over ``confluent_kafka.Consumer``."""

    def __init__(self, config: Mapping[str, ConfigValue]) -> None:
        self._errors: list[PollError] = []
        cfg: dict[str, Any] = dict(config)
        cfg["error_cb"] = self._on_error
        cfg["on_commit"] = self._on_commit  # the result of begin_commit, served by poll/consume
        secrets = tuple(v for k, v in cfg.items() if isinstance(v, str) and v and is_secret_key(k))
        lines = LibrdkafkaLog(LIBRDKAFKA_LOGGER, lambda s: ISSUED_TOKENS.scrub(scrub(s, secrets)))
        self._log = cfg["logger"] = _ClientLog(self._errors, lines, quiet=_with_cgrp_debug(cfg))
        try:
            self._consumer = confluent_kafka.Consumer(cfg)
        except confluent_kafka.KafkaException as exc:  # e.g. a TLS key it cannot load (-186)
            raise _raise(exc) from None
        # Every topic (or "^pattern") this client was ever told to read, and the one topic every message
        # comes from when that is a single named topic: batches then skip building a topic per message.
        # Never narrowed: after a new subscription or assignment, librdkafka may still hand out queued
        # messages of the old one until its rebalance runs.
        self._sources: set[str] = set()
        self._topic: str | None = None
        self._in_flight: dict[TopicPartition, int] | None = None  # the offsets begin_commit sent
        self._result: CommitResult | None = None

    def _reading(self, topics: Iterable[str]) -> None:
        self._sources.update(topics)
        only = next(iter(self._sources)) if len(self._sources) == 1 else None
        self._topic = None if only is None or only.startswith("^") else only  # a pattern may match many

    def _on_error(self, err: confluent_kafka.KafkaError) -> None:
        self._errors.append(poll_error(err))

    def take_errors(self) -> list[PollError]:
        errors = list(self._errors)
        self._errors.clear()  # the same list the log hook appends to
        return errors

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        on_assign: RebalanceCallback,
        on_revoke: RebalanceCallback,
        on_lost: RebalanceCallback,
    ) -> None:
        self._reading(topics)
        # confluent-kafka applies the (incremental) assign/unassign itself after each callback returns.
        self._consumer.subscribe(
            list(topics),
            on_assign=lambda _c, parts: on_assign(_ours(parts)),
            on_revoke=lambda _c, parts: on_revoke(_ours(parts)),
            on_lost=lambda _c, parts: on_lost(_ours(parts)),
        )

    def assign(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        self._reading(tp.topic for tp in partitions)
        self._consumer.assign(_starts(partitions))

    def incremental_assign(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        self._reading(tp.topic for tp in partitions)
        self._consumer.incremental_assign(_starts(partitions))

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None:
        self._consumer.incremental_unassign(
            [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        )

    def partition_counts(self, topics: Sequence[str], timeout: float) -> dict[str, int | None]:
        try:
            # One Metadata request for all topics; consumers do not auto-create topics by default.
            known = self._consumer.list_topics(timeout=timeout).topics
        except confluent_kafka.KafkaException as exc:
            raise _raise(exc) from None
        counts: dict[str, int | None] = {}
        for topic in topics:
            meta = known.get(topic)
            counts[topic] = len(meta.partitions) if meta is not None and meta.partitions else None
        return counts

    def unmatched(self, subscription: Sequence[str], timeout: float) -> list[str]:
        try:
            # Every topic: a pattern needs them all, and naming topics could make the broker create them.
            names = self._consumer.list_topics(timeout=timeout).topics
        except confluent_kafka.KafkaException as exc:
            raise _raise(exc) from None
        return [entry for entry in subscription if not _matches(entry, names)]

    def poll(self, timeout: float) -> Record | PollError | None:
        msg = self._consumer.poll(timeout)
        return None if msg is None else _message(msg)

    def consume(self, max_records: int, timeout: float) -> list[Record | PollError]:
        return _records(self._consumer.consume(max_records, timeout), self._topic)  # type: ignore[return-value]

    def consume_batch(self, max_records: int, timeout: float) -> RecordBatch | list[Record | PollError]:
        return _convert(self._consumer.consume(max_records, timeout), self._topic)

    def commit(self, offsets: Mapping[TopicPartition, int] | None) -> None:
        try:
            if offsets is None:
                result = self._consumer.commit(asynchronous=False)
            else:
                new = confluent_kafka.TopicPartition
                parts = [new(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
                result = self._consumer.commit(offsets=parts, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            raise _raise(exc) from None
        for part in result:
            if part.error is not None:
                raise AdapterError(poll_error(part.error))

    def begin_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        # librdkafka's asynchronous commit: it reports to the consumer's queue, which this thread's next
        # poll()/consume() serves (on_commit). No thread of our own: confluent-kafka (2.16) lets one
        # thread at a time into a Consumer (re-entrant calls from its callbacks excepted), so a commit
        # on another thread would wait for every poll in progress, a revoke inside one included.
        # Only asynchronous commits call on_commit (a synchronous one has its own result callback).
        new = confluent_kafka.TopicPartition
        parts = [new(tp.topic, tp.partition, offset) for tp, offset in offsets.items()]
        try:
            self._consumer.commit(offsets=parts, asynchronous=True)
        except confluent_kafka.KafkaException as exc:
            raise _raise(exc) from None
        self._in_flight, self._result = dict(offsets), None

    def _on_commit(
        self, err: confluent_kafka.KafkaError | None, parts: list[confluent_kafka.TopicPartition]
    ) -> None:
        sent, self._in_flight = self._in_flight, None
        if sent is None:
            return  # none of ours in flight (the core begins one at a time)
        if err is None:
            err = next((p.error for p in parts if p.error is not None), None)
        self._result = CommitResult(sent, None if err is None else poll_error(err))

    def commit_result(self) -> CommitResult | None:
        result, self._result = self._result, None
        return result

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float
    ) -> dict[TopicPartition, int | None]:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        try:
            result = self._consumer.committed(parts, timeout=timeout)
        except confluent_kafka.KafkaException as exc:
            raise _raise(exc) from None
        return {TopicPartition(p.topic, p.partition): _offset(p.offset) for p in result}

    def position(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        parts = [confluent_kafka.TopicPartition(tp.topic, tp.partition) for tp in partitions]
        result = self._consumer.position(parts)
        return {TopicPartition(p.topic, p.partition): _offset(p.offset) for p in result}

    def seek(self, partition: TopicPartition, offset: int) -> None:
        # librdkafka bumps the partition's version at once, so messages already queued are not served.
        try:
            self._consumer.seek(confluent_kafka.TopicPartition(partition.topic, partition.partition, offset))
        except confluent_kafka.KafkaException as exc:
            raise _raise(exc) from None

    def assignment(self) -> list[TopicPartition]:
        return _ours(self._consumer.assignment())

    def member_id(self) -> str | None:
        member: str | None = self._consumer.memberid()
        return member or None

    def generation(self) -> int | None:
        try:
            return parse_generation(self._consumer.consumer_group_metadata())
        except (RuntimeError, confluent_kafka.KafkaException):  # closed, or no group configured
            return None

    def unsubscribe(self) -> None:
        self._consumer.unsubscribe()

    def close(self) -> None:
        self._consumer.close()


__all__ = ["LIBRDKAFKA_LOGGER", "ConfluentAdapter", "parse_generation", "poll_error"]
