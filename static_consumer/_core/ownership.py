"""Owning partitions: rebalance callbacks, processed offsets and at-least-once commits.

The rebalance callbacks run inside the client's poll/consume/close. They never raise: listener
exceptions are collected by the dispatcher and re-raised by the consumer after the client call returns
(raising inside librdkafka's callback would leave the rebalance half done). Offsets are committed only
for records the application processed, only for partitions this member owns, and never once the session
is fenced or failed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from static_consumer._core.failures import ends_session, recover_or_die, scrubbed
from static_consumer._core.seam import AdapterError, PollError
from static_consumer._core.session import Session, State
from static_consumer._kafka.codes import name_of
from static_consumer.errors import CommitFailedError
from static_consumer.events import Assigned, CommitRefused, Lost, Revoked
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
    session.offsets.remove(partitions)  # another member may own them already: never commit them
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
    or explicit next-offsets. Returns the offsets sent; raises for a refused commit (see the mode)."""
    if session.adapter is None:
        raise RuntimeError("static_consumer bug: commit without a client")
    if isinstance(what, Mapping):
        offsets = dict(what)
    else:
        if isinstance(what, RecordBatch | RecordList):  # they know their highest offsets
            ignored = session.offsets.mark_highest(what.highest_offsets())
        else:
            ignored = session.offsets.mark_all([what] if isinstance(what, Record) else what or ())
        if ignored:
            log.debug("ignoring processed records of partitions not assigned: %s", ignored)
        offsets = session.offsets.pending()
    if not offsets:
        return {}
    try:
        session.adapter.commit(offsets, asynchronous=asynchronous)
    except AdapterError as exc:
        if ends_session(exc.error):
            # Raises unless the client was replaced (it had lost its own session): then the partitions
            # were reported lost and this commit is simply refused. A missing ACL (revoked while the
            # consumer ran) ends the session too: every later commit would be refused the same way.
            recover_or_die(session, exc.error, _no_other_errors)
        error = scrubbed(session.settings, exc.error)
        refusal = session.mode.commit_error(error, offsets)
        if isinstance(refusal, CommitFailedError):  # not a transient failure: said once, as an event
            refused = tuple(sorted(offsets.items()))
            name = error.name if error.cause is None else name_of(error.cause)  # a _FATAL says its cause
            session.dispatch.emit(
                CommitRefused(**session.event_fields(), offsets=refused, error=name, reason=error.reason)
            )
        raise refusal from None
    if not asynchronous:
        session.offsets.committed(offsets)
    return offsets


def commit_quietly(session: Session, partitions: Sequence[TopicPartition] | None, what: str) -> None:
    """Commit processed offsets, logging (not raising) a failure: used where raising cannot help."""
    offsets = session.offsets.pending(partitions)
    if not offsets or not session.usable or session.adapter is None:
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


__all__ = ["Commitable", "assigned", "commit", "commit_quietly", "lost", "mark", "revoked"]
