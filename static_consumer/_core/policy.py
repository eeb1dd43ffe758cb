"""The membership policies a user picks in the settings, decided here and nowhere else.

- ``static_policy``: whether this member joins with a ``group.instance.id``, and what happens when the
  broker cannot do static membership: ``require`` refuses to start (StaticMembershipUnsupportedError),
  ``warn`` runs as a dynamic member and says so, ``dynamic`` never sends an instance id (and needs no
  pod name).
- ``duplicate_policy``: what a member does when a live process holds its instance id: ``exit`` ends with
  FencedInstanceError (exit 82), ``wait`` stands by without a client until the id is free
  (``_core/standby.py``).

What depends on the group protocol is decided by the mode (``_core/membership.py``); the phases ask the
policy, never the settings strings (``tests/architecture/test_core_tables.py`` holds the code to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from static_consumer._base.errors import StaticMembershipUnsupportedError

StaticPolicy = Literal["require", "warn", "dynamic"]
DuplicatePolicy = Literal["exit", "wait"]


class PolicyFields(Protocol):
    """The settings this module reads."""

    @property
    def static_policy(self) -> StaticPolicy: ...

    @property
    def duplicate_policy(self) -> DuplicatePolicy: ...


@dataclass(frozen=True, slots=True)
class MembershipPolicy:
    """``static_policy`` and ``duplicate_policy`` as decisions."""

    static_policy: StaticPolicy = "require"
    duplicate_policy: DuplicatePolicy = "exit"

    @classmethod
    def of(cls, settings: PolicyFields) -> MembershipPolicy:
        return cls(settings.static_policy, settings.duplicate_policy)

    @property
    def static(self) -> bool:
        """Whether the member joins with its instance id where the broker can do static membership (and
        so needs an identity: an explicit id, or the pod name)."""
        return self.static_policy != "dynamic"

    @property
    def why_dynamic(self) -> str:
        """The reason a member that is never static gives in its join plan."""
        return "static_policy='dynamic'"

    def unsupported(self, lacks: str, note: str, upgrade: str) -> str:
        """The broker ``lacks`` what static membership needs: under ``require`` raise, else the warning
        of a member that runs dynamic instead. ``note`` says what the broker looks like, ``upgrade``
        what to upgrade to."""
        if self.static_policy == "require":
            raise StaticMembershipUnsupportedError(
                f"static membership needs {lacks}{note}: {upgrade}, or set static_policy='warn' (fall back "
                "to dynamic) or 'dynamic'"
            )
        return f"broker lacks {lacks}: running as a dynamic member, so every restart triggers a rebalance"

    @property
    def stands_by(self) -> bool:
        """Whether a member whose instance id a live process holds waits for it (True) or exits (False)."""
        return self.duplicate_policy == "wait"


__all__ = ["DuplicatePolicy", "MembershipPolicy", "PolicyFields", "StaticPolicy"]
