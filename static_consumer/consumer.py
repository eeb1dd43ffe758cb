"""StaticConsumer: a confluent-kafka consumer that is a KIP-345 static member by default.

Data flows one way: settings -> identity -> capability gate -> librdkafka config -> adapter. The
consumer commits only what the application processed (at-least-once), commits on revoke, never after a
loss or a fence, and never sends LeaveGroup on ``close()``: a static member that left would make the
broker rebalance on every restart, which is the storm static membership exists to prevent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from types import TracebackType
from typing import Any

from static_consumer import _probe
from static_consumer._adapter import MAX_POLL_EXCEEDED, PARTITION_EOF, ConfluentAdapter
from static_consumer._config import ConfigValue
from static_consumer._failures import RateLimiter, commit_error, is_fencing, is_unreleased, terminal_error
from static_consumer._held import held_lookup
from static_consumer._leave import (
    MemberRemover,
    left_after_close,
    remove_static_member,
    unsubscribe_and_serve_revoke,
)
from static_consumer._membership import Membership
from static_consumer._ordinal_mode import OrdinalAssignment, start_ordinal
from static_consumer._release import release_policy, wait_for_release
from static_consumer._seam import AdapterError, ConsumerAdapter, PollError, close_bounded
from static_consumer._startup import JoinPlan, Prober, plan_join
from static_consumer.errors import ConsumerClosedError, StaticConsumerError, UnreleasedInstanceIdError
from static_consumer.events import Closed, Dispatcher, FatalError, Fenced, Joining, MembershipListener
from static_consumer.settings import ConsumerSettings
from static_consumer.types import Record, RecordBatch, RecordList, TopicPartition

log = logging.getLogger(__name__)

AdapterFactory = Callable[[dict[str, ConfigValue]], ConsumerAdapter]
Commitable = Record | Sequence[Record] | RecordBatch | Mapping[TopicPartition, int] | None


class State(Enum):
    NEW = "new"
    RUNNING = "running"
    FENCED = "fenced"
    FAILED = "failed"
    CLOSED = "closed"


class StaticConsumer:
    """A Kafka consumer with a stable ``group.instance.id``, fail-fast fencing and at-least-once commits.

    ``env`` (default ``os.environ``, read once here) feeds identity resolution. ``adapter_factory``,
    ``probe``, ``remove_member``, ``sleep`` and ``clock`` are seams for tests.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        listeners: Sequence[MembershipListener] = (),
        env: Mapping[str, str] | None = None,
        adapter_factory: AdapterFactory | None = None,
        probe: Prober | None = None,
        remove_member: MemberRemover | None = None,
        sleep: Callable[[float], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._state = State.NEW
        self._settings = settings
        self._env = dict(os.environ if env is None else env)
        self._adapter_factory: AdapterFactory = adapter_factory or ConfluentAdapter
        self._probe: Prober = probe or _probe.probe
        self._remove_member: MemberRemover = remove_member or remove_static_member
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait  # interruptible by stop(), e.g. from a SIGTERM handler
        self._clock = clock
        self._dispatch = Dispatcher(listeners)
        self._membership = Membership(self._dispatch, self._event_fields, self._send_commit, self._running)
        self._buffer: deque[Record] = deque()
        self._limiter = RateLimiter(30.0, clock)
        self._adapter: ConsumerAdapter | None = None
        self._plan: JoinPlan | None = None
        self._terminal: StaticConsumerError | None = None
        self._member_id: str | None = None
        self._generation: int | None = None
        self._ordinal: OrdinalAssignment | None = None

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> StaticConsumer:
        """Resolve the identity, run the capability gate, then create the client and join the group."""
        if self._state is not State.NEW:
            self._require_running()
            return self
        self._plan = plan_join(self._settings, self._env, self._probe)
        self._adapter = self._new_adapter()
        self._state = State.RUNNING
        return self

    def _new_adapter(self) -> ConsumerAdapter:
        assert self._plan is not None
        adapter = self._adapter_factory(dict(self._plan.config))
        if self._settings.assignment_mode == "ordinal":
            self._assign_by_ordinal(adapter)
        else:
            # Announced before subscribe(): a listener may ask the broker what it holds for this id.
            lookup = held_lookup(self._settings, self.instance_id)
            protocol = self._settings.protocol
            self._dispatch.emit(Joining(**self._event_fields(), protocol=protocol, lookup_held=lookup))
            m = self._membership
            adapter.subscribe(
                self._settings.topics, on_assign=m.on_assign, on_revoke=m.on_revoke, on_lost=m.on_lost
            )
        return adapter

    def _assign_by_ordinal(self, adapter: ConsumerAdapter) -> None:
        """assignment_mode='ordinal': assign() this pod's slice (see _ordinal_mode); no join, no rebalance."""
        assert self._plan is not None
        seams = (self._clock, self._sleep, self._stop.is_set)
        self._ordinal = start_ordinal(adapter, self._settings, self._plan, self._membership, *seams)

    def __enter__(self) -> StaticConsumer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def stop(self) -> None:
        """Ask iteration and retry waits to end. Safe from signal handlers and other threads (no I/O)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- properties ----------------------------------------------------------------------------------

    @property
    def settings(self) -> ConsumerSettings:
        return self._settings

    @property
    def plan(self) -> JoinPlan | None:
        """Identity, broker capabilities and static decision, once started."""
        return self._plan

    @property
    def static(self) -> bool:
        """True when this consumer joins with a group.instance.id."""
        return self.instance_id is not None

    @property
    def instance_id(self) -> str | None:
        return self._plan.instance_id if self._plan is not None else None

    @property
    def member_id(self) -> str | None:
        if self._adapter is not None and self._state is State.RUNNING:
            self._member_id = self._adapter.member_id() or self._member_id
        return self._member_id

    @property
    def generation(self) -> int | None:
        """The group generation (classic) or member epoch (consumer protocol) last seen; None before."""
        if self._adapter is not None and self._state is State.RUNNING:
            generation = self._adapter.generation()
            self._generation = self._generation if generation is None else generation
        return self._generation

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return self._membership.offsets.owned

    @property
    def state(self) -> State:
        return self._state

    # -- consuming -----------------------------------------------------------------------------------

    def poll(self, timeout: float = 1.0) -> Record | None:
        """One record, or None when none arrived within ``timeout`` (or a non-fatal error was logged).

        Raises FencedInstanceError when another process took this instance id, FatalConsumerError on
        other fatal errors, and any exception a listener raised. Under protocol='consumer' it can block
        up to the broker session timeout while a previous incarnation still holds the instance id.
        """
        adapter = self._require_running()
        record = self._buffer.popleft() if self._buffer else None
        if record is None:
            item = adapter.poll(timeout)
            self._handle_out_of_band(adapter)
            if isinstance(item, PollError):
                self._handle_error(item)
            else:
                record = item
        self._raise_listener_errors([record] if record is not None else [])
        return record

    def consume(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        """Up to ``max_records`` records within ``timeout``; same errors as :meth:`poll`."""
        adapter = self._require_running()
        records: list[Record] = []
        while self._buffer and len(records) < max_records:
            records.append(self._buffer.popleft())
        if len(records) < max_records:
            items = adapter.consume(max_records - len(records), 0.0 if records else timeout)
            self._handle_out_of_band(adapter)
            if not records and isinstance(items, RecordList):
                records = items  # the adapter's list, with the highest offsets commit(records) needs
            else:
                self._accept(items, records)
        self._raise_listener_errors(records)
        return records

    def consume_batch(self, max_records: int = 500, timeout: float = 1.0) -> RecordBatch:
        """:meth:`consume` as a :class:`RecordBatch` (field by field, no object per record), for code
        that hands whole batches on; same errors as :meth:`poll`. ``commit(batch)`` commits it."""
        adapter = self._require_running()
        if self._buffer:  # records given back after a listener error come first, as in consume()
            return RecordBatch.from_records(self.consume(max_records, timeout))
        got = adapter.consume_batch(max_records, timeout)
        self._handle_out_of_band(adapter)
        if isinstance(got, RecordBatch):
            self._raise_listener_errors(got)
            return got
        records = self._accept(got, [])
        self._raise_listener_errors(records)
        return RecordBatch.from_records(records)

    def _accept(self, items: list[Record | PollError], records: list[Record]) -> list[Record]:
        """Append the records among ``items`` to ``records``, handling the errors among them."""
        if PollError not in map(type, items):  # the common case, checked without a Python loop
            records.extend(items)  # type: ignore[arg-type]  # all Records, checked just above
            return records
        for item in items:
            if isinstance(item, Record):
                records.append(item)
            elif self._handle_error(item):
                break  # the client was replaced; the rest of this batch came from the dead one
        return records

    def __iter__(self) -> Iterator[Record]:
        """Yield records until :meth:`stop` or close. A record counts as processed (committed by the
        next commit, revoke or close) once the loop body finished and the loop asks for the next one."""
        while not self._stop.is_set() and self._state is State.RUNNING:
            record = self.poll(1.0)
            if record is not None:
                yield record
                self.mark_processed(record)

    def _raise_listener_errors(self, records: list[Record] | RecordBatch) -> None:
        pending = self._dispatch.take()
        if not pending:
            return
        if isinstance(records, RecordBatch):
            records = records.records()
        # Give the records back on the next call rather than skip them (a skipped record whose
        # successors get committed would be lost).
        self._buffer.extendleft(reversed(records))
        for other in pending[1:]:
            pending[0].add_note(f"another listener also raised: {other!r}")
        raise pending[0]

    # -- errors --------------------------------------------------------------------------------------

    def _handle_out_of_band(self, adapter: ConsumerAdapter) -> None:
        if self._ordinal is not None:
            self._ordinal.refresh(adapter)  # picks up partitions added to the topics
        for error in adapter.take_errors():
            self._handle_error(error)

    def _handle_error(self, error: PollError) -> bool:
        """Log a non-fatal error; raise for a fatal one. True when the client was replaced."""
        if error.fatal:
            if is_unreleased(error) and self.static and not self._membership.ever_assigned:
                self._wait_for_release(error)
                return True
            raise self._die(error)
        if error.code == MAX_POLL_EXCEEDED:
            log.warning(
                "%s: the member left the group and its partitions will be reassigned; processing between "
                "polls took longer than max_poll_interval_ms=%d, raise it or process smaller batches",
                error.reason,
                self._settings.max_poll_interval_ms,
            )
        elif error.code != PARTITION_EOF and self._limiter.allow(error.code):
            log.warning("kafka error %s: %s (still polling)", error.name, error.reason)
        return False

    def _die(self, error: PollError) -> StaticConsumerError:
        """Mark the consumer dead after a fatal error and build the exception to raise."""
        fenced = is_fencing(error, after_join=self._membership.ever_assigned)
        exc = terminal_error(
            error, fenced=fenced, group_id=self._settings.group_id, instance_id=self.instance_id
        )
        self._state, self._terminal = (State.FENCED if fenced else State.FAILED), exc
        # Nothing may be committed any more: the partitions belong to the process that fenced us.
        self._membership.offsets.clear()
        self._buffer.clear()
        log.error("%s", exc)
        event = Fenced if fenced else FatalError
        self._dispatch.emit(event(**self._event_fields(), error=error.reason))
        return exc

    def _wait_for_release(self, error: PollError) -> None:
        try:
            wait_for_release(
                error,
                policy=release_policy(self._plan.capabilities if self._plan else None),
                rejoin=self._replace_adapter,
                joined=lambda: self._membership.ever_assigned,
                keep=self._buffer.append,
                handle=self._handle_error,
                sleep=self._sleep,
                should_stop=self._stop.is_set,
                group_id=self._settings.group_id,
                instance_id=self.instance_id,
                clock=self._clock,
            )
        except StaticConsumerError as exc:
            if self._state is State.RUNNING:
                self._state, self._terminal = State.FAILED, exc
            if isinstance(exc, UnreleasedInstanceIdError) and self._stop.is_set():
                log.info("stopped while waiting for the instance id to be released")
                return  # a requested shutdown is not an error; later calls raise it
            raise

    def _replace_adapter(self) -> ConsumerAdapter:
        old, self._adapter = self._adapter, None
        if old is not None:
            close_bounded(old, self._settings.shutdown_timeout_s, log)
        self._adapter = self._new_adapter()
        return self._adapter

    def _running(self) -> bool:
        return self._state is State.RUNNING

    def _require_running(self) -> ConsumerAdapter:
        if self._state is State.RUNNING and self._adapter is not None:
            return self._adapter
        if self._state is State.NEW:
            raise ConsumerClosedError("the consumer is not started: call start() or use it in a with block")
        if self._terminal is not None:
            raise type(self._terminal)(str(self._terminal))  # fenced/failed: the same error, every time
        raise ConsumerClosedError("the consumer is closed")

    def _event_fields(self) -> dict[str, Any]:
        return {
            "group_id": self._settings.group_id,
            "instance_id": self.instance_id,
            "member_id": self.member_id,
            "generation": self.generation,
        }

    # -- committing ----------------------------------------------------------------------------------

    def mark_processed(self, record: Record) -> None:
        """Note that ``record`` was processed; the next commit (or revoke, or close) commits it."""
        self._require_running()
        if not self._membership.offsets.mark(record):
            log.debug(
                "ignoring processed %s@%d: partition not assigned", record.topic_partition, record.offset
            )

    def commit(self, what: Commitable = None, *, asynchronous: bool = False) -> dict[TopicPartition, int]:
        """Commit processed offsets (``what`` None), a record, records or a RecordBatch (marked
        processed first), or explicit next-offsets. Returns the offsets sent. Never commits after a fence."""
        adapter = self._require_running()
        if isinstance(what, Mapping):
            offsets = dict(what)
        else:
            tracker = self._membership.offsets
            if isinstance(what, RecordBatch | RecordList):  # they know their highest offsets
                ignored = tracker.mark_highest(what.highest_offsets())
            else:
                ignored = tracker.mark_all([what] if isinstance(what, Record) else what or ())
            if ignored:
                log.debug("ignoring processed records of partitions not assigned: %s", ignored)
            offsets = self._membership.offsets.pending()
        if not offsets:
            return {}
        try:
            adapter.commit(offsets, asynchronous=asynchronous)
        except AdapterError as exc:
            if exc.error.fatal:
                raise self._die(exc.error) from None
            raise commit_error(exc.error, offsets, ordinal=self._ordinal is not None) from None
        if not asynchronous:
            self._membership.offsets.committed(offsets)
        return offsets

    def _send_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self._adapter is not None:
            self._adapter.commit(offsets)

    # -- closing -------------------------------------------------------------------------------------

    def close(self, timeout_s: float | None = None) -> None:
        """Commit processed offsets and close, keeping a static member in the group (no LeaveGroup), so
        a restart within the session timeout gets the same partitions without a rebalance. Idempotent."""
        self._shutdown(leave=False, timeout_s=timeout_s)

    def leave_group(self, timeout_s: float | None = None) -> bool:
        """Commit, close and leave the group at once (scale-down), so the broker rebalances now rather
        than after the session timeout. Returns True when the member is known to be gone."""
        if self._state is State.CLOSED:
            raise ConsumerClosedError("the consumer is closed")
        return self._shutdown(leave=True, timeout_s=timeout_s)

    def _shutdown(self, *, leave: bool, timeout_s: float | None) -> bool:
        was, adapter = self._state, self._adapter
        if adapter is None:
            self._state = State.CLOSED
            return False
        self._member_id = self.member_id  # read it while the client is still open
        left = False
        try:
            if was is State.RUNNING:
                self._membership.commit_quietly(None, "processed offsets on close")
                if leave and self.static and self._settings.protocol == "classic":
                    unsubscribe_and_serve_revoke(adapter, lambda: self._membership.offsets.owned)
            # Still RUNNING while closing: the revoke callback that close() runs commits what a listener
            # marked processed in on_revoked.
            close_bounded(adapter, self._settings.shutdown_timeout_s if timeout_s is None else timeout_s, log)
            running, ordinal = was is State.RUNNING, self._ordinal is not None
            left = left_after_close(
                self._settings, self.instance_id, self._remove_member, leave, running, ordinal
            )
            return left
        finally:
            self._state, self._adapter = State.CLOSED, None
            self._membership.offsets.clear()
            self._dispatch.emit(Closed(**self._event_fields(), left_group=left))
            log.info("closed (left group: %s)", left)
            self._dispatch.raise_pending()

    def __del__(self) -> None:
        if getattr(self, "_state", State.CLOSED) in (State.RUNNING, State.FENCED, State.FAILED):
            warnings.warn(
                f"StaticConsumer for group {self._settings.group_id!r} garbage-collected without close()",
                ResourceWarning,
                stacklevel=2,
            )


__all__ = ["AdapterFactory", "Commitable", "MemberRemover", "State", "StaticConsumer"]
