"""Which offsets are safe to commit: the at-least-once bookkeeping of the consumer. Pure.

Kafka commits the *next* offset to read, so a processed record at offset N commits N + 1. Only
partitions this member currently owns are tracked: after a revoke or loss, committing for a partition
would overwrite the progress of its new owner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from static_consumer._base.errors import StaticConsumerError
from static_consumer._base.records import Record, TopicPartition, records_highest_offsets
from static_consumer._core.seam import PollError


class OffsetTracker:
    """Highest processed offset per owned partition, and what was last committed.

    ``version`` counts the assignments: a commit sent at version V that ends later counts only for the
    partitions owned without a break since V (:meth:`committed`), so the late answer to a commit sent
    before a partition was lost and assigned again cannot pass for its progress now.
    """

    def __init__(self) -> None:
        self._owned: set[TopicPartition] = set()
        self._processed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._since: dict[TopicPartition, int] = {}  # the version each owned partition was assigned at
        # The offset per partition a commit() call last returned (asked for), so a later call returns
        # only what is new, as when every commit waited (see :meth:`fresh`).
        self._asked: dict[TopicPartition, int] = {}
        self.version = 0

    @property
    def owned(self) -> frozenset[TopicPartition]:
        return frozenset(self._owned)

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        self.version += 1
        for tp in partitions:
            if tp not in self._owned:
                self._owned.add(tp)
                self._since[tp] = self.version

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._owned.discard(tp)
            self._processed.pop(tp, None)
            self._committed.pop(tp, None)
            self._since.pop(tp, None)
            self._asked.pop(tp, None)

    def clear(self) -> None:
        self.remove(list(self._owned))
        self._processed.clear()
        self._asked.clear()

    def mark(self, record: Record) -> bool:
        """Record that ``record`` was processed. False (ignored) when its partition is not owned."""
        tp = record.topic_partition
        if tp not in self._owned:
            return False
        if record.offset + 1 > self._processed.get(tp, -1):
            self._processed[tp] = record.offset + 1
        return True

    def mark_all(self, records: Iterable[Record]) -> list[TopicPartition]:
        """mark() for a batch, without a Python loop per record (the per-record cost matters at high
        throughput). Returns the partitions that were ignored because they are not owned."""
        return self.mark_highest(records_highest_offsets(records))

    def mark_highest(self, highest: Mapping[tuple[str, int], int]) -> list[TopicPartition]:
        """mark() for the highest processed offset per (topic, partition); returns the partitions
        ignored because they are not owned."""
        ignored = []
        owned, processed = self._owned, self._processed
        for key, offset in highest.items():
            # A plain (topic, partition) finds its TopicPartition (a NamedTuple: equal, same hash) in the
            # set and the dict, and updating the dict keeps its TopicPartition key: one is built only for
            # a partition seen the first time (the per-batch cost counts at high throughput).
            if key not in owned:
                ignored.append(TopicPartition(*key))
                continue
            done = processed.get(key)
            if done is None:
                processed[TopicPartition(*key)] = offset + 1
            elif offset + 1 > done:
                processed[key] = offset + 1
        return ignored

    def pending(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Offsets processed but not yet committed (limited to ``partitions`` if given)."""
        wanted = self._owned if partitions is None else self._owned.intersection(partitions)
        return {
            tp: offset
            for tp, offset in self._processed.items()
            if tp in wanted and self._committed.get(tp) != offset
        }

    def fresh(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The part of ``offsets`` no earlier commit() call returned: what a commit() call returns. A
        call's offsets may also go in a commit sent (or owed) by an earlier call that is still in flight;
        before commits stopped waiting, that earlier call had committed them, so they were not pending
        and not returned again. :meth:`ask` notes what a call returned, :meth:`unask` forgets a failure's
        offsets (the next call sends and returns them again, as after a refused synchronous commit)."""
        asked = self._asked
        return {tp: offset for tp, offset in offsets.items() if asked.get(tp) != offset}

    def ask(self, offsets: Mapping[TopicPartition, int]) -> None:
        """``offsets`` (pending, so of owned partitions) were returned by a commit() call."""
        self._asked.update(offsets)

    def unask(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            if self._asked.get(tp) == offset:
                del self._asked[tp]

    def last_committed(self) -> dict[TopicPartition, int]:
        """What was last committed for the partitions owned now (sending it again moves nothing)."""
        return {tp: offset for tp, offset in self._committed.items() if tp in self._owned}

    def committed(self, offsets: Mapping[TopicPartition, int], sent_at: int | None = None) -> None:
        """Note a successful commit, so it is not sent again. ``sent_at``: the version the commit was
        sent at, for one that ended later (partitions assigned again since then are left alone)."""
        for tp, offset in offsets.items():
            if tp in self._owned and (sent_at is None or self._since[tp] <= sent_at):
                self._committed[tp] = offset
                if offset > self._processed.get(tp, -1):
                    self._processed[tp] = offset


@dataclass
class CommitFlight:
    """The commit that does not wait for the broker (``_core/ownership.py``).

    At most one is in flight: a commit asked for meanwhile is ``owed`` and sent, with every offset
    processed by then, once the result of the one in flight was read: by the poll path at once, unless
    that client call handed out records (``deferred``): then by the application's next ``commit()``, or
    the poll path after the next client call if none came. ``superseded``: a synchronous
    commit sent every processed offset since, so that result counts for nothing. ``failed``: a commit
    that met a failure that ends the session (a fence, a missing ACL), raised by the poll path at once or
    the next ``commit()``. ``refusal``: any other failure (or a fence the client recovered from by
    replacing itself after it lost its own session), raised by the next ``commit()``.
    """

    sent: Mapping[TopicPartition, int] | None = None  # the offsets of the commit in flight
    sent_at: int = 0  # the tracker's version when it was sent
    client: object = None  # the client it was sent through (a replaced client takes its commit along)
    owed: bool = False
    deferred: bool = False  # owed, its turn came as records went out: it waits for the next commit()
    holding: bool = False  # a synchronous commit waits for the one in flight: owed ones wait for it too
    superseded: bool = False
    failed: tuple[PollError, Mapping[TopicPartition, int]] | None = None
    refusal: StaticConsumerError | None = None  # raised by the next commit()


__all__ = ["CommitFlight", "OffsetTracker"]
