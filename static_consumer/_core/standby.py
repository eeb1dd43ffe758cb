"""Standing by while a live process holds this member's instance id (``duplicate_policy='wait'``).

Two processes with one ``group.instance.id`` (two pods that resolve the same name, a copied Deployment,
an old pod still running on a node the control plane lost) cannot both be members. What each protocol
does with them (Kafka 4.3.1, librdkafka 2.16):

- classic: a JoinGroup with the id of a live member replaces that member; the replaced process is fenced
  (FENCED_INSTANCE_ID) at its next heartbeat or commit. The joiner cannot tell a live holder from this
  process's own previous incarnation (a restart within the session, the case static membership exists
  for), so the library never refuses to join; it can only decide what the *fenced* process does.
- consumer (KIP-848): the broker refuses the joiner (UNRELEASED_INSTANCE_ID) while the holder heartbeats;
  the joiner's wait (``rejoin.py``) proves the holder alive.

With ``duplicate_policy='exit'`` the process that lost ends with FencedInstanceError (exit 82). Under a
StatefulSet (``restartPolicy: Always``) that exit is restarted after the kubelet's back-off, and a classic
restart fences the other holder in turn: the partitions change hands at every restart, and records
processed but not yet committed are processed again (bench/bench_duplicate_restarts.py). With ``'wait'``
the process that lost stays up instead: it closes its client, reports its partitions lost, emits
:class:`~static_consumer._core.events.StandingBy` (a readiness probe turns the pod unready) and looks at the
group every :data:`LOOK_S` until nobody holds the id (the other process stopped, or its session expired),
then joins with a new client. The loop ends: one process owns the partitions, the other waits, unready.
``duplicate_max_wait_s`` bounds the wait; then FencedInstanceError (82) as under ``'exit'``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from static_consumer._base.codes import ErrorKind, name_of
from static_consumer._base.errors import FencedInstanceError
from static_consumer._base.records import Record
from static_consumer._core import ownership
from static_consumer._core.events import Fenced, StandingBy
from static_consumer._core.policy import MembershipPolicy
from static_consumer._core.poll import handle_error
from static_consumer._core.seam import ConsumerAdapter, PollError, close_bounded
from static_consumer._core.session import Session, State
from static_consumer._core.stall import waited

log = logging.getLogger(__name__)

LOOK_S = 2.0  # between looks at the group: a DescribeGroups every 2 s while standing by
TRY_S = 10.0  # KIP-848: a join every 10 s while the id is listed (a new client each: kept rare)
JOIN_POLLS = 25
JOIN_POLL_S = 0.2  # so a join attempt watches the client for at most JOIN_POLLS * JOIN_POLL_S = 5 s


def stand_by(
    session: Session,
    why: str,
    attempt: Callable[[], bool],
    *,
    try_every_s: float | None = None,
) -> None:
    """Stand by until no member of the group holds this instance id, then join (``attempt``: one join with
    a new client, False when refused). Returns once a join was not refused; raises FencedInstanceError
    after ``duplicate_max_wait_s``. A stop requested meanwhile ends the session FAILED, without raising.

    ``try_every_s``: also try a join this often while the id is listed (KIP-848, where the broker refuses
    a join for a live holder but accepts one after the holder's static leave, while ConsumerGroupDescribe
    still lists it until its session ends). None under the classic protocol, where a join takes the id
    from a live holder: there only an id nobody holds is joined."""
    settings, instance_id = session.settings, session.instance_id
    assert instance_id is not None  # only static members stand by
    owned = sorted(session.offsets.owned)
    if owned:
        # Another process owns them now: forgotten before the client closes, so that nothing (not a
        # revoke callback run by close()) commits them any more.
        ownership.lost(session, owned)
    old, session.adapter = session.adapter, None
    if old is not None:
        close_bounded(old, settings.shutdown_timeout_s, log)
    if session.state is not State.REJOINING:
        session.move(State.REJOINING)
    log.warning(
        "group.instance.id %r of group %r is held by a live process (%s); standing by "
        "(duplicate_policy='wait'): no client, not ready, joining once the id is free (at most %gs)",
        instance_id,
        settings.group_id,
        why,
        settings.duplicate_max_wait_s,
    )
    session.dispatch.emit(StandingBy(**session.event_fields(), reason=why))
    started, looks = session.clock(), 0
    next_try = started + try_every_s if try_every_s is not None else None
    watch = session.group_watch(settings)
    try:
        while True:
            if session.stop.is_set():
                session.end(State.FAILED, _error(session, why, session.clock() - started))
                log.info("stopped while standing by for group.instance.id %r", instance_id)
                return
            look = watch.look()
            looks += 1
            free = look is not None and look.member(instance_id) is None
            due = next_try is not None and session.clock() >= next_try
            if due and try_every_s is not None:
                next_try = session.clock() + try_every_s
            if (free or due) and attempt():
                break
            if session.clock() - started > settings.duplicate_max_wait_s:
                exc = _error(session, why, session.clock() - started)
                session.end(State.FENCED, exc)
                log.error("%s", exc)
                session.dispatch.emit(Fenced(**session.event_fields(), error=str(exc)))
                raise exc
            session.sleep(LOOK_S)
    finally:
        watch.close()
    joined_again(session, "is free again", started, f"standing by, {looks} looks")


def joined_again(session: Session, why: str, started: float, detail: str) -> None:
    """The end of a wait for this member's instance id (standing by, or the KIP-848 release wait): the
    join was not refused, so the member is joining (or, assigned meanwhile, running) again. The wait is
    no stall (``stall.waited``)."""
    waited(session)
    if session.state is State.REJOINING:
        session.move(State.JOINING)
    log.info(
        "group.instance.id %r %s: joined group %r after %.1fs (%s)",
        session.instance_id,
        why,
        session.settings.group_id,
        session.clock() - started,
        detail,
    )


def standing_by(
    session: Session,
    error: PollError,
    rejoin: Callable[[], ConsumerAdapter],
    *,
    try_every_s: float | None,
) -> bool:
    """``Mode.recover`` for a member a live process replaced: stand by (True) under
    ``duplicate_policy='wait'``, else False (the fence ends the session). ``try_every_s``: see
    :func:`stand_by` (the mode says: :data:`TRY_S` under KIP-848, None under the classic protocol)."""
    if not MembershipPolicy.of(session.settings).stands_by or session.instance_id is None:
        return False
    name = name_of(error.cause) if error.cause is not None else error.name
    attempt = join_attempt(session, rejoin)
    stand_by(session, f"{name}: {error.reason}", attempt, try_every_s=try_every_s)
    return True


def join_attempt(
    session: Session,
    rejoin: Callable[[], ConsumerAdapter],
    on_refused: Callable[[], object] = lambda: None,
) -> Callable[[], bool]:
    """One join with a new client (``rejoin``), watched for at most JOIN_POLLS * JOIN_POLL_S: False when
    the broker refused it because the id is held (UNRELEASED_INSTANCE_ID; ``on_refused`` is called), True
    when assigned or still under way. Records that arrive meanwhile are kept in the session's buffer; any
    other error the client reports is handled as on the poll path (``poll.handle_error``: raised if it
    is fatal)."""

    def attempt() -> bool:
        adapter = rejoin()
        for _ in range(JOIN_POLLS):
            if session.state is State.RUNNING:
                return True
            item = adapter.poll(JOIN_POLL_S)
            for error in [*adapter.take_errors(), *([item] if isinstance(item, PollError) else [])]:
                if error.kind is ErrorKind.UNRELEASED:
                    on_refused()
                    return False
                handle_error(session, error)
            if isinstance(item, Record):
                session.buffer.append(item)
        return True  # not refused within the window: the join is under way (or got no partitions)

    return attempt


def _error(session: Session, why: str, waited_s: float) -> FencedInstanceError:
    return FencedInstanceError(
        f"group.instance.id {session.instance_id!r} of group {session.settings.group_id!r} was held by "
        f"another live process ({why}) for the {waited_s:.0f}s this one stood by "
        f"(duplicate_max_wait_s={session.settings.duplicate_max_wait_s:g}). Make sure only one replica uses "
        "this id (two pods with the same name, a copied Deployment, an old pod that is still running)."
    )


__all__ = [
    "JOIN_POLLS",
    "JOIN_POLL_S",
    "LOOK_S",
    "TRY_S",
    "join_attempt",
    "joined_again",
    "stand_by",
    "standing_by",
]
