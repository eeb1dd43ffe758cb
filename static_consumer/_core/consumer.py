"""StaticConsumer: a confluent-kafka consumer that is a KIP-345 static member by default.

Data flows one way: settings -> identity -> capability gate -> librdkafka config -> adapter. The
consumer commits only what the application processed (at-least-once), commits on revoke, never after a
loss or a fence, and never sends LeaveGroup on ``close()``: a static member that left would make the
broker rebalance on every restart, which is the storm static membership exists to prevent.

This class is the public face of the core in ``static_consumer._core``: it holds one
:class:`~static_consumer._core.session.Session` and hands it to the phases (joining, ownership, the
poll path) and to the assignment mode (group membership or StatefulSet ordinal), which is where the
behaviour lives.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType

from static_consumer._base.errors import ConsumerClosedError, StaticConsumerError
from static_consumer._base.records import Record, RecordBatch, RecordList, TopicPartition
from static_consumer._core import ownership
from static_consumer._core.events import Closed, Dispatcher, MembershipEvent, MembershipListener
from static_consumer._core.join import JoinPlan
from static_consumer._core.modes import mode_for
from static_consumer._core.offsets import CommitFlight
from static_consumer._core.ownership import Commitable
from static_consumer._core.poll import (
    IN_FLIGHT_WAIT_S,
    accept,
    after_client_call,
    end_in_flight,
    hand_out,
    handle_error,
    replaced,
    take_buffered,
)
from static_consumer._core.seam import ConsumerAdapter, PollError
from static_consumer._core.seams import DEFAULT_SEAMS, Seams
from static_consumer._core.session import Session, State, Status
from static_consumer._core.stall import guard
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)


class StaticConsumer:
    """A Kafka consumer with a stable ``group.instance.id``, fail-fast fencing and at-least-once commits.

    ``env`` (default ``os.environ``, read once here) feeds identity resolution. ``seams``: how the
    consumer reaches Kafka and time (librdkafka, the broker calls, the clock), what unit tests replace.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        listeners: Sequence[MembershipListener] = (),
        env: Mapping[str, str] | None = None,
        seams: Seams = DEFAULT_SEAMS,
    ) -> None:
        self._session = Session(
            settings,
            env=dict(os.environ if env is None else env),
            dispatch=Dispatcher(listeners),
            mode=mode_for(settings),
            seams=seams,
            stop=threading.Event(),
        )

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> StaticConsumer:
        """Resolve the identity, run the capability gate (while the client connects), then join the group."""
        s = self._session
        if s.state is not State.NEW:
            self._require_usable()
            return self
        try:
            # The client is built while the gate runs (Session.connect); it subscribes only in join().
            s.plan = s.mode.plan(s)
            s.mode.join(s)
        finally:
            s.drop_early()  # a gate that refused (or a plan with another config) leaves it unused
        return self

    def __enter__(self) -> StaticConsumer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def stop(self) -> None:
        """Ask iteration and retry waits to end. Safe from signal handlers and other threads (no I/O)."""
        self._session.stop.set()

    @property
    def stopping(self) -> bool:
        return self._session.stop.is_set()

    # -- properties ----------------------------------------------------------------------------------

    @property
    def settings(self) -> ConsumerSettings:
        return self._session.settings

    @property
    def plan(self) -> JoinPlan | None:
        """Identity, broker capabilities and static decision, once started."""
        return self._session.plan

    @property
    def static(self) -> bool:
        """True when this consumer joins with a group.instance.id."""
        return self.instance_id is not None

    @property
    def instance_id(self) -> str | None:
        return self._session.instance_id

    @property
    def member_id(self) -> str | None:
        return self._session.member_id()

    @property
    def generation(self) -> int | None:
        """The group generation (classic) or member epoch (consumer protocol) last seen; None before."""
        return self._session.generation()

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return self._session.offsets.owned

    @property
    def checked_at(self) -> float:
        """The consumer's clock (``time.monotonic()`` unless another was given) when the stall guard
        last measured the time since the measurement before, which it does before any record goes out:
        after each client call on the poll path, and where records handed back earlier go out without
        one. What a call handed out was checked as of this instant; a pause after it (before or while
        the batch is processed) shows at the next call, and the batch's commit is refused if the
        partitions moved meanwhile (docs/semantics.md, pauses). 0.0 before the first call."""
        return self._session.stall.last_return

    @property
    def state(self) -> State:
        """Where the consumer is in its life (see :class:`State` for the transitions)."""
        return self._session.state

    def status(self) -> Status:
        """What the consumer is doing now (state, identity, assignment, ``ready`` only when RUNNING), for
        a health endpoint. It asks the client for the member id: call it where you consume (librdkafka
        serializes calls into one consumer, so from another thread it waits for a poll in progress)."""
        return self._session.status()

    # -- consuming -----------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> Record | None:
        """One record, or None when none arrived within ``timeout`` (or a non-fatal error was logged).

        Raises FencedInstanceError when another process took this instance id (or, under
        protocol='consumer', holds it and is alive), FatalConsumerError on other fatal errors, and any
        exception a listener raised. Under protocol='consumer' it can block up to the group's session
        timeout (plus ``release_margin_s``) while a crashed incarnation still holds the instance id.
        """
        adapter, s = self._require_usable(), self._session
        record = s.buffer.popleft() if s.buffer else None
        if record is None:
            item = adapter.poll(timeout)
            after_client_call(s, adapter, isinstance(item, Record))
            if replaced(s, adapter):
                item = None  # the replaced client's (poll.replaced)
            if isinstance(item, PollError):
                handle_error(s, item)
            else:
                record = item
        else:
            s.stall.returned(s.clock())  # handed back earlier: a freeze since is checked all the same
        if s.stall.checking:  # rare: a long gap before this call, or partitions disowned
            kept = guard(s, adapter, [record] if record is not None else [], 1)
            record = kept[0] if kept else None
        hand_out(s, [record] if record is not None else [])
        return record

    def consume(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        """Up to ``max_records`` records within ``timeout``; same errors as :meth:`poll`."""
        adapter, s = self._require_usable(), self._session
        records = take_buffered(s, max_records) if s.buffer else []
        if len(records) < max_records:
            items = adapter.consume(max_records - len(records), 0.0 if records else timeout)
            after_client_call(s, adapter, bool(items or records))
            if not records and isinstance(items, RecordList) and not replaced(s, adapter):
                records = items  # the adapter's list, with the highest offsets commit(records) needs
            else:
                accept(s, adapter, items, records)
        else:
            s.stall.returned(s.clock())  # handed back earlier: a freeze since is checked all the same
        if s.stall.checking:
            records = guard(s, adapter, records, max_records)
        hand_out(s, records)
        return records

    def consume_batch(self, max_records: int = 500, timeout: float = 1.0) -> RecordBatch:
        """:meth:`consume` as a :class:`RecordBatch`: the same Records (iterating the batch yields them)
        and their fields column by column, each column built when first read, for code that hands whole
        batches on; same errors as :meth:`poll`. ``commit(batch)`` commits it."""
        adapter, s = self._require_usable(), self._session
        if s.buffer:  # records given back after a listener error come first, as in consume()
            return RecordBatch.from_records(self.consume(max_records, timeout))
        got = adapter.consume_batch(max_records, timeout)
        after_client_call(s, adapter, len(got) > 0)
        if isinstance(got, RecordBatch) and not s.stall.checking and not replaced(s, adapter):
            hand_out(s, got)
            return got
        records = accept(s, adapter, got.records() if isinstance(got, RecordBatch) else got, [])
        if s.stall.checking:
            records = guard(s, adapter, records, max_records)
        hand_out(s, records)
        return RecordBatch.from_records(records)

    def _emit_event(self, make: Callable[..., MembershipEvent], **fields: object) -> None:
        """Deliver an event of the runners' (``make(**fields)`` with this member's identity fields) to
        the listeners, and re-raise a listener's exception (``static_consumer._core.recovery``)."""
        s = self._session
        s.dispatch.emit(make(**s.event_fields(), **fields))
        s.dispatch.raise_pending()

    def _retry_wait(self, seconds: float) -> None:
        """Wait ``seconds``, ending at once on :meth:`stop` (the runners' retry waits)."""
        self._session.sleep(seconds)

    def _give_back(self, records: Sequence[Record]) -> None:
        """Records handed out but never processed come first on the next call (``static_consumer.aio``:
        the task that awaited them was cancelled)."""
        self._session.give_back(records)

    def __iter__(self) -> Iterator[Record]:
        """Yield records until :meth:`stop` or close. A record counts as processed (committed by the
        next commit, revoke or close) once the loop body finished and the loop asks for the next one."""
        while not self.stopping and self._session.usable:
            record = self.poll(1.0)
            if record is not None:
                yield record
                self.mark_processed(record)

    # -- committing ----------------------------------------------------------------------------------

    def mark_processed(self, record: Record) -> None:
        """Note that ``record`` was processed; the next commit (or revoke, or close) commits it."""
        self._require_usable()
        ownership.mark(self._session, record)

    def commit(self, what: Commitable = None, *, asynchronous: bool = True) -> dict[TopicPartition, int]:
        """Commit processed offsets (``what`` None), a record, records or a RecordBatch (marked
        processed first), or explicit next-offsets. Never commits after a fence.

        By default the commit does not wait for the broker (librdkafka's asynchronous commit; its result
        is read in the next ``poll()``/``consume()``; at most one commit is in flight, a later one goes
        once that one's result was read, so offsets never go backwards). It returns what it returned when
        every commit waited: the offsets this call asks for that no earlier call did (``commit(batch)``:
        the batch's next offsets, plus those of records processed since the last commit), whether sent
        now or owed to the commit in flight; explicit offsets as given; an empty dict when nothing is
        new. A failure is raised by a later call: the next ``commit()`` raises a refused or retriable one
        as a synchronous commit would (``CommitFailedError``, ``RetriableError``), the next
        ``poll()``/``consume()`` a fence. A revoke, ``close()`` and ``leave_group()`` commit everything
        processed synchronously (the offsets in flight included), so a clean close leaves everything
        processed committed.

        ``asynchronous=False`` first waits (at most 5 s, serving the client on this thread; records it
        returns meanwhile come with the next call) for the result of the commit in flight, then sends
        every processed offset and waits for the broker's answer; it raises for a refused commit."""
        self._require_usable()
        return ownership.commit(
            self._session, what, asynchronous=asynchronous, end_in_flight=self._end_in_flight
        )

    def _end_in_flight(self) -> None:
        """Before a synchronous commit: the result of the commit in flight read first (bounded), so it
        cannot land after this one; records served meanwhile come first on the next call."""
        s = self._session
        adapter = s.adapter
        if adapter is None:
            return
        records = end_in_flight(s, adapter, IN_FLIGHT_WAIT_S)
        if records and s.stall.checking:
            records = guard(s, adapter, records, len(records))
        s.buffer.extend(records)

    # -- closing -------------------------------------------------------------------------------------

    def close(self, timeout_s: float | None = None) -> None:
        """Commit processed offsets and close, keeping a static member in the group (no LeaveGroup), so
        a restart within the session timeout gets the same partitions without a rebalance. Idempotent."""
        self._shutdown(leave=False, timeout_s=timeout_s)

    def leave_group(self, timeout_s: float | None = None) -> bool:
        """Commit, close and leave the group at once (scale-down), so the broker rebalances now rather
        than after the session timeout. Returns True when the member is known to be gone."""
        if self._session.state is State.CLOSED:
            raise ConsumerClosedError("the consumer is closed")
        return self._shutdown(leave=True, timeout_s=timeout_s)

    def _end_in_flight_on_close(self, adapter: ConsumerAdapter, bound_s: float) -> None:
        """close(): the commit in flight ends before the last synchronous commit; the records served
        meanwhile are not handed out (not processed, so not committed: the next owner reads them)."""
        s = self._session
        if s.commits.sent is None or not s.usable:
            return
        try:
            dropped = end_in_flight(s, adapter, bound_s)
        except StaticConsumerError as exc:  # a fence the result revealed: nothing more is committed
            log.warning("while closing: %s", exc)
            return
        if dropped:
            log.debug("closing: %d records fetched while the last commit ended, not handed out", len(dropped))

    def _shutdown(self, *, leave: bool, timeout_s: float | None) -> bool:
        s = self._session
        adapter = s.adapter
        if adapter is None:  # never started (or already closed)
            if s.state is not State.CLOSED:
                s.move(State.CLOSED)
            return False
        s.member_id()  # read it while the client is still open
        left = False
        if s.usable and s.state is not State.CLOSING:
            s.move(State.CLOSING)  # the last commit, the revoke callbacks and leaving run in CLOSING
        bound = s.settings.shutdown_timeout_s if timeout_s is None else timeout_s
        try:
            # Synchronously, on this thread, once the commit in flight ended (bounded): it covers it.
            began = s.clock()
            self._end_in_flight_on_close(adapter, min(IN_FLIGHT_WAIT_S, bound / 2))
            ownership.commit_quietly(s, None, "processed offsets on close")
            # Still usable while closing: the revoke callback that close() runs commits what a listener
            # marked processed in on_revoked.
            rest = max(bound - (s.clock() - began), bound / 2)
            left = s.mode.close(s, adapter, leave=leave, timeout_s=rest)
            return left
        finally:
            s.move(State.CLOSED)
            s.adapter = None
            s.offsets.clear()
            s.commits = CommitFlight()
            s.dispatch.emit(Closed(**s.event_fields(), left_group=left))
            log.info("closed (left group: %s)", left)
            s.dispatch.raise_pending()

    def _require_usable(self) -> ConsumerAdapter:
        s = self._session
        if s.usable and s.adapter is not None:
            return s.adapter
        if s.state is State.NEW:
            raise ConsumerClosedError("the consumer is not started: call start() or use it in a with block")
        if s.error is not None:
            raise type(s.error)(str(s.error))  # fenced/failed: the same error, every time
        raise ConsumerClosedError("the consumer is closed")

    def __del__(self) -> None:
        session = getattr(self, "_session", None)
        if session is not None and session.state not in (State.NEW, State.CLOSED):
            warnings.warn(
                f"StaticConsumer for group {session.settings.group_id!r} garbage-collected without close()",
                ResourceWarning,
                stacklevel=2,
            )


__all__ = ["Commitable", "Seams", "State", "StaticConsumer", "Status"]
