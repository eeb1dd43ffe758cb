"""MicroBatchRunner on a StaticConsumer over the fake adapter (no broker, no JVM): commit only after fn
returned, nothing committed when fn fails, revoked partitions never reach fn, batch time within budget."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from fakes import FENCED, MODERN, UNKNOWN_MEMBER, Assign, FakeFactory, Lose, Revoke, Step, rec, tp

from static_consumer._base.errors import FencedInstanceError
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import BatchProgress, CommitRefused, MembershipListener, Revoked
from static_consumer._core.seams import Seams
from static_consumer.settings import ConsumerSettings
from static_consumer.spark import BatchInfo, BatchLimits, FailurePolicy, MicroBatchRunner, OffsetRange

P0, P1 = tp(0), tp(1)


class Clock:
    """Advances a little on every reading, so collection deadlines pass without sleeping."""

    def __init__(self, tick: float = 0.05) -> None:
        self.now, self.tick = 0.0, tick
        self._lock = threading.Lock()  # read by the runner thread and by fn's thread

    def __call__(self) -> float:
        with self._lock:
            self.now += self.tick
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class FakeSpark:
    """Stands in for a SparkSession: the "DataFrame" is the Arrow table itself."""

    read: Any = None  # never used: without a spark context the runner hands batches over in memory

    def __init__(self) -> None:
        self.tables: list[Any] = []

    def createDataFrame(self, data: Any) -> Any:  # noqa: N802 - Spark's name
        self.tables.append(data)
        return data


class Sink:
    """A batch function that remembers what it saw and in which order relative to commits."""

    def __init__(self, factory: FakeFactory, fail: int = 0, delay_s: float = 0.0) -> None:
        self.factory, self.fail, self.delay_s = factory, fail, delay_s
        self.batches: list[tuple[list[tuple[int, int]], BatchInfo]] = []
        self.commits_seen: list[int] = []
        self.on_call: Callable[[BatchInfo], object] | None = None  # e.g. what the broker does meanwhile

    def __call__(self, df: Any, info: BatchInfo) -> None:
        self.commits_seen.append(len(self.factory.last.commits))
        if self.on_call is not None:
            self.on_call(info)
        if self.fail:
            self.fail -= 1
            raise RuntimeError("sink down")
        time.sleep(self.delay_s)  # real time: the runner's thread keeps polling meanwhile
        self.batches.append(
            (
                list(zip(df.column("partition").to_pylist(), df.column("offset").to_pylist(), strict=True)),
                info,
            )
        )


def make_runner(
    script: Sequence[Step],
    *,
    fail: int = 0,
    delay_s: float = 0.0,
    limits: BatchLimits | None = None,
    failure: FailurePolicy | None = None,
    clock: Clock | None = None,
    listeners: Sequence[MembershipListener] = (),
    checkpoint: Any = None,
    **settings: Any,
) -> tuple[MicroBatchRunner, FakeFactory, Sink, list[float]]:
    factory = FakeFactory(script)
    sink = Sink(factory, fail=fail, delay_s=delay_s)
    sleeps: list[float] = []
    values: dict[str, Any] = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "g", "topics": ("t",)}
    values["failure_retries"] = 0  # the runner stops at the first failure unless a test says otherwise
    values.update(settings)

    def consumer(s: ConsumerSettings, ls: Sequence[MembershipListener]) -> StaticConsumer:
        return StaticConsumer(
            s,
            listeners=ls,
            env={"POD_NAME": "orders-2"},
            seams=Seams(adapter_factory=factory, probe=lambda _, **__: MODERN),
        )

    runner = MicroBatchRunner(
        ConsumerSettings(**values),
        sink,
        spark=FakeSpark(),
        limits=limits or BatchLimits(max_records=3, min_records=1, poll_records=10, max_wait_s=1.0),
        failure=failure,
        listeners=listeners,
        checkpoint=checkpoint,
        lag_interval_s=None,
        consumer_factory=consumer,
        sleep=sleeps.append,
        clock=clock or Clock(),
    )
    return runner, factory, sink, sleeps


def test_each_batch_is_committed_after_fn_returned() -> None:
    runner, factory, sink, _ = make_runner(
        [Assign((P0, P1)), rec(0, 0), rec(1, 0), rec(0, 1), rec(1, 1), rec(0, 2), rec(1, 2)]
    )
    summary = runner.run(max_batches=2)
    assert [pairs for pairs, _ in sink.batches] == [[(0, 0), (1, 0), (0, 1)], [(1, 1), (0, 2), (1, 2)]]
    assert factory.last.commits == [{P0: 2, P1: 1}, {P0: 3, P1: 3}]
    assert sink.commits_seen == [0, 1]  # fn ran before its batch's commit
    assert (summary.batches, summary.records) == (2, 6)
    first = sink.batches[0][1]
    assert first.batch_id == 0 and first.instance_id == "orders-2" and first.records == 3
    assert first.offsets == {P0: OffsetRange(0, 1), P1: OffsetRange(0, 0)}
    assert "unsubscribe" not in factory.last.calls and factory.last.calls[-1] == "close"  # no LeaveGroup


def test_when_fn_fails_nothing_is_committed_and_the_runner_stops() -> None:
    runner, factory, sink, _ = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2), rec(0, 3)], fail=1
    )
    with pytest.raises(RuntimeError, match="sink down") as raised:
        runner.run()
    assert factory.last.commits == []  # not on failure, not on close
    assert factory.last.calls[-1] == "close"
    assert any("nothing of it was committed" in note for note in raised.value.__notes__)


def test_a_retry_policy_calls_fn_again_with_the_same_batch() -> None:
    runner, factory, sink, sleeps = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2)],
        fail=2,
        failure=FailurePolicy(retries=2, backoff_s=1.0),
    )
    runner.run(max_batches=1)
    assert sleeps == [1.0, 2.0]
    [(pairs, info)] = sink.batches
    assert pairs == [(0, 0), (0, 1), (0, 2)] and info.attempt == 3
    assert factory.last.commits == [{P0: 3}]


def test_retries_stop_before_the_poll_interval_runs_out() -> None:
    runner, factory, _, sleeps = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2)],
        fail=5,
        failure=FailurePolicy(retries=5, backoff_s=120.0, max_backoff_s=120.0),
        max_poll_interval_ms=60_000,
    )
    with pytest.raises(RuntimeError) as raised:
        runner.run()
    assert sleeps == []  # a 120 s pause would outlast the 60 s max.poll.interval
    assert any("max_poll_interval_ms" in note for note in raised.value.__notes__)
    assert factory.last.commits == []


def test_records_of_revoked_partitions_never_reach_fn() -> None:
    # p1@0 was collected, then p1 is revoked while the batch is still filling: it must leave the batch,
    # and its offset must not be committed (by the revoke, or after the batch).
    runner, factory, sink, _ = make_runner(
        [Assign((P0, P1)), rec(0, 0), rec(1, 0), None, Revoke((P1,)), rec(0, 1), rec(0, 2)]
    )
    runner.run(max_batches=1)
    [(pairs, info)] = sink.batches
    assert pairs == [(0, 0), (0, 1), (0, 2)]
    assert P1 not in info.offsets
    assert factory.last.commits == [{P0: 3}]


def test_records_of_lost_partitions_never_reach_fn() -> None:
    runner, factory, sink, _ = make_runner(
        [Assign((P0, P1)), rec(1, 0), rec(0, 0), None, Lose((P1,)), rec(0, 1), rec(0, 2)]
    )
    runner.run(max_batches=1)
    assert [pairs for pairs, _ in sink.batches] == [[(0, 0), (0, 1), (0, 2)]]
    assert factory.last.commits == [{P0: 3}]


def test_a_fenced_runner_calls_fn_no_more_and_commits_nothing() -> None:
    runner, factory, sink, _ = make_runner([Assign((P0,)), rec(0, 0), None, FENCED])
    with pytest.raises(FencedInstanceError):
        runner.run()
    assert sink.batches == [] and factory.last.commits == []


def test_a_partial_batch_is_processed_when_the_wait_is_over() -> None:
    runner, factory, sink, _ = make_runner(
        [Assign((P0,)), rec(0, 0)], limits=BatchLimits(max_records=100, min_records=1, max_wait_s=0.5)
    )
    runner.run(max_batches=1)
    assert [pairs for pairs, _ in sink.batches] == [[(0, 0)]]
    assert factory.last.commits == [{P0: 1}]


def test_stop_finishes_and_commits_the_current_batch() -> None:
    factory_script: list[Step] = [
        Assign((P0,)),
        rec(0, 0),
        rec(0, 1),
        rec(0, 2),
        rec(0, 3),
        rec(0, 4),
        rec(0, 5),
    ]
    runner, factory, sink, _ = make_runner(factory_script)
    original = sink.__call__

    def stop_after_first(df: Any, info: BatchInfo) -> None:
        original(df, info)
        runner.stop()

    runner._attempts._fn = stop_after_first
    summary = runner.run()
    assert summary.batches == 1 and factory.last.commits == [{P0: 3}]
    assert "unsubscribe" not in factory.last.calls


def test_idle_timeout_ends_a_run_without_batches() -> None:
    runner, factory, sink, _ = make_runner([Assign((P0,))])
    summary = runner.run(idle_timeout_s=2.0)
    assert summary.batches == 0 and sink.batches == [] and factory.last.commits == []


def test_a_slow_batch_warns_and_shrinks_the_next_ones(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    runner, _, sink, _ = make_runner(
        [Assign((P0,)), *[rec(0, i) for i in range(12)]],
        limits=BatchLimits(max_records=4, min_records=1, poll_records=10, max_wait_s=1.0),
        clock=clock,
        max_poll_interval_ms=60_000,
    )
    original = sink.__call__
    # Batch 0 ends only once batch 1 was taken (a spy, no change to the runner): otherwise the thread
    # schedule decides whether batch 1 is cut before or after the shrink.
    taken = 0
    second_taken = threading.Event()
    next_batch = runner._next_batch

    def spy() -> Any:
        nonlocal taken
        batch = next_batch()
        if batch is not None:
            taken += 1
            if taken == 2:
                second_taken.set()
        return batch

    def slow(df: Any, info: BatchInfo) -> None:
        original(df, info)
        assert second_taken.wait(10.0), "batch 1 was never taken"
        clock.advance(40.0)  # over half of the 60 s max.poll.interval

    runner._next_batch = spy  # type: ignore[method-assign]
    runner._attempts._fn = slow
    with caplog.at_level(logging.WARNING, logger="static_consumer.spark.runner"):
        runner.run(max_batches=3)
    assert any("max_poll_interval_ms" in r.getMessage() for r in caplog.records)
    # Batch 1 was collected while batch 0 was still running; batch 2 is the first after the shrink.
    assert [info.records for _, info in sink.batches] == [4, 4, 1]
    assert runner.max_records == 1


class AtRevoke(MembershipListener):
    """Notes, when a revocation reaches the application's listeners, what fn and the commits had done."""

    def __init__(self) -> None:
        self.sink: Sink | None = None
        self.seen: list[tuple[int, list[dict[Any, int]]]] = []

    def on_revoked(self, event: Revoked) -> None:
        assert self.sink is not None
        self.seen.append((len(self.sink.batches), list(self.sink.factory.last.commits)))


