"""BatchCommitter, the commit path of the batch loops: a coordinator move (broker restart) defers a
commit, and a refused commit (the partitions moved, or the session ended while a batch ran) is said
once as a CommitRefused event and the loop goes on; a fence still ends it."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import Any

import pytest
from fakes import MODERN, UNKNOWN_MEMBER, Assign, FakeFactory, Lose, rec, tp

from static_consumer._base.errors import CommitFailedError, FencedInstanceError, RetriableError, exit_code_for
from static_consumer._base.records import Record
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import CommitRefused, MembershipListener
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer._core.shutdown import BatchCommitter, run_until_sigterm
from static_consumer.settings import ConsumerSettings

# What a commit during a coordinator move returned on Kafka 4.3 (a broker of a 3-node cluster stopped).
LOADING = PollError(
    14, "COORDINATOR_LOAD_IN_PROGRESS", "Commit failed: Broker: Coordinator load in progress", False, True
)
MOVED = PollError(
    27, "REBALANCE_IN_PROGRESS", "Commit failed: Broker: Group rebalance in progress", False, False
)
# A commit that reaches the broker after another process took the instance id: code 82, which the
# adapter makes fatal (tests/unit/test_consumer_unit.py checks that against confluent-kafka).
FENCED_BY_COMMIT = PollError(
    82,
    "FENCED_INSTANCE_ID",
    "Commit failed: Broker: Static consumer fenced by other consumer",
    fatal=True,
    retriable=False,
    cause=82,
)


def started(
    *scripts: Any, listeners: Sequence[MembershipListener] = ()
) -> tuple[StaticConsumer, FakeFactory]:
    factory = FakeFactory(*scripts)
    settings = ConsumerSettings(
        bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",), session_timeout_ms=10000
    )
    consumer = StaticConsumer(
        settings,
        env={"POD_NAME": "app-0"},
        listeners=listeners,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
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


class Refusals(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[CommitRefused] = []

    def on_commit_refused(self, event: CommitRefused) -> None:
        self.seen.append(event)


def test_a_refused_commit_is_an_event_and_the_committer_goes_on() -> None:
    refusals = Refusals()
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1)], listeners=[refusals])
    committer = BatchCommitter(consumer)
    factory.last.commit_failures.append(MOVED)

    assert committer.commit(consumer.consume(10, 0.01)) is None
    [event] = refusals.seen
    assert (event.error, event.offsets, event.partitions) == (
        "REBALANCE_IN_PROGRESS",
        ((tp(0), 1),),
        (tp(0),),
    )
    assert event.instance_id == "app-0" and "rebalance in progress" in event.reason
    assert committer.commit(consumer.consume(10, 0.01)) == {tp(0): 2}  # the same consumer commits on


def test_a_commit_the_caller_makes_raises_commit_failed_and_says_so_once() -> None:
    refusals = Refusals()
    consumer, factory = started([Assign((tp(0),)), rec(0, 0)], listeners=[refusals])
    factory.last.commit_failures.append(MOVED)
    with pytest.raises(CommitFailedError):
        consumer.commit(consumer.consume(10, 0.01))
    assert [e.error for e in refusals.seen] == ["REBALANCE_IN_PROGRESS"]


def test_a_transient_failure_is_no_refusal() -> None:
    refusals = Refusals()
    consumer, factory = started([Assign((tp(0),)), rec(0, 0)], listeners=[refusals])
    factory.last.commit_failures.append(LOADING)
    assert BatchCommitter(consumer).commit(consumer.consume(10, 0.01)) is None
    assert refusals.seen == []


def test_a_fence_found_by_the_commit_is_not_ridden_out() -> None:
    refusals = Refusals()
    consumer, factory = started([Assign((tp(0),)), rec(0, 0)], listeners=[refusals])
    factory.last.commit_failures.append(FENCED_BY_COMMIT)
    with pytest.raises(FencedInstanceError):
        BatchCommitter(consumer).commit(consumer.consume(10, 0.01))
    assert refusals.seen == [] and consumer.state is State.FENCED


def test_run_until_sigterm_goes_on_after_a_refused_commit_and_commits_nothing_it_lost() -> None:
    """The issue-27 case in miniature: a batch's commit is refused (the session ended while the handler
    ran), the client reports the partition lost and the member is given another one; the loop neither
    exits nor ever commits the lost partition's offsets (they would overwrite its new owner's)."""
    refusals = Refusals()
    consumer, factory = started(
        [Assign((tp(0),)), rec(0, 0), None, Lose((tp(0),)), Assign((tp(1),)), rec(1, 5), None, rec(1, 6)],
        listeners=[refusals],
    )
    factory.last.commit_failures.append(UNKNOWN_MEMBER)
    batches: list[list[tuple[int, int]]] = []

    def handle(batch: list[Record]) -> None:
        batches.append([(r.partition, r.offset) for r in batch])
        if len(batches) == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    run_until_sigterm(consumer, handle, max_records=10, poll_timeout_s=0.01)
    assert batches == [[(0, 0)], [(1, 5)], [(1, 6)]]
    assert [(e.error, e.partitions) for e in refusals.seen] == [("UNKNOWN_MEMBER_ID", (tp(0),))]
    assert factory.last.commits == [{tp(1): 6}, {tp(1): 7}]  # never t[0] again
    assert consumer.state is State.CLOSED


def test_run_until_sigterm_still_ends_on_a_fence() -> None:
    consumer, factory = started([Assign((tp(0),)), rec(0, 0), None, rec(0, 1)])
    factory.last.commit_failures.append(FENCED_BY_COMMIT)
    with pytest.raises(FencedInstanceError) as info:
        run_until_sigterm(consumer, lambda batch: None, max_records=10, poll_timeout_s=0.01)
    assert exit_code_for(info.value) == 82 and consumer.state is State.CLOSED


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
