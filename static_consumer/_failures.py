"""How the consumer reads client errors: fencing, unreleased ids, commit failures. Pure.

librdkafka reports fencing as a ``_FATAL`` error whose broker cause is only in its text; the adapter
extracts that cause into ``PollError.cause``. The messages built here say what happened and what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

from static_consumer._seam import FENCED_INSTANCE_ID, UNRELEASED_INSTANCE_ID, PollError
from static_consumer.errors import (
    CommitFailedError,
    FatalConsumerError,
    FencedInstanceError,
    RetriableError,
    StaticConsumerError,
    UnreleasedInstanceIdError,
)
from static_consumer.types import TopicPartition

UNKNOWN_MEMBER_ID = 25

# Commit failures worth retrying: the coordinator moved or the network blinked. Everything else that is
# not fatal means the partitions changed hands (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, ...).
_TRANSIENT_COMMIT_CODES = frozenset(
    {
        -195,  # _TRANSPORT
        -187,  # _ALL_BROKERS_DOWN
        -185,  # _TIMED_OUT
        -180,  # _WAIT_COORD
        7,  # REQUEST_TIMED_OUT
        13,  # NETWORK_EXCEPTION
        14,  # COORDINATOR_LOAD_IN_PROGRESS
        15,  # COORDINATOR_NOT_AVAILABLE
        16,  # NOT_COORDINATOR
    }
)


def is_unreleased(error: PollError) -> bool:
    """KIP-848: the broker still holds this instance id for another member (UNRELEASED_INSTANCE_ID)."""
    return error.fatal and error.cause == UNRELEASED_INSTANCE_ID


def is_fencing(error: PollError, *, after_join: bool) -> bool:
    """Whether a fatal error means another process owns this instance id.

    Under protocol='consumer' a member that was assigned partitions and later hears "instance id still
    used by another member" was replaced while it was away: that is fencing too, not a join to retry.
    """
    if not error.fatal:
        return False
    if error.cause == FENCED_INSTANCE_ID or (after_join and error.cause == UNRELEASED_INSTANCE_ID):
        return True
    text = error.reason.lower()
    return "fenced" in text and "instance" in text


def terminal_error(
    error: PollError, *, fenced: bool, group_id: str, instance_id: str | None
) -> StaticConsumerError:
    """The exception for a fatal error, with what to do about it."""
    if fenced:
        # Rejoining would fence the other process in turn, and the two would trade partitions forever.
        return FencedInstanceError(
            f"group.instance.id {instance_id!r} of group {group_id!r} was fenced: another consumer joined "
            f"with the same instance id ({_cause(error)}). This process must exit without rejoining. Make "
            "sure only one replica uses this id (two pods with the same name, a copied Deployment, an "
            "old pod that is still running)."
        )
    return FatalConsumerError(
        f"fatal consumer error in group {group_id!r} ({error.name}: {error.reason}); the client is "
        "unusable: exit and let the process restart"
    )


def _cause(error: PollError) -> str:
    # librdkafka's _FATAL text repeats the broker error twice; the code name says it once.
    names = {FENCED_INSTANCE_ID: "FENCED_INSTANCE_ID", UNRELEASED_INSTANCE_ID: "UNRELEASED_INSTANCE_ID"}
    return f"{names[error.cause]}, error code {error.cause}" if error.cause in names else error.reason


def unreleased_error(
    error: PollError, *, group_id: str, instance_id: str | None
) -> UnreleasedInstanceIdError:
    return UnreleasedInstanceIdError(
        f"group.instance.id {instance_id!r} is still held by another member of group {group_id!r} "
        f"({_cause(error)}). The broker releases it when the previous member's session times out; if "
        "this persists, another process is running with the same instance id."
    )


def is_transient(error: PollError) -> bool:
    """A client error that can go away by itself: the coordinator moved or the network blinked."""
    return error.retriable or error.code in _TRANSIENT_COMMIT_CODES


def commit_error(
    error: PollError, offsets: Mapping[TopicPartition, int], *, ordinal: bool = False
) -> StaticConsumerError:
    """The exception for a non-fatal commit failure (``ordinal``: the consumer is not a group member)."""
    where = ", ".join(f"{tp}@{offset}" for tp, offset in sorted(offsets.items()))
    if is_transient(error):
        return RetriableError(f"commit of {where} failed ({error.name}: {error.reason}); try again")
    if ordinal and error.code == UNKNOWN_MEMBER_ID:
        # Checked on Kafka 4.3: a commit from a non-member is accepted only while the group is empty.
        return CommitFailedError(
            f"commit of {where} was refused ({error.name}: {error.reason}): the group has members. An "
            "ordinal consumer commits without joining, which the broker allows only while no consumer is "
            "subscribed with this group id. Give the ordinal consumers a group id of their own, or remove "
            "the old members (static members stay until their session times out: "
            "'static-consumer remove-members')"
        )
    return CommitFailedError(
        f"commit of {where} was refused ({error.name}: {error.reason}), most likely because a rebalance "
        "moved the partitions; their uncommitted records will be delivered again"
    )


class RateLimiter:
    """Allows one event per key per ``interval_s`` (so a down broker does not flood the log)."""

    def __init__(self, interval_s: float, clock: Callable[[], float]) -> None:
        self._interval = interval_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}

    def allow(self, key: Hashable) -> bool:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            return False
        self._last[key] = now
        return True


__all__ = [
    "RateLimiter",
    "commit_error",
    "is_fencing",
    "is_transient",
    "is_unreleased",
    "terminal_error",
    "unreleased_error",
]
