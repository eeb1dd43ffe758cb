"""The one state object of a consumer, handed to every phase of the core.

Like tenacity's ``RetryCallState``, a :class:`Session` carries what the phases (joining, owning
partitions, the assignment mode, error handling) read and change, instead of each phase holding
callbacks into the consumer. A session belongs to the thread that drives the consumer; only ``stop``
(a ``threading.Event``) may be set from another thread or a signal handler. ``stop`` is a request, not
a state: iteration and retry waits end, and the state changes when the consumer is closed.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol

from static_consumer._base.codes import ErrorKind
from static_consumer._base.errors import (
    AuthenticationError,
    ConfigurationError,
    FatalConsumerError,
    StaticConsumerError,
)
from static_consumer._base.records import Record, TopicPartition
from static_consumer._core.events import Dispatcher
from static_consumer._core.join import JoinPlan
from static_consumer._core.offsets import CommitFlight, OffsetTracker
from static_consumer._core.seam import AdapterError, ConsumerAdapter, PollError, close_bounded
from static_consumer._core.seams import Seams
from static_consumer._security.oauth import TokenSource, first_token, token_error, token_source
from static_consumer._security.secrets import scrub_for
from static_consumer.settings import ConsumerSettings

if TYPE_CHECKING:
    from static_consumer.settings._config import ConfigValue


class State(Enum):
    """Where a consumer is in its life. The transitions :meth:`Session.move` allows::

        NEW        -> JOINING, RUNNING, CLOSED
        JOINING    -> RUNNING, REJOINING, CLOSING, FENCED, FAILED, CLOSED
        REJOINING  -> JOINING, RUNNING, CLOSING, FENCED, FAILED, CLOSED
        RUNNING    -> JOINING, REJOINING, CLOSING, FENCED, FAILED, CLOSED
        CLOSING    -> FENCED, FAILED, CLOSED
        FENCED     -> CLOSED
        FAILED     -> CLOSED
        CLOSED     ->

    - NEW -> JOINING: ``start()`` subscribed (group mode); JOINING -> RUNNING: the first assignment
      arrived (even an empty one). NEW -> RUNNING: ``start()`` assigned this pod's slice (ordinal mode).
    - JOINING -> REJOINING: KIP-848 refused the join because the broker still holds the instance id
      (UNRELEASED_INSTANCE_ID); the dead client is replaced until the id is released (-> JOINING, or
      RUNNING when the new client is assigned while watched) or the wait gives up (-> FAILED).
    - RUNNING -> JOINING (classic protocol): librdkafka lost its session locally and a request sent
      without its member id was refused as fenced by this process's own earlier member; the client is
      replaced and rejoins with the same instance id (the partitions were reported lost).
    - RUNNING -> REJOINING (``duplicate_policy='wait'``): a live process took the instance id; this one
      stands by without a client until the id is free (``_core/standby.py``), then joins (-> JOINING).
    - -> FENCED: another process took the instance id; -> FAILED: any other fatal error. Both are
      final: the consumer never commits or consumes again, and every call raises the same error.
    - -> CLOSING: ``close()`` or ``leave_group()`` of a consumer with a client, from JOINING, REJOINING
      or RUNNING. The last commit, the revoke callbacks the client runs on its way out, leaving the group
      and the client's close run in it; a fence met meanwhile still ends it FENCED (or FAILED).
    - -> CLOSED: the close finished, or ``close()`` of a consumer without a client (never started, or
      FENCED or FAILED: it never commits again), from any state.

    Consuming and committing work in JOINING, REJOINING, RUNNING and CLOSING (:attr:`Session.usable`):
    while closing, a listener may still mark records processed in ``on_revoked``, and they are committed.
    """

    NEW = "new"
    JOINING = "joining"
    REJOINING = "rejoining"
    RUNNING = "running"
    CLOSING = "closing"
    FENCED = "fenced"
    FAILED = "failed"
    CLOSED = "closed"


_ENDINGS = frozenset({State.FENCED, State.FAILED, State.CLOSED})
TRANSITIONS: Mapping[State, frozenset[State]] = {
    State.NEW: frozenset({State.JOINING, State.RUNNING, State.CLOSED}),
    State.JOINING: frozenset({State.RUNNING, State.REJOINING, State.CLOSING}) | _ENDINGS,
    State.REJOINING: frozenset({State.JOINING, State.RUNNING, State.CLOSING}) | _ENDINGS,
    State.RUNNING: frozenset({State.JOINING, State.REJOINING, State.CLOSING}) | _ENDINGS,
    State.CLOSING: _ENDINGS,
    State.FENCED: frozenset({State.CLOSED}),
    State.FAILED: frozenset({State.CLOSED}),
    State.CLOSED: frozenset(),
}
USABLE = frozenset({State.JOINING, State.REJOINING, State.RUNNING, State.CLOSING})


@dataclass(frozen=True, slots=True)
class Status:
    """What a consumer is doing at one moment, for health endpoints and readiness probes.

    ``ready`` only in RUNNING: the member joined and got its assignment (possibly empty: more replicas
    than partitions is fine). ``error`` says why the state is FENCED or FAILED. ``stopping``: a stop was
    asked for (SIGTERM) and the consumer is finishing its batch.
    """

    state: State
    group_id: str
    instance_id: str | None
    member_id: str | None
    generation: int | None
    assignment: tuple[TopicPartition, ...]
    stopping: bool = False
    error: str | None = None

    @property
    def ready(self) -> bool:
        return self.state is State.RUNNING


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


@dataclass
class StallWatch:
    """What the stall guard (``_core/stall.py``) keeps between client calls on the poll path.

    Calls are numbered as they return, so records and rebalance callbacks can be ordered: a callback
    runs inside the call that will return as number ``calls + 1``.
    """

    threshold_s: float | None = None  # gaps longer than this are checked; None: no group session
    last_return: float = 0.0  # the clock at the last return (see ``returned``)
    calls: int = 0  # client calls on the poll path that returned (and hand-outs of records given back)
    suspect_gap: float | None = None  # a gap over the threshold, not checked yet (no records since)
    suspect_call: int = 0  # the call that returned after that gap
    touched: dict[TopicPartition, int] = field(default_factory=dict)  # the last call (un)assigning each
    left_in: int = 0  # the last call in which partitions were revoked or lost
    lost_in: int = 0  # the last call in which partitions were lost
    # Partitions the broker disowned that the client has not reported lost yet, with the first offset
    # dropped since (None: nothing dropped), and since when.
    gone: dict[TopicPartition, int | None] = field(default_factory=dict)
    gone_since: float = 0.0

    def returned(self, now: float) -> None:
        """A client call on the poll path returned at ``now``, or records handed back earlier (a listener
        raised, a task was cancelled, a join attempt fetched them) go out at ``now`` without one: the
        process may have been frozen meanwhile all the same. Numbered like a call: rebalance callbacks
        run since the last one came before these records. The hot path: one subtraction."""
        if self.threshold_s is not None and self.calls and now - self.last_return > self.threshold_s:
            if self.suspect_gap is None:
                self.suspect_call = self.calls + 1
            self.suspect_gap = max(self.suspect_gap or 0.0, now - self.last_return)
        self.last_return = now
        self.calls += 1

    @property
    def checking(self) -> bool:
        """Whether the last call's records must go through the guard: a gap to check, partitions
        disowned, or partitions revoked or lost in that call (records handed back earlier may be theirs)."""
        return self.suspect_gap is not None or bool(self.gone) or self.left_in == self.calls

    def touch(self, partitions: Iterable[TopicPartition], *, left: bool = False, lost: bool = False) -> None:
        """A rebalance callback about ``partitions`` runs in the call under way."""
        call = self.calls + 1
        for tp in partitions:
            self.touched[tp] = call
            self.gone.pop(tp, None)  # the client knows now: a re-assignment restarts from the commit
        if left or lost:
            self.left_in = call
        if lost:
            self.lost_in = call


class Mode(Protocol):
    """How a consumer gets its partitions, and every decision that depends on the assignment mode or the
    group protocol: ``membership.ClassicMode`` and ``membership.ConsumerMode`` (group members) and
    ``ordinal.OrdinalMode`` implement it, ``modes.mode_for`` picks one. The consumer and the phases call
    it and never ask which one they have."""

    @property
    def refusal(self) -> str | None:
        """Why a group refuses a member of this protocol, and what to change; None for a consumer that
        never joins (nothing to refuse)."""
        ...

    @property
    def one_process_per_pod(self) -> bool:
        """Whether a pod runs one consumer only (no process pool)."""
        ...

    def plan(self, session: Session) -> JoinPlan:
        """The join plan: identity, the broker's capabilities, the static decision, the client config.
        The client of the likely plan is built before the probe runs (:meth:`Session.connect`)."""
        ...

    def join(self, session: Session) -> None:
        """Create the client and start consuming: subscribe (-> JOINING) or assign (-> RUNNING)."""
        ...

    def on_poll(self, session: Session, adapter: ConsumerAdapter) -> None:
        """Work on the poll path after each client call (ordinal: follow partition count changes)."""
        ...

    def recover(self, session: Session, error: PollError) -> bool:
        """Try to recover from a fatal ``error`` by replacing the client; True when it did."""
        ...

    def close(self, session: Session, adapter: ConsumerAdapter, *, leave: bool, timeout_s: float) -> bool:
        """Close ``adapter`` within ``timeout_s`` (leaving the group if ``leave``); True when the member
        is known to be gone from the group."""
        ...

    def commit_error(self, error: PollError, offsets: Mapping[TopicPartition, int]) -> StaticConsumerError:
        """The exception for a commit the broker refused (not fatally)."""
        ...


class Session:
    """A consumer's settings, seams, state, client and partitions: everything the core phases share.

    ``seams`` is what unit tests replace (a fake client, canned broker capabilities, a scripted group,
    instant sleeps); its parts are kept here as attributes for the phases.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        env: Mapping[str, str],
        dispatch: Dispatcher,
        mode: Mode,
        seams: Seams,
        stop: threading.Event,
    ) -> None:
        self.settings = settings
        self.env = env
        self.dispatch = dispatch
        self.mode = mode
        self.adapter_factory = seams.adapter_factory
        self.probe = seams.probe
        self.remove_member = seams.remove_member
        self.release_member = seams.release_member  # a crash restart's leave for its dead predecessor
        self.group_watch = seams.group_watch  # the broker look-ups of the wait for a held instance id
        self.stop = stop
        self.sleep = seams.sleep or stop.wait  # interruptible by stop(), e.g. from a SIGTERM handler
        self.clock = seams.clock
        self.state = State.NEW
        self.error: StaticConsumerError | None = None  # why the state is FENCED or FAILED
        self.plan: JoinPlan | None = None
        self.adapter: ConsumerAdapter | None = None
        self.offsets = OffsetTracker()
        self.commits = CommitFlight()  # the commit that does not wait (_core/ownership.py)
        self.buffer: deque[Record] = deque()  # records handed back after a listener raised
        self.stall = StallWatch()
        self.error_log = RateLimiter(30.0, self.clock)
        self._member_id: str | None = None
        self._generation: int | None = None
        self.tokens: TokenSource | None = None  # the OAUTHBEARER provider behind the current client
        self._early: tuple[dict[str, ConfigValue], ConsumerAdapter] | None = None  # see connect()

    # -- state ---------------------------------------------------------------------------------------

    def move(self, to: State) -> None:
        """Change state; a transition the table does not allow is a bug in the core."""
        if to not in TRANSITIONS[self.state]:
            raise RuntimeError(f"static_consumer bug: no transition {self.state.name} -> {to.name}")
        logging.getLogger(__name__).debug("state %s -> %s", self.state.name, to.name)
        self.state = to

    def end(self, to: State, error: StaticConsumerError) -> StaticConsumerError:
        """Move to FENCED or FAILED for ``error``: nothing is committed or handed out any more."""
        self.move(to)
        self.error = error
        self.offsets.clear()
        self.commits = CommitFlight()
        self.buffer.clear()
        return error

    @property
    def usable(self) -> bool:
        """Whether consuming and committing are allowed (JOINING, REJOINING, RUNNING, CLOSING)."""
        return self.state in USABLE

    def give_back(self, records: Sequence[Record]) -> None:
        """Records handed out but not processed: they come first on the next call, in their order (a
        skipped record whose successors get committed would be lost). Dropped once the session ended."""
        if self.usable:
            self.buffer.extendleft(reversed(records))

    def status(self) -> Status:
        """The consumer's :class:`Status` now. Asks the client for the member id and generation, so call
        it on the thread that drives the consumer (librdkafka serializes calls into one consumer)."""
        return Status(
            state=self.state,
            group_id=self.settings.group_id,
            instance_id=self.instance_id,
            member_id=self.member_id(),
            generation=self.generation(),
            assignment=tuple(sorted(self.offsets.owned)),
            stopping=self.stop.is_set(),
            error=None if self.error is None else str(self.error),
        )

    # -- identity ------------------------------------------------------------------------------------

    @property
    def instance_id(self) -> str | None:
        return self.plan.instance_id if self.plan is not None else None

    def member_id(self) -> str | None:
        """The member id the client reports, or the last one seen (kept after close)."""
        if self.adapter is not None and self.usable:
            self._member_id = self.adapter.member_id() or self._member_id
        return self._member_id

    def generation(self) -> int | None:
        """The group generation (classic) or member epoch (consumer protocol) last seen."""
        if self.adapter is not None and self.usable:
            generation = self.adapter.generation()
            self._generation = self._generation if generation is None else generation
        return self._generation

    def event_fields(self) -> dict[str, Any]:
        """The fields every membership event carries."""
        return {
            "group_id": self.settings.group_id,
            "instance_id": self.instance_id,
            "member_id": self.member_id(),
            "generation": self.generation(),
        }

    # -- the client ----------------------------------------------------------------------------------

    def connect(self, config: dict[str, ConfigValue]) -> None:
        """Build the client for ``config`` now, before the join plan exists: librdkafka connects to the
        bootstrap servers and reads the cluster's metadata while the capability gate asks the broker
        (a restart reaches its first record sooner). It does not subscribe or assign, so nothing joins the
        group before the gate passed: :meth:`new_client` hands it out only when the plan ended with the
        config (the same object: the mode's plan keeps the early config when the gate agreed with it), and
        :meth:`drop_early` closes it otherwise. A client that cannot be built is built again after the
        gate, which then reports the problem in its own words."""
        try:
            client = build_client(self.settings, dict(config), self.adapter_factory)
        except StaticConsumerError:
            return
        self._early = (config, client)

    def drop_early(self) -> None:
        """Close the client :meth:`connect` built, if no plan took it (bounded: it never joined)."""
        early, self._early = self._early, None
        if early is not None:
            close_bounded(early[1], self.settings.shutdown_timeout_s, logging.getLogger(__name__))

    def new_client(self) -> ConsumerAdapter:
        """A new client for the join plan (not yet subscribed or assigned): the one built early when the
        plan kept its config."""
        if self.plan is None:
            raise RuntimeError("static_consumer bug: a client was asked for before the join plan")
        config = self.plan.config
        early = self._early
        if early is not None and early[0] is config:
            self._early = None
            client = early[1]
        else:
            self.drop_early()
            client = build_client(self.settings, dict(config), self.adapter_factory)
        self.tokens = token_source(config)
        return client

    def token_lost(self) -> str | None:
        """Why no client can log in any more: the OAUTHBEARER token expired while the provider kept
        failing (:meth:`~static_consumer._security.oauth.TokenSource.lost`); None otherwise and without
        one."""
        return None if self.tokens is None else self.tokens.lost()


