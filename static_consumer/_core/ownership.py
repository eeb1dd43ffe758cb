"""Owning partitions: rebalance callbacks, processed offsets and at-least-once commits.

The rebalance callbacks run inside the client's poll/consume/close. They never raise: listener
exceptions are collected by the dispatcher and re-raised by the consumer after the client call returns
(raising inside librdkafka's callback would leave the rebalance half done). Offsets are committed only
for records the application processed, only for partitions this member owns, and never once the session
is fenced or failed.

A commit does not wait for the broker unless asked to (``commit(asynchronous=False)``): the client
commits on a thread of its own while the application goes on (``ConsumerAdapter.begin_commit``). At most
one such commit is in flight (``CommitFlight``): a commit asked for meanwhile is owed and goes, with
everything processed by then, once the one in flight ended, so offsets never go backwards. What ends
one (:func:`settle`) is read after every client call on the poll path and by every commit; a failure is
raised by the next ``commit()``, a fatal one (a fence) by the poll path at once. Whatever commits
synchronously (a revoke, ``close()``, the stall guard, ``commit(asynchronous=False)``) waits for the
commit in flight first (:func:`barrier`), and a commit that ends after its partitions were lost counts for
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import NoReturn

from static_consumer._core.failures import recover_or_die, scrubbed
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError
from static_consumer._core.session import Session, State
from static_consumer.errors import RetriableError
from static_consumer.events import Assigned, Lost, Revoked
from static_consumer.types import Record, RecordBatch, RecordList, TopicPartition

log = logging.getLogger(__name__)

Commitable = Record | Sequence[Record] | RecordBatch | Mapping[TopicPartition, int] | None


def assigned(session: Session, partitions: list[TopicPartition]) -> None:
    """The client added ``partitions`` (the first call, even with none, means the member joined)."""
    if session.state in (State.JOINING, State.REJOINING):
        session.move(State.RUNNING)
    session.stall.touch(partitions)
    session.offsets.add(partitions)
    log.info("assigned %s", _names(partitions) or "no partitions")
    session.dispatch.emit(Assigned(**session.event_fields(), partitions=tuple(sorted(partitions))))


def revoked(session: Session, partitions: list[TopicPartition]) -> None:
    """An orderly revoke: listeners first (they may flush state and mark records processed), then
    commit while the partitions are still ours (eager rebalance: before the rejoin)."""
    session.dispatch.emit(Revoked(**session.event_fields(), partitions=tuple(sorted(partitions))))
    commit_quietly(session, partitions, f"offsets of revoked {_names(partitions)}")
    session.offsets.remove(partitions)
    _forget(session, partitions, lost=False)


def lost(session: Session, partitions: list[TopicPartition]) -> None:
    """Partitions lost without a rebalance (session timed out, max.poll.interval.ms exceeded)."""
    # Another member may own them already: never commit them. A commit in flight was sent while they were
    # ours (the broker takes or refuses it by the member's generation); its answer no longer counts for
    # them (OffsetTracker.committed), so there is nothing to wait for here.
    session.offsets.remove(partitions)
    _forget(session, partitions, lost=True)
    log.warning(
        "lost %s without committing (session timed out or max_poll_interval_ms exceeded); records "
        "processed since the last commit will be delivered again",
        _names(partitions),
    )
    session.dispatch.emit(Lost(**session.event_fields(), partitions=tuple(sorted(partitions))))


def mark(session: Session, record: Record) -> None:
    """Note that ``record`` was processed; the next commit (or revoke, or close) commits it."""
    if not session.offsets.mark(record):
        log.debug("ignoring processed %s@%d: partition not assigned", record.topic_partition, record.offset)


def commit(session: Session, what: Commitable, *, asynchronous: bool) -> dict[TopicPartition, int]:
    """Commit processed offsets (``what`` None), a record, records or a batch (marked processed first),
    or explicit next-offsets. Returns the offsets sent, or owed to the commit in flight (asynchronous).

    Asynchronous: raises the failure of a commit that ended since the last call (see the mode); an
    explicit-offsets commit waits for the one in flight before it is sent (they need not be higher).
    Synchronous: waits for the one in flight, then for the broker; raises for a refused commit."""
    adapter = session.adapter
    if adapter is None:
        raise RuntimeError("static_consumer bug: commit without a client")
    explicit = isinstance(what, Mapping)
    if isinstance(what, Mapping):
        offsets = dict(what)
    elif isinstance(what, RecordBatch | RecordList):  # they know their highest offsets
        _ignored(session.offsets.mark_highest(what.highest_offsets()))
    else:
        _ignored(session.offsets.mark_all([what] if isinstance(what, Record) else what or ()))
    flight = session.commits
    if asynchronous and _after_a_stall(session):
        asynchronous = False  # the member may have lost its partitions meanwhile: its answer, now
    if (not asynchronous or explicit) and not barrier(session, _settle_bound(session)):
        raise RetriableError(
            f"a commit sent earlier has not ended within {_settle_bound(session):.0f} s; try again"
        )
    refusal, flight.refusal = flight.refusal, None
    if asynchronous:
        settle(session)
        failed, flight.failed = flight.failed, None
        if failed is not None:
            _raise_failure(session, *failed)
        if refusal is not None:
            raise refusal
    else:
        flight.failed = None  # this commit sends those offsets again and reports its own outcome
    if not explicit:
        offsets = session.offsets.pending()
        if flight.sent is not None:  # sent already, owed only if newer
            offsets = {tp: o for tp, o in offsets.items() if flight.sent.get(tp) != o}
    if not offsets:
        return {}
    if asynchronous:
        if flight.sent is not None:
            flight.owed = True
            return offsets
        _begin(session, adapter, offsets)
        settle(session)  # one that ended at once (a fast broker, a fake client) is reported at once
        failed, flight.failed = flight.failed, None
        if failed is not None:
            _raise_failure(session, *failed)
        return offsets
    try:
        adapter.commit(offsets)
    except AdapterError as exc:
        _raise_failure(session, exc.error, offsets)
    session.offsets.committed(offsets)
    return offsets


def settle(session: Session, wait_s: float = 0.0) -> bool:
    """Read the end of the commit in flight, waiting up to ``wait_s``: a success counts as committed
    for the partitions still owned since it was sent; a failure is kept for the next ``commit()`` (its
    offsets stay pending: that commit, or close, sends them again). Never raises (it runs inside
    rebalance callbacks too). True when no commit is in flight any more."""
    flight = session.commits
    if flight.sent is None:
        return True
    if flight.client is not session.adapter:  # the client was replaced: its commit went with it
        flight.sent, flight.owed = None, False
        return True
    adapter = session.adapter
    result = None if adapter is None else adapter.commit_result(wait_s)
    if result is None:
        return False
    flight.sent = None
    if result.error is None:
        session.offsets.committed(result.offsets, sent_at=flight.sent_at)
        flight.failed = None  # what failed before went with this one
    else:
        flight.failed = (scrubbed(session.settings, result.error), result.offsets)
    return True


def pump(session: Session) -> None:
    """After each client call on the poll path: read the end of the commit in flight, raise a fatal
    failure at once (a fence found by a commit: nothing more is handed out), and send an owed commit."""
    flight = session.commits
    if flight.sent is not None:
        settle(session)
    if flight.failed is not None and flight.failed[0].fatal:  # ended here or in a callback's barrier
        error, offsets = flight.failed
        flight.failed = None
        recover_or_die(session, error, _no_other_errors)
        # The client was replaced (it had lost its own session): the next commit() says it was refused.
        flight.refusal = session.mode.commit_error(scrubbed(session.settings, error), offsets)
    if flight.owed and flight.sent is None and session.usable and session.adapter is not None:
        flight.owed = False
        offsets = session.offsets.pending()
        if offsets:
            _begin(session, session.adapter, offsets)


def barrier(session: Session, wait_s: float) -> bool:
    """Wait up to ``wait_s`` for the commit in flight to end (before a synchronous commit, which must not
    be overtaken by it); what it ended with is kept as :func:`settle` keeps it. False if it did not end."""
    if settle(session, wait_s):
        return True
    log.warning("a commit sent earlier did not end within %.1fs", wait_s)
    return False


def _begin(session: Session, adapter: ConsumerAdapter, offsets: Mapping[TopicPartition, int]) -> None:
    flight = session.commits
    adapter.begin_commit(offsets)
    flight.sent, flight.sent_at, flight.client, flight.owed = offsets, session.offsets.version, adapter, False


def _raise_failure(session: Session, error: PollError, offsets: Mapping[TopicPartition, int]) -> NoReturn:
    if error.fatal:
        # Raises unless the client was replaced (it had lost its own session): then the partitions
        # were reported lost and this commit is simply refused.
        recover_or_die(session, error, _no_other_errors)
    raise session.mode.commit_error(scrubbed(session.settings, error), offsets) from None


def _after_a_stall(session: Session) -> bool:
    """Whether this commit comes longer than the stall guard's threshold after the last client call
    returned (a handler that blocked, a paused process): then it waits for the broker, so that a refusal
    (the partitions moved meanwhile) is raised by this commit rather than the next."""
    watch = session.stall
    return watch.threshold_s is not None and session.clock() - watch.last_return > watch.threshold_s


def _settle_bound(session: Session) -> float:
    """How long a synchronous commit waits for the one in flight: librdkafka holds a commit while the
    group has no coordinator for at most the session timeout (rd_kafka_cgrp_defer_offset_commit)."""
    return session.settings.session_timeout_ms / 1000 + 1.0


def _ignored(partitions: list[TopicPartition]) -> None:
    if partitions:
        log.debug("ignoring processed records of partitions not assigned: %s", partitions)


def commit_quietly(
    session: Session, partitions: Sequence[TopicPartition] | None, what: str, wait_s: float | None = None
) -> None:
    """Commit processed offsets synchronously (after the commit in flight, waiting up to ``wait_s`` for
    it), logging (not raising) a failure: used where raising cannot help."""
    if not session.usable or session.adapter is None:
        return
    if not barrier(session, _settle_bound(session) if wait_s is None else wait_s):
        log.warning("not committing %s: their records will be delivered again", what)
        return
    offsets = session.offsets.pending(partitions)
    if not offsets:
        return
    try:
        session.adapter.commit(offsets)
    except AdapterError as exc:
        reason = scrubbed(session.settings, exc.error)
        log.warning(
            "could not commit %s (%s: %s); their records will be delivered again",
            what,
            reason.name,
            reason.reason,
        )
        return
    session.offsets.committed(offsets)


def _forget(session: Session, partitions: Sequence[TopicPartition], *, lost: bool) -> None:
    """Records of ``partitions`` handed back earlier are not ours to hand out any more: their next
    owner (maybe this member again, from the committed offset) reads them."""
    session.stall.touch(partitions, left=True, lost=lost)
    if session.buffer:
        gone = set(partitions)
        kept = [r for r in session.buffer if r.topic_partition not in gone]
        session.buffer.clear()
        session.buffer.extend(kept)


def _no_other_errors(error: PollError) -> None:
    log.warning("kafka error %s while replacing the client: %s", error.name, error.reason)


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(map(str, sorted(partitions)))


__all__ = [
    "Commitable",
    "assigned",
    "barrier",
    "commit",
    "commit_quietly",
    "lost",
    "mark",
    "pump",
    "revoked",
    "settle",
]
