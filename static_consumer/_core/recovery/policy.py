"""The handler-failure policy: when to retry, how long to wait, and what to do once retrying stops.

Composed the way tenacity composes a retry: ``stop`` and ``wait`` are tenacity's own strategies (combine
them with ``|`` and ``+``), each called with one ``RetryCallState`` that says how many attempts failed
and how long ago the first one began; ``then`` is the action. Guarantees, whatever the strategies:

- a record is committed only once it was handled, dead-lettered (acknowledged) or skipped, in its
  partition's order: never a record after one that is still failing;
- retrying never outlasts half of ``max_poll_interval_ms`` from the moment the batch was handed out
  (``budget_s``), so the member keeps its session and its partitions: the runner adds that bound to
  ``stop`` itself;
- library errors (fenced, closed, a missing ACL) raised from inside the handler are never retried,
  dead-lettered or skipped: they end the runner as they always did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import tenacity
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from static_consumer._base.errors import RecordFailedError, StaticConsumerError

if TYPE_CHECKING:
    from static_consumer.settings import ConsumerSettings

Action = Literal["stop", "dead_letter", "skip"]
ACTIONS: tuple[Action, ...] = ("stop", "dead_letter", "skip")


def _default_stop() -> stop_base:
    return tenacity.stop_after_attempt(4)


def _default_wait() -> wait_base:
    return tenacity.wait_exponential(multiplier=1.0, max=10.0)


@dataclass(frozen=True)
class OnFailure:
    """What a runner does when its handler raises. ``stop`` ends the retries (it is asked after every
    failed attempt, with the wait ``wait`` chose as ``upcoming_sleep``), ``wait`` says how long to wait
    before the next attempt, ``then`` what happens to a record still failing: ``stop`` (raise the
    handler's error, nothing past the record committed), ``dead_letter`` (write it to
    ``dead_letter_topic``, ``{topic}`` being its source topic, and go on) or ``skip`` (go on without it).
    The defaults are the settings' defaults: 3 retries 1, 2 and 4 s apart, then stop."""

    stop: stop_base = field(default_factory=_default_stop)
    wait: wait_base = field(default_factory=_default_wait)
    then: Action = "stop"
    dead_letter_topic: str = "{topic}-dlt"
    dead_letter_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.then not in ACTIONS:
            raise ValueError(f"then must be one of {ACTIONS}, got {self.then!r}")
        if self.dead_letter_timeout_s <= 0:
            raise ValueError(f"dead_letter_timeout_s must be > 0, got {self.dead_letter_timeout_s}")

    @classmethod
    def from_settings(cls, settings: ConsumerSettings) -> OnFailure:
        """The policy the settings describe (``failure_*``, ``dead_letter_*``)."""
        return cls(
            stop=tenacity.stop_after_attempt(settings.failure_retries + 1),
            wait=tenacity.wait_exponential(
                multiplier=settings.failure_backoff_s, max=settings.failure_max_backoff_s
            ),
            then=settings.failure_action,
            dead_letter_topic=settings.dead_letter_topic,
            dead_letter_timeout_s=settings.dead_letter_timeout_s,
        )


def is_handler_failure(error: BaseException) -> bool:
    """Whether ``error`` from a handler falls under the policy: any ``Exception`` but the library's own
    errors (a fence, a closed consumer, a missing ACL met inside the handler end the runner unchanged);
    :class:`RecordFailedError` is the handler's, so it does. ``KeyboardInterrupt`` and ``SystemExit``
    never do."""
    if isinstance(error, RecordFailedError):
        return True
    return isinstance(error, Exception) and not isinstance(error, StaticConsumerError)


def budget_s(settings: ConsumerSettings) -> float:
    """How long the retries of one batch may go on: half of ``max_poll_interval_ms``, which leaves the
    handler's last attempt as much again before librdkafka would leave the group."""
    return settings.max_poll_interval_ms / 2000.0


__all__ = ["ACTIONS", "Action", "OnFailure", "budget_s", "is_handler_failure"]
