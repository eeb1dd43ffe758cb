"""What the table reports, defined once; :mod:`.tally` and :mod:`.recount` compute it independently.

The run's own tally (``tally``, a chronological replay of what the runner observed) and the recount from
the saved event files (``recount``, interval arithmetic over each incarnation's stream) share nothing but
these definitions and the :class:`Metrics` they fill in, so each checks the other.

Definitions. Each strategy's group is bounced on its own schedule, and its numbers are measured over its
own bounce window ``[w0, w1]`` (seconds since the epoch): from its first restart signal to the moment it
settled after its last restart (**window**, in seconds: a fast strategy's window is shorter, and its
steady state does not dilute its tail). An *incarnation* is one process of one member.

- its **stop** is its first ``signal`` event (TERM or KILL; none: never signalled); its **end** is its
  earliest ``exit``, ``reaped`` or KILL ``signal`` event, or, when it has none (it died without a word),
  its last event of any kind (``alive`` ticks keep that close to the real end);
- it **holds** a partition from an ``assigned`` event naming it (when not already holding it) until the
  first later ``revoked``/``lost`` naming it, or its end; membership events after its end are ignored.
  Events are taken in timestamp order, ties in file order; across incarnations ties go by name;
- **restarts** / **kills**: ``start`` / KILL ``signal`` events within the window;
- **rebalances**: generations (classic) or group epochs (KIP-848) the broker logged for the group within
  the window; None when the broker's log cannot be read (an external cluster);
- **live revocations**: ``revoked``/``lost`` events with partitions, within the window, of incarnations
  not yet stopped (their own shutdown does not count);
- **partition moves**: acquisitions (the start of a holding) within the window by a member other than
  the member of the partition's previous acquisition (a restarted member getting its own back is none);
- **unowned partition-seconds**: summed over partitions, the time within the window no incarnation held
  it; **longest unowned**: the longest single such stretch of one partition (both in seconds);
- **rebuilds** / **rebuild seconds**: partitions in ``rebuild`` events that started within the window,
  and the seconds those events took;
- a record's **first processing** is the earliest ``done_ms`` any incarnation reported for its
  (partition, offset); **latency** = first processing - producer timestamp (``created_ms``), over the
  records produced within the window (``int(w0 * 1000) <= created_ms <= int(w1 * 1000)``); p50 and p99
  are nearest-rank (the smallest value with at least that share of values at or below it);
- **max lag**: the largest, over milliseconds ``t`` in the window, of records produced by ``t`` minus
  records first processed by ``t``;
- **produced**: distinct records in the producer's delivery log (the whole run, the same topic for every
  strategy); **duplicated**: processings beyond the first of a record; **lost**: produced, never
  processed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

Event = Mapping[str, Any]


@dataclass(frozen=True)
class Metrics:
    window_s: float
    restarts: int
    kills: int
    rebalances: int | None
    live_revocations: int
    partition_moves: int
    unowned_s: float
    longest_unowned_s: float
    rebuilds: int
    rebuild_s: float
    latency_p50_ms: int | None
    latency_p99_ms: int | None
    latency_max_ms: int | None
    max_lag: int
    produced: int
    duplicated: int
    lost: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Metrics:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


def _count(value: object) -> str:
    return "n/a" if value is None else f"{value:,}"


def _seconds(value: object) -> str:
    return "n/a" if value is None else f"{value:.1f}"


# (field, label, format): the table's rows, in order.
ROWS: tuple[tuple[str, str, Callable[[object], str]], ...] = (
    ("window_s", "bounce window (its own), s", _seconds),
    ("restarts", "member restarts", _count),
    ("kills", "  of which hard kills (SIGKILL)", _count),
    ("rebalances", "rebalances (broker generations / epochs)", _count),
    ("live_revocations", "revocations in live members", _count),
    ("partition_moves", "partition moves", _count),
    ("unowned_s", "partition-s with no owner", _seconds),
    ("longest_unowned_s", "longest wait of one partition, s", _seconds),
    ("rebuilds", "state rebuilds (partitions)", _count),
    ("rebuild_s", "s spent rebuilding state", _seconds),
    ("latency_p50_ms", "end-to-end latency p50, ms", _count),
    ("latency_p99_ms", "end-to-end latency p99, ms", _count),
    ("latency_max_ms", "end-to-end latency max, ms", _count),
    ("max_lag", "max lag, records", _count),
    ("produced", "records produced (whole run)", _count),
    ("duplicated", "records processed twice", _count),
    ("lost", "records lost", _count),
)


def differences(a: Metrics, b: Metrics, *, tolerance_s: float = 1e-6) -> list[str]:
    """Fields on which two computations disagree (seconds compare within ``tolerance_s``)."""
    out = []
    for f in fields(Metrics):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=tolerance_s):
                out.append(f"{f.name}: {x} != {y}")
        elif x != y:
            out.append(f"{f.name}: {x} != {y}")
    return out
