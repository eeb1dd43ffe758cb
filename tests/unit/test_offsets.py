"""The at-least-once bookkeeping: the next offsets to commit, per owned partition."""

from __future__ import annotations

from static_consumer._base.records import Record, TopicPartition
from static_consumer._core.offsets import OffsetTracker


def test_highest_offsets_become_next_offsets_of_owned_partitions() -> None:
    tracker = OffsetTracker()
    tracker.add([TopicPartition("t", 0), TopicPartition("t", 1)])
    assert tracker.mark_highest({("t", 0): 4, ("t", 2): 9}) == [TopicPartition("t", 2)]  # not owned
    tracker.mark_highest({("t", 0): 7, ("t", 1): 1})
    tracker.mark_highest({("t", 0): 5})  # lower than processed: no step back
    pending = tracker.pending()
    assert pending == {TopicPartition("t", 0): 8, TopicPartition("t", 1): 2}
    # Keyed by TopicPartition (the adapter reads .topic and .partition), though marked by plain tuples.
    assert all(type(tp) is TopicPartition for tp in pending)
    tracker.committed(pending)
    assert tracker.pending() == {}
    assert tracker.mark_all(
        [Record("t", 1, 3, None, None, None, 0), Record("u", 0, 1, None, None, None, 0)]
    ) == [TopicPartition("u", 0)]
    assert tracker.pending() == {TopicPartition("t", 1): 4}
    tracker.remove([TopicPartition("t", 1)])
    assert tracker.pending() == {} and tracker.owned == {TopicPartition("t", 0)}
