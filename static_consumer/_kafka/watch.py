"""The broker look-ups behind a wait for this member's instance id (the KIP-848 release wait, standing by
under ``duplicate_policy='wait'``): describe the group, read its committed offsets and its session.

A restarted static member that the coordinator refuses with UNRELEASED_INSTANCE_ID cannot tell from
librdkafka who holds its instance id: librdkafka drops the broker's message naming the holder. So the
wait (``static_consumer._core.rejoin``) watches the group from outside, through one kafka-python admin
session that serves every look of the wait:

- DescribeGroups, or ConsumerGroupDescribe for a KIP-848 group (``describe.ask_group``): the
  coordinator's id and the members, with their instance ids, hosts and current assignments (neither
  carries a last-heartbeat time);
- OffsetFetch: the group's committed offsets for the holder's partitions. Only the member that owns a
  partition commits it, so offsets that move prove the holder alive;
- DescribeConfigs of the GROUP resource: the group's own ``consumer.session.timeout.ms`` override, read
  when the wait begins and when the coordinator changes.

kafka-python, not librdkafka's admin client: the waits run while brokers come and go (that is often why
an instance id is still held), and librdkafka's admin client aborts or crashes the whole process when a
coordinator-bound request (ConsumerGroupDescribe, OffsetFetch) is under way as the coordinator goes away
(``describe``). Each look finds the coordinator again, so one that moved is followed at once.

The first two need only DESCRIBE on the group and its topics, which READ implies: a consumer's principal
has them. The third needs DESCRIBE_CONFIGS on the group; without it the session probed at ``start()``
stands. This module is imported only when a member waits, never on the consume path, and a look that
fails returns None (the wait knows what an unanswered look means); it never raises a broker error.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import kafka.errors as kafka_errors

from static_consumer._base.errors import StaticConsumerError
from static_consumer._base.records import TopicPartition
from static_consumer._kafka import kafka_python
from static_consumer._kafka.describe import ask_group, forget_coordinator
from static_consumer._kafka.groups import GroupDescription
from static_consumer.settings._views import Cluster

log = logging.getLogger(__name__)
NO_OFFSET = -1  # no committed offset
SESSION_OVERRIDE = "consumer.session.timeout.ms"  # a KIP-848 group's own session timeout
CLIENT_ID = "static-consumer-watch"


class GroupWatch:
    """Looks at this consumer's group through one kafka-python admin session, opened at the first look
    (and again after one failed), each request bounded by ``connect_timeout_s``."""

    def __init__(self, settings: Cluster) -> None:
        self._settings = settings
        self._group = settings.group_id
        self._session: ExitStack | None = None
        self._admin: Any = None

    def _client(self) -> Any:
        if self._admin is None:
            session = ExitStack()
            self._admin = session.enter_context(kafka_python.admin_client(self._settings, CLIENT_ID))
            self._session = session
        return self._admin

    def _ask(self, what: str, call: Any) -> Any:
        """``call(admin)``, or None (logged at DEBUG) when the broker did not answer or refused: a new
        session is opened for the next look."""
        try:
            return call(self._client())
        except (kafka_errors.KafkaError, StaticConsumerError, OSError, ValueError) as exc:
            log.debug("could not %s of group %r: %r", what, self._group, exc)
            self.close()
            return None

    def look(self) -> GroupDescription | None:
        """The group as its coordinator describes it now; None when it did not answer in time or refused."""
        answer: GroupDescription | None = self._ask("describe", lambda admin: ask_group(admin, self._group))
        return answer

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        """The group's committed offsets of ``partitions`` (NO_OFFSET where none); None on failure."""
        from kafka import TopicPartition as KafkaPartition

        wanted = [KafkaPartition(tp.topic, tp.partition) for tp in partitions]

        def read(admin: Any) -> dict[TopicPartition, int]:
            forget_coordinator(admin, self._group)
            offsets = admin.list_group_offsets({self._group: wanted})[self._group]
            found = {
                TopicPartition(tp.topic, tp.partition): max(o.offset, NO_OFFSET) for tp, o in offsets.items()
            }
            return {tp: found.get(tp, NO_OFFSET) for tp in partitions}

        answer: dict[TopicPartition, int] | None = self._ask("read the committed offsets", read)
        return answer

    def session_ms(self) -> int | None:
        """The group's ``consumer.session.timeout.ms`` override; None without one, or on failure."""
        from static_consumer._kafka.probe import group_overrides

        overrides: dict[str, int] | None = self._ask(
            "read the session", lambda admin: group_overrides(admin, self._group)
        )
        return None if overrides is None else overrides.get("consumer_session_timeout_ms")

    def close(self) -> None:
        session, self._session, self._admin = self._session, None, None
        if session is not None:
            session.close()


__all__ = ["CLIENT_ID", "NO_OFFSET", "SESSION_OVERRIDE", "GroupWatch"]
