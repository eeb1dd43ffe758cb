"""KIP-848: rejoin while the broker still holds this instance id for a previous incarnation.

Under protocol='consumer' a static member that crashed (no static leave) keeps its instance id until its
session times out (``group.consumer.session.timeout.ms``, 45 s by default), and a restarted pod that joins
meanwhile gets UNRELEASED_INSTANCE_ID as a *fatal* librdkafka error: that client is dead, so each retry
needs a new one. Retries are bounded by the session timeout (plus a margin) and only ever happen before
the member was first assigned; afterwards the same error means it was replaced, i.e. fenced.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from static_consumer._failures import is_unreleased, unreleased_error
from static_consumer._seam import ConsumerAdapter, PollError
from static_consumer.capabilities import BrokerCapabilities
from static_consumer.retry import RetryPolicy
from static_consumer.types import Record

log = logging.getLogger(__name__)

DEFAULT_CONSUMER_SESSION_TIMEOUT_MS = 45000  # Kafka's default group.consumer.session.timeout.ms
RELEASE_MARGIN_MS = 5000  # one default heartbeat interval, for the coordinator's expiry timer
JOIN_POLLS = 25
JOIN_POLL_S = 0.2  # so a join attempt watches the client for at most JOIN_POLLS * JOIN_POLL_S = 5 s


def release_policy(caps: BrokerCapabilities | None) -> RetryPolicy:
    session_ms = (caps.consumer_session_timeout_ms if caps else None) or DEFAULT_CONSUMER_SESSION_TIMEOUT_MS
    return RetryPolicy(deadline_s=(session_ms + RELEASE_MARGIN_MS) / 1000, initial_wait_s=1.0, max_wait_s=5.0)


def wait_for_release(
    first: PollError,
    *,
    policy: RetryPolicy,
    rejoin: Callable[[], ConsumerAdapter],
    joined: Callable[[], bool],
    keep: Callable[[Record], None],
    handle: Callable[[PollError], object],
    sleep: Callable[[float], object],
    should_stop: Callable[[], bool],
    group_id: str,
    instance_id: str | None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Recreate the client until the join is not refused, or raise UnreleasedInstanceIdError.

    ``rejoin`` closes the dead client and returns a new, subscribed one; ``keep`` buffers records that
    arrive while watching the join; ``handle`` deals with any other error (raising if fatal).
    """
    log.debug("join refused: %s", first.reason)
    log.warning(
        "group.instance.id %r is still held by its previous member (UNRELEASED_INSTANCE_ID); retrying for "
        "up to %.0fs, until the broker's session timeout releases it",
        instance_id,
        policy.deadline_s,
    )

    def attempt() -> None:
        adapter = rejoin()
        for _ in range(JOIN_POLLS):
            if joined():
                return
            item = adapter.poll(JOIN_POLL_S)
            for error in [*adapter.take_errors(), *([item] if isinstance(item, PollError) else [])]:
                if is_unreleased(error):
                    raise unreleased_error(error, group_id=group_id, instance_id=instance_id)
                handle(error)
            if isinstance(item, Record):
                keep(item)
        # No refusal within the window: the join is under way (or the member got no partitions).

    sleep(policy.initial_wait_s)
    policy.call(
        attempt, sleep=sleep, clock=clock, should_stop=should_stop, what=f"joining as {instance_id!r}"
    )
    log.info("group.instance.id %r was released; joined group %r", instance_id, group_id)


__all__ = ["DEFAULT_CONSUMER_SESSION_TIMEOUT_MS", "release_policy", "wait_for_release"]
