"""AsyncStaticConsumer: the static member for asyncio code, driven on one dedicated thread.

Why one thread and not ``confluent_kafka.aio.AIOConsumer`` (docs/asyncio.md has the measured facts):
AIOConsumer sends each call to a pool of up to 100 threads and runs rebalance callbacks as coroutines
on the event loop while librdkafka's thread waits, so the core's synchronous callbacks (commit on
revoke, held-assignment look-up, the stall guard's bookkeeping) would need a second, async copy. Here a
:class:`~static_consumer.StaticConsumer` runs unchanged on a single worker thread: every librdkafka call,
rebalance callback, listener and membership decision happens on that thread, in the order the sync
consumer makes them, and the loop only awaits the futures. The loop is never blocked: a poll waits on
the worker, not on the loop.

Cancellation: a task cancelled while its fetch runs does not lose the fetch. The records go back to the
front of the consumer's buffer (on the worker, before any later fetch runs), so they are handed to the
next caller in order and nothing after them is committed first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, Generic, TypeVar, overload

from static_consumer._base.records import Record, RecordBatch, TopicPartition
from static_consumer._core.consumer import Commitable, State, StaticConsumer
from static_consumer._core.events import MembershipListener
from static_consumer._core.join import JoinPlan
from static_consumer._core.seams import DEFAULT_SEAMS, Seams
from static_consumer._core.session import Status
from static_consumer._core.shutdown import BatchCommitter
from static_consumer.aio._events import EventStream, LoopForwarder
from static_consumer.settings import ConsumerSettings

T = TypeVar("T")


class _FromSync(Generic[T]):
    """A read-only attribute of the same name of the sync consumer (``self._sync``)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _FromSync[T]: ...

    @overload
    def __get__(self, obj: AsyncStaticConsumer, owner: type) -> T: ...

    def __get__(self, obj: AsyncStaticConsumer | None, owner: type) -> _FromSync[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj._sync, self._name)
        return value


