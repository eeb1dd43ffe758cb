"""Waiting for the subscribed topics to exist, and giving up after ``missing_topic_timeout_s``.

librdkafka never ends a subscription to a topic that does not exist. Observed with librdkafka 2.16 on
Kafka 4.3: under the classic protocol it reports UNKNOWN_TOPIC_OR_PART once (for a ``^regex`` that
matches nothing too) and then waits without ever being assigned; under the consumer protocol (KIP-848) it
reports nothing at all. A consumer subscribed to a misspelled topic would run forever consuming nothing,
and its pod would look healthy.

:class:`TopicWatch` asks fresh cluster metadata which subscribed names, and which patterns, match no
topic: when the consumer joins (before any Fetch is in flight: a metadata request sent behind a long-poll
Fetch waits for it), then every ``CHECK_INTERVAL_S`` while something is missing, and never again once
everything exists (so a running consumer pays one metadata request). A topic still missing at the
deadline ends the session with :class:`~static_consumer._base.errors.MissingTopicError` (a configuration
error, exit 78). A metadata read that fails (brokers restarting) proves nothing: it is tried again and
never ends the session by itself. Patterns are matched with Python's ``re``; for the patterns topic names
need it agrees with librdkafka's regex dialect and the broker's RE2/J (KIP-848).

Under an authorizer the brokers list to a principal only the topics it may DESCRIBE, and match a regex
against those (both protocols, Kafka 4.3): a ``^regex`` whose topics exist but are hidden looks exactly
like one that matches nothing, so the error says both and names the PREFIXED ACL that covers the regex.
A named topic the principal may not describe is refused by name instead (an ``AuthorizationError``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from static_consumer._base.errors import MissingTopicError
from static_consumer._core.events import FatalError
from static_consumer._core.seam import AdapterError, ConsumerAdapter
from static_consumer._core.session import Session, State
from static_consumer._kafka.acls import hidden_topics
from static_consumer._security.secrets import scrub_for

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 10.0  # while a topic is missing; the metadata request stops once all exist
_CALL_TIMEOUT_S = 5.0  # the check runs inside poll(), so keep each metadata read short


class TopicWatch:
    """Ends a session whose subscription still names a missing topic after ``timeout_s`` (None: never,
    with a warning). Created when the consumer joins; the clock starts then."""

    def __init__(self, subscription: Sequence[str], timeout_s: float | None, clock: Callable[[], float]):
        self._subscription = tuple(subscription)
        self._timeout_s = timeout_s
        self._clock = clock
        now = clock()
        self._deadline = None if timeout_s is None else now + timeout_s
        self._due: float | None = now  # None once every topic was seen
        self._warned = False

    @property
    def done(self) -> bool:
        """True once every subscribed topic (and pattern) was seen in the cluster."""
        return self._due is None

    def check(self, session: Session, adapter: ConsumerAdapter) -> None:
        """Look when due; raise MissingTopicError (ending the session) past the deadline."""
        if self._due is None:  # the common case, on every poll: nothing left to watch
            return
        now = self._clock()
        if now < self._due:
            return
        self._due = now + CHECK_INTERVAL_S
        if self._deadline is not None and now < self._deadline:
            self._due = min(self._due, self._deadline)  # look again right at the deadline
        timeout = min(_CALL_TIMEOUT_S, session.settings.connect_timeout_s)
        try:
            missing = adapter.unmatched(self._subscription, timeout)
        except AdapterError as exc:
            log.info("could not read the topic metadata (%s); looking again in a moment", exc)
            return
        if not missing:
            if self._warned:
                log.info("every subscribed topic exists now: %s", list(self._subscription))
            self._due = None
            return
        if self._timeout_s is not None and self._deadline is not None and now >= self._deadline:
            raise _fail(session, missing, self._timeout_s)
        if not self._warned:
            self._warned = True
            log.warning(
                "subscribed %s no topic in the cluster%s; waiting %s for it to be created",
                _listed(missing),
                " (or none this principal may describe)" if any(m.startswith("^") for m in missing) else "",
                "without a limit"
                if self._timeout_s is None
                else f"up to missing_topic_timeout_s={self._timeout_s:g} s",
            )


def _listed(missing: Sequence[str]) -> str:
    return ", ".join(repr(m) for m in missing) + (" matches" if len(missing) == 1 else " match")


def _fail(session: Session, missing: Sequence[str], timeout_s: float) -> MissingTopicError:
    settings = session.settings
    # A principal sees only the topics it may describe: a regex's topics can exist and be hidden. (A named
    # topic it may not describe is refused by name instead, an AuthorizationError.)
    patterns = [m for m in missing if m.startswith("^")]
    hidden = f"; {hidden_topics(settings, patterns)}" if patterns else ""
    exc = MissingTopicError(
        f"subscribed {_listed(missing)} no topic in the cluster at {settings.bootstrap_servers} after "
        f"missing_topic_timeout_s={timeout_s:g} s: check the names in topics (STATIC_CONSUMER_TOPICS) and "
        "bootstrap_servers, or create the topics; if another deployment step creates them later, raise "
        f"missing_topic_timeout_s{hidden}"
    )
    session.end(State.FAILED, exc)  # nothing to hand out or commit any more: like any other ending
    log.error("%s", exc)
    session.dispatch.emit(FatalError(**session.event_fields(), error=scrub_for(settings, str(exc))))
    return exc


__all__ = ["CHECK_INTERVAL_S", "TopicWatch"]
