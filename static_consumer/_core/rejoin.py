"""Joining again while the broker still holds this instance id (KIP-848, UNRELEASED_INSTANCE_ID).

Under protocol='consumer' a static member that crashed (no static leave) keeps its instance id until its
session times out (``group.consumer.session.timeout.ms``, 45 s by default), and a restarted pod that joins
meanwhile gets UNRELEASED_INSTANCE_ID as a *fatal* librdkafka error: that client is dead, so each retry
needs a new one. Retries are bounded by the session timeout (plus a margin) and only ever happen before
the member was first assigned; afterwards the same error means it was replaced, i.e. fenced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from static_consumer._core.failures import unreleased_error
from static_consumer._core.seam import ConsumerAdapter, PollError
from static_consumer._core.session import Session, State
from static_consumer._kafka_codes import ErrorKind
from static_consumer.capabilities import BrokerCapabilities
from static_consumer.errors import StaticConsumerError, UnreleasedInstanceIdError
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
    session: Session,
    first: PollError,
    rejoin: Callable[[], ConsumerAdapter],
    handle: Callable[[PollError], object],
) -> None:
    """Recreate the client (``rejoin``) until its join is not refused; raise UnreleasedInstanceIdError
    when the policy gives up, unless a stop was requested meanwhile (then the session just ends FAILED).

    Records that arrive while a join is watched are kept in the session's buffer; ``handle`` deals with
    any other error the watched client reports (raising if it is fatal).
    """
    instance_id = session.instance_id
    policy = release_policy(session.plan.capabilities if session.plan else None)
    session.move(State.REJOINING)
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
            if session.state is State.RUNNING:
                return
            item = adapter.poll(JOIN_POLL_S)
            for error in [*adapter.take_errors(), *([item] if isinstance(item, PollError) else [])]:
                if error.kind is ErrorKind.UNRELEASED:
                    raise unreleased_error(error, group_id=session.settings.group_id, instance_id=instance_id)
                handle(error)
            if isinstance(item, Record):
                session.buffer.append(item)
        # No refusal within the window: the join is under way (or the member got no partitions).

    try:
        session.sleep(policy.initial_wait_s)
        policy.call(
            attempt,
            sleep=session.sleep,
            clock=session.clock,
            should_stop=session.stop.is_set,
            what=f"joining as {instance_id!r}",
        )
    except StaticConsumerError as exc:
        if session.usable:
            session.end(State.FAILED, exc)
        if isinstance(exc, UnreleasedInstanceIdError) and session.stop.is_set():
            log.info("stopped while waiting for the instance id to be released")
            return  # a requested shutdown is not an error; later calls raise it
        raise
    if session.state is State.REJOINING:
        session.move(State.JOINING)
    log.info("group.instance.id %r was released; joined group %r", instance_id, session.settings.group_id)


__all__ = ["DEFAULT_CONSUMER_SESSION_TIMEOUT_MS", "release_policy", "wait_for_release"]
