"""Plain data the consumer hands out: partitions and records. Pure; no client library types leak out.

Both are NamedTuples rather than dataclasses: a consumer builds one Record per message, and tuple
construction, hashing and comparison run in C. They are immutable and compare by value.
"""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of a topic. Ordered by (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


class Record(NamedTuple):
    """One consumed message. ``timestamp_ms`` is None when the broker gave no timestamp."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None
    timestamp_type: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


__all__ = ["Record", "TopicPartition"]
