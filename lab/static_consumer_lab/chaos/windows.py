"""A fault's window: the time its effects may last, over which the invariants excuse them (pure).

A fault's window runs from its start (the signal sent, the broker killed or stopped, the ACL revoked)
to its end (the member's new process started, SIGCONT sent, the broker answering again, the ACL
granted back) plus a settling time:

- ``kill``, ``long_pause``, ``acl``: one session plus ``grace_s``. These are the faults after which
  the group may wait out a session (a KIP-848 member killed keeps its partitions until its session
  expires unless its restart releases it, which the runs' ``restart_state_dir`` lets it do; a member
  paused past its session is expired, and taken over; a member that ended on a refused request left no
  commit and, under KIP-848, a held instance id), and the faults that may hand records out twice: the
  records a member handled and had not committed when it died, was expired or was refused.
- every other kind: ``grace_s`` (the member rejoins, the new coordinator loads the group).

The runner starts each fault only after the previous fault's window closed, so windows never overlap
and everything inside one belongs to that fault.
"""

from __future__ import annotations

from collections.abc import Iterable

from static_consumer_lab.chaos.evidence import Done

LINGERING = frozenset({"kill", "long_pause", "acl"})
DUPLICATING = LINGERING


def settle_s(kind: str, session_s: float, grace_s: float) -> float:
    return session_s + grace_s if kind in LINGERING else grace_s


def window(fault: Done, session_s: float, grace_s: float) -> tuple[float, float]:
    return fault.start, fault.end + settle_s(fault.kind, session_s, grace_s)


def containing(
    at: float, faults: Iterable[Done], session_s: float, grace_s: float, kinds: Iterable[str] | None = None
) -> Done | None:
    """The fault (of ``kinds``, or any) whose window holds ``at``; the latest one if several do."""
    wanted = None if kinds is None else set(kinds)
    found = None
    for fault in faults:
        if wanted is not None and fault.kind not in wanted:
            continue
        start, end = window(fault, session_s, grace_s)
        if start <= at <= end and (found is None or fault.start > found.start):
            found = fault
    return found


__all__ = ["DUPLICATING", "LINGERING", "containing", "settle_s", "window"]
