"""The broker look-ups behind the wait for a held instance id (KIP-848): describe the group, read offsets.

A restarted static member that the coordinator refuses with UNRELEASED_INSTANCE_ID cannot tell from
librdkafka who holds its instance id: librdkafka drops the broker's message naming the holder. So the
wait (``static_consumer._core.rejoin``) watches the group from outside, through one confluent-kafka
AdminClient that serves every look of the wait:

- ConsumerGroupDescribe (``describe_consumer_groups``): the coordinator's id and the members, with
  their instance ids, hosts and current assignments (it carries no last-heartbeat time);
- OffsetFetch (``list_consumer_group_offsets``): the group's committed offsets for the holder's
  partitions. Only the member that owns a partition commits it, so offsets that move prove the holder
  alive;
- DescribeConfigs of the GROUP resource (``describe_configs``): the group's own
  ``consumer.session.timeout.ms`` override, read when the wait begins and when the coordinator changes.

The first two need only DESCRIBE on the group and its topics, which READ implies: a consumer's principal
has them. The third needs DESCRIBE_CONFIGS on the group; without it the session probed at ``start()``
stands. This module is imported only when a join is refused, never on the consume path, and a look that
fails returns None (the wait knows what an unanswered look means); it never raises a broker error.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Sequence
from typing import Any

from static_consumer._base.records import TopicPartition
from static_consumer._kafka.admin_client import librdkafka_admin
from static_consumer._kafka.describe import ask_consumer_group
from static_consumer._kafka.groups import GroupDescription
from static_consumer.settings._views import Cluster

log = logging.getLogger(__name__)
NO_OFFSET = -1  # no committed offset (librdkafka reports OFFSET_INVALID, -1001)
SESSION_OVERRIDE = "consumer.session.timeout.ms"  # a KIP-848 group's own session timeout


class ConfluentGroupWatch:
    """Looks at this consumer's group through one AdminClient, each look bounded by ``connect_timeout_s``."""

    def __init__(self, settings: Cluster) -> None:
        self._group = settings.group_id
        self._timeout = settings.connect_timeout_s
        self._admin: Any = librdkafka_admin(settings, f"watch group {settings.group_id}")

    def look(self) -> GroupDescription | None:
        """The group as its coordinator describes it now; None when it did not answer in time or refused."""
        from confluent_kafka import KafkaException

        try:
            return ask_consumer_group(self._admin, self._group, self._timeout)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            log.debug("could not describe group %r: %s", self._group, exc)
            return None

    def committed(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int] | None:
        """The group's committed offsets of ``partitions`` (NO_OFFSET where none); None on failure."""
        from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
        from confluent_kafka import TopicPartition as KafkaPartition

        request = ConsumerGroupTopicPartitions(
            self._group, [KafkaPartition(tp.topic, tp.partition) for tp in partitions]
        )
        try:
            future = self._admin.list_consumer_group_offsets([request], request_timeout=self._timeout)
            answer = future[self._group].result(timeout=self._timeout)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            log.debug("could not read the committed offsets of group %r: %s", self._group, exc)
            return None
        return {
            TopicPartition(p.topic, p.partition): max(p.offset, NO_OFFSET)
            for p in answer.topic_partitions
            if p.error is None
        }

    def session_ms(self) -> int | None:
        """The group's ``consumer.session.timeout.ms`` override; None without one, or on failure."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin._config import ConfigResource, ConfigSource
        from confluent_kafka.admin._resource import ResourceType

        resource = ConfigResource(ResourceType.GROUP, self._group)
        try:
            future = self._admin.describe_configs([resource], request_timeout=self._timeout)
            entries = future[resource].result(timeout=self._timeout)
        except (KafkaException, concurrent.futures.TimeoutError) as exc:
            log.debug("could not read the session of group %r: %s", self._group, exc)
            return None
        entry = entries.get(SESSION_OVERRIDE)
        # Without an override the broker answers with Kafka's static default, not its own setting.
        source = getattr(entry, "source", None)
        if getattr(source, "value", source) != ConfigSource.GROUP_CONFIG.value or not entry.value:
            return None
        return int(entry.value)

    def close(self) -> None:
        # confluent-kafka's AdminClient has no close(): dropping the last reference frees it.
        self._admin = None


__all__ = ["NO_OFFSET", "SESSION_OVERRIDE", "ConfluentGroupWatch"]