def test_a_revocation_waits_for_the_batch_in_flight_and_commits_it_first() -> None:
    at_revoke = AtRevoke()
    script: list[Step] = [Assign((P0, P1)), rec(0, 0), rec(1, 0), rec(0, 1), None, Revoke((P1,))]
    runner, factory, sink, _ = make_runner(
        [*script, rec(0, 2), rec(0, 3), rec(0, 4)], delay_s=0.3, listeners=[at_revoke]
    )
    at_revoke.sink = sink
    runner.run(max_batches=2)
    # Batch 0 (holding p1@0) was finished and committed before the revocation went on.
    assert at_revoke.seen[0] == (1, [{P0: 2, P1: 1}])  # (the second revocation is close()'s)
    assert factory.last.commits == [{P0: 2, P1: 1}, {P0: 5}]


def test_a_batch_in_flight_does_not_commit_partitions_lost_meanwhile() -> None:
    script: list[Step] = [Assign((P0, P1)), rec(0, 0), rec(1, 0), rec(0, 1), None, Lose((P1,))]
    runner, factory, sink, _ = make_runner([*script, rec(0, 2), rec(0, 3), rec(0, 4)], delay_s=0.3)
    runner.run(max_batches=2)
    assert [pairs for pairs, _ in sink.batches][0] == [(0, 0), (1, 0), (0, 1)]
    assert factory.last.commits == [{P0: 2}, {P0: 5}]  # p1 may belong to another member by now


