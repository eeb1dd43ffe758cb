"""The stall guard: no records from a session that may be gone.

A consumer process can stop running without knowing it: a stop-the-world GC, SIGSTOP, a frozen VM or
node. Its group session keeps counting on the broker, from the last heartbeat the broker received, and
once it expires another member takes the partitions. librdkafka (2.16) still holds the records it
fetched before the freeze and hands them out from the first consume after the wake-up, unless it noticed
the loss first (docs/semantics.md has the measurements):

- classic protocol: librdkafka keeps its own session clock (monotonic) and notices the expiry the first
  time its main thread runs after the wake-up, racing the application's consume call;
- consumer protocol (KIP-848): no client-side session clock; the loss is learned from the next heartbeat
  answer, one coordinator round trip after the wake-up at the earliest;
- records still queued when the loss is noticed are discarded (the partitions' versions move on), so
  stale records come only out of calls made between the wake-up and the detection.

librdkafka exposes neither the heartbeat age nor the member epoch, and its statistics trail the
detection, so the guard measures what the library sees itself: the gap between two returns from the
client on the poll path, or up to a hand-out of records given back earlier without one
(``StallWatch.returned``, one subtraction per call). After a gap over the
threshold, before any record goes out, it asks, cheapest first: did the client report the loss since the
gap; has it dropped its member id (classic, after its own session check); else does the broker accept a
commit of offsets already processed (the broker checks the member id and generation, or the member
epoch). When the member is gone it serves the client's callbacks, bounded, until the loss is reported,
and hands out only records of partitions still owned that were fetched after their last (re)assignment.
It never pauses partitions: librdkafka keeps an application pause across an unassign/assign, so a
partition paused here and assigned again would stay paused.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping

from static_consumer._base.codes import ErrorKind
from static_consumer._base.records import Record, TopicPartition
from static_consumer._core.events import Stalled, StallVerdict
from static_consumer._core.failures import die, scrubbed
from static_consumer._core.ownership import supersede
from static_consumer._core.poll import IN_FLIGHT_WAIT_S, accept, after_client_call, end_in_flight
from static_consumer._core.seam import AdapterError, ConsumerAdapter
from static_consumer._core.session import Session

log = logging.getLogger(__name__)

# Consumer protocol, when the probe could not read the broker's session timeout: assume a short one. A
# check that was not needed costs one commit round trip; a missed one hands out another member's records.
UNKNOWN_SESSION_MS = 6000
SERVE_S = 0.005  # one short client call while waiting for the client to report a loss
GONE_WAIT_S = 5.0  # the broker said gone: librdkafka reported the loss within 25 ms in every measured run
UNKNOWN_WAIT_S = 1.0  # no answer either way: wait this much (at most) for a loss before handing out

# How long to serve callbacks per verdict, given the threshold.
_WAIT: Mapping[StallVerdict, Callable[[float], float]] = {
    "ok": lambda _t: 0.0,
    "lost": lambda _t: 0.0,
    "gone": lambda t: min(GONE_WAIT_S, t),
    "unknown": lambda t: min(UNKNOWN_WAIT_S, t / 4),
}


def threshold_s(session_ms: float, heartbeat_ms: int | None = None) -> float:
    """The longest gap between client returns that is not checked, from the group session's timeout and,
    where the client knows it (classic), its heartbeat interval; the group mode says which they are.

    Half the session timeout, and at most three quarters of (session - heartbeat interval) when the
    interval is known (classic). Why: the broker counts the session from the last heartbeat it
    *received*, so a freeze of (session - heartbeat interval - a round trip) can already expire it
    (measured under KIP-848: taken over 12 s into a freeze with a 15 s session and 5 s heartbeats). With
    the usual heartbeat of at most a third of the session (librdkafka's classic default and this
    library's, KIP-848's 5 s of 45 s) both bounds give at most half the session, a quarter of
    (session - heartbeat) short of the earliest expiry: margin for the round trip and a late heartbeat on
    a busy host. A lower threshold only adds checks that were not needed (one commit round trip each,
    measured 1-5 ms); a higher one would miss expiries.
    """
    bound = session_ms / 2
    if heartbeat_ms is not None and heartbeat_ms < session_ms:
        bound = min(bound, (session_ms - heartbeat_ms) * 3 / 4)
    return bound / 1000


def waited(session: Session) -> None:
    """A wait of the core's own on the poll path ended: the member waited for its instance id (the
    KIP-848 release wait of ``rejoin.py``, or standing by in ``standby.py``). It owned no partition
    meanwhile (never assigned yet, or its partitions reported lost first) and its client was replaced,
    so no record fetched before the wait can go out: the time the wait took is no gap to check, and the
    guard measures from now (a gap found before the wait began is still checked). Measured from the call
    before the wait instead, every crash restart that waited out a session would be held back once and
    reported as a ``stalled`` event with verdict ``unknown`` (no answer: nothing committed yet), although
    the member only waited as designed."""
    session.stall.last_return = session.clock()


def guard(
    session: Session, adapter: ConsumerAdapter, records: list[Record], max_records: int
) -> list[Record]:
    """The records of the last client call that may go out; only called while ``stall.checking``.

    Records kept beyond ``max_records`` (more may arrive while callbacks are served) wait in the
    session's buffer for the next call.
    """
    watch = session.stall
    if watch.gone:
        _expire(session, adapter)
    if not records:
        return records  # a gap stays suspect until records arrive: those are the ones to check
    if watch.suspect_gap is not None:
        records = _settle(session, adapter, records, max_records)
    else:
        if watch.left_in == watch.calls:  # records handed back before a revoke may be of its partitions
            owned = session.offsets.owned
            records = [record for record in records if record.topic_partition in owned]
        if watch.gone:
            records = _drop_gone(session, records)
    if len(records) > max_records:
        session.buffer.extend(records[max_records:])
        records = records[:max_records]
    return records


def _settle(
    session: Session, adapter: ConsumerAdapter, records: list[Record], max_records: int
) -> list[Record]:
    watch, clock = session.stall, session.clock
    assert watch.suspect_gap is not None and watch.threshold_s is not None
    gap, watch.suspect_gap = watch.suspect_gap, None
    began, first = clock(), watch.calls
    held = [(first, record) for record in records]
    verdict = _verdict(session, adapter, held)
    bound = _WAIT[verdict](watch.threshold_s)
    deadline = began + bound
    for _ in range(math.ceil(bound / SERVE_S)):  # bounded also on a clock that stands still
        if _settled(session, verdict, first) or clock() >= deadline:
            break
        items = adapter.consume(max_records, SERVE_S)
        after_client_call(session, adapter)
        held.extend((watch.calls, record) for record in accept(session, adapter, items, []))
    owned = session.offsets.owned
    if verdict == "gone" and not _settled(session, verdict, first):
        # The broker said so and librdkafka has not yet: nothing of these partitions goes out until it
        # reports the loss (or a session timeout passes, see _expire).
        watch.gone.update(dict.fromkeys(owned - watch.gone.keys()))
        watch.gone_since = clock()
    # A record fetched before the last (re)assignment of its partition is from an earlier ownership;
    # librdkafka would have discarded it had it still been queued, and the re-assignment restarts from
    # the committed offset, so nothing is skipped by dropping it.
    kept = [
        record
        for call, record in held
        if record.topic_partition in owned
        and record.topic_partition not in watch.gone
        and call >= watch.touched.get(record.topic_partition, 0)
    ]
    dropped = len(held) - len(kept)
    if watch.gone:
        _drop_gone(session, [record for _, record in held])
        _drop_gone_buffered(session)
    waited = clock() - began
    level = logging.INFO if verdict == "ok" else logging.WARNING
    log.log(
        level,
        "%.1fs between client calls (threshold %.1fs): %s; %d of %d records held back, checked in %.3fs",
        gap,
        watch.threshold_s,
        _MEANING[verdict],
        dropped,
        len(held),
        waited,
    )
    session.dispatch.emit(
        Stalled(
            **session.event_fields(),
            gap_s=gap,
            threshold_s=watch.threshold_s,
            verdict=verdict,
            dropped=dropped,
            waited_s=waited,
        )
    )
    return kept


_MEANING: Mapping[StallVerdict, str] = {
    "ok": "the broker accepted a commit, still the owner",
    "lost": "the client reported the partitions lost",
    "gone": "the broker no longer knows this member or generation",
    "unknown": "no answer from the broker; records of partitions still owned handed out",
    "expired": "disowned partitions were not reported lost",
}


def _verdict(session: Session, adapter: ConsumerAdapter, held: list[tuple[int, Record]]) -> StallVerdict:
    watch = session.stall
    if watch.lost_in >= watch.suspect_call:
        return "lost"  # librdkafka noticed first (classic: its own session clock)
    if adapter.member_id() is None:
        return "gone"  # classic: librdkafka's session check already cleared the member id
    # Offsets the application may commit anyway: what it processed, else the last commit sent again.
    # The check is a synchronous commit on this thread: it covers the commit in flight, if any, once
    # that one ended (the records served meanwhile are held like the others).
    if session.commits.sent is not None and watch.threshold_s is not None:
        bound = min(IN_FLIGHT_WAIT_S, _WAIT["unknown"](watch.threshold_s))
        served = end_in_flight(session, adapter, bound)
        held.extend((watch.calls, record) for record in served)
        if session.adapter is not adapter or watch.lost_in >= watch.suspect_call:
            return "lost"
    offsets = session.offsets.pending() or session.offsets.last_committed()
    if not offsets:
        return "unknown"
    supersede(session)
    try:
        adapter.commit(offsets)
    except AdapterError as exc:
        if exc.error.fatal:
            # Fenced meanwhile (raises, nothing goes out), unless the fence was this client's own lost
            # session: then the client was replaced and its partitions reported lost.
            error = scrubbed(session.settings, exc.error)
            if not session.mode.recover(session, error):
                raise die(session, error) from None
            return "gone"
        # STALE_MEMBER_EPOCH or REBALANCE_IN_PROGRESS: still a member, its partitions may be moving.
        return "gone" if exc.error.kind is ErrorKind.MEMBER_GONE else "unknown"
    session.offsets.committed(offsets)
    return "ok"


def _settled(session: Session, verdict: StallVerdict, first: int) -> bool:
    """Whether the client reported what the verdict expects since call ``first``: for ``gone`` the loss
    (or a revoke of everything, classic ILLEGAL_GENERATION during a rebalance); else any revoke or loss."""
    watch = session.stall
    if verdict == "gone":
        return watch.lost_in > first or (watch.left_in > first and not session.offsets.owned)
    return watch.left_in > first


def _drop_gone(session: Session, records: list[Record]) -> list[Record]:
    """Drop records of disowned partitions, remembering the first offset dropped of each."""
    gone, kept = session.stall.gone, []
    for record in records:
        tp = record.topic_partition
        if tp not in gone:
            kept.append(record)
            continue
        first = gone[tp]
        if first is None or record.offset < first:
            gone[tp] = record.offset
    if len(kept) < len(records):
        log.debug("dropped %d records of partitions the broker disowned", len(records) - len(kept))
    return kept


def _drop_gone_buffered(session: Session) -> None:
    if session.buffer:
        kept = _drop_gone(session, list(session.buffer))
        session.buffer.clear()
        session.buffer.extend(kept)


def _expire(session: Session, adapter: ConsumerAdapter) -> None:
    """Disowned partitions the client never reported lost within a session timeout (twice the
    threshold, at least) are read again from the first record dropped: never skip a record of a
    partition still owned."""
    watch = session.stall
    assert watch.threshold_s is not None
    waited = session.clock() - watch.gone_since
    if waited <= 2 * watch.threshold_s:
        return
    owned = session.offsets.owned
    rewound: list[tuple[TopicPartition, int]] = []
    for tp, first in sorted(watch.gone.items()):
        if tp not in owned or first is None:
            continue
        try:
            adapter.seek(tp, first)
        except AdapterError as exc:
            log.error("could not rewind %s to %d (%s): its dropped records may be skipped", tp, first, exc)
            continue
        rewound.append((tp, first))
    watch.gone.clear()
    log.warning("%s after %.1fs; rewound %s", _MEANING["expired"], waited, rewound or "nothing")
    session.dispatch.emit(
        Stalled(
            **session.event_fields(),
            gap_s=waited,
            threshold_s=watch.threshold_s,
            verdict="expired",
            rewound=tuple(rewound),
        )
    )


__all__ = ["GONE_WAIT_S", "SERVE_S", "UNKNOWN_SESSION_MS", "UNKNOWN_WAIT_S", "guard", "threshold_s", "waited"]
