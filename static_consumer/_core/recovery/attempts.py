"""One batch through the handler under an :class:`~static_consumer._core.recovery.policy.OnFailure`, as
the steps a runner carries out. Sans I/O: :func:`attempts` is a generator that yields what to do next
(:class:`Call` the handler, :class:`Wait`, :class:`Settle` a record by dead-lettering or skipping it) and
returns the :class:`Outcome`; the sync and the asyncio runner drive the same generator.

Which record failed (docs/failures.md, batches):

- The handler raised :class:`~static_consumer.RecordFailedError` naming a record of the call: the
  records before it in the batch's order are handled (never handed to the handler again), and the
  retries call the handler with the batch from that record on. Once they are spent, only that record
  is dead-lettered or skipped, and the handler gets the records after it (with fresh retries).
- It raised anything else: the whole call failed. The retries hand it the same records again; once they
  are spent, the runner calls the handler with one record at a time, in order, one attempt each, and
  dead-letters or skips each record that fails alone. Records the handler had dealt with before it
  raised are so handed to it again (at-least-once: handlers are idempotent anyway).

With ``then='stop'`` nothing is dead-lettered or skipped: the outcome carries the error to raise, and the
records settled before the failing one (the handled prefix) are what the runner commits first.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

import tenacity

from static_consumer._base.errors import RecordFailedError
from static_consumer._base.records import Record
from static_consumer._core.recovery.policy import OnFailure, is_handler_failure


@dataclass(frozen=True, slots=True)
class Call:
    """Call the handler with ``records``; send back None when it returned, else its exception."""

    records: Sequence[Record]


@dataclass(frozen=True, slots=True)
class Wait:
    """The handler failed (``attempt`` failed attempts so far for ``first``, the record it named or the
    first of the call); wait ``seconds`` before the next attempt, which gets ``records`` records."""

    seconds: float
    first: Record
    records: int
    attempt: int
    error: BaseException


@dataclass(frozen=True, slots=True)
class Settle:
    """Retrying ``record`` is over: dead-letter or skip it (the policy's ``then``). ``settled`` records of
    the batch come before it (what to commit should settling fail); ``error`` is the handler's own
    exception (a :class:`RecordFailedError`'s cause)."""

    record: Record
    attempts: int
    error: BaseException
    settled: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the batch ended: its first ``settled`` records (in the batch's order) are handled,
    dead-lettered or skipped, which is what the runner commits. ``error``: raise it after that commit
    (``then='stop'``, or a library error from the handler). ``interrupted``: the consumer is stopping and
    the retries ended early; the rest of the batch is left uncommitted, for the next incarnation."""

    settled: int
    error: BaseException | None = None
    interrupted: bool = False
    failed: Record | None = None  # with ``error``: the record it failed on (or the first of the call)
    attempts: int = 0


Step = Call | Wait | Settle


def _position(record: Record) -> tuple[str, int, int]:
    return (record.topic, record.partition, record.offset)


def _named(error: BaseException, pending: Sequence[Record]) -> int | None:
    """Where in ``pending`` the record a :class:`RecordFailedError` names is; None for another error or
    a record not in the call."""
    if not isinstance(error, RecordFailedError):
        return None
    wanted = _position(error.record)
    return next((i for i, r in enumerate(pending) if _position(r) == wanted), None)


def cause_of(error: BaseException) -> BaseException:
    """The handler's own exception behind ``error``."""
    return error.cause if isinstance(error, RecordFailedError) else error


def _state(attempt: int, began: float, now: float, error: BaseException) -> tenacity.RetryCallState:
    """tenacity's call state after failed attempt ``attempt`` (the first began at ``began``): what its
    ``stop`` and ``wait`` strategies read, timed by the runner's clock."""
    state = tenacity.RetryCallState(tenacity.Retrying(), None, (), {})
    state.attempt_number = attempt
    state.start_time = began
    outcome = tenacity.Future(attempt)
    outcome.set_exception(error)
    state.outcome, state.outcome_timestamp = outcome, now
    return state


def attempts(
    batch: Sequence[Record],
    policy: OnFailure,
    *,
    budget_s: float,
    clock: Callable[[], float],
    stopping: Callable[[], bool],
) -> Generator[Step, BaseException | None, Outcome]:
    """The steps of handling ``batch`` (see the module docstring). Retries end when ``policy.stop`` says
    so, when the next attempt would begin more than ``budget_s`` after this call, or at ``stopping()``."""
    began = clock()
    settled = 0
    pending: Sequence[Record] = batch  # the handler gets the batch itself first (a RecordList stays one)
    culprit: tuple[str, int, int] | None = None
    failures, first_at = 0, began
    while pending:
        attempt_at = clock()
        error = yield Call(pending)
        if error is None:
            return Outcome(len(batch))
        if not is_handler_failure(error):
            return Outcome(settled, error=error, failed=pending[0], attempts=failures + 1)
        index = _named(error, pending)
        if index is not None:
            settled, pending = settled + index, list(pending[index:])
        named = _position(pending[0]) if index is not None else None
        if failures == 0 or named != culprit:  # a new failure: its own count and clock
            culprit, failures, first_at = named, 0, attempt_at
        failures += 1
        now = clock()
        state = _state(failures, first_at, now, error)
        wait = float(policy.wait(state))
        state.upcoming_sleep = wait
        if stopping():
            return Outcome(settled, interrupted=True)
        if not policy.stop(state) and now - began + wait < budget_s:
            yield Wait(wait, pending[0], len(pending), failures, cause_of(error))
            if stopping():
                return Outcome(settled, interrupted=True)
            continue
        if policy.then == "stop":
            return Outcome(settled, error=error, failed=pending[0], attempts=failures)
        if index is not None:
            yield Settle(pending[0], failures, cause_of(error), settled)
            settled, pending, failures = settled + 1, list(pending[1:]), 0
            continue
        # Which record failed is unknown: one at a time, one attempt each.
        for record in pending:
            if stopping():
                return Outcome(settled, interrupted=True)
            alone = yield Call([record])
            if alone is not None:
                if not is_handler_failure(alone):
                    return Outcome(settled, error=alone, failed=record, attempts=failures + 1)
                yield Settle(record, failures + 1, cause_of(alone), settled)
            settled += 1
        return Outcome(len(batch))
    return Outcome(len(batch))


__all__ = ["Call", "Outcome", "Settle", "Step", "Wait", "attempts", "cause_of"]
