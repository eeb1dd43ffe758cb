"""SIGTERM path: finish the batch, commit, close without leaving; exit codes for a pod's main."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from fakes import FENCED, MODERN, Assign, FakeFactory, rec, tp

from static_consumer._base.errors import (
    BrokerUnavailableError,
    ConfigurationError,
    FencedInstanceError,
    StaticMembershipUnsupportedError,
    exit_code_for,
)
from static_consumer._base.records import Record
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.seams import Seams
from static_consumer._core.shutdown import run_until_sigterm
from static_consumer.settings import ConsumerSettings


def make(*scripts: Any) -> tuple[StaticConsumer, FakeFactory]:
    factory = FakeFactory(*scripts)
    settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",))
    consumer = StaticConsumer(
        settings, env={"POD_NAME": "app-0"}, seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN)
    )
    return consumer, factory


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (None, 0),
        (FencedInstanceError("x"), 82),
        (BrokerUnavailableError("x"), 75),
        (ConfigurationError("x"), 78),
        (StaticMembershipUnsupportedError("x"), 69),
        (RuntimeError("bug"), 70),
        (KeyboardInterrupt(), 130),
    ],
)
def test_exit_codes(exc: BaseException | None, code: int) -> None:
    assert exit_code_for(exc) == code


def test_sigterm_finishes_batch_commits_and_closes_without_leaving() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), rec(0, 1), None, rec(0, 2)])
    batches: list[list[int]] = []
    before = signal.getsignal(signal.SIGTERM)

    def handle(batch: list[Record]) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the pod is told to stop while processing
        batches.append([r.offset for r in batch])

    run_until_sigterm(consumer, handle, max_records=10, poll_timeout_s=0.01)
    adapter = factory.last
    assert batches == [[0, 1]]  # the batch in hand was finished, no new one was started
    assert adapter.commits == [{tp(0): 2}]
    assert "unsubscribe" not in adapter.calls and adapter.calls[-1] == "close"
    assert consumer.state is State.CLOSED
    assert signal.getsignal(signal.SIGTERM) == before


def test_fencing_propagates_after_closing() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), FENCED])
    handled: list[Record] = []
    with pytest.raises(FencedInstanceError) as info:
        run_until_sigterm(consumer, handled.extend, max_records=1, poll_timeout_s=0.01)
    assert exit_code_for(info.value) == 82
    assert consumer.state is State.CLOSED
    assert factory.last.commits == [{tp(0): 1}]  # only the batch finished before the fence
