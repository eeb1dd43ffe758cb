"""TopicPartition, below the Record implementations that hand it out (``Record.topic_partition``) and
re-exported by :mod:`static_consumer._base.records`, its public home."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    """One partition of a topic. Ordered by (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]"


# Pickles and reprs of the class name its public home, as they did when it was defined there.
TopicPartition.__module__ = "static_consumer"

__all__ = ["TopicPartition"]
