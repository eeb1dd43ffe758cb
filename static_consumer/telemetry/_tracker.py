"""What one member can tell from its own membership events: joins, rebalances, failed rebalances.

Pure (times come from the events, no I/O), shared by the OpenTelemetry listener and the event log so
that metrics and log always agree. Definitions, from this member's point of view (docs/observability.md):

- **join**: the first assignment of a new client. A *static rejoin* is a join of a static member whose
  instance id the broker still held, handed back the partitions it held: KIP-345's restart without a
  rebalance. Any other join of a group member makes the group rebalance (unless the group was empty).
- **rebalance**: an assignment received by a member that already had one, which either comes with a
  new generation or changes its partitions. Classic protocol: every eager revoke/assign round of a new
  generation. Consumer protocol: every reconciliation step that moves partitions of this member.
  A revoke/assign round that changes neither (a no-op reconciliation) is not one.
- **partitions moved**: the symmetric difference between the partitions before the round's first
  revoke (or loss) and after its assignment.
- **failed rebalance**: partitions lost (the member's generation was gone: session timeout,
  max.poll.interval exceeded), or a fence or fatal error while a join or rebalance was under way.
- Partitions revoked by ``close()`` are released, not rebalanced: they count with reason ``close``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from static_consumer._base.records import TopicPartition
from static_consumer._core.events import (
    Assigned,
    Closed,
    FatalError,
    Fenced,
    HeldAssignment,
    Joining,
    Lost,
    MembershipEvent,
    Revoked,
)

JoinKind = Literal["static_rejoin", "static_join", "dynamic_join", "manual", "unknown"]
JOIN_KINDS: tuple[JoinKind, ...] = ("static_rejoin", "static_join", "dynamic_join", "manual", "unknown")


@dataclass(frozen=True, slots=True)
class Join:
    """This member's first assignment. ``kind``: see the module docstring; ``manual`` when no join was
    announced (assignment without a group, e.g. ordinal mode), ``unknown`` when the broker's view of the
    instance id could not be looked up."""

    kind: JoinKind
    started_at: float
    at: float
    partitions: frozenset[TopicPartition]
    generation: int | None

    @property
    def duration_s(self) -> float:
        return max(0.0, self.at - self.started_at)


@dataclass(frozen=True, slots=True)
class Rebalance:
    """A rebalance this member went through, from its first revoke/loss to the new assignment."""

    started_at: float
    at: float
    before: frozenset[TopicPartition]
    after: frozenset[TopicPartition]
    previous_generation: int | None
    generation: int | None
    revoked: int
    lost: int

    @property
    def moved(self) -> int:
        return len(self.before ^ self.after)

    @property
    def duration_s(self) -> float:
        return max(0.0, self.at - self.started_at)


@dataclass(frozen=True, slots=True)
class Failed:
    """A failed rebalance: ``reason`` is ``lost``, ``fenced`` or ``fatal``."""

    at: float
    reason: Literal["lost", "fenced", "fatal"]


@dataclass(frozen=True, slots=True)
class Interrupted:
    """A join or rebalance that never got its assignment (closed, fenced or failed on the way)."""

    what: Literal["join", "rebalance"]
    started_at: float
    at: float
    reason: str
    revoked: int = 0


@dataclass(frozen=True, slots=True)
class Released:
    """Partitions revoked because the consumer closed (no rebalance: the member goes away)."""

    at: float
    partitions: int


Outcome = Join | Rebalance | Failed | Interrupted | Released


@dataclass
class _Round:
    """An open revoke/assign round."""

    started_at: float
    before: frozenset[TopicPartition]
    revoked: int = 0
    lost: int = 0
    failed: bool = False


class MembershipTracker:
    """Feed it every event in order (:meth:`observe`); it returns what each event completed.

    With ``look_up_held`` it calls :meth:`Joining.lookup_held` (broker I/O, cached and shared by all
    listeners of the consumer) to classify the join; without, static joins are of kind ``unknown``.
    """

    def __init__(self, *, look_up_held: bool = True) -> None:
        self._look_up = look_up_held
        self.protocol: str | None = None
        self.owned: set[TopicPartition] = set()
        self.generation: int | None = None
        self.last_rebalance_at: float | None = None
        self.closed = False
        self._joining: Joining | None = None
        self._held: HeldAssignment | None = None
        self._joined = False
        self._round: _Round | None = None

    @property
    def joined(self) -> bool:
        return self._joined

    @property
    def held(self) -> HeldAssignment | None:
        """What the broker held for the instance id before the current client joined (None: unknown)."""
        return self._held

    def observe(self, event: MembershipEvent) -> list[Outcome]:
        if isinstance(event, Joining):
            held = event.lookup_held() if self._look_up and event.instance_id is not None else None
            self.protocol, self._joining, self._held = event.protocol, event, held
            self._joined, self.closed, self._round = False, False, None
            self.owned.clear()
            return []
        if isinstance(event, Assigned):
            return self._assigned(event)
        if isinstance(event, Revoked):
            self._open(event.at).revoked += len(event.partitions)
            self.owned.difference_update(event.partitions)
            return []
        if isinstance(event, Lost):
            return self._lost(event)
        if isinstance(event, Fenced | FatalError):
            return self._died(event.at, "fenced" if isinstance(event, Fenced) else "fatal")
        if isinstance(event, Closed):
            return self._closed(event)
        return []

    # -- transitions ---------------------------------------------------------------------------------

    def _open(self, at: float) -> _Round:
        if self._round is None:
            self._round = _Round(started_at=at, before=frozenset(self.owned))
        return self._round

    def _assigned(self, event: Assigned) -> list[Outcome]:
        self.owned.update(event.partitions)
        after = frozenset(self.owned)
        previous = self.generation
        if event.generation is not None:
            self.generation = event.generation
        if not self._joined:
            self._joined, self._round = True, None
            started = self._joining.at if self._joining is not None else event.at
            return [Join(self._join_kind(after), started, event.at, after, event.generation)]
        round_, self._round = self._round, None
        if self._joining is None:
            return []  # manual assignment (no group): changes are the application's, not rebalances
        before = round_.before if round_ is not None else after - frozenset(event.partitions)
        new_generation = None not in (event.generation, previous) and event.generation != previous
        # Without a generation (a client that does not report one), a revoke/assign round is the evidence.
        unknown_generation = event.generation is None and round_ is not None
        if not (new_generation or before != after or unknown_generation):
            return []  # a no-op reconciliation: nothing moved, same generation
        self.last_rebalance_at = event.at
        return [
            Rebalance(
                started_at=round_.started_at if round_ is not None else event.at,
                at=event.at,
                before=before,
                after=after,
                previous_generation=previous,
                generation=event.generation,
                revoked=round_.revoked if round_ is not None else 0,
                lost=round_.lost if round_ is not None else 0,
            )
        ]

    def _join_kind(self, partitions: frozenset[TopicPartition]) -> JoinKind:
        if self._joining is None:
            return "manual"
        if self._joining.instance_id is None:
            return "dynamic_join"
        if self._held is None:
            return "unknown"
        if self._held.held and frozenset(self._held.partitions) == partitions:
            return "static_rejoin"
        return "static_join"

    def _lost(self, event: Lost) -> list[Outcome]:
        round_ = self._open(event.at)
        round_.lost += len(event.partitions)
        self.owned.difference_update(event.partitions)
        if round_.failed:
            return []
        round_.failed = True
        return [Failed(event.at, "lost")]

    def _died(self, at: float, reason: Literal["fenced", "fatal"]) -> list[Outcome]:
        out: list[Outcome] = []
        if self._round is not None or (self._joining is not None and not self._joined):
            if self._round is None or not self._round.failed:
                out.append(Failed(at, reason))
            out.append(self._interrupt(at, reason))
        self.owned.clear()
        return out

    def _closed(self, event: Closed) -> list[Outcome]:
        out: list[Outcome] = []
        round_ = self._round
        if round_ is not None and not round_.failed:
            # close() revoked them (or closed mid-round): the member goes away, nobody rebalances for it.
            out.append(Released(event.at, round_.revoked))
            self._round = None
        elif round_ is not None or (self._joining is not None and not self._joined):
            out.append(self._interrupt(event.at, "closed"))
        self.closed = True
        self.owned.clear()
        return out

    def _interrupt(self, at: float, reason: str) -> Interrupted:
        if self._round is not None:
            round_, self._round = self._round, None
            return Interrupted("rebalance", round_.started_at, at, reason, round_.revoked)
        self._joined = True  # nothing more to wait for
        started = self._joining.at if self._joining is not None else at
        return Interrupted("join", started, at, reason)


__all__ = [
    "JOIN_KINDS",
    "Failed",
    "Interrupted",
    "Join",
    "JoinKind",
    "MembershipTracker",
    "Outcome",
    "Rebalance",
    "Released",
]
