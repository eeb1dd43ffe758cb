"""The seeded fault schedule: which fault, on what, for how long, and the quiet time before it (pure).

``plan(seed, ...)`` draws from ``random.Random(seed)`` only, so one seed gives one schedule: a failed run
is replayed by its seed. Kinds are dealt from a shuffled deck (every kind once before any kind twice),
so even a short schedule has each kind.

Fault kinds (the targets are member names, broker node ids or an ACL):

- ``kill``: SIGKILL to a member; its pod restarts it ``duration_s`` (1 s) later, as a kubelet would;
- ``term``: SIGTERM to a member (a rollout, a drain); restarted ``duration_s`` after it exits;
- ``term2``: SIGTERM to two members at the same moment;
- ``pause``: SIGSTOP for ``duration_s``, under the session (20-60 % of it), then SIGCONT;
- ``long_pause``: SIGSTOP for ``duration_s``, past the session (130-160 % of it), then SIGCONT;
- ``broker_kill``, ``broker_term``: SIGKILL or SIGTERM to a broker, started again ``duration_s`` later
  (2-8 s); the target is ``coordinator`` (the group's coordinator at that moment) or a node id drawn;
- ``acl``: the member principal's READ on the ``group`` or on the ``topic`` revoked for ``duration_s``
  (5-12 s), then granted again.

How long a fault's effects may last (its window) is not the schedule's business: see ``windows.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

MEMBER_KINDS = ("kill", "term", "term2", "pause", "long_pause")
BROKER_KINDS = ("broker_kill", "broker_term")
PERMISSION_KINDS = ("acl",)
KINDS = MEMBER_KINDS + BROKER_KINDS + PERMISSION_KINDS
RESTART_DELAY_S = 1.0


@dataclass(frozen=True)
class Fault:
    """One planned fault. ``gap_s``: quiet time between the previous fault's window and this one."""

    index: int
    kind: str
    targets: tuple[str, ...]
    duration_s: float
    gap_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        return cls(**{**data, "targets": tuple(data["targets"])})


def plan(
    seed: int,
    *,
    members: Sequence[str],
    session_s: float,
    count: int,
    kinds: Sequence[str] = KINDS,
    nodes: int = 3,
    gap_s: tuple[float, float] = (5.0, 15.0),
    coordinator_share: float = 0.5,
) -> tuple[Fault, ...]:
    """``count`` faults drawn from ``random.Random(seed)``; the runner carries out as many as fit. A broker
    fault targets the coordinator with probability ``coordinator_share``, else a node drawn at random."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown or not kinds:
        raise ValueError(f"unknown fault kinds {unknown}: use some of {KINDS}")
    if "term2" in kinds and len(members) < 2:
        raise ValueError("term2 needs two members")
    rng = random.Random(seed)
    deck: list[str] = []
    faults = []
    for index in range(count):
        if not deck:
            deck = sorted(kinds)
            rng.shuffle(deck)
        kind = deck.pop()
        targets, duration = _draw(rng, kind, sorted(members), session_s, nodes, coordinator_share)
        faults.append(Fault(index, kind, targets, round(duration, 1), round(rng.uniform(*gap_s), 1)))
    return tuple(faults)


def _draw(
    rng: random.Random, kind: str, members: list[str], session_s: float, nodes: int, coordinator_share: float
) -> tuple[tuple[str, ...], float]:
    if kind in ("kill", "term"):
        return (rng.choice(members),), RESTART_DELAY_S
    if kind == "term2":
        return tuple(sorted(rng.sample(members, 2))), RESTART_DELAY_S
    if kind == "pause":
        return (rng.choice(members),), session_s * rng.uniform(0.2, 0.6)
    if kind == "long_pause":
        return (rng.choice(members),), session_s * rng.uniform(1.3, 1.6)
    if kind in BROKER_KINDS:
        target = "coordinator" if rng.random() < coordinator_share else str(rng.randint(1, nodes))
        return (target,), rng.uniform(2.0, 8.0)
    return (rng.choice(["group", "topic"]),), rng.uniform(5.0, 12.0)


__all__ = ["BROKER_KINDS", "KINDS", "MEMBER_KINDS", "PERMISSION_KINDS", "RESTART_DELAY_S", "Fault", "plan"]
