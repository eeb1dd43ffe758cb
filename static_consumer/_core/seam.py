"""The seam's own side: what the consumer core needs from a Kafka client, in the project's types.

:class:`ConsumerAdapter` is implemented by ``confluent.ConfluentAdapter`` (librdkafka) and, in unit
tests, by a scripted fake; :class:`GroupWatch`, the broker look-ups of the wait for a held instance id,
by ``static_consumer._kafka.watch`` and, in unit tests, a scripted fake. Nothing here imports a client
library, so the core depends on this module and only the code that builds a client depends on
``confluent``. Errors cross the seam as :class:`PollError`, classified by the error table: the core
branches on ``error.kind``, never on a client's codes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from static_consumer._base.codes import ErrorKind, classify
from static_consumer._base.records import Record, RecordBatch, TopicPartition

if TYPE_CHECKING:
    from static_consumer._kafka.groups import GroupDescription

RebalanceCallback = Callable[[list[TopicPartition]], None]


@dataclass(frozen=True, slots=True)
class PollError:
    """An error event from the client. ``fatal`` means the client instance is dead: librdkafka's own
    fatal flag, or a ``_FATAL`` code (which is how fencing arrives, with ``fatal()`` False).
    ``cause`` is the broker error code behind a ``_FATAL`` when it could be recognised. ``kind`` is
    what the error table makes of the three, and all the core looks at. ``topic``: the topic the
    client attached to the error, if any (which topic a refused Fetch was for)."""

    code: int
    name: str
    reason: str
    fatal: bool
    retriable: bool
    cause: int | None = None
    topic: str | None = None
    kind: ErrorKind = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", classify(self.code, fatal=self.fatal, cause=self.cause))


class AdapterError(Exception):
    """A client call failed; ``error`` says how."""

    def __init__(self, error: PollError) -> None:
        super().__init__(f"{error.name}: {error.reason}")
        self.error = error


@dataclass(frozen=True, slots=True)
class CommitResult:
    """How a commit begun with :meth:`ConsumerAdapter.begin_commit` ended: ``error`` None when the broker
    accepted ``offsets``."""

    offsets: Mapping[TopicPartition, int]
    error: PollError | None


class ConsumerAdapter(Protocol):
    """What the consumer core needs from a Kafka consumer client."""

    def subscribe(
        self,
        topics: Sequence[str],
        *,
        on_assign: RebalanceCallback,
        on_revoke: RebalanceCallback,
        on_lost: RebalanceCallback,
    ) -> None: ...

    def assign(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        """Replace the assignment; an offset of None starts from the committed offset (else the reset)."""
        ...

    def incremental_assign(self, partitions: Mapping[TopicPartition, int | None]) -> None:
        """Add partitions, leaving the positions of the others alone."""
        ...

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None: ...

    def partition_counts(self, topics: Sequence[str], timeout: float) -> dict[str, int | None]:
        """Partition count per topic from fresh cluster metadata; None for a topic the broker does not
        know (or reported an error for without partitions)."""
        ...

    def unmatched(self, subscription: Sequence[str], timeout: float) -> list[str]:
        """The entries of ``subscription`` (topic names, ``^regex`` patterns) that match no topic in
        fresh cluster metadata."""
        ...

    def poll(self, timeout: float) -> Record | PollError | None: ...

    def consume(self, max_records: int, timeout: float) -> list[Record | PollError]: ...

    def consume_batch(self, max_records: int, timeout: float) -> RecordBatch | list[Record | PollError]:
        """Like :meth:`consume`, as a :class:`RecordBatch` when every message is a plain record."""
        ...

    def commit(self, offsets: Mapping[TopicPartition, int] | None) -> None:
        """Commit ``offsets`` (None: the client's own positions) and wait for the broker's answer."""
        ...

    def begin_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Start committing ``offsets`` without waiting for the broker; its result is served by a later
        ``poll``/``consume`` on the calling thread. The core begins one only after it read the result of
        the one before (:meth:`commit_result`): at most one is ever in flight."""
        ...

    def commit_result(self) -> CommitResult | None:
        """The result of the commit begun last, once a client call served it, read once; None while it
        is still under way, and when none is. Never waits."""
        ...

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float
    ) -> dict[TopicPartition, int | None]: ...

    def position(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]: ...

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch ``partition`` (assigned) from ``offset`` next; records queued past it are discarded."""
        ...

    def assignment(self) -> list[TopicPartition]: ...

    def member_id(self) -> str | None: ...

    def generation(self) -> int | None:
        """The group generation (classic) or member epoch (consumer protocol); None when not joined."""
        ...

    def take_errors(self) -> list[PollError]:
        """Errors reported out of band (librdkafka's error_cb) since the last call."""
        ...

    def unsubscribe(self) -> None: ...

    def close(self) -> None: ...


class GroupWatch(Protocol):
    """The broker look-ups of the wait for a held instance id (``rejoin``); both return None when the
    broker did not answer."""

    def look(self) -> GroupDescription | None:
        """The group as its coordinator describes it now (members, assignments, coordinator id)."""
        ...

    def committed(self, partitions: Sequence[TopicPartition]) -> Mapping[TopicPartition, int] | None:
        """The group's committed offsets of ``partitions`` (-1 where none)."""
        ...

    def session_ms(self) -> int | None:
        """The group's own ``consumer.session.timeout.ms`` override now; None without one or unanswered."""
        ...

    def close(self) -> None: ...


def close_bounded(adapter: ConsumerAdapter, timeout_s: float, log: logging.Logger) -> bool:
    """Close ``adapter`` in a helper thread, waiting at most ``timeout_s``. False if it did not return.

    Bounded so that a close() that hangs (e.g. after a fatal error) cannot keep a pod past its grace
    period; the daemon thread dies with the process.
    """
    done = threading.Event()
    failure: list[Exception] = []

    def run() -> None:
        try:
            adapter.close()
        except Exception as exc:  # noqa: BLE001 - reported below
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="static-consumer-close", daemon=True).start()
    if not done.wait(timeout_s):
        log.error("close() did not return within %.1fs; abandoning it", timeout_s)
        return False
    if failure:
        log.warning("close() failed: %s", failure[0])
    return True


__all__ = [
    "AdapterError",
    "CommitResult",
    "ConsumerAdapter",
    "GroupWatch",
    "PollError",
    "RebalanceCallback",
    "close_bounded",
]
