"""Small, bounded Kafka operations for tests, benchmarks and the demo (topics, producing, group reads).

``extra`` (where accepted) adds librdkafka properties to the client, e.g. the security settings of a
SASL listener (``SaslUsers.client_config``).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from static_consumer_lab.brokers.classpath import HarnessError

QUIET_LOGGER = logging.getLogger("static_consumer_lab.librdkafka")
QUIET_LOGGER.addHandler(logging.NullHandler())
QUIET_LOGGER.propagate = False  # librdkafka's connect-refused chatter while a broker starts is expected


def _admin(bootstrap: str, extra: Mapping[str, Any] | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": 5000,
        "logger": QUIET_LOGGER,
    }
    return AdminClient({**config, **(extra or {})})


def metadata(bootstrap: str, timeout_s: float, extra: Mapping[str, Any] | None = None) -> Any:
    """Cluster metadata as answered by (first) this bootstrap server."""
    return _admin(bootstrap, extra).list_topics(timeout=timeout_s)


def wait_for_metadata(bootstrap: str, timeout_s: float, describe: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            return metadata(bootstrap, timeout_s=2.0)
        except Exception as exc:  # noqa: BLE001 - not ready yet
            last = str(exc)
        time.sleep(0.25)
    details = describe() if describe else ""
    raise HarnessError(f"{bootstrap} did not answer metadata within {timeout_s:.0f} s ({last})\n{details}")


def wait_in_sync(bootstrap: str, timeout_s: float = 90.0) -> None:
    """Until every partition (``__consumer_offsets`` too) has a leader and all its replicas in sync, as
    after a broker came back; HarnessError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            meta = metadata(bootstrap, timeout_s=5.0)
        except Exception:  # noqa: BLE001 - a broker still starting
            meta = None
        if meta is not None and all(
            p.leader >= 0 and len(p.isrs) == len(p.replicas)
            for topic in meta.topics.values()
            for p in topic.partitions.values()
        ):
            return
        time.sleep(0.5)
    raise HarnessError(f"{bootstrap}: not every replica back in sync within {timeout_s:.0f} s")


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    *,
    replication: int = 1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Create a topic and wait until every partition has a leader."""
    from confluent_kafka.cimpl import NewTopic

    admin = _admin(bootstrap, extra)
    futures = admin.create_topics(
        [
            NewTopic(
                name, num_partitions=partitions, replication_factor=replication, config=dict(config or {})
            )
        ],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    futures[name].result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        topic = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions:
            if all(p.leader >= 0 for p in topic.partitions.values()):
                return name
        time.sleep(0.1)
    raise HarnessError(f"topic {name} did not get leaders for {partitions} partitions within {timeout_s} s")


def add_partitions(bootstrap: str, topic: str, total: int, timeout_s: float = 30.0) -> None:
    from confluent_kafka.cimpl import NewPartitions

    admin = _admin(bootstrap)  # must outlive its futures
    futures = admin.create_partitions([NewPartitions(topic, total)], request_timeout=timeout_s)
    futures[topic].result(timeout=timeout_s)


def produce(
    bootstrap: str,
    topic: str,
    count: int,
    *,
    start: int = 0,
    partition: int | None = None,
    timeout_s: float = 60.0,
    extra: Mapping[str, Any] | None = None,
) -> int:
    """Produce ``count`` records whose key and value are the decimal sequence number; returns acks."""
    from confluent_kafka import Producer

    acked = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "acks": "all",
            "logger": QUIET_LOGGER,
            **(extra or {}),
        }
    )
    for i in range(start, start + count):
        payload = str(i).encode()
        kwargs: dict[str, Any] = {"key": payload, "value": payload, "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.1)
    remaining = producer.flush(timeout_s)
    if remaining or acked != count:
        raise HarnessError(f"produced {acked} of {count} records to {topic} ({remaining} still queued)")
    return acked


# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: a fresh broker creates
# __consumer_offsets on the first FindCoordinator and answers these meanwhile.
COORDINATOR_NOT_READY = frozenset({14, 15, 16})


def describe_consumer_group(
    bootstrap: str,
    group_id: str,
    timeout_s: float = 10.0,
    extra: Mapping[str, Any] | None = None,
    *,
    ready_within_s: float = 30.0,
) -> Any:
    """confluent-kafka's ConsumerGroupDescription for ``group_id``, retrying for up to ``ready_within_s``
    while the group coordinator is still being set up."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + ready_within_s
    while True:
        admin = _admin(bootstrap, extra)  # must outlive its futures
        futures = admin.describe_consumer_groups([group_id], request_timeout=timeout_s)
        try:
            return futures[group_id].result(timeout=timeout_s)
        except KafkaException as exc:
            if exc.args[0].code() not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def committed_offsets(
    bootstrap: str, group_id: str, topic: str, partitions: int, extra: Mapping[str, Any] | None = None
) -> dict[int, int]:
    """The group's committed offset per partition (missing partitions have none)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p) for p in range(partitions)])
    admin = _admin(bootstrap, extra)  # must outlive its futures
    result = admin.list_consumer_group_offsets([request], request_timeout=10)[group_id].result(10)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The high watermark (the next offset to be written) of each partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"hw-{uuid.uuid4().hex[:8]}", "logger": QUIET_LOGGER}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def set_group_config(
    bootstrap: str, group_id: str, config: Mapping[str, str], timeout_s: float = 10.0
) -> None:
    """Set KIP-848 group-level configs (e.g. ``consumer.session.timeout.ms``) for one group."""
    from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource
    from confluent_kafka.admin._resource import ResourceType

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in config.items()]
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=entries)
    admin = _admin(bootstrap)  # must outlive its futures
    for future in admin.incremental_alter_configs([resource], request_timeout=timeout_s).values():
        future.result(timeout=timeout_s)