class AsyncStaticConsumer:
    """:class:`~static_consumer.StaticConsumer` for asyncio: the same settings, identity, capability
    gate, events and guarantees, with awaitable calls.

    ``listeners`` run on the consumer's thread inside librdkafka's callbacks, as with the sync consumer;
    :meth:`events` streams the same events on the loop. ``env`` and ``seams`` as for the sync consumer.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        listeners: Sequence[MembershipListener] = (),
        env: Mapping[str, str] | None = None,
        seams: Seams = DEFAULT_SEAMS,
    ) -> None:
        self._forwarder = LoopForwarder()
        self._sync = StaticConsumer(settings, listeners=[*listeners, self._forwarder], env=env, seams=seams)
        # One worker, kept for the consumer's life: librdkafka, the core and the listeners see one
        # thread, and calls run in the order they were awaited. It ends when this object is collected.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"static-consumer-{settings.group_id}")
        self._status = self._sync.status()  # refreshed on the worker after every call
        self._fetching = False

    # -- running calls on the consumer's thread -------------------------------------------------------

    def _job(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        finally:
            self._status = self._sync.status()  # the member id and generation ask the client: here

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the consumer's thread, awaited."""
        return await asyncio.wrap_future(self._thread.submit(self._job, fn, *args))

    async def _fetch(
        self,
        fn: Callable[[int, float], T],
        max_records: int,
        timeout: float,
        first: Callable[[], object] | None = None,
    ) -> T:
        """``fn(max_records, timeout)`` on the thread, after ``first()`` in the same job when given (the
        commit of the previous batch: one trip to the thread instead of two)."""
        if self._fetching:
            raise RuntimeError("another task is already awaiting a fetch from this consumer")
        self._fetching = True
        fetch = self._thread.submit(self._job, _then, first, fn, max_records, timeout)
        try:
            return await asyncio.wrap_future(fetch)
        except asyncio.CancelledError:
            # The worker runs jobs in order: this runs once the fetch is over, before any later fetch.
            self._thread.submit(self._job, self._give_back, fetch)
            raise
        finally:
            self._fetching = False

    def _give_back(self, fetch: Future[RecordBatch | list[Record]]) -> None:
        if fetch.cancelled() or fetch.exception() is not None:
            return  # never ran, or raised (records of a listener error are back in the buffer already)
        got = fetch.result()
        self._sync._give_back(got.records() if isinstance(got, RecordBatch) else got)

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> AsyncStaticConsumer:
        """Resolve the identity, run the capability gate, create the client and join (on the thread)."""
        self._forwarder.loop = asyncio.get_running_loop()
        await self._call(self._sync.start)
        return self

    async def __aenter__(self) -> AsyncStaticConsumer:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def stop(self) -> None:
        """Ask :meth:`batches` and retry waits to end. No I/O: safe from signal handlers and any thread."""
        self._sync.stop()

    async def close(self, timeout_s: float | None = None) -> None:
        """Commit processed offsets and close without LeaveGroup (see StaticConsumer.close). Runs after
        a call already on the thread; a cancelled await does not stop the close."""
        self.stop()  # retry waits in a call under way end now
        await self._call(self._sync.close, timeout_s)

    async def leave_group(self, timeout_s: float | None = None) -> bool:
        """Commit, close and leave the group at once (scale-down); see StaticConsumer.leave_group."""
        self.stop()
        return await self._call(self._sync.leave_group, timeout_s)

    # -- what it is doing ----------------------------------------------------------------------------

    # The sync consumer's own answers, read without a trip to its thread (no client call behind them).
    settings = _FromSync[ConsumerSettings]()
    plan = _FromSync[JoinPlan | None]()
    instance_id = _FromSync[str | None]()
    state = _FromSync[State]()
    stopping = _FromSync[bool]()

    @property
    def assignment(self) -> tuple[TopicPartition, ...]:
        """The partitions owned after the last call returned."""
        return self._status.assignment

    def status(self) -> Status:
        """What the consumer is doing, without waiting for the thread (a health endpoint can call it
        while a poll is under way): as of the last call that returned, with ``stopping`` as of now."""
        return dataclasses.replace(self._status, stopping=self._sync.stopping)

    def events(self, maxsize: int = 10_000) -> EventStream:
        """Membership events from now on, on the loop (``async for event in consumer.events()``); the
        stream ends after the ``Closed`` event."""
        stream = EventStream(maxsize)
        self._forwarder.streams.append(stream)
        return stream

    # -- consuming and committing --------------------------------------------------------------------

    async def consume_batch(self, max_records: int = 500, timeout: float = 1.0) -> RecordBatch:
        """Up to ``max_records`` as a :class:`RecordBatch` within ``timeout``; raises what
        StaticConsumer.consume_batch raises (FencedInstanceError when another process took the id)."""
        return await self._fetch(self._sync.consume_batch, max_records, timeout)

    async def consume(self, max_records: int = 500, timeout: float = 1.0) -> list[Record]:
        """Up to ``max_records`` records within ``timeout``, as a list of :class:`Record`."""
        return await self._fetch(self._sync.consume, max_records, timeout)

    async def batches(self, max_records: int = 500, timeout: float = 1.0) -> AsyncIterator[RecordBatch]:
        """Non-empty batches until :meth:`stop`; each is committed once the loop body finished with it
        (riding out commit failures while the coordinator moves, as ``run_until_sigterm`` does). A body
        that raises or breaks leaves its batch uncommitted."""
        committer = BatchCommitter(self._sync)
        commit: Callable[[], object] | None = None  # the last batch's, sent with the next fetch
        while not self.stopping:
            batch = await self._fetch(self._sync.consume_batch, max_records, timeout, commit)
            commit = None
            if len(batch):
                yield batch
                commit = functools.partial(committer.commit, batch)
        if commit is not None:
            await self._call(commit)

    async def commit(
        self, what: Commitable = None, *, asynchronous: bool = True
    ) -> dict[TopicPartition, int]:
        """Commit processed offsets, or ``what`` (records, a batch, offsets); see StaticConsumer.commit
        (by default it does not wait for the broker; ``asynchronous=False`` does)."""
        return await self._call(functools.partial(self._sync.commit, what, asynchronous=asynchronous))

    async def mark_processed(self, record: Record) -> None:
        """The next commit (or revoke, or close) commits ``record``."""
        await self._call(self._sync.mark_processed, record)


def _then(first: Callable[[], object] | None, fn: Callable[[int, float], T], n: int, timeout: float) -> T:
    if first is not None:
        first()
    return fn(n, timeout)


__all__ = ["AsyncStaticConsumer"]
