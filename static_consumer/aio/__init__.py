"""static_consumer for asyncio services: the same static member, awaited instead of blocking.

:class:`AsyncStaticConsumer` drives one :class:`~static_consumer.StaticConsumer` on one dedicated
thread, so every librdkafka call, rebalance callback and membership decision is the sync core's own;
the event loop only awaits futures. :func:`run_until_sigterm` is the asyncio pod main (docs/asyncio.md).
"""

from static_consumer.aio.consumer import AsyncStaticConsumer
from static_consumer.aio.runner import run_until_sigterm

__all__ = ["AsyncStaticConsumer", "run_until_sigterm"]
