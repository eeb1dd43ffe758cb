"""Owning partitions: rebalance callbacks, processed offsets and at-least-once commits.

The rebalance callbacks run inside the client's poll/consume/close. They never raise: listener
exceptions are collected by the dispatcher and re-raised by the consumer after the client call returns
(raising inside librdkafka's callback would leave the rebalance half done). Offsets are committed only
for records the application processed, only for partitions this member owns, and never once the session
is fenced or failed.

Two commit paths, one function each:

- :func:`commit_async` (``commit()``'s default): librdkafka's own asynchronous commit
  (``ConsumerAdapter.begin_commit``), whose result the client hands back inside a later poll/consume of
  the consuming thread; :func:`settle` reads it after every client call on the poll path and in every
  commit. There is no thread of the library's own: confluent-kafka lets one thread at a time into a
  consumer handle, so a commit on another thread would wait for every poll in progress, and a revoke
  callback waiting for that commit inside a poll would never see it end. At most one commit is in flight
  (``CommitFlight``), because librdkafka sends an OffsetCommit again by itself after some errors (a
  coordinator that moved or is loading, a timeout, a dropped connection), possibly after a newer one
  went: two in flight could move a committed offset back. A commit asked for meanwhile is owed and goes,
  with everything processed by then, once that result was read: by the poll path at once, or, when the
  client call that served the result also handed out records, with the application's next ``commit()``
  (or after the next client call, if no ``commit()`` came first). An owed commit sent right after such a
  call would be answered while the application handles the records with no client call, so the next
  ``commit()`` would find it unread and owe again, and every later batch would go one call late for as
  long as records keep coming. The bound that gives: in the steady state a batch's offsets go with the
  ``commit()`` after it; while answers take longer than one ``consume()``, at the latest with the next
  batch's ``commit()`` (the committed offset then trails the last handled batch by at most two batches,
  for at most one ``consume()`` and one handler), and the first answer that comes within a ``consume()``
  restores the steady state. A failure is raised by the next ``commit()``, a fatal one (a fence) by the
  poll path at once.
- :func:`commit_sync`: whatever must know that its commit reached the broker (a revoke, ``close()``, the
  stall guard, ``commit(asynchronous=False)``) commits on the calling thread and waits. It sends every
  processed offset, those in flight included, so it supersedes the commit in flight, whose result then
  counts for nothing when it comes (:func:`supersede`). Outside a rebalance callback it first waits
  (bounded) for that result, driving the client (``poll.end_in_flight``; no owed commit goes meanwhile),
  so a retry of the one in flight cannot land after it. A revoke cannot: a poll nested in
  confluent-kafka's rebalance callback clears the call state the outer poll needs for its next callback.
  There, only such a retry (after a retriable error answer) could land after the revoke's commit, moving
  a committed offset back by less than a batch: records delivered again, never lost.

Both return the offsets this call asks for that no earlier call returned (``OffsetTracker.fresh``), not
everything sent or owed: a caller sees each offset once, whichever commit carries it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from static_consumer._base.codes import name_of
from static_consumer._base.errors import CommitFailedError, StaticConsumerError
from static_consumer._base.records import Record, RecordBatch, RecordList, TopicPartition
from static_consumer._core.events import Assigned, CommitRefused, Lost, Revoked
from static_consumer._core.failures import die, ends_session, scrubbed
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError
from static_consumer._core.session import Session, State

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
    # them (OffsetTracker.committed).
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


def commit(
    session: Session,
    what: Commitable,
    *,
    asynchronous: bool,
    end_in_flight: Callable[[], object] | None = None,
) -> dict[TopicPartition, int]:
    """Commit processed offsets (``what`` None), a record, records or a batch (marked processed first),
    or explicit next-offsets: :func:`commit_async` unless asked to wait, or unless waiting is the only
    safe way. Explicit offsets while a commit is in flight go synchronously (they need not be higher than
    the ones in flight, and must not be overtaken by them); so does a commit that comes longer than the
    stall guard's threshold after the last client call (the member may have lost its partitions
    meanwhile: its answer, now).

    Returns the offsets this call asks for that no earlier call returned (a batch's next offsets, and
    those of records processed since the last commit), whether they go now, are owed to the commit in
    flight, or go synchronously together with the offsets of the commit in flight; explicit offsets as
    given. Offsets of a commit that failed count as not asked for (the next call sends and returns them
    again)."""
    if session.adapter is None:
        raise RuntimeError("static_consumer bug: commit without a client")
    explicit: dict[TopicPartition, int] | None = None
    if isinstance(what, Mapping):
        explicit = dict(what)
    elif isinstance(what, RecordBatch | RecordList):  # they know their highest offsets
        _ignored(session.offsets.mark_highest(what.highest_offsets()))
    else:
        _ignored(session.offsets.mark_all([what] if isinstance(what, Record) else what or ()))
    if session.commits.sent is not None:
        settle(session)  # a result served by the last client call, not read yet
    stalled = _after_a_stall(session)
    if asynchronous and not stalled and (explicit is None or session.commits.sent is None):
        return commit_async(session, explicit)
    # Not after a stall: serving the client first would report the loss the stall may have caused and
    # hide the refusal this commit is there to raise; and the one in flight went over a stall threshold
    # ago, time librdkafka had to answer or retry it.
    return commit_sync(session, explicit, end_in_flight=None if stalled else end_in_flight)


def commit_async(
    session: Session, explicit: Mapping[TopicPartition, int] | None
) -> dict[TopicPartition, int]:
    """Send every processed offset (or ``explicit`` ones) without waiting for the broker.

    - Nothing in flight: the offsets go now, through librdkafka's asynchronous commit; its result is read
      after a later client call (:func:`settle`).
    - A commit in flight: this call's offsets are owed and go, with everything processed by then, once
      that result was read; explicit offsets never come here then (``commit`` sends them synchronously).
    - Raises, before sending anything, a failure that ends the session which an earlier commit met (a
      fence, a missing ACL); raises an earlier commit's refusal after this call's offsets were sent or
      owed all the same (``CommitFailedError``, ``RetriableError``)."""
    flight, tracker = session.commits, session.offsets
    adapter = _client(session)
    _raise_kept_failure(session)
    refusal, flight.refusal = flight.refusal, None
    if explicit is not None:
        offsets = fresh = dict(explicit)
    else:
        offsets, fresh = _pending(session)
        if flight.sent is not None:  # sent already, owed only if newer
            offsets = {tp: o for tp, o in offsets.items() if flight.sent.get(tp) != o}
    if offsets and flight.sent is not None:
        flight.owed = True
        tracker.ask(fresh)
    elif offsets:
        tracker.ask(fresh)
        owed = flight.owed
        _begin(session, adapter, offsets)
        flight.owed = owed and explicit is not None  # everything processed went, unless these were explicit
        settle(session)  # one that ended at once (a fake client) is reported at once
        _raise_kept_failure(session)
        refusal, flight.refusal = refusal or flight.refusal, None
    if refusal is not None:
        raise refusal
    return fresh


def commit_sync(
    session: Session,
    explicit: Mapping[TopicPartition, int] | None,
    *,
    end_in_flight: Callable[[], object] | None,
) -> dict[TopicPartition, int]:
    """Send every processed offset (or ``explicit`` ones) and wait for the broker's answer.

    ``end_in_flight`` first (it drives the client until the result of the commit in flight was read,
    bounded), so that librdkafka's retry of that one cannot land after this one; then this commit
    supersedes it: it covers the offsets in flight, whose result then counts for nothing. Raises a failure
    that ends the session which an earlier commit met, before sending anything, and this commit's own
    refusal (an earlier commit's refusal is not raised: this one sends those offsets again and reports its
    own outcome)."""
    flight, tracker = session.commits, session.offsets
    if flight.sent is not None and end_in_flight is not None:
        end_in_flight()  # may serve callbacks (a revoke, a fence raised by the poll path)
    adapter = _client(session)
    _raise_kept_failure(session)
    flight.refusal = None
    offsets, fresh = (dict(explicit), dict(explicit)) if explicit is not None else _pending(session)
    if offsets:
        supersede(session)
        try:
            adapter.commit(offsets)
        except AdapterError as exc:
            tracker.unask(offsets)
            _raise_failure(session, exc.error, offsets)
        tracker.committed(offsets)
    return fresh


def _client(session: Session) -> ConsumerAdapter:
    if session.adapter is None:
        raise RuntimeError("static_consumer bug: commit without a client")
    return session.adapter


def _pending(session: Session) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int]]:
    """Every processed offset not committed yet, and the part of it no earlier ``commit()`` returned."""
    flight, tracker = session.commits, session.offsets
    offsets = tracker.pending()
    # With no commit in flight or owed, nothing pending was returned before (a success is committed, a
    # failure un-asked): the common case skips the look-up.
    fresh = offsets if flight.sent is None and not flight.owed else tracker.fresh(offsets)
    return offsets, fresh


def _raise_kept_failure(session: Session) -> None:
    """Raise the failure that ends the session which an earlier commit met (a fence, a missing ACL)."""
    flight = session.commits
    if flight.failed is not None:
        failed, flight.failed = flight.failed, None
        _raise_failure(session, *failed)


def settle(session: Session) -> bool:
    """Read the result of the commit in flight, if the client has served it: a success counts as
    committed for the partitions still owned since it was sent; a failure is kept (:func:`_failed`; its
    offsets stay pending: the next commit, or close, sends them again); the result of a superseded
    commit counts for nothing. Never raises. True when no commit is in flight any more."""
    flight = session.commits
    if flight.sent is None:
        return True
    if flight.client is not session.adapter:  # the client was replaced: its commit went with it
        session.offsets.unask(flight.sent)
        flight.sent, flight.owed, flight.deferred, flight.superseded = None, False, False, False
        return True
    adapter = session.adapter
    result = None if adapter is None else adapter.commit_result()
    if result is None:
        return False
    flight.sent = None
    if flight.superseded:  # a synchronous commit sent its offsets, or newer ones, since
        flight.superseded = False
    elif result.error is None:
        session.offsets.committed(result.offsets, sent_at=flight.sent_at)
        flight.refusal = None  # what failed before went with this one
    else:
        _failed(session, result.error, result.offsets)
    return True


def _failed(session: Session, error: PollError, offsets: Mapping[TopicPartition, int]) -> None:
    """Keep the failure of a commit that did not wait: one that ends the session (a fence, a missing
    ACL) for the poll path or the next commit to raise; any other is said now (a refusal is a
    ``CommitRefused`` event at once) and raised by the next ``commit()``."""
    error = scrubbed(session.settings, error)
    session.offsets.unask(offsets)  # sent (and returned) again by the next commit
    if ends_session(error):
        session.commits.failed = (error, offsets)
    else:
        session.commits.refusal = _refusal(session, error, offsets)


def supersede(session: Session) -> None:
    """Before a synchronous commit of every processed offset: the commit in flight (if any) is covered
    by it, so its result, when the client serves it, counts for nothing (a failure of it is not raised
    either). It still counts as in flight until then: nothing asynchronous is sent before."""
    flight = session.commits
    if flight.sent is not None:
        flight.superseded = True


def pump(session: Session, handed_out: bool = False) -> None:
    """After each client call on the poll path: read the result of the commit in flight, send an owed
    commit, and raise a failure that ends the session at once (a fence found by a commit: nothing more
    is handed out). ``handed_out``: the call returned records for the application; an owed commit then
    waits for the application's next ``commit()``, or the next client call if none came first (see the
    module docstring)."""
    flight = session.commits
    if flight.sent is not None:
        settle(session)
    if (
        flight.owed
        and flight.sent is None
        and not flight.holding
        and flight.failed is None
        and session.usable
    ):
        if handed_out and not flight.deferred:
            flight.deferred = True  # the application's next commit() sends it, with that batch's offsets
        else:
            flight.owed = flight.deferred = False
            owed = session.offsets.pending()
            if owed and session.adapter is not None:
                _begin(session, session.adapter, owed)
    if flight.failed is not None:
        error, offsets = flight.failed
        flight.failed = None
        _recover_or_die(session, error)
        # The client was replaced (it had lost its own session): the next commit() says it was refused.
        flight.refusal = _refusal(session, error, offsets)


def _begin(session: Session, adapter: ConsumerAdapter, offsets: Mapping[TopicPartition, int]) -> None:
    """Send ``offsets`` without waiting; a client that refuses at once (a fence it knows of already)
    leaves the failure for the caller to raise."""
    flight = session.commits
    try:
        adapter.begin_commit(offsets)
    except AdapterError as exc:
        _failed(session, exc.error, dict(offsets))
        return
    flight.sent, flight.sent_at, flight.client = offsets, session.offsets.version, adapter
    flight.owed = flight.deferred = flight.superseded = False


def _raise_failure(session: Session, error: PollError, offsets: Mapping[TopicPartition, int]) -> NoReturn:
    if ends_session(error):
        # Raises unless the client was replaced (it had lost its own session): then the partitions
        # were reported lost and this commit is simply refused. A missing ACL (revoked while the
        # consumer ran) ends the session too: every later commit would be refused the same way.
        _recover_or_die(session, scrubbed(session.settings, error))
    raise _refusal(session, error, offsets) from None


def _refusal(
    session: Session, error: PollError, offsets: Mapping[TopicPartition, int]
) -> StaticConsumerError:
    """The exception for a failed commit; a refusal (not a transient failure) is said once, as an event."""
    error = scrubbed(session.settings, error)
    refusal = session.mode.commit_error(error, offsets)
    if isinstance(refusal, CommitFailedError):
        refused = tuple(sorted(offsets.items()))
        name = error.name if error.cause is None else name_of(error.cause)  # a _FATAL says its cause
        session.dispatch.emit(
            CommitRefused(**session.event_fields(), offsets=refused, error=name, reason=error.reason)
        )
    return refusal


def _after_a_stall(session: Session) -> bool:
    """Whether this commit comes longer than the stall guard's threshold after the last client call
    returned (a handler that blocked, a paused process): then it waits for the broker, so that a refusal
    (the partitions moved meanwhile) is raised by this commit rather than the next."""
    watch = session.stall
    return watch.threshold_s is not None and session.clock() - watch.last_return > watch.threshold_s


def _ignored(partitions: list[TopicPartition]) -> None:
    if partitions:
        log.debug("ignoring processed records of partitions not assigned: %s", partitions)


def commit_quietly(session: Session, partitions: Sequence[TopicPartition] | None, what: str) -> None:
    """Commit processed offsets synchronously on the calling thread (superseding the commit in flight),
    logging (not raising) a failure: used where raising cannot help (a revoke, close)."""
    if not session.usable or session.adapter is None:
        return
    settle(session)  # a result served already counts
    offsets = session.offsets.pending(partitions)
    if not offsets:
        return
    supersede(session)
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


def _recover_or_die(session: Session, error: PollError) -> None:
    """A commit met a failure that ends the session: return when the mode recovered by replacing the
    client (a classic client that had lost its own session), else end the session and raise."""
    if not session.mode.recover(session, error):
        raise die(session, error)


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(map(str, sorted(partitions)))


__all__ = [
    "Commitable",
    "assigned",
    "commit",
    "commit_async",
    "commit_quietly",
    "commit_sync",
    "lost",
    "mark",
    "pump",
    "revoked",
    "settle",
    "supersede",
]
