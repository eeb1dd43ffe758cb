"""The poll path: what happens to each client call's results before records reach the application.

Errors are handled by kind (a fatal one ends the session or, for a held instance id, makes the mode
replace the client), out-of-band errors and the mode's own poll work run after every client call, and
records go out only after listener exceptions raised during the call were re-raised, with the records
handed back for the next call rather than skipped (a skipped record whose successors get committed
would be lost).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

from static_consumer._base.codes import TRANSPORT, ErrorKind
from static_consumer._base.records import Record, RecordBatch
from static_consumer._core.failures import check_token, die, ends_session, scrubbed
from static_consumer._core.ownership import pump, settle
from static_consumer._core.seam import ConsumerAdapter, PollError
from static_consumer._core.session import Session

log = logging.getLogger(__name__)

IN_FLIGHT_WAIT_S = 5.0  # how long a synchronous commit waits for the one in flight to end
SERVE_CALL_S = 0.005  # one short client call while waiting for it


def end_in_flight(session: Session, adapter: ConsumerAdapter, bound_s: float) -> list[Record]:
    """Before a synchronous commit: drive the client (short consume calls on this thread, which serve
    librdkafka's queue and so the on_commit result) until the result of the commit in flight was read,
    for at most ``bound_s``. librdkafka retries an OffsetCommit that met a retriable error; had the
    synchronous one been sent first, such a retry could land after it and move a committed offset back.
    No owed commit is sent meanwhile. Returns the records those calls returned, for the caller to keep
    (or drop when closing). Never from inside a rebalance callback (see docs/semantics.md)."""
    flight, watch = session.commits, session.stall
    held: list[tuple[int, Record]] = []
    if flight.sent is None or settle(session):
        return []
    clock = session.clock
    deadline = clock() + bound_s
    flight.holding = True
    try:
        for _ in range(math.ceil(bound_s / SERVE_CALL_S)):  # bounded also on a clock that stands still
            if flight.sent is None or session.adapter is not adapter or clock() >= deadline:
                break
            items = adapter.consume(500, SERVE_CALL_S)
            after_client_call(session, adapter)
            held.extend((watch.calls, record) for record in accept(session, adapter, items, []))
    finally:
        flight.holding = False
    if flight.sent is not None and session.adapter is adapter:
        log.warning(
            "the commit in flight did not end within %.1fs; committing synchronously without it (if "
            "librdkafka retries it later, a committed offset can move back: records delivered again)",
            bound_s,
        )
    # A revoke or loss while waiting: records of those partitions fetched before it are not ours (their
    # next owner, maybe this member again from the committed offset, reads them).
    owned = session.offsets.owned
    return [
        record
        for call, record in held
        if record.topic_partition in owned and call >= watch.touched.get(record.topic_partition, 0)
    ]


def after_client_call(session: Session, adapter: ConsumerAdapter, handed_out: bool = False) -> None:
    """The time of the return (for the stall guard), the mode's poll work, the errors the client
    reported out of band (librdkafka's error_cb), whether the client can still log in, then the commit
    in flight: its end read (a fatal failure raised), an owed commit sent (``handed_out``: the call
    returned records for the application; an owed commit then waits for its next ``commit()``)."""
    session.stall.returned(session.clock())
    session.mode.on_poll(session, adapter)
    for error in adapter.take_errors():
        handle_error(session, error)
    if session.tokens is not None:
        check_token(session)  # OAUTHBEARER: the last token expired while the provider kept failing
    commits = session.commits
    if commits.sent is not None or commits.owed or commits.failed is not None:
        pump(session, handed_out)


def handle_error(session: Session, error: PollError) -> bool:
    """Log a non-fatal error; raise for a fatal one. True when the mode replaced the client.

    The client's text is scrubbed here, where a client error enters the core from the poll path: what
    it says can reach a log record, an exception or an event. A fatal error ends the session unless the
    mode recovers by replacing the client (a held instance id under KIP-848, a classic client that lost
    its own session, a live duplicate under ``duplicate_policy='wait'``): FENCED_INSTANCE_ID becomes
    FencedInstanceError in ``failures.die``.
    """
    error = scrubbed(session.settings, error)
    if ends_session(error):
        # A refused protocol, a missing ACL and a refused session timeout are not fatal to librdkafka,
        # which sends the refused request again forever; nothing changes by waiting, so they end the
        # session too (with the error that says what to change).
        if not session.mode.recover(session, error):
            raise die(session, error)
        return True
    if error.kind is ErrorKind.MAX_POLL_EXCEEDED:
        log.warning(
            "%s: processing between polls took longer than max_poll_interval_ms=%d; %s. Raise it or "
            "process smaller batches",
            error.reason,
            session.settings.max_poll_interval_ms,
            (
                "its partitions are lost here and nothing is committed for them, but a static member "
                "sends no LeaveGroup: the broker keeps them for it until its session times out, so it "
                "gets them back without a rebalance when this poll came within session_timeout_ms of the "
                "expiry; otherwise the group has rebalanced and it rejoins"
            )
            if session.instance_id is not None
            else "the member left the group and its partitions will be reassigned",
        )
    elif error.code == TRANSPORT or error.kind is ErrorKind.UNREACHABLE:
        # A failed broker connection: librdkafka logs it too, and static_consumer.connections tells it.
        log.debug("kafka error %s: %s (still polling)", error.name, error.reason)
    elif error.kind is not ErrorKind.PARTITION_EOF and session.error_log.allow(error.code):
        log.warning("kafka error %s: %s (still polling)", error.name, error.reason)
    return False


def replaced(session: Session, adapter: ConsumerAdapter) -> bool:
    """Whether the work after a call into ``adapter`` replaced it. What that call returned is then the
    dead client's: its records belong to a session that ended (the new client reads them again from the
    committed offsets), and an error among them is one the replacement already answered (librdkafka
    reports one fence twice in one call: as the result of the commit in flight and as an item)."""
    return session.adapter is not adapter


def accept(
    session: Session, adapter: ConsumerAdapter, items: Sequence[Record | PollError], records: list[Record]
) -> list[Record]:
    """Append the records among ``items`` (what a call into ``adapter`` returned, its after-work done)
    to ``records``, handling the errors among them; nothing when that work replaced ``adapter``."""
    if replaced(session, adapter):
        return records
    if PollError not in map(type, items):  # the common case, checked without a Python loop
        records.extend(items)  # type: ignore[arg-type]  # all Records, checked just above
        return records
    for item in items:
        if isinstance(item, Record):
            records.append(item)
        elif handle_error(session, item):
            break  # the client was replaced; the rest of this batch came from the dead one
    return records


def hand_out(session: Session, records: list[Record] | RecordBatch) -> None:
    """Raise the first exception a listener raised during the client call, giving ``records`` back to
    the session's buffer (they come first on the next call); return normally when there is none."""
    pending = session.dispatch.take()
    if not pending:
        return
    if isinstance(records, RecordBatch):
        records = records.records()
    session.buffer.extendleft(reversed(records))
    for other in pending[1:]:
        pending[0].add_note(f"another listener also raised: {other!r}")
    raise pending[0]


def take_buffered(session: Session, max_records: int) -> list[Record]:
    """Up to ``max_records`` records handed back earlier, oldest first."""
    records: list[Record] = []
    while session.buffer and len(records) < max_records:
        records.append(session.buffer.popleft())
    return records


__all__ = [
    "IN_FLIGHT_WAIT_S",
    "accept",
    "after_client_call",
    "end_in_flight",
    "hand_out",
    "handle_error",
    "take_buffered",
]
