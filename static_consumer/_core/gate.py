"""The capability gate: whether this consumer runs as a static member on this broker. Pure.

Each group mode's ``decide`` (``_core/membership.py``) turns the broker's ApiVersions and group configs
(``static_consumer._kafka.capabilities``, read by ``static_consumer._kafka.probe``) plus the settings into
a :class:`StaticDecision` through :func:`classic` or :func:`consumer`, or raises a
:class:`~static_consumer._base.errors.CapabilityError` when joining would fail anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from static_consumer._base.errors import (
    CapabilityError,
    ConfigurationError,
    SessionTimeoutOutOfBoundsError,
)
from static_consumer._core.policy import MembershipPolicy, PolicyFields
from static_consumer._kafka.capabilities import (
    CONSUMER_GROUP_HEARTBEAT,
    STATIC_JOIN_GROUP_VERSION,
    BrokerCapabilities,
)


@dataclass(frozen=True)
class StaticDecision:
    """Whether to send group.instance.id, why, and what the operator should know."""

    static: bool
    reasons: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


class GateFields(PolicyFields, Protocol):
    """The settings the gate reads (``ConsumerSettings`` has them)."""

    @property
    def session_timeout_ms(self) -> int: ...

    @property
    def expected_restart_ms(self) -> int | None: ...

    @property
    def release_margin_s(self) -> float: ...

    @property
    def release_max_wait_s(self) -> float | None: ...


def classic(settings: GateFields, caps: BrokerCapabilities) -> StaticDecision:
    """The gate of a classic-protocol member (``ClassicMode.decide``): the broker's session bounds first
    (a JoinGroup outside them is refused whether static or not), then JoinGroup v5 for an instance id.

    Raises SessionTimeoutOutOfBoundsError for a session timeout outside the broker's bounds, and
    StaticMembershipUnsupportedError under ``static_policy='require'`` on a broker without JoinGroup v5.
    """
    policy = MembershipPolicy.of(settings)
    warnings = _check_session_bounds(settings, caps)
    if not policy.static:
        return StaticDecision(False, (policy.why_dynamic,), tuple(warnings))
    if not caps.supports_classic_static:
        max_version = caps.join_group_max_version
        lacks = (
            f"JoinGroup v{STATIC_JOIN_GROUP_VERSION} (broker max v{max_version})"
            if max_version is not None
            else "the JoinGroup API (api key 11) entirely"
        )
        upgrade = "upgrade the brokers to Kafka 2.3 or later"
        warnings.append(policy.unsupported(lacks, _version_note(caps), upgrade))
        return StaticDecision(False, (f"broker lacks {lacks}",), tuple(warnings))
    reason = f"JoinGroup v{caps.join_group_max_version} >= v{STATIC_JOIN_GROUP_VERSION}"
    fix = "raise session_timeout_ms above the restart time"
    warnings.extend(_restart_warning("session_timeout_ms", settings.session_timeout_ms, settings, fix))
    return StaticDecision(True, (reason,), tuple(warnings))


def consumer(settings: GateFields, caps: BrokerCapabilities) -> StaticDecision:
    """The gate of a consumer-protocol (KIP-848) member (``ConsumerMode.decide``).

    Raises CapabilityError on a broker without ConsumerGroupHeartbeat (no member of any kind can join,
    so no policy helps), and ConfigurationError when ``release_max_wait_s`` is below the group's session
    + ``release_margin_s``.
    """
    if not caps.supports_consumer_protocol:
        raise CapabilityError(
            f"protocol='consumer' needs ConsumerGroupHeartbeat (api key {CONSUMER_GROUP_HEARTBEAT}, "
            f"Kafka 4.0+), which the broker does not offer{_version_note(caps)}; set protocol='classic'"
        )
    policy = MembershipPolicy.of(settings)
    if not policy.static:
        return StaticDecision(False, (policy.why_dynamic,))
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


def _check_release_bound(settings: GateFields, session_ms: int) -> None:
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


def _check_session_bounds(settings: GateFields, caps: BrokerCapabilities) -> list[str]:
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
    settings: GateFields, caps: BrokerCapabilities | None, *, refused: str | None = None
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


def _restart_warning(what: str, timeout_ms: int, settings: GateFields, fix: str) -> list[str]:
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
    "GateFields",
    "StaticDecision",
    "classic",
    "consumer",
    "session_out_of_bounds",
]
