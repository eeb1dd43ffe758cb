"""The librdkafka properties the library sets for its consumers unless the ``librdkafka`` passthrough sets
them, and what bounds a consumer's memory (docs/configuration.md is generated from both). Pure data: the
passthrough check (``_passthrough``) validates a passthrough on top of them, ``_config`` applies them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class ClientDefault:
    """A librdkafka property the library sets for its consumers, unless the ``librdkafka`` passthrough
    sets it: the value, librdkafka's own default, and why (docs/configuration.md is generated from this)."""

    value: int
    librdkafka_default: int
    reason: str


# librdkafka stops fetching a partition whenever its consumer's one shared queue holds queued.min.messages
# (100,000) messages or queued.max.messages.kbytes (64 MiB) of values, and looks again only after
# fetch.queue.backoff.ms (rdkafka_fetcher.c, rd_kafka_toppar_fetch_decide). Nothing wakes the fetcher when
# the application drains the queue, so with the default second a loop slower than the fetcher (one that
# commits every batch) reads at about one queue per second: 150,000 records/s of 100 B, 180,000 of 1 KiB,
# with the loop waiting in consume() most of the time (docs/benchmarks.md, "Why librdkafka's defaults
# cap the idiomatic loop"). Looking again after 10 ms keeps the queue filled with the same bound on it.
# What bounds the memory a consumer fetches ahead (docs/configuration.md; measured in docs/benchmarks.md).
QUEUE_BOUND = (
    "A consumer's fetched records wait in one queue for all its partitions. librdkafka stops fetching "
    "while that queue holds `queued.min.messages` (100,000) messages or `queued.max.messages.kbytes` "
    "(64 MiB) of values, whichever comes first (only values count: keys, headers and librdkafka's own "
    "few hundred bytes per message come on top), and each Fetch already under way can add its response: "
    "per broker up to `fetch.message.max.bytes` (1 MiB) for each partition of this consumer that the "
    "broker leads, and at most `fetch.max.bytes` (50 MiB). So a consumer's queued values stay below "
    "min(100,000 x the value size, 64 MiB) + min(50 MiB, 1 MiB x its partitions) per broker, and its "
    "queued messages below 100,000 + one Fetch response per broker. What the application holds comes on "
    "top: a batch handed out is `max_records` values as Python bytes. A queued message keeps the whole "
    "Fetch response it came in alive. The library's `fetch.queue.backoff.ms` changes none of these "
    "bounds: it keeps the queue near them instead of letting it run dry for a second. Lower "
    "`queued.max.messages.kbytes` or `queued.min.messages` through `librdkafka` for a smaller bound."
)
CLIENT_DEFAULTS: Mapping[str, ClientDefault] = MappingProxyType(
    {
        "fetch.queue.backoff.ms": ClientDefault(
            10,
            1000,
            "how long a partition waits before librdkafka checks again whether its consumer's queue has "
            "room, once the queue held `queued.min.messages` messages or `queued.max.messages.kbytes` of "
            "values. Nothing wakes the fetcher when the application drains the queue, so with librdkafka's "
            "second a loop slower than the fetcher (one that commits every batch) reads about one queue a "
            "second and waits in `consume()` most of the time; 10 ms keeps the queue filled. The queue's "
            "bounds, and so the memory, stay librdkafka's (docs/benchmarks.md)",
        ),
        "reconnect.backoff.ms": ClientDefault(
            20,
            100,
            "how long librdkafka waits before it connects to a broker again; while a consumer looks for its "
            "coordinator and no broker answers, it tries again every half of it (784-791 attempts in 10 s "
            "with 20 ms against 194 with 100 ms, 3 runs each, each logged to `static_consumer.librdkafka` "
            "at DEBUG). librdkafka also holds "
            "back its first connection to the brokers the bootstrap metadata names by half of it (its "
            "sparse-connection interval, at least about 10 ms), and a consumer finds its group coordinator "
            "only through that connection: with librdkafka's 100 ms most starts wait about 55 ms before "
            "they can join, with 20 ms about 16 ms, as with 10 (docs/benchmarks.md). The Java client's "
            "default is 50 ms",
        ),
    }
)

__all__ = ["CLIENT_DEFAULTS", "QUEUE_BOUND", "ClientDefault"]
