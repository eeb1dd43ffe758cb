"""The asyncio pod main: SIGTERM through the event loop, finish the batch, commit, close without leaving.

Same contract as :func:`static_consumer.run_until_sigterm`, for an async ``handle_batch``::

    async def main() -> None:
        await run_until_sigterm(AsyncStaticConsumer(ConsumerSettings.load()), handle_batch)

    try:
        asyncio.run(main())
    except Exception as exc:
        raise SystemExit(exit_code_for(exc)) from exc   # 82 when fenced
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterable

from static_consumer._base.records import RecordBatch
from static_consumer._core.recovery.policy import OnFailure
from static_consumer._core.shutdown import StopRequest
from static_consumer.aio._failures import AsyncFailureHandling, Interrupted
from static_consumer.aio.consumer import AsyncStaticConsumer


async def run_until_sigterm(
    consumer: AsyncStaticConsumer,
    handle_batch: Callable[[RecordBatch], Awaitable[object] | object],
    *,
    max_records: int = 500,
    poll_timeout_s: float = 1.0,
    timeout_s: float | None = None,
    signals: Iterable[signal.Signals] = (signal.SIGTERM,),
    on_failure: OnFailure | None = None,
) -> None:
    """Start ``consumer`` and feed non-empty batches to ``handle_batch`` (a coroutine function or a plain
    one), committing each after it returned, until one of ``signals`` arrives or :meth:`stop` is called;
    then finish the batch in hand, commit and close without leaving the group.

    The signals are handled by the running loop (``loop.add_signal_handler``: the handler only sets the
    stop request, the loop goes on). ``timeout_s`` (default ``settings.shutdown_timeout_s``) bounds the
    time from the signal to the end of close(), as in the sync runner. A failing ``handle_batch`` goes
    through the settings' failure policy (or ``on_failure``), as in the sync runner (docs/failures.md).
    Errors propagate after the close (FencedInstanceError for a fenced member: exit code 82 through
    ``exit_code_for``); a cancelled runner closes too.
    """
    loop = asyncio.get_running_loop()
    bound = consumer.settings.shutdown_timeout_s if timeout_s is None else timeout_s
    request = StopRequest(consumer.stop)
    installed = []
    for sig in signals:
        loop.add_signal_handler(sig, request, sig)
        installed.append(sig)
    failures = AsyncFailureHandling(consumer, handle_batch, policy=on_failure)
    try:
        await failures.prepare()  # failure_action='dead_letter': its topics checked before joining
        await consumer.start()
        # batches() commits each batch once the body is done (with the next fetch, on the thread) and
        # ends at the stop request, after committing the last one. A failing handler goes through the
        # settings' failure policy; a stop during its retries ends the loop, the batch's rest uncommitted.
        with contextlib.suppress(Interrupted):
            async for batch in consumer.batches(max_records, poll_timeout_s):
                await failures.handle(batch)
    finally:
        try:
            try:
                await failures.close()
            finally:
                await consumer.close(timeout_s=request.close_timeout(bound))
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)


__all__ = ["run_until_sigterm"]
