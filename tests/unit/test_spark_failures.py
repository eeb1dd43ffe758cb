"""The Spark runner's failure policy: a batch ``fn`` keeps failing on is retried as a whole (the same
key), then stopped on, dead-lettered or skipped record by record, its ledger entry done and its offsets
committed (docs/failures.md, Spark)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from fakes import Assign, rec
from test_failure_runners import Events, FakeDeadLetters
from test_spark_runner import P0, make_runner

from static_consumer import RecordDeadLettered, RecordSkipped, StaticConsumer
from static_consumer._core.recovery import runner as recovery_runner


def test_a_batch_fn_keeps_failing_on_is_dead_lettered_then_committed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    made: list[FakeDeadLetters] = []

    def dead_letters(consumer: StaticConsumer, topics: Sequence[str]) -> FakeDeadLetters:
        made.append(FakeDeadLetters(topics))
        return made[-1]

    monkeypatch.setattr(recovery_runner, "_dead_letters", dead_letters)
    events = Events()
    runner, factory, sink, sleeps = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1), rec(0, 2), None, rec(0, 3)],
        fail=3,
        listeners=[events],
        checkpoint=tmp_path,
        failure_retries=2,
        failure_action="dead_letter",
    )
    summary = runner.run(max_batches=2)
    assert sleeps == [1.0, 2.0]  # the settings' retries, the same key each time
    assert [s[:3] for s in made[0].sent] == [(0, "t-dlt", 3), (1, "t-dlt", 3), (2, "t-dlt", 3)]
    assert [e.offset for e in events.of(RecordDeadLettered)] == [0, 1, 2]
    assert factory.last.commits[0] == {P0: 3}  # committed only after the three writes
    assert [pairs for pairs, _ in sink.batches] == [[(0, 3)]]  # the next batch goes on
    assert summary.batches == 2


def test_skip_settles_the_whole_batch_and_stop_keeps_raising() -> None:
    events = Events()
    runner, factory, _, _ = make_runner(
        [Assign((P0,)), rec(0, 0), rec(0, 1)], fail=1, listeners=[events], failure_action="skip"
    )
    runner.run(max_batches=1)
    assert [e.offset for e in events.of(RecordSkipped)] == [0, 1]
    assert factory.last.commits == [{P0: 2}]

    runner, factory, _, _ = make_runner([Assign((P0,)), rec(0, 0), rec(0, 1)], fail=1)
    with pytest.raises(RuntimeError, match="sink down"):
        runner.run(max_batches=1)
    assert factory.last.commits == []
