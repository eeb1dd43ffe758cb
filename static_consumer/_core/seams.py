"""The one object a unit test substitutes: how a consumer reaches Kafka and time.

A consumer talks to the outside through these seven things only; by default they are librdkafka (through
``_core/confluent.py``), the broker calls of ``static_consumer._kafka`` and the clock. Unit tests give a
scripted client, canned broker capabilities, a scripted group and instant sleeps instead
(``tests/fakes.py``); integration tests never replace them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from static_consumer._core.seam import ConsumerAdapter, GroupWatch
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings._views import Cluster

if TYPE_CHECKING:
    from static_consumer.settings._config import ConfigValue

AdapterFactory = Callable[[dict[str, "ConfigValue"]], ConsumerAdapter]
MemberRemover = Callable[[Cluster, str], bool]
# (settings, instance id, member ids newest first) -> the member id whose static leave the broker took
MemberReleaser = Callable[[Cluster, str, Sequence[str]], "str | None"]
GroupWatchFactory = Callable[[Cluster], GroupWatch]


class Prober(Protocol):
    """Asks the broker what it can do. ``group_overrides``: also read the group's own KIP-848 session
    and heartbeat overrides (the consumer protocol's mode asks for them)."""

    def __call__(self, settings: Cluster, *, group_overrides: bool) -> BrokerCapabilities: ...


def confluent_adapter(config: dict[str, ConfigValue]) -> ConsumerAdapter:
    """The default client: librdkafka through confluent-kafka, imported when the first client is built."""
    from static_consumer._core.confluent import ConfluentAdapter

    return ConfluentAdapter(config)


def probe_broker(settings: Cluster, *, group_overrides: bool) -> BrokerCapabilities:
    """The default :class:`Prober`: librdkafka's ApiVersions and DescribeConfigs (kafka-python only as a
    fallback), imported here and not before, so a process that never starts a consumer never loads it."""
    from static_consumer._kafka.probe import probe

    return probe(settings, group_overrides=group_overrides)


def remove_static_member(settings: Cluster, instance_id: str) -> bool:
    """The default member remover: an admin LeaveGroup by instance id, imported only when a
    consumer-protocol member leaves its group."""
    from static_consumer._kafka.members import remove_static_member as remove

    return remove(settings, instance_id)


def release_static_member(settings: Cluster, instance_id: str, member_ids: Sequence[str]) -> str | None:
    """The default member releaser: the static leave of this pod's dead predecessor, sent for it
    (``_core/predecessor.py``); kafka-python is imported only when a restart finds member ids to release."""
    from static_consumer._kafka.release import release_static_member as release

    return release(settings, instance_id, member_ids)


def open_group_watch(settings: Cluster) -> GroupWatch:
    """The default group watch (one kafka-python admin session), for a refused KIP-848 join or a member
    standing by: its module is loaded then."""
    from static_consumer._kafka.watch import GroupWatch as KafkaGroupWatch

    return KafkaGroupWatch(settings)


@dataclass(frozen=True)
class Seams:
    """How a consumer reaches Kafka and time. ``sleep`` None: the consumer's own stop event's ``wait``,
    so that :meth:`~static_consumer.StaticConsumer.stop` (a SIGTERM) ends every wait at once."""

    adapter_factory: AdapterFactory = confluent_adapter
    probe: Prober = probe_broker
    remove_member: MemberRemover = remove_static_member
    release_member: MemberReleaser = release_static_member
    group_watch: GroupWatchFactory = open_group_watch
    sleep: Callable[[float], object] | None = None
    clock: Callable[[], float] = time.monotonic


DEFAULT_SEAMS = Seams()

__all__ = [
    "DEFAULT_SEAMS",
    "AdapterFactory",
    "GroupWatchFactory",
    "MemberReleaser",
    "MemberRemover",
    "Prober",
    "Seams",
    "confluent_adapter",
    "open_group_watch",
    "probe_broker",
    "release_static_member",
    "remove_static_member",
]
