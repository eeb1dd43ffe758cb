"""From settings to a librdkafka config: identity, capability gate, static decision.

Runs before any librdkafka consumer exists, so a consumer that cannot be static (under policy
'require') never joins the group at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from static_consumer._config import ConfigValue, consumer_config
from static_consumer.capabilities import BrokerCapabilities, StaticDecision, decide
from static_consumer.errors import ConfigurationError
from static_consumer.identity import Identity, resolve_identity
from static_consumer.settings import ConsumerSettings

log = logging.getLogger("static_consumer.consumer")

Prober = Callable[[ConsumerSettings], BrokerCapabilities]


@dataclass(frozen=True)
class JoinPlan:
    """How this consumer joins: who it is, what the broker can do, and the resulting client config."""

    identity: Identity | None
    capabilities: BrokerCapabilities
    decision: StaticDecision
    # Holds the SASL/SSL secrets in clear (librdkafka needs them): kept out of the repr.
    config: dict[str, ConfigValue] = field(repr=False)

    @property
    def instance_id(self) -> str | None:
        value = self.config.get("group.instance.id")
        return value if isinstance(value, str) else None


def plan_join(settings: ConsumerSettings, env: Mapping[str, str], probe: Prober) -> JoinPlan:
    """Resolve the identity, probe the broker and apply the static policy. Logs the gate's warnings."""
    if not settings.topics:
        raise ConfigurationError("topics is empty: set topics (STATIC_CONSUMER_TOPICS='a,b')")
    identity = _identity(settings, env)
    caps = probe(settings)
    if settings.assignment_mode == "ordinal":
        # No group membership at all, so nothing static to decide and no session bounds to check. No
        # group.instance.id either: an OffsetCommit carrying one is fenced (fatally) whenever a member
        # with that id is in the group, and a non-member has no use for it.
        decision = StaticDecision(False, ("assignment_mode='ordinal': manual assignment, no group join",))
        log.info("consuming for group %r by ordinal, without joining it", settings.group_id)
        return JoinPlan(identity, caps, decision, consumer_config(settings, None))
    decision = decide(settings, caps)
    for warning in decision.warnings:
        log.warning("%s", warning)
    instance_id = identity.instance_id if decision.static and identity is not None else None
    log.info(
        "joining group %r as %s (protocol=%s; %s)",
        settings.group_id,
        f"static member {instance_id!r}" if instance_id else "a dynamic member",
        settings.protocol,
        "; ".join(decision.reasons),
    )
    return JoinPlan(identity, caps, decision, consumer_config(settings, instance_id))


def _identity(settings: ConsumerSettings, env: Mapping[str, str]) -> Identity | None:
    try:
        return resolve_identity(
            env,
            group_id=settings.group_id,
            explicit=settings.instance_id,
            template=settings.instance_id_template,
            allow_unstable=settings.allow_unstable_instance_id,
        )
    except ConfigurationError:
        if settings.static_policy == "dynamic" and settings.assignment_mode == "group":
            return None  # a dynamic member needs no instance id (ordinal mode needs the pod's ordinal)
        raise


__all__ = ["JoinPlan", "Prober", "plan_join"]
