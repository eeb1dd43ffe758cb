"""Retry policies: only retriable errors, always bounded, original error re-raised."""

from __future__ import annotations

import pytest
from fakes import FakeTime

from static_consumer._base.errors import (
    BrokerUnavailableError,
    ConfigurationError,
    FatalConsumerError,
    FencedInstanceError,
    UnreleasedInstanceIdError,
)
from static_consumer._base.retry import RetryPolicy, is_retriable


class Flaky:
    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def test_retriable_attribute_decides() -> None:
    assert is_retriable(BrokerUnavailableError("x"))
    assert is_retriable(UnreleasedInstanceIdError("x"))
    assert not is_retriable(FencedInstanceError("x"))
    assert not is_retriable(ConfigurationError("x"))
    assert not is_retriable(TimeoutError("no attribute"))


def test_retriable_errors_are_retried_until_success() -> None:
    t = FakeTime()
    fn = Flaky(BrokerUnavailableError("down"), BrokerUnavailableError("down"))
    assert RetryPolicy(deadline_s=30).call(fn, sleep=t.sleep, clock=t.clock) == "ok"
    assert fn.calls == 3
    assert len(t.sleeps) == 2


@pytest.mark.parametrize(
    "error", [FencedInstanceError("fenced"), FatalConsumerError("dead"), ValueError("bug")]
)
def test_non_retriable_errors_are_raised_at_once(error: BaseException) -> None:
    t = FakeTime()
    fn = Flaky(error)
    with pytest.raises(type(error)):
        RetryPolicy(deadline_s=30).call(fn, sleep=t.sleep, clock=t.clock)
    assert fn.calls == 1 and t.sleeps == []


def test_deadline_stops_and_reraises_the_last_error() -> None:
    t = FakeTime()
    fn = Flaky(*(UnreleasedInstanceIdError(f"held {i}") for i in range(1000)))
    with pytest.raises(UnreleasedInstanceIdError, match="held"):
        RetryPolicy(deadline_s=20, max_wait_s=5).call(fn, sleep=t.sleep, clock=t.clock)
    assert t.now <= 20  # no sleep runs past the deadline
    assert 4 <= fn.calls < 1000


def test_backoff_grows_and_is_capped() -> None:
    t = FakeTime()
    fn = Flaky(*(BrokerUnavailableError("down") for _ in range(8)))
    RetryPolicy(deadline_s=1000, initial_wait_s=0.5, max_wait_s=4, jitter_s=0).call(
        fn, sleep=t.sleep, clock=t.clock
    )
    assert t.sleeps[:4] == [0.5, 1.0, 2.0, 4.0]
    assert max(t.sleeps) == 4


def test_max_attempts_and_should_stop() -> None:
    t = FakeTime()
    fn = Flaky(*(BrokerUnavailableError("down") for _ in range(10)))
    with pytest.raises(BrokerUnavailableError):
        RetryPolicy(deadline_s=1000, max_attempts=3).call(fn, sleep=t.sleep, clock=t.clock)
    assert fn.calls == 3
    fn = Flaky(*(BrokerUnavailableError("down") for _ in range(10)))
    with pytest.raises(BrokerUnavailableError):
        RetryPolicy(deadline_s=1000).call(fn, sleep=t.sleep, clock=t.clock, should_stop=lambda: True)
    assert fn.calls == 1


@pytest.mark.parametrize("kwargs", [{"deadline_s": 0}, {"deadline_s": 5, "max_attempts": 0}])
def test_policy_must_be_bounded(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
