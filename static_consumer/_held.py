"""What the group coordinator still holds for an instance id, asked lazily just before a join.

A restarted process cannot tell from its own assignment whether its join made the group rebalance:
librdkafka reports the same callbacks either way, and the generation it sees is only meaningful next to
the one the group had before. What tells them apart is whether the broker still held the instance id
(and which partitions) when the process came back: KIP-345 hands a held static member its old
assignment without a new generation. The look-up runs only if a listener asks for it (telemetry does),
so consumers without such a listener pay nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from static_consumer.events import HeldAssignment
from static_consumer.settings import ConsumerSettings

log = logging.getLogger("static_consumer.consumer")

HeldLookup = Callable[[], HeldAssignment | None]


def held_lookup(settings: ConsumerSettings, instance_id: str | None) -> HeldLookup:
    """A once-only look-up of ``instance_id`` in the group; None for a dynamic member or on failure."""
    answer: list[HeldAssignment | None] = []

    def lookup() -> HeldAssignment | None:
        if not answer:
            answer.append(None if instance_id is None else _ask(settings, instance_id))
        return answer[0]

    return lookup


def _ask(settings: ConsumerSettings, instance_id: str) -> HeldAssignment | None:
    from static_consumer.admin import describe_group  # operator tooling: loaded only when asked

    try:
        group = describe_group(settings)
    except Exception as exc:  # noqa: BLE001 - an observability aid must never stop the consumer joining
        log.info("could not ask the group coordinator what it holds for %r: %s", instance_id, exc)
        return None
    member = group.member(instance_id)
    if member is None:
        return HeldAssignment(held=False, group_state=group.state)
    return HeldAssignment(held=True, partitions=member.assignment, group_state=group.state)


__all__ = ["HeldLookup", "held_lookup"]
