"""Partition ownership and at-least-once commits, driven by the client's rebalance callbacks.

The callbacks run inside the client's poll/consume/close. They never raise: listener exceptions are
collected by the dispatcher and re-raised by the consumer after the client call returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from static_consumer._offsets import OffsetTracker
from static_consumer._seam import AdapterError
from static_consumer.events import Assigned, Dispatcher, Lost, Revoked
from static_consumer.types import TopicPartition

log = logging.getLogger("static_consumer.consumer")


class Membership:
    """Owned partitions and processed offsets of this member."""

    def __init__(
        self,
        dispatch: Dispatcher,
        event_fields: Callable[[], dict[str, Any]],
        send_commit: Callable[[Mapping[TopicPartition, int]], None],
        may_commit: Callable[[], bool],
    ) -> None:
        self.offsets = OffsetTracker()
        self.ever_assigned = False
        self._dispatch = dispatch
        self._fields = event_fields
        self._send_commit = send_commit
        self._may_commit = may_commit

    def on_assign(self, partitions: list[TopicPartition]) -> None:
        self.ever_assigned = True
        self.offsets.add(partitions)
        log.info("assigned %s", _names(partitions) or "no partitions")
        self._dispatch.emit(Assigned(**self._fields(), partitions=tuple(sorted(partitions))))

    def on_revoke(self, partitions: list[TopicPartition]) -> None:
        # Listeners first, so they can flush their own state and mark records processed; then commit,
        # while the partitions are still ours (eager rebalance: before the rejoin).
        self._dispatch.emit(Revoked(**self._fields(), partitions=tuple(sorted(partitions))))
        self.commit_quietly(partitions, f"offsets of revoked {_names(partitions)}")
        self.offsets.remove(partitions)

    def on_lost(self, partitions: list[TopicPartition]) -> None:
        self.offsets.remove(partitions)  # another member may own them already: never commit them
        log.warning(
            "lost %s without committing (session timed out or max_poll_interval_ms exceeded); records "
            "processed since the last commit will be delivered again",
            _names(partitions),
        )
        self._dispatch.emit(Lost(**self._fields(), partitions=tuple(sorted(partitions))))

    def commit_quietly(self, partitions: Sequence[TopicPartition] | None, what: str) -> None:
        """Commit processed offsets, logging (not raising) a failure: used where raising cannot help."""
        offsets = self.offsets.pending(partitions)
        if not offsets or not self._may_commit():
            return
        try:
            self._send_commit(offsets)
        except AdapterError as exc:
            log.warning("could not commit %s (%s); their records will be delivered again", what, exc)
            return
        self.offsets.committed(offsets)


def _names(partitions: Sequence[TopicPartition]) -> str:
    return ", ".join(map(str, sorted(partitions)))


__all__ = ["Membership"]
