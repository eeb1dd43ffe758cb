"""MicroBatchRunner beyond one batch (fake adapter, no JVM): a crash replays the unfinished batch with the
same key, stop() is bounded by shutdown_timeout_s, a dead session ends the run with a typed error, and
every batch reports its progress to the listeners."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import Assign, rec, tp
from test_spark_runner import FakeSpark, make_runner

from static_consumer._core.events import BatchProgress, MembershipListener
from static_consumer.settings import ConsumerSettings
from static_consumer.spark import BatchInfo, BatchLimits, FailurePolicy, SparkSessionStoppedError
from static_consumer.spark._progress import LagProbe

P0 = tp(0)
LIMITS = BatchLimits(max_records=3, min_records=1, poll_records=10, max_wait_s=1.0)


class Crash(BaseException):
    """Stands in for kill -9 right after fn wrote its batch: nothing after it runs."""


class VersionedSink:
    """A sink that skips a key's version it holds (as Delta's txnAppId/txnVersion do)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int]] = []
        self.last: dict[str, int] = {}
        self.keys: list[tuple[str, int]] = []

    def write(self, df: Any, info: BatchInfo) -> None:
        assert info.key is not None
        self.keys.append((info.key.app_id, info.key.version))
        if info.key.version <= self.last.get(info.key.app_id, -1):
            return
        self.rows += list(
            zip(df.column("partition").to_pylist(), df.column("offset").to_pylist(), strict=True)
        )
        self.last[info.key.app_id] = info.key.version


def test_after_a_crash_the_unfinished_batch_is_replayed_with_its_key_and_held_once(tmp_path: Path) -> None:
    sink = VersionedSink()
    first, factory, _, _ = make_runner(
        [Assign((P0,)), *[rec(0, i) for i in range(6)]], limits=LIMITS, checkpoint=tmp_path
    )

    def write_then_die(df: Any, info: BatchInfo) -> None:
        sink.write(df, info)
        if info.batch_id == 1:
            raise Crash  # written, not recorded as done, not committed

    first._attempts._fn = write_then_die
    with pytest.raises(Crash):
        first.run()
    assert factory.last.commits == [{P0: 3}]
    crashed = sink.keys[-1]

    # The restarted pod: Kafka hands out the records from the committed offset 3 again.
    second, factory2, _, _ = make_runner(
        [Assign((P0,)), *[rec(0, i) for i in range(3, 8)]], limits=LIMITS, checkpoint=tmp_path
    )
    second._attempts._fn = sink.write
    second.run(max_batches=2)
    assert sink.keys[2] == crashed  # the replay carries the crashed batch's key: the sink skips it
    assert sorted(sink.rows) == [(0, i) for i in range(8)]  # every record once
    assert factory2.last.commits == [{P0: 6}, {P0: 8}]


def test_stop_gives_up_on_a_slow_batch_after_shutdown_timeout(caplog: pytest.LogCaptureFixture) -> None:
    started, release = threading.Event(), threading.Event()
    interrupted: list[str] = []

    class TaggedSpark(FakeSpark):
        def addTag(self, tag: str) -> None:  # noqa: N802 - Spark's name
            self.tag = tag

        def removeTag(self, tag: str) -> None:  # noqa: N802 - Spark's name
            pass

        def interruptTag(self, tag: str) -> None:  # noqa: N802 - Spark's name
            interrupted.append(tag)

    runner, factory, _, _ = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2)],
        limits=LIMITS,
        clock=time.monotonic,  # type: ignore[arg-type]
        shutdown_timeout_s=1.0,
    )
    spark = TaggedSpark()
    runner._attempts._spark = spark

    def slow(df: Any, info: BatchInfo) -> None:
        started.set()
        release.wait(60)  # a stuck sink

    runner._attempts._fn = slow
    stopped_at: list[float] = []

    def stop_once_fn_runs() -> None:
        if started.wait(30):
            stopped_at.append(time.monotonic())
            runner.stop()

    threading.Thread(target=stop_once_fn_runs, daemon=True).start()
    try:
        summary = runner.run()
    finally:
        release.set()
    took = time.monotonic() - stopped_at[0]
    assert summary.batches == 1 and factory.last.commits == []  # abandoned uncommitted
    # The 1 s budget, the 0.5 s close() always gets, and 3 s for a loaded machine: far below the 60 s fn.
    assert took < 1.0 + 0.5 + 3.0, f"run() returned {took:.1f} s after stop()"
    assert interrupted == [spark.tag]  # the batch's Spark jobs were cancelled
    assert "unsubscribe" not in factory.last.calls and factory.last.calls[-1] == "close"  # no LeaveGroup
    assert any("abandoning it uncommitted" in r.getMessage() for r in caplog.records)


def test_a_dead_session_ends_the_run_with_a_typed_error_and_no_retry() -> None:
    class DeadSpark(FakeSpark):
        sparkContext = SimpleNamespace(master="spark://m:7077", _jsc=None)  # SparkContext.stop() ran

    runner, factory, _, sleeps = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2)],
        limits=LIMITS,
        failure=FailurePolicy(retries=3, backoff_s=1.0),
    )
    runner._attempts._spark = DeadSpark()

    def fails(df: Any, info: BatchInfo) -> None:
        raise RuntimeError("[INTERNAL_ERROR] The Spark SQL phase execution failed... you hit a bug in Spark")

    runner._attempts._fn = fails
    with pytest.raises(SparkSessionStoppedError, match="Spark session stopped during batch 0") as raised:
        runner.run()
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert sleeps == [] and factory.last.commits == []  # never retried, nothing committed
    assert raised.value.exit_code == 75 and not raised.value.retriable


def test_every_batch_reports_its_progress_to_the_listeners() -> None:
    seen: list[BatchProgress] = []

    class Progress(MembershipListener):
        def on_batch(self, event: BatchProgress) -> None:
            seen.append(event)

    runner, _, _, _ = make_runner(
        [Assign((P0,)), *[rec(0, i) for i in range(6)]], limits=LIMITS, listeners=[Progress()]
    )
    runner.run(max_batches=2)
    assert [(e.batch_id, e.records, e.committed) for e in seen] == [(0, 3, True), (1, 3, True)]
    first = seen[0]
    assert first.group_id == "g" and first.instance_id == "orders-2" and first.version is None
    assert first.process_s > 0 and first.processing_rows_per_s == pytest.approx(3 / first.process_s)
    assert first.input_rows_per_s > 0 and first.lag is None  # lag look-ups are off in these tests


def test_lag_comes_from_end_offsets_looked_up_off_the_runner_thread() -> None:
    settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",))
    asked: list[list[Any]] = []
    gate = threading.Event()

    def lookup(partitions: list[Any]) -> dict[Any, int]:
        asked.append(partitions)
        gate.wait(10)  # a slow broker: the runner must not wait for it
        return {P0: 100}

    probe = LagProbe(settings, 5.0, lookup=lookup)
    assert probe.lag({P0: 40}) is None  # not known yet; the look-up runs in the background
    gate.set()
    deadline = time.monotonic() + 10
    while probe._busy and time.monotonic() < deadline:
        time.sleep(0.01)
    assert probe.lag({P0: 40}) == 60
    assert len(asked) == 1  # within the interval the last answer serves
    assert LagProbe(settings, None).lag({P0: 40}) is None
