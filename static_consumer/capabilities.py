"""What the broker can do, and whether this consumer runs as a static member on it. Pure.

:func:`decide` is the capability gate: it turns the broker's ApiVersions and group configs (gathered by
``static_consumer._kafka.probe``) plus the settings into a :class:`StaticDecision`, or raises a
:class:`~static_consumer.errors.CapabilityError` when joining would fail anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from static_consumer.errors import (
    CapabilityError,
    ConfigurationError,
    SessionTimeoutOutOfBoundsError,
    StaticMembershipUnsupportedError,
)
from static_consumer.settings import ConsumerSettings

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


@dataclass(frozen=True)
class StaticDecision:
    """Whether to send group.instance.id, why, and what the operator should know."""

    static: bool
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def decide(settings: ConsumerSettings, caps: BrokerCapabilities) -> StaticDecision:
    """Apply ``settings.static_policy`` to the broker's capabilities.

    Raises CapabilityError when the join would fail whatever the policy (protocol='consumer' on a broker
    without KIP-848, a session timeout outside the broker's bounds), and StaticMembershipUnsupportedError
    under policy 'require' when the broker cannot do static membership. Raises ConfigurationError when
    ``release_max_wait_s`` is below the group's session + ``release_margin_s`` (protocol='consumer').
    """
    if settings.protocol == "consumer":
        return _decide_consumer_protocol(settings, caps)
    warnings = _check_session_bounds(settings, caps)
    if settings.static_policy == "dynamic":
        return StaticDecision(False, ("static_policy='dynamic'",), tuple(warnings))
    if not caps.supports_classic_static:
        max_version = caps.join_group_max_version
        lacks = (
            f"JoinGroup v{STATIC_JOIN_GROUP_VERSION} (broker max v{max_version})"
            if max_version is not None
            else "the JoinGroup API (api key 11) entirely"
        )
        if settings.static_policy == "require":
            raise StaticMembershipUnsupportedError(
                f"static membership needs {lacks}{_version_note(caps)}: upgrade the brokers to Kafka 2.3 or "
                "later, or set static_policy='warn' (fall back to dynamic) or 'dynamic'"
            )
        warnings.append(
            f"broker lacks {lacks}: running as a dynamic member, so every restart triggers a rebalance"
        )
        return StaticDecision(False, (f"broker lacks {lacks}",), tuple(warnings))
    reason = f"JoinGroup v{caps.join_group_max_version} >= v{STATIC_JOIN_GROUP_VERSION}"
    fix = "raise session_timeout_ms above the restart time"
    warnings.extend(_restart_warning("session_timeout_ms", settings.session_timeout_ms, settings, fix))
    return StaticDecision(True, (reason,), tuple(warnings))


def _decide_consumer_protocol(settings: ConsumerSettings, caps: BrokerCapabilities) -> StaticDecision:
    if not caps.supports_consumer_protocol:
        # Not a static-membership problem: no member of any kind can join, so no policy can help.
        raise CapabilityError(
            f"protocol='consumer' needs ConsumerGroupHeartbeat (api key {CONSUMER_GROUP_HEARTBEAT}, "
            f"Kafka 4.0+), which the broker does not offer{_version_note(caps)}; set protocol='classic'"
        )
    if settings.static_policy == "dynamic":
        return StaticDecision(False, ("static_policy='dynamic'",))
    warnings: list[str] = []
    timeout = caps.consumer_session_timeout_ms
    if timeout is None:
        warnings.append(
            "could not read the group's session timeout (the broker's group.consumer.session.timeout.ms "
            "or the group's consumer.session.timeout.ms); restart budget unchecked"
        )
    else:
        what = "the broker's group.consumer.session.timeout.ms"
        fix = f"raise {what} (or the group's consumer.session.timeout.ms)"
        warnings.extend(_restart_warning(what, timeout, settings, fix))
        _check_release_bound(settings, timeout)
    reason = f"ConsumerGroupHeartbeat (api key {CONSUMER_GROUP_HEARTBEAT}) supported"
    return StaticDecision(True, (reason,), tuple(warnings))


def _check_release_bound(settings: ConsumerSettings, session_ms: int) -> None:
    # A crashed member's instance id stays held for up to one session, and the wait for it judges a
    # holder after session + release_margin_s: a bound below that would give up on a restart that was
    # about to succeed (exit 75, and a restart that waits again).
    bound = settings.release_max_wait_s
    least = session_ms / 1000 + settings.release_margin_s
    if bound is not None and bound < least:
        raise ConfigurationError(
            f"release_max_wait_s (STATIC_CONSUMER_RELEASE_MAX_WAIT_S) is {bound:g}s, below the group's "
            f"session timeout ({session_ms / 1000:g}s) + release_margin_s ({settings.release_margin_s:g}s): "
            "after a crash the broker holds this member's instance id for up to a session, so the wait "
            f"would give up on a restart that was about to succeed; set it to at least {least:g}s or unset "
            f"it (default 3 x {least:g}s)"
        )


def _check_session_bounds(settings: ConsumerSettings, caps: BrokerCapabilities) -> list[str]:
    # The coordinator rejects a JoinGroup outside [min, max] with INVALID_SESSION_TIMEOUT, static or not,
    # so this is checked before (and regardless of) the static policy.
    low, high = caps.group_min_session_timeout_ms, caps.group_max_session_timeout_ms
    timeout = settings.session_timeout_ms
    if (low is not None and timeout < low) or (high is not None and timeout > high):
        raise session_out_of_bounds(settings, caps)
    if low is None or high is None:
        return [
            "could not read the broker's group.min/max.session.timeout.ms (the principal needs "
            "DESCRIBE_CONFIGS on the Cluster for that): session_timeout_ms is not checked before joining; "
            "a JoinGroup the broker refuses for it ends with SessionTimeoutOutOfBoundsError"
        ]
    return []


def session_out_of_bounds(
    settings: ConsumerSettings, caps: BrokerCapabilities | None, *, refused: str | None = None
) -> SessionTimeoutOutOfBoundsError:
    """The error for a ``session_timeout_ms`` outside the broker's group bounds: found by the gate from
    ``caps``, or ``refused`` by the coordinator (INVALID_SESSION_TIMEOUT; the bounds may then be unknown,
    because the principal could not read them)."""
    low = caps.group_min_session_timeout_ms if caps is not None else None
    high = caps.group_max_session_timeout_ms if caps is not None else None
    timeout = settings.session_timeout_ms
    names = "group.min.session.timeout.ms, group.max.session.timeout.ms"
    if low is not None and high is not None:
        bounds = f"the broker's bounds [{low}, {high}] ({names})"
    else:
        bounds = (
            f"the broker's bounds ({names}; unknown here, Kafka's defaults are [6000, 1800000]: grant "
            "DESCRIBE_CONFIGS on the Cluster to see them)"
        )
    what = (
        f"the group coordinator refused session_timeout_ms={timeout} ({refused})"
        if refused
        else (f"session_timeout_ms={timeout}")
    )
    return SessionTimeoutOutOfBoundsError(
        f"{what}: it is outside {bounds}. Set session_timeout_ms (STATIC_CONSUMER_SESSION_TIMEOUT_MS) "
        "within them, or change the broker configs; the same settings are refused at every restart"
    )


def _restart_warning(what: str, timeout_ms: int, settings: ConsumerSettings, fix: str) -> list[str]:
    restart = settings.expected_restart_ms
    if restart is None or timeout_ms >= restart:
        return []
    return [
        f"{what} ({timeout_ms} ms) is shorter than expected_restart_ms ({restart} ms): the broker will "
        f"expire a restarting member and rebalance; {fix}"
    ]


def _version_note(caps: BrokerCapabilities) -> str:
    return f" (broker looks like Kafka {caps.broker_version})" if caps.broker_version else ""


__all__ = [
    "CONSUMER_GROUP_HEARTBEAT",
    "GROUP_CONFIGS",
    "JOIN_GROUP",
    "LEAVE_GROUP",
    "BrokerCapabilities",
    "StaticDecision",
    "decide",
    "session_out_of_bounds",
]
