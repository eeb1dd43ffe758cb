"""Which :class:`~static_consumer._core.session.Mode` a consumer has: the one place that reads
``assignment_mode`` and ``protocol``.

- ``assignment_mode='group'``: a member of its group, :class:`~static_consumer._core.membership.ClassicMode`
  or :class:`~static_consumer._core.membership.ConsumerMode` by the group protocol;
- ``assignment_mode='ordinal'``: :class:`~static_consumer._core.ordinal.OrdinalMode`, which never joins
  (so the group protocol decides nothing for it).

The consumer and the core's phases call the mode and never ask which one it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from static_consumer._core.membership import ClassicMode, ConsumerMode
from static_consumer._core.session import Mode
from static_consumer.settings import ConsumerSettings

_MEMBERSHIP: Mapping[str, Callable[[], Mode]] = {"classic": ClassicMode, "consumer": ConsumerMode}


def mode_for(settings: ConsumerSettings) -> Mode:
    """The mode ``settings.assignment_mode`` (and, for a group member, ``settings.protocol``) asks for."""
    if settings.assignment_mode == "ordinal":
        # Imported here: its planner (assignors) and retry policies (tenacity) are not on a group
        # member's way to its first record.
        from static_consumer._core.ordinal import OrdinalMode

        return OrdinalMode()
    return _MEMBERSHIP[settings.protocol]()


__all__ = ["mode_for"]
