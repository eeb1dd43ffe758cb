"""The asyncio runner's handler failures: the same steps as the sync runners
(``static_consumer._core.recovery``), carried out with awaits. The handler runs on the loop; the events,
the dead-letter writes and the commits run on the consumer's thread, like everything that touches it.

A batch the handler took whole is committed by ``AsyncStaticConsumer.batches()`` as before; when the
runner stops part-way, :meth:`AsyncFailureHandling.handle` commits the records settled before the
failing one and raises (the policy's error, or :class:`Interrupted` for a stop during the retries), so
``batches()`` does not commit the batch.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence

from static_consumer._base.records import Record, RecordBatch
from static_consumer._core.recovery.attempts import Call, Outcome, Settle, Step, Wait, attempts
from static_consumer._core.recovery.policy import OnFailure
from static_consumer._core.recovery.runner import DeadLettersFactory, Recovery
from static_consumer._core.shutdown import BatchCommitter
from static_consumer.aio.consumer import AsyncStaticConsumer

AsyncHandler = Callable[[RecordBatch], Awaitable[object] | object]
_SLICE_S = 0.1  # a retry wait checks for a stop request this often


class Interrupted(Exception):
    """The consumer is stopping during the retries: what was settled is committed, the rest is not."""


async def _stoppable_sleep(consumer: AsyncStaticConsumer, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not consumer.stopping:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(_SLICE_S, left))


class AsyncFailureHandling:
    """Runs each batch through an async (or plain) handler under the settings' failure policy."""

    def __init__(
        self,
        consumer: AsyncStaticConsumer,
        handler: AsyncHandler,
        *,
        policy: OnFailure | None = None,
        dead_letters: DeadLettersFactory | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._consumer = consumer
        self._sync = consumer._sync
        self.recovery = Recovery(self._sync, policy, dead_letters, clock)
        self._handler = handler
        self._sleep = sleep or (lambda seconds: _stoppable_sleep(consumer, seconds))
        self._committer = BatchCommitter(self._sync)

    async def prepare(self) -> None:
        """The dead-letter topics checked (on the consumer's thread) before the consumer joins."""
        await self._consumer._call(self.recovery.prepare)

    async def close(self) -> None:
        await self._consumer._call(self.recovery.close)

    async def _call(self, records: Sequence[Record] | RecordBatch) -> BaseException | None:
        batch = records if isinstance(records, RecordBatch) else RecordBatch.from_records(list(records))
        try:
            handled = self._handler(batch)
            if inspect.isawaitable(handled):
                await handled
        except BaseException as exc:  # noqa: BLE001 - judged by the steps (library errors end them)
            return exc
        return None

    async def handle(self, batch: RecordBatch) -> None:
        """Handle ``batch``; returns when all of it was settled (``batches()`` then commits it)."""
        r = self.recovery
        if r.watching_patterns:  # a ^regex subscription: new topics' dead-letter topics checked first
            await self._consumer._call(r.arrived, batch.records())
        first = await self._call(batch)
        if first is None:
            return
        if isinstance(first, asyncio.CancelledError):
            raise first
        records = batch.records()
        steps = attempts(
            records, r.policy, budget_s=r.budget_s, clock=r.clock, stopping=lambda: self._consumer.stopping
        )
        settled = 0
        try:
            step: Step = next(steps)  # the first Call: answered by the attempt above
            step = steps.send(first)
            while True:
                if isinstance(step, Settle):
                    settled = step.settled
                step = steps.send(await self._carry_out(step))
        except StopIteration as done:
            outcome: Outcome = done.value
        except BaseException:
            if settled:
                await self._consumer._call(self._committer.commit, records[:settled])
            raise
        if outcome.settled >= len(records) and outcome.error is None:
            return
        if outcome.settled:
            await self._consumer._call(self._committer.commit, records[: outcome.settled])
        r.ended(outcome)
        if outcome.error is not None:
            raise outcome.error
        raise Interrupted(f"stopping during the retries: {outcome.settled} of {len(records)} records settled")

    async def _carry_out(self, step: Step) -> BaseException | None:
        if isinstance(step, Call):
            return await self._call(step.records)
        if isinstance(step, Wait):
            await self._consumer._call(self.recovery.retrying, step)
            await self._sleep(step.seconds)
            return None
        await self._consumer._call(self.recovery.settle, step)
        return None


__all__ = ["AsyncFailureHandling", "AsyncHandler", "Interrupted"]
