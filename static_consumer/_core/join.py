"""Joining: what every join plan starts from (the local checks, then the broker's capabilities), the
plan itself, the client built from it, and what the coordinator still holds for this instance id.

The mode makes the plan (``Mode.plan``: ``_core/membership.py`` for a group member, ``_core/ordinal.py``
for an ordinal consumer); both start from :func:`prepare`. The client of the likely plan is built while
the gate asks the broker (``Session.connect``: librdkafka connects and reads the cluster's metadata
meanwhile), but nothing subscribes or assigns before the plan is made, so a consumer that cannot be static
(under policy 'require') never joins the group at all, and never sends a JoinGroup with an instance id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from static_consumer._base.errors import (
    ConfigurationError,
)
from static_consumer._core.events import HeldAssignment
from static_consumer._core.gate import StaticDecision
from static_consumer._core.identity import Identity, resolve_identity
from static_consumer._core.seams import Prober
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._security.tls import check_tls_files
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import ConfigValue

log = logging.getLogger(__name__)

HeldLookup = Callable[[], HeldAssignment | None]


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


def prepare(
    settings: ConsumerSettings,
    env: Mapping[str, str],
    probe: Prober,
    *,
    identity_optional: bool,
    group_overrides: bool = False,
    early: Callable[[Identity | None], object] | None = None,
) -> tuple[Identity | None, BrokerCapabilities]:
    """What every join plan starts from: :func:`check_locally`, then the broker's capabilities
    (``group_overrides``: the group's own KIP-848 settings too). ``early`` runs between the two, with the
    identity: it builds the client of the likely plan while the probe runs (``Session.connect``)."""
    identity = check_locally(settings, env, identity_optional=identity_optional)
    if early is not None:
        early(identity)
    return identity, probe(settings, group_overrides=group_overrides)


def check_locally(
    settings: ConsumerSettings, env: Mapping[str, str], *, identity_optional: bool
) -> Identity | None:
    """What a start checks before any network I/O, in this order: the topics, the identity (None only
    when ``identity_optional`` and the pod name gives none), the TLS files. A process pool checks the
    same once for its workers, before forking them."""
    if not settings.topics:
        raise ConfigurationError("topics is empty: set topics (STATIC_CONSUMER_TOPICS='a,b')")
    identity = _identity(settings, env, optional=identity_optional)
    check_tls_files(settings)  # a bad key or CA file fails here, named, before any client connects
    return identity


def _identity(settings: ConsumerSettings, env: Mapping[str, str], *, optional: bool) -> Identity | None:
    try:
        return resolve_identity(
            env,
            group_id=settings.group_id,
            explicit=settings.instance_id,
            template=settings.instance_id_template,
            allow_unstable=settings.allow_unstable_instance_id,
        )
    except ConfigurationError:
        if optional:
            return None
        raise


def held_lookup(settings: ConsumerSettings, instance_id: str | None) -> HeldLookup:
    """A once-only look-up of what the coordinator still holds for ``instance_id``; None for a dynamic
    member or on failure.

    A restarted process cannot tell from its own assignment whether its join made the group rebalance:
    librdkafka reports the same callbacks either way, and the generation it sees is only meaningful next
    to the one the group had before. What tells them apart is whether the broker still held the instance
    id (and which partitions) when the process came back: KIP-345 hands a held static member its old
    assignment without a new generation. The look-up runs only if a listener asks for it (telemetry
    does), so consumers without such a listener pay nothing.
    """
    answer: list[HeldAssignment | None] = []

    def lookup() -> HeldAssignment | None:
        if not answer:
            answer.append(None if instance_id is None else _ask(settings, instance_id))
        return answer[0]

    return lookup


def _ask(settings: ConsumerSettings, instance_id: str) -> HeldAssignment | None:
    from static_consumer._kafka.describe import describe_group  # a broker call: loaded only when asked

    try:
        group = describe_group(settings)
    except Exception as exc:  # noqa: BLE001 - an observability aid must never stop the consumer joining
        log.info("could not ask the group coordinator what it holds for %r: %s", instance_id, exc)
        return None
    member = group.member(instance_id)
    if member is None:
        return HeldAssignment(held=False, group_state=group.state)
    return HeldAssignment(held=True, partitions=member.assignment, group_state=group.state)


__all__ = [
    "HeldLookup",
    "JoinPlan",
    "check_locally",
    "held_lookup",
    "prepare",
]
