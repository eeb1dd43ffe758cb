"""BatchCommitter: a coordinator move (broker restart) defers a commit instead of ending the consumer."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
from fakes import MODERN, Assign, FakeFactory, rec, tp

from static_consumer._core.seam import PollError
from static_consumer.consumer import State, StaticConsumer
from static_consumer.errors import CommitFailedError, RetriableError
from static_consumer.settings import ConsumerSettings
from static_consumer.shutdown import BatchCommitter, run_until_sigterm
from static_consumer.types import Record

# What a commit during a coordinator move returned on Kafka 4.3 (a broker of a 3-node cluster stopped).
LOADING = PollError(
    14, "COORDINATOR_LOAD_IN_PROGRESS", "Commit failed: Broker: Coordinator load in progress", False, True
)
MOVED = PollError(
    27, "REBALANCE_IN_PROGRESS", "Commit failed: Broker: Group rebalance in progress", False, False
)


def started(*scripts: Any) -> tuple[StaticConsumer, FakeFactory]:
    factory = FakeFactory(*scripts)
    settings = ConsumerSettings(
        bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",), session_timeout_ms=10000
    )
    consumer = StaticConsumer(
        settings, env={"POD_NAME": "app-0"}, adapter_factory=factory, probe=lambda s: MODERN
    )
    consumer.start()
    return consumer, factory


def test_transient_failure_keeps_the_offsets_for_the_next_commit() -> None:
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1)])
    committer = BatchCommitter(consumer)
    first = consumer.consume(10, 0.01)
    factory.last.commit_failures.append(LOADING)

    assert committer.commit(first) is None
    assert factory.last.commits == []
    second = consumer.consume(10, 0.01)
    assert committer.commit(second) == {tp(0): 2}
    assert factory.last.commits == [{tp(0): 2}]


def test_failures_lasting_past_the_bound_raise() -> None:
    now = [0.0]
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1), None, rec(0, 2)])
    committer = BatchCommitter(consumer, bound_s=10.0, clock=lambda: now[0])
    factory.last.commit_failures.extend([LOADING, LOADING, LOADING])

    assert committer.commit(consumer.consume(10, 0.01)) is None
    now[0] = 9.0
    assert committer.commit(consumer.consume(10, 0.01)) is None
    now[0] = 10.5
    with pytest.raises(RetriableError):
        committer.commit(consumer.consume(10, 0.01))


def test_the_bound_restarts_after_a_successful_commit() -> None:
    now = [0.0]
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1), None, rec(0, 2)])
    committer = BatchCommitter(consumer, bound_s=10.0, clock=lambda: now[0])
    factory.last.commit_failures.append(LOADING)
    assert committer.commit(consumer.consume(10, 0.01)) is None
    now[0] = 5.0
    assert committer.commit(consumer.consume(10, 0.01)) == {tp(0): 2}
    factory.last.commit_failures.append(LOADING)
    now[0] = 20.0
    assert committer.commit(consumer.consume(10, 0.01)) is None  # a new failure, a new bound


def test_default_bound_is_the_session_timeout() -> None:
    now = [0.0]
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1), None, rec(0, 2)])
    committer = BatchCommitter(consumer, clock=lambda: now[0])
    factory.last.commit_failures.extend([LOADING, LOADING, LOADING])
    assert committer.commit(consumer.consume(10, 0.01)) is None
    now[0] = 9.9
    assert committer.commit(consumer.consume(10, 0.01)) is None
    now[0] = 10.1
    with pytest.raises(RetriableError):
        committer.commit(consumer.consume(10, 0.01))


def test_partitions_moved_is_not_deferred() -> None:
    consumer, factory = started([Assign((tp(0),)), rec(0, 0)])
    factory.last.commit_failures.append(MOVED)
    with pytest.raises(CommitFailedError):
        BatchCommitter(consumer).commit(consumer.consume(10, 0.01))


def test_run_until_sigterm_rides_out_a_coordinator_move() -> None:
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1)])
    factory.last.commit_failures.append(LOADING)
    batches: list[list[int]] = []

    def handle(batch: list[Record]) -> None:
        batches.append([r.offset for r in batch])
        if len(batches) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    run_until_sigterm(consumer, handle, max_records=10, poll_timeout_s=0.01)
    assert batches == [[0], [1]]
    assert factory.last.commits == [{tp(0): 2}]  # the deferred offsets went with the next commit
    assert consumer.state is State.CLOSED
