"""What the broker can do: its ApiVersions and group configs, as the probe (``probe``) reads them. Pure
data; the capability gate (``static_consumer._core.gate``) decides from it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

JOIN_GROUP = 11
LEAVE_GROUP = 13
CONSUMER_GROUP_HEARTBEAT = 68
STATIC_JOIN_GROUP_VERSION = 5  # JoinGroup v5 added GroupInstanceId (KIP-345, Kafka 2.3)
BATCH_LEAVE_GROUP_VERSION = 3  # LeaveGroup v3 removes members by instance id

# BrokerCapabilities field -> broker config key, as read by the probe and stored in fixtures.
GROUP_CONFIGS: Mapping[str, str] = MappingProxyType(
    {
        "group_min_session_timeout_ms": "group.min.session.timeout.ms",
        "group_max_session_timeout_ms": "group.max.session.timeout.ms",
        "group_initial_rebalance_delay_ms": "group.initial.rebalance.delay.ms",
        "consumer_session_timeout_ms": "group.consumer.session.timeout.ms",
        "consumer_max_session_timeout_ms": "group.consumer.max.session.timeout.ms",
        "consumer_heartbeat_interval_ms": "group.consumer.heartbeat.interval.ms",
    }
)


@dataclass(frozen=True)
class BrokerCapabilities:
    """ApiVersions (api key -> (min, max)) and group configs of a broker; None where unknown."""

    api_versions: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    group_min_session_timeout_ms: int | None = None
    group_max_session_timeout_ms: int | None = None
    group_initial_rebalance_delay_ms: int | None = None
    # KIP-848: the session and heartbeat interval that apply to this consumer's group (the group's own
    # consumer.*.ms override when it has one, else the broker's group.consumer.*.ms), and the broker's
    # upper bound, which caps any override.
    consumer_session_timeout_ms: int | None = None
    consumer_max_session_timeout_ms: int | None = None
    consumer_heartbeat_interval_ms: int | None = None
    broker_version: str | None = None

    @property
    def join_group_max_version(self) -> int | None:
        versions = self.api_versions.get(JOIN_GROUP)
        return versions[1] if versions else None

    @property
    def supports_classic_static(self) -> bool:
        return (self.join_group_max_version or -1) >= STATIC_JOIN_GROUP_VERSION

    @property
    def supports_consumer_protocol(self) -> bool:
        return CONSUMER_GROUP_HEARTBEAT in self.api_versions

    @property
    def supports_leave_group_batch(self) -> bool:
        versions = self.api_versions.get(LEAVE_GROUP)
        return versions is not None and versions[1] >= BATCH_LEAVE_GROUP_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (api keys as strings), the format of the recorded fixtures."""
        out: dict[str, Any] = {
            "broker_version": self.broker_version,
            "api_versions": {str(k): list(v) for k, v in sorted(self.api_versions.items())},
        }
        out.update({name: getattr(self, name) for name in GROUP_CONFIGS})
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BrokerCapabilities:
        """Inverse of :meth:`to_dict`."""
        api_versions = {int(k): (int(v[0]), int(v[1])) for k, v in data["api_versions"].items()}
        configs = {name: data.get(name) for name in GROUP_CONFIGS}
        return cls(api_versions=api_versions, broker_version=data.get("broker_version"), **configs)


__all__ = [
    "BATCH_LEAVE_GROUP_VERSION",
    "CONSUMER_GROUP_HEARTBEAT",
    "GROUP_CONFIGS",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "STATIC_JOIN_GROUP_VERSION",
    "BrokerCapabilities",
]
