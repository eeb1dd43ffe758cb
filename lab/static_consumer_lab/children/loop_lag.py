"""A timer on the asyncio loop whose lateness says how long the loop could not run anything.

Used by the asyncio tests and ``bench/bench_async.py``: an ``AsyncStaticConsumer`` consuming at full rate
must leave the loop free, so a 10 ms timer beside it fires close to on time; a consume run on the loop
itself would hold the timer back for as long as the consume takes.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType


class LoopLag:
    """``async with LoopLag() as lag:`` ticks every ``tick_s`` on the running loop until the block ends;
    ``lag.worst`` is the worst lateness of a tick (seconds past its due time), ``lag.ticks`` the count."""

    def __init__(self, tick_s: float = 0.01) -> None:
        self.tick_s = tick_s
        self.worst = 0.0
        self.ticks = 0
        self._due = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            self._due = time.monotonic() + self.tick_s
            await asyncio.sleep(self.tick_s)
            self.worst = max(self.worst, time.monotonic() - self._due)
            self.ticks += 1

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._tick())
        await asyncio.sleep(0)  # the timer is running before the block starts
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._task is not None:
            # The tick due now counts too: a loop blocked until the block ended never ran it.
            self.worst = max(self.worst, time.monotonic() - self._due)
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass


__all__ = ["LoopLag"]
