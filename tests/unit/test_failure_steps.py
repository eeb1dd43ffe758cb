"""The handler-failure policy and its steps, without a consumer: which record failed, what is handed to
the handler again, when retrying stops, what is settled and what is committed (docs/failures.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import tenacity
from fakes import rec

from static_consumer import ConsumerSettings, OnFailure, RecordFailedError
from static_consumer._base.errors import ConfigurationError, FencedInstanceError
from static_consumer._base.records import Record
from static_consumer._core.recovery.attempts import Call, Outcome, Settle, Wait, attempts
from static_consumer._core.recovery.policy import budget_s, is_handler_failure

Handler = Callable[[Sequence[Record]], None]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drive(
    batch: Sequence[Record],
    handler: Handler,
    policy: OnFailure,
    *,
    budget: float = 1000.0,
    call_s: float = 0.0,
    stop_after_waits: int | None = None,
) -> tuple[Outcome, list[object]]:
    """Run the steps the way a runner does (the clock moves by the waits and ``call_s`` per call)."""
    clock, log, waits = Clock(), [], 0
    steps = attempts(batch, policy, budget_s=budget, clock=clock, stopping=lambda: stopped)
    stopped = False
    result: BaseException | None = None
    step = next(steps)
    try:
        while True:
            log.append(step)
            result = None
            if isinstance(step, Call):
                clock.now += call_s
                try:
                    handler(step.records)
                except BaseException as exc:  # noqa: BLE001 - handed to the steps
                    result = exc
            elif isinstance(step, Wait):
                clock.now += step.seconds
                waits += 1
                stopped = stop_after_waits is not None and waits >= stop_after_waits
            step = steps.send(result)
    except StopIteration as done:
        return done.value, log


def batch(*offsets: int, partition: int = 0) -> list[Record]:
    return [rec(partition, o) for o in offsets]


def poison(*bad: int, typed: bool = True, fails: int | None = None) -> tuple[Handler, list[list[int]]]:
    """A handler that fails on offsets ``bad`` (``fails`` times each, else always); it records the
    offsets each call was handed, and handles them in order."""
    calls: list[list[int]] = []
    left = {o: fails for o in bad}

    def handle(records: Sequence[Record]) -> None:
        calls.append([r.offset for r in records])
        for r in records:
            if r.offset in left and (left[r.offset] is None or left[r.offset] > 0):  # type: ignore[operator]
                if left[r.offset] is not None:
                    left[r.offset] -= 1  # type: ignore[operator]
                if typed:
                    raise RecordFailedError(r) from ValueError(f"bad {r.offset}")
                raise ValueError(f"bad {r.offset}")

    return handle, calls


def policy(then: str = "dead_letter", attempts_: int = 3, wait: float = 1.0) -> OnFailure:
    return OnFailure(
        stop=tenacity.stop_after_attempt(attempts_),
        wait=tenacity.wait_exponential(multiplier=wait, max=10),
        then=then,  # type: ignore[arg-type]
    )


def settled(log: list[object]) -> list[tuple[int, int]]:
    return [(s.record.offset, s.attempts) for s in log if isinstance(s, Settle)]


def test_a_batch_the_handler_takes_is_one_call_and_settles_whole() -> None:
    handle, calls = poison()
    b = batch(0, 1, 2)
    outcome, log = drive(b, handle, policy())
    assert outcome == Outcome(3) and calls == [[0, 1, 2]]
    assert isinstance(log[0], Call) and log[0].records is b  # the batch itself, not a copy


def test_a_transient_failure_is_retried_and_every_record_handled_once_after_it() -> None:
    handle, calls = poison(1, fails=2)
    outcome, log = drive(batch(0, 1, 2), handle, policy())
    # Records before the named one are not handed out again; the retries start at the failing one.
    assert calls == [[0, 1, 2], [1, 2], [1, 2]]
    assert [s.seconds for s in log if isinstance(s, Wait)] == [1.0, 2.0]
    assert outcome == Outcome(3) and settled(log) == []


def test_a_named_record_that_keeps_failing_is_settled_alone_and_the_rest_goes_on() -> None:
    handle, calls = poison(1, 3)
    outcome, log = drive(batch(0, 1, 2, 3, 4), handle, policy(attempts_=2))
    assert settled(log) == [(1, 2), (3, 2)]
    assert calls == [[0, 1, 2, 3, 4], [1, 2, 3, 4], [2, 3, 4], [3, 4], [4]]
    assert outcome == Outcome(5)
    settle = next(s for s in log if isinstance(s, Settle))
    assert isinstance(settle.error, ValueError) and settle.settled == 1  # the cause, and what came before


def test_an_unnamed_failure_retries_the_batch_then_goes_record_by_record() -> None:
    handle, calls = poison(1, typed=False)
    outcome, log = drive(batch(0, 1, 2), handle, policy(attempts_=2))
    # Twice the batch, then one record at a time: 0 and 2 are handled (0 a second time), 1 is settled.
    assert calls == [[0, 1, 2], [0, 1, 2], [0], [1], [2]]
    assert settled(log) == [(1, 3)] and outcome == Outcome(3)


def test_stop_commits_what_came_before_the_named_record_and_raises() -> None:
    handle, _ = poison(2)
    outcome, log = drive(batch(0, 1, 2, 3), handle, policy("stop", attempts_=3))
    assert outcome.settled == 2 and isinstance(outcome.error, RecordFailedError)
    assert outcome.failed is not None and outcome.failed.offset == 2 and outcome.attempts == 3
    assert settled(log) == []


def test_stop_after_an_unnamed_failure_commits_nothing_of_the_batch() -> None:
    handle, calls = poison(2, typed=False)
    outcome, _ = drive(batch(0, 1, 2), handle, policy("stop", attempts_=2))
    assert outcome.settled == 0 and isinstance(outcome.error, ValueError) and len(calls) == 2


def test_retries_end_before_the_budget_runs_out() -> None:
    handle, calls = poison(0)
    # Waits 1, 2, 4, 8 would be allowed by the policy; a 10 s budget allows 1 and 2 (1+2+4 >= 10 - 1 s
    # of calls), then the record is settled with the attempts it had.
    outcome, log = drive(batch(0, 1), handle, policy(attempts_=10), budget=10.0, call_s=1.0)
    assert [s.seconds for s in log if isinstance(s, Wait)] == [1.0, 2.0]
    assert settled(log) == [(0, 3)] and outcome == Outcome(2)


def test_a_stop_request_during_the_retries_settles_nothing_more() -> None:
    handle, _ = poison(1)
    outcome, log = drive(batch(0, 1, 2), handle, policy(attempts_=5), stop_after_waits=1)
    assert outcome == Outcome(1, interrupted=True) and settled(log) == []


def test_library_errors_from_the_handler_are_never_retried_or_settled() -> None:
    def handle(records: Sequence[Record]) -> None:
        raise FencedInstanceError("another process took the id")

    outcome, log = drive(batch(0, 1), handle, policy())
    assert isinstance(outcome.error, FencedInstanceError) and outcome.settled == 0 and len(log) == 1
    assert not is_handler_failure(KeyboardInterrupt()) and not is_handler_failure(ConfigurationError("x"))
    assert is_handler_failure(RecordFailedError(rec(0, 0))) and is_handler_failure(KeyError("x"))


def test_tenacity_strategies_compose() -> None:
    composed = OnFailure(
        stop=tenacity.stop_after_attempt(5) | tenacity.stop_after_delay(2.5),
        wait=tenacity.wait_fixed(1.0),
        then="skip",
    )
    handle, _ = poison(0)
    _, log = drive(batch(0), handle, composed)
    # stop_after_delay counts from the record's first attempt: after waits of 1 and 1, 2 s have passed,
    # the third failure (at 2 s) still allows one more; the fourth (at 3 s) ends it.
    assert [s.seconds for s in log if isinstance(s, Wait)] == [1.0, 1.0, 1.0]
    assert settled(log) == [(0, 4)]


def test_the_settings_make_the_policy_and_the_budget() -> None:
    settings = ConsumerSettings(
        bootstrap_servers="127.0.0.1:9092",
        group_id="g",
        topics=("t",),
        failure_retries=2,
        failure_backoff_s=0.5,
        failure_max_backoff_s=1.0,
        failure_action="skip",
        max_poll_interval_ms=60_000,
    )
    made = OnFailure.from_settings(settings)
    handle, _ = poison(0)
    _, log = drive(batch(0), handle, made)
    assert [s.seconds for s in log if isinstance(s, Wait)] == [0.5, 1.0] and settled(log) == [(0, 3)]
    assert budget_s(settings) == 30.0
    with pytest.raises(ValueError, match="then must be one of"):
        OnFailure(then="retry")  # type: ignore[arg-type]
