"""Membership events carried from the consumer's thread to the event loop, for ``async for``.

Listeners given to :class:`~static_consumer.aio.AsyncStaticConsumer` run on the consumer's thread inside
librdkafka's callbacks, exactly as for the sync consumer (their exceptions are re-raised from the
awaited call). :class:`EventStream` is the loop-side view: the event is put on each open stream with
``call_soon_threadsafe``, so a slow reader never delays a rebalance.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from static_consumer._core.events import (
    Closed,
    MembershipEvent,
    MembershipListener,
)

log = logging.getLogger(__name__)


class EventStream:
    """The events since it was opened, oldest first; ends after :class:`Closed`.

    Bounded (``maxsize``): when a reader falls that far behind, the oldest events are dropped with a
    warning rather than growing without end (the consumer's state stays readable through ``status()``).
    """

    def __init__(self, maxsize: int) -> None:
        self._queue: asyncio.Queue[MembershipEvent] = asyncio.Queue(maxsize)
        self._dropped = 0

    def put(self, event: MembershipEvent) -> None:
        """On the loop: keep ``event``, dropping the oldest one when the stream is full."""
        if self._queue.full():
            self._queue.get_nowait()
            self._dropped += 1
            log.warning("event stream full: dropped the oldest event (%d so far)", self._dropped)
        self._queue.put_nowait(event)

    def __aiter__(self) -> AsyncIterator[MembershipEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[MembershipEvent]:
        while True:
            event = await self._queue.get()
            yield event
            if isinstance(event, Closed):
                return


class LoopForwarder(MembershipListener):
    """A listener on the consumer's thread that hands every event to the loop's open streams."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop that started the consumer
        self.streams: list[EventStream] = []  # changed on the loop only

    def _forward(self, event: MembershipEvent) -> None:
        loop = self.loop
        if self.streams and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._deliver, event)

    def _deliver(self, event: MembershipEvent) -> None:
        for stream in self.streams:
            stream.put(event)
        if isinstance(event, Closed):  # the streams end with it
            self.streams.clear()

    def on_event(self, event: MembershipEvent) -> None:
        self._forward(event)


__all__ = ["EventStream", "LoopForwarder"]
