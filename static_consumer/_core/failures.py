"""What a client error means for the consumer, and the exception it raises. Built on the error table.

The adapter classifies every client error (``PollError.kind``); this module decides what the consumer
does with the kinds that matter to a static member (fencing, an unreleased instance id, a refused
commit) and words the exceptions: what happened and what to do.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping

from static_consumer._base.codes import ErrorKind, name_of
from static_consumer._base.errors import (
    CommitFailedError,
    FatalConsumerError,
    FencedInstanceError,
    GroupProtocolMismatchError,
    RetriableError,
    StaticConsumerError,
    UnreleasedInstanceIdError,
)
from static_consumer._base.records import TopicPartition
from static_consumer._core.events import FatalError, Fenced
from static_consumer._core.gate import session_out_of_bounds
from static_consumer._core.seam import PollError
from static_consumer._core.session import Session, State
from static_consumer._kafka.acls import authorization_error
from static_consumer._security.oauth import token_lost_error
from static_consumer._security.secrets import scrub_for
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)


def is_fencing(error: PollError, *, after_join: bool) -> bool:
    """Whether a fatal error means another process owns this instance id.

    Under protocol='consumer' a member that was assigned partitions and later hears "instance id still
    used by another member" was replaced while it was away: that is fencing too, not a join to retry.
    """
    return error.kind is ErrorKind.FENCED or (after_join and error.kind is ErrorKind.UNRELEASED)


# Errors librdkafka does not end a client for, but that nothing will change while the consumer waits:
# it would send the refused JoinGroup (or FindCoordinator, Fetch, heartbeat) again forever. They end the
# session like a fatal error.
_ENDING = frozenset({ErrorKind.PROTOCOL_REFUSED, ErrorKind.AUTHORIZATION, ErrorKind.SESSION_REFUSED})


def ends_session(error: PollError) -> bool:
    """Whether ``error`` ends the session (unless the mode recovers): fatal to the client, or refused
    for a reason the same settings and ACLs meet again (a protocol the group refuses, a missing ACL, a
    session timeout outside the broker's bounds)."""
    return error.fatal or error.kind in _ENDING


def is_transient(error: PollError) -> bool:
    """A client error that can go away by itself: the coordinator moved or the network blinked."""
    return error.retriable or error.kind in (ErrorKind.TRANSIENT, ErrorKind.UNREACHABLE)


def scrubbed(settings: ConsumerSettings, error: PollError) -> PollError:
    """``error`` with every configured secret and OAUTHBEARER token masked in its reason: what the core
    does before a client's error text reaches a log record, an exception or an event (librdkafka's
    texts are not known to quote secrets, but a passthrough setting or a broker message could)."""
    reason = scrub_for(settings, error.reason)
    return error if reason == error.reason else dataclasses.replace(error, reason=reason)


def die(session: Session, error: PollError) -> StaticConsumerError:
    """End the session after a fatal error (FENCED or FAILED) and build the exception to raise.
    ``error`` comes scrubbed (:func:`scrubbed`, where it entered the core)."""
    # A member closing was running (or joining) when close() began: what it hears is judged as then.
    fenced = is_fencing(error, after_join=session.state in (State.RUNNING, State.CLOSING))
    instance_id, group_id = session.instance_id, session.settings.group_id
    exc: StaticConsumerError
    if fenced:
        # Rejoining would fence the other process in turn, and the two would trade partitions forever.
        exc = FencedInstanceError(
            f"group.instance.id {instance_id!r} of group {group_id!r} was fenced: another consumer joined "
            f"with the same instance id ({_cause(error)}). This process must exit without rejoining. Make "
            "sure only one replica uses this id (two pods with the same name, a copied Deployment, an "
            "old pod that is still running)."
        )
    elif error.kind is ErrorKind.PROTOCOL_REFUSED and session.mode.refusal is not None:
        # Why the group refused this member's protocol is the mode's to say (a consumer that never joins
        # has none: its refusals are fatal errors like any other).
        protocol = str(session.plan.config.get("group.protocol")) if session.plan is not None else "?"
        exc = protocol_mismatch_error(error, group_id=group_id, protocol=protocol, why=session.mode.refusal)
    elif error.kind is ErrorKind.AUTHORIZATION:
        code = error.cause if error.cause is not None else error.code
        doing = f"the consumer of group {group_id!r}"
        exc = authorization_error(
            session.settings, code, error.reason, doing, topic=error.topic, consumer=True
        )
    elif error.kind is ErrorKind.SESSION_REFUSED:
        caps = session.plan.capabilities if session.plan is not None else None
        exc = session_out_of_bounds(session.settings, caps, refused=f"{error.name}: {error.reason}")
    else:
        exc = fatal_error(error, group_id=group_id)
    # Nothing may be committed any more: the partitions belong to the process that fenced us.
    session.end(State.FENCED if fenced else State.FAILED, exc)
    log.error("%s", exc)
    event = Fenced if fenced else FatalError
    session.dispatch.emit(event(**session.event_fields(), error=error.reason))
    return exc


def check_token(session: Session) -> None:
    """End the session with AuthenticationError once the OAUTHBEARER token expired while the provider
    kept failing. Until then librdkafka keeps the current token and asks the provider again every 10 s,
    so the retries are bounded by the last token's remaining lifetime (docs/security.md)."""
    reason = session.token_lost()
    if reason is None:
        return
    exc = token_lost_error(session.settings, reason)  # masked: never a token or a password
    session.end(State.FAILED, exc)
    log.error("%s", exc)
    session.dispatch.emit(FatalError(**session.event_fields(), error=str(exc)))
    raise exc


def unreleased_error(
    error: PollError, *, group_id: str, instance_id: str | None
) -> UnreleasedInstanceIdError:
    return UnreleasedInstanceIdError(
        f"group.instance.id {instance_id!r} is still held by another member of group {group_id!r} "
        f"({_cause(error)}). The broker releases it when the previous member's session times out; if "
        "this persists, another process is running with the same instance id."
    )


def fatal_error(error: PollError, *, group_id: str) -> FatalConsumerError:
    """The exception for a fatal client error that is neither a fence nor a refused protocol."""
    return FatalConsumerError(
        f"fatal consumer error in group {group_id!r} ({error.name}: {error.reason}); the client is "
        "unusable: exit and let the process restart"
    )


def protocol_mismatch_error(
    error: PollError, *, group_id: str, protocol: str, why: str
) -> GroupProtocolMismatchError:
    """The group refused this member's ``protocol``, for the reason ``why`` (each group mode knows its
    own: ``Mode.refused``). librdkafka would retry the refused join forever (a classic JoinGroup every
    2 s; a KIP-848 client is dead already), and nothing changes while the other members stay: so the
    member stops, and says which broker policy or migration step is missing."""
    return GroupProtocolMismatchError(
        f"group {group_id!r} refused this member's protocol={protocol!r} ({_cause(error)}): {why}. "
        "See docs/migration.md."
    )


def commit_error(
    error: PollError, offsets: Mapping[TopicPartition, int], *, refused_because: str | None = None
) -> StaticConsumerError:
    """The exception for a non-fatal commit failure; ``refused_because`` words a refusal the caller
    understands better than the default (a rebalance moved the partitions)."""
    where = ", ".join(f"{tp}@{offset}" for tp, offset in sorted(offsets.items()))
    if is_transient(error):
        return RetriableError(f"commit of {where} failed ({error.name}: {error.reason}); try again")
    return CommitFailedError(
        f"commit of {where} was refused ({error.name}: {error.reason}), "
        + (
            refused_because
            or "most likely because a rebalance moved the partitions; their uncommitted records will be "
            "delivered again"
        )
    )


def _cause(error: PollError) -> str:
    # librdkafka's _FATAL text repeats the broker error twice; the code name says it once.
    if error.cause is not None:
        return f"{name_of(error.cause)}, error code {error.cause}"
    if not error.fatal:  # a broker code as such
        return f"{error.name}, error code {error.code}"
    return error.reason


__all__ = [
    "check_token",
    "commit_error",
    "die",
    "ends_session",
    "fatal_error",
    "is_fencing",
    "is_transient",
    "protocol_mismatch_error",
    "scrubbed",
    "unreleased_error",
]
