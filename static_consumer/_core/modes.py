"""Which :class:`~static_consumer._core.session.Mode` a consumer has: the one place that reads
``assignment_mode`` and ``protocol``.

- ``assignment_mode='group'``: a member of its group, :class:`~static_consumer._core.membership.ClassicMode`
  or :class:`~static_consumer._core.membership.ConsumerMode` by the group protocol;
- ``assignment_mode='ordinal'``: :class:`~static_consumer._core.ordinal.OrdinalMode`, which never joins
  (the group protocol gives its client the protocol's keys, nothing more).

The consumer and the core's phases call the mode and never ask which one it is; tools outside the core
(the pool, the ``check`` command, the benchmarks) ask it here too: :func:`decide`, :func:`client_config`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from static_consumer._core.gate import StaticDecision
from static_consumer._core.membership import ClassicMode, ConsumerMode, GroupMode
from static_consumer._core.session import Mode
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import ConfigValue

_MEMBERSHIP: Mapping[str, Callable[[], GroupMode]] = {"classic": ClassicMode, "consumer": ConsumerMode}


def group_mode(settings: ConsumerSettings) -> GroupMode:
    """The group membership of ``settings.protocol``."""
    return _MEMBERSHIP[settings.protocol]()


def mode_for(settings: ConsumerSettings) -> Mode:
    """The mode ``settings.assignment_mode`` (and, for a group member, ``settings.protocol``) asks for."""
    if settings.assignment_mode == "ordinal":
        # Imported here: its planner (assignors) and retry policies (tenacity) are not on a group
        # member's way to its first record.
        from static_consumer._core.ordinal import OrdinalMode

        return OrdinalMode(group_mode(settings))
    return group_mode(settings)


def decide(settings: ConsumerSettings, caps: BrokerCapabilities) -> StaticDecision:
    """The capability gate: whether a member of ``settings`` runs static on a broker of ``caps``.

    Raises CapabilityError when the join would fail whatever the policy (protocol='consumer' on a broker
    without KIP-848, a session timeout outside the broker's bounds), and StaticMembershipUnsupportedError
    under policy 'require' when the broker cannot do static membership. Raises ConfigurationError when
    ``release_max_wait_s`` is below the group's session + ``release_margin_s`` (protocol='consumer').
    """
    return group_mode(settings).decide(settings, caps)


def client_config(settings: ConsumerSettings, instance_id: str | None) -> dict[str, ConfigValue]:
    """The librdkafka config a consumer of ``settings`` runs with, for ``instance_id`` (None: dynamic)."""
    return group_mode(settings).client_config(settings, instance_id)


__all__ = ["client_config", "decide", "group_mode", "mode_for"]