def build_client(
    settings: ConsumerSettings,
    config: dict[str, ConfigValue],
    factory: Callable[[dict[str, ConfigValue]], ConsumerAdapter],
) -> ConsumerAdapter:
    """The consumer client for ``config``: with OAUTHBEARER its first token is fetched first, within
    ``connect_timeout_s`` (confluent-kafka would wait a fixed 10 s in the constructor for a provider
    that failed, then raise without its reason); a client that cannot be built is a project error."""
    first_token(config, settings)
    try:
        return factory(config)
    except AdapterError as exc:
        raise _refused(settings, config, exc.error) from None


def _refused(
    settings: ConsumerSettings, config: dict[str, ConfigValue], error: PollError
) -> StaticConsumerError:
    source = token_source(config)
    if source is not None and source.failure is not None:
        return token_error(settings, source.failure)
    text = scrub_for(settings, f"{error.name}: {error.reason}")
    if error.kind is ErrorKind.AUTHENTICATION:
        return AuthenticationError(f"the consumer could not log in ({text}); check the sasl_* settings")
    if error.kind in (ErrorKind.CONFIGURATION, ErrorKind.TLS):
        return ConfigurationError(
            f"the consumer client refused its configuration ({text}); check the ssl_* and sasl_* "
            "settings and the librdkafka passthrough"
        )
    return FatalConsumerError(f"the consumer client could not be created ({text})")


__all__ = [
    "USABLE",
    "TRANSITIONS",
    "Mode",
    "RateLimiter",
    "Session",
    "StallWatch",
    "State",
    "Status",
]