def test_a_fence_while_a_batch_is_in_flight_commits_nothing() -> None:
    runner, factory, sink, _ = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2), None, FENCED], delay_s=0.3
    )
    with pytest.raises(FencedInstanceError):
        runner.run()
    assert len(sink.batches) == 1  # the batch in flight was allowed to finish
    assert factory.last.commits == []


class Refusals(MembershipListener):
    def __init__(self) -> None:
        self.refused: list[CommitRefused] = []
        self.batches: list[BatchProgress] = []

    def on_commit_refused(self, event: CommitRefused) -> None:
        self.refused.append(event)

    def on_batch(self, event: BatchProgress) -> None:
        self.batches.append(event)


def test_a_refused_commit_is_said_and_the_runner_goes_on() -> None:
    """fn ran past the session, so the broker refuses the batch's commit (UNKNOWN_MEMBER_ID): a
    CommitRefused event, the batch reported uncommitted (its records come again), and no exit: the next
    batch is committed. (Partitions lost meanwhile are never committed: the test above.)"""
    seen = Refusals()
    runner, factory, sink, _ = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2), None, rec(0, 3), rec(0, 4), rec(0, 5)],
        listeners=[seen],
    )
    sink.on_call = lambda info: info.batch_id == 0 and factory.last.commit_failures.append(UNKNOWN_MEMBER)
    summary = runner.run(max_batches=2)
    assert summary.batches == 2
    assert [(e.error, e.offsets) for e in seen.refused] == [("UNKNOWN_MEMBER_ID", ((P0, 3),))]
    assert [b.committed for b in seen.batches] == [False, True]
    assert factory.last.commits == [{P0: 6}]


def test_the_batch_collected_meanwhile_loses_the_partitions_lost_with_the_refused_commit() -> None:
    """fn outlives the session, so the next batch is collected (and taken) before the loss is
    reported; its commit is refused. The next poll reports the partitions lost: the batch collected
    meanwhile must lose their records before anything reaches fn (another member owns them now)."""
    script: list[Step] = [Assign((P0, P1)), rec(0, 0), rec(1, 0), rec(0, 1), None]
    meanwhile: list[Step] = [rec(1, 1), rec(0, 2), rec(1, 2)]  # fills the next batch: no more polls
    after: list[Step] = [Lose((P0, P1)), Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2)]
    runner, factory, sink, _ = make_runner([*script, *meanwhile, *after], delay_s=0.3)
    sink.on_call = lambda info: info.batch_id == 0 and factory.last.commit_failures.append(UNKNOWN_MEMBER)
    runner.run(max_batches=2)
    assert [pairs for pairs, _ in sink.batches] == [[(0, 0), (1, 0), (0, 1)], [(0, 0), (0, 1), (0, 2)]]
    assert factory.last.commits == [{P0: 3}]
