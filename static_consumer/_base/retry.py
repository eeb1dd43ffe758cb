"""Bounded retry policies derived from ``error.retriable``.

Retriability is data on the exception (see :mod:`static_consumer._base.errors`), never a guess from its type
name, and a fatal error is never retried. Every policy has a stop condition: a deadline, optionally an
attempt limit and an external "stop now" flag (tenacity's own default retries forever). Sleep and clock
are injectable so tests run instantly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

log = logging.getLogger(__name__)
T = TypeVar("T")


def is_retriable(exc: BaseException) -> bool:
    """True only when the exception says so through a ``retriable`` attribute set to True."""
    return getattr(exc, "retriable", False) is True


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter, stopped by ``deadline_s`` (and ``max_attempts`` if set).

    The deadline counts from the first attempt, and no sleep starts that would end past it.
    """

    deadline_s: float
    max_attempts: int | None = None
    initial_wait_s: float = 0.5
    max_wait_s: float = 5.0
    jitter_s: float = 0.5

    def __post_init__(self) -> None:
        if self.deadline_s <= 0:
            raise ValueError(f"deadline_s must be > 0, got {self.deadline_s}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")

    def retrying(
        self,
        *,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        should_stop: Callable[[], bool] | None = None,
        what: str = "operation",
    ) -> tenacity.Retrying:
        """A single-use ``tenacity.Retrying`` (its deadline starts now) that retries retriable errors.

        The last error is re-raised as is when the policy gives up, so callers see the project's error
        (e.g. UnreleasedInstanceIdError), not tenacity's RetryError.
        """
        started = clock()

        def stop(state: tenacity.RetryCallState) -> bool:
            if should_stop is not None and should_stop():
                return True
            if self.max_attempts is not None and state.attempt_number >= self.max_attempts:
                return True
            return clock() - started + state.upcoming_sleep > self.deadline_s

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            log.warning(
                "%s failed (attempt %d): %s; retrying in %.1fs",
                what,
                state.attempt_number,
                exc,
                state.upcoming_sleep,
            )

        return tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_retriable),
            stop=stop,
            wait=tenacity.wait_exponential_jitter(
                multiplier=self.initial_wait_s, max=self.max_wait_s, jitter=self.jitter_s
            ),
            sleep=lambda seconds: _void(sleep(seconds)),  # so Event.wait (which returns bool) fits
            before_sleep=before_sleep,
            reraise=True,
        )

    def call(
        self,
        fn: Callable[[], T],
        *,
        sleep: Callable[[float], object] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        should_stop: Callable[[], bool] | None = None,
        what: str = "operation",
    ) -> T:
        """Call ``fn`` until it succeeds, raises a non-retriable error, or the policy stops."""
        retrying = self.retrying(sleep=sleep, clock=clock, should_stop=should_stop, what=what)
        return retrying(fn)


def _void(_: object) -> None:
    """Discard a value (adapts sleep functions that return one)."""


__all__ = ["RetryPolicy", "is_retriable"]
