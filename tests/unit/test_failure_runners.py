"""The failure policy in the runners, on the fake adapter: what is committed, dead-lettered or skipped,
the events and the event log, the asyncio runner, and the check of the dead-letter topics before the
member joins (the dead-letter producer is a fake here; integration/test_failing_records.py writes to a
real broker)."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Sequence
from typing import Any

import pytest
from fakes import MODERN, Assign, FakeFactory, rec, tp

from static_consumer import (
    ConsumerSettings,
    DeadLetterError,
    DeadLetterTopicError,
    MembershipEvent,
    MembershipListener,
    RecordDeadLettered,
    RecordFailedError,
    RecordSkipped,
    RecordsRetried,
    StaticConsumer,
    exit_code_for,
    run_until_sigterm,
)
from static_consumer._base.records import Record, RecordBatch
from static_consumer._core.recovery import runner as recovery_runner
from static_consumer._core.seams import Seams
from static_consumer._kafka.dead_letter import Written
from static_consumer.aio import AsyncStaticConsumer
from static_consumer.aio import run_until_sigterm as run_async
from static_consumer.telemetry import EventLog

POISON = 2  # the offset that always fails


class Events(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[MembershipEvent] = []

    def on_event(self, event: MembershipEvent) -> None:
        self.seen.append(event)

    def of(self, kind: type[MembershipEvent]) -> list[Any]:
        return [e for e in self.seen if isinstance(e, kind)]


class FakeDeadLetters:
    """Records what it was asked to write; ``fail`` makes every write raise it."""

    def __init__(self, topics: Sequence[str], fail: BaseException | None = None) -> None:
        self.checked = list(topics)
        self.partitions = {t: 3 for t in topics}
        self.sent: list[tuple[int, str, int, str]] = []
        self.fail = fail
        self.closed = False

    def send(
        self, record: Record, topic: str, *, error: BaseException, attempts: int, instance_id: str | None
    ) -> Written:
        if self.fail is not None:
            raise self.fail
        self.sent.append((record.offset, topic, attempts, f"{type(error).__name__}: {error}"))
        return Written(topic, record.partition, len(self.sent) - 1)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def dead_letters(monkeypatch: pytest.MonkeyPatch) -> list[FakeDeadLetters]:
    made: list[FakeDeadLetters] = []

    def make(consumer: StaticConsumer, topics: Sequence[str]) -> FakeDeadLetters:
        made.append(FakeDeadLetters(topics))
        return made[-1]

    monkeypatch.setattr(recovery_runner, "_dead_letters", make)
    return made


def settings(**fields: Any) -> ConsumerSettings:
    values = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "g", "topics": ("t",), **fields}
    return ConsumerSettings(**values)


def script(records: int = 6) -> list[Any]:
    return [Assign((tp(0),)), *(rec(0, o) for o in range(records)), None]


def consumer_for(
    factory: FakeFactory, listeners: Sequence[MembershipListener], **fields: Any
) -> tuple[StaticConsumer, list[float]]:
    waits: list[float] = []
    consumer = StaticConsumer(
        settings(**fields),
        listeners=listeners,
        env={"POD_NAME": "app-0"},
        seams=Seams(adapter_factory=factory, probe=lambda _s, **_: MODERN, sleep=waits.append),
    )
    return consumer, waits


def handler(consumer: StaticConsumer, handled: list[int], *, typed: bool = True, until: int = 5) -> Any:
    def handle(batch: list[Record]) -> None:
        for r in batch:
            if r.offset == POISON:
                if typed:
                    raise RecordFailedError(r) from ValueError("bad payload")
                raise ValueError("bad payload")
            handled.append(r.offset)
            if r.offset >= until:
                consumer.stop()

    return handle


def test_dead_letter_writes_the_poison_record_before_committing_past_it(
    dead_letters: list[FakeDeadLetters],
) -> None:
    factory, events, handled = FakeFactory(script()), Events(), []
    log = io.StringIO()
    consumer, waits = consumer_for(
        factory, [events, EventLog(log, look_up_held=False)], failure_action="dead_letter"
    )
    run_until_sigterm(consumer, handler(consumer, handled), poll_timeout_s=0.0)
    [dlq] = dead_letters
    assert dlq.checked == ["t-dlt"] and dlq.closed  # checked before joining, closed at the end
    assert dlq.sent == [(POISON, "t-dlt", 4, "ValueError: bad payload")]
    assert handled == [0, 1, 3, 4, 5]  # each once: records before the named one are not handed out again
    assert waits == [1.0, 2.0, 4.0]
    assert factory.last.commits[-1] == {tp(0): 6}
    assert [(e.offset, e.attempt, e.records) for e in events.of(RecordsRetried)] == [
        (2, 1, 4),
        (2, 2, 4),
        (2, 3, 4),
    ]
    [lettered] = events.of(RecordDeadLettered)
    assert (lettered.offset, lettered.attempts, lettered.dead_letter) == (POISON, 4, ("t-dlt", 0, 0))
    lines = [json.loads(line) for line in log.getvalue().splitlines()]
    kinds = [line["event"] for line in lines]
    assert kinds.count("retried") == 3 and kinds.count("dead_lettered") == 1
    line = next(line for line in lines if line["event"] == "dead_lettered")
    assert line["offsets"] == [{"topic": "t", "partition": 0, "offset": POISON}] and line["attempts"] == 4
    assert line["dead_letter"] == {"topic": "t-dlt", "partition": 0, "offset": 0}


def test_skip_goes_on_without_the_record(dead_letters: list[FakeDeadLetters]) -> None:
    factory, events, handled = FakeFactory(script()), Events(), []
    consumer, _ = consumer_for(factory, [events], failure_action="skip", failure_retries=1)
    run_until_sigterm(consumer, handler(consumer, handled, typed=False), poll_timeout_s=0.0)
    assert dead_letters == []  # no producer without dead-lettering
    # The batch twice, then record by record: 0 and 1 were handed out again.
    assert handled == [0, 1, 0, 1, 0, 1, 3, 4, 5]
    [skipped] = events.of(RecordSkipped)
    assert (skipped.offset, skipped.attempts, skipped.error) == (POISON, 3, "ValueError: bad payload")
    assert factory.last.commits[-1] == {tp(0): 6}


def test_stop_commits_the_records_before_the_failing_one_and_exits_70() -> None:
    factory, handled = FakeFactory(script()), []
    consumer, waits = consumer_for(factory, [], failure_retries=2)
    with pytest.raises(RecordFailedError) as raised:
        run_until_sigterm(consumer, handler(consumer, handled), poll_timeout_s=0.0)
    assert exit_code_for(raised.value) == 70 and waits == [1.0, 2.0]
    assert factory.last.commits == [{tp(0): 2}]  # 0 and 1, nothing from the poison record on
    assert any("t[0]@2 (3 attempts, failure_action='stop')" in note for note in raised.value.__notes__)


def test_a_dead_letter_write_that_fails_commits_nothing_past_the_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    failure = DeadLetterError("not acknowledged", topic="t-dlt", record=("t", 0, POISON))
    monkeypatch.setattr(recovery_runner, "_dead_letters", lambda c, topics: FakeDeadLetters(topics, failure))
    factory, handled = FakeFactory(script()), []
    consumer, _ = consumer_for(factory, [], failure_action="dead_letter", failure_retries=0)
    with pytest.raises(DeadLetterError) as raised:
        run_until_sigterm(consumer, handler(consumer, handled), poll_timeout_s=0.0)
    assert exit_code_for(raised.value) == 75
    assert factory.last.commits == [{tp(0): 2}]


def test_a_missing_dead_letter_topic_ends_the_start_before_joining(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(consumer: StaticConsumer, topics: Sequence[str]) -> FakeDeadLetters:
        raise DeadLetterTopicError("the dead-letter topic 't-dlt' does not exist", topic="t-dlt")

    monkeypatch.setattr(recovery_runner, "_dead_letters", missing)
    factory = FakeFactory(script())
    consumer, _ = consumer_for(factory, [], failure_action="dead_letter")
    with pytest.raises(DeadLetterTopicError) as raised:
        run_until_sigterm(consumer, lambda batch: None, poll_timeout_s=0.0)
    assert exit_code_for(raised.value) == 78 and factory.adapters == []  # no client, no join


def test_a_stop_request_during_the_retries_commits_what_came_before_and_returns() -> None:
    factory, handled = FakeFactory(script()), []
    consumer, _ = consumer_for(factory, [])

    def stop_while_waiting(seconds: float) -> None:
        consumer.stop()

    consumer._session.sleep = stop_while_waiting
    run_until_sigterm(consumer, handler(consumer, handled), poll_timeout_s=0.0)
    assert handled == [0, 1] and factory.last.commits == [{tp(0): 2}]


def test_the_asyncio_runner_dead_letters_and_commits_the_same_way(
    dead_letters: list[FakeDeadLetters],
) -> None:
    factory, events, handled = FakeFactory(script()), Events(), []
    consumer = AsyncStaticConsumer(
        settings(failure_action="dead_letter", failure_backoff_s=0.0),
        listeners=[events],
        env={"POD_NAME": "app-0"},
        seams=Seams(adapter_factory=factory, probe=lambda _s, **_: MODERN),
    )

    async def handle(batch: RecordBatch) -> None:
        await asyncio.sleep(0)
        for r in batch:
            if r.offset == POISON:
                raise RecordFailedError(r) from ValueError("bad payload")
            handled.append(r.offset)
            if r.offset >= 5:
                consumer.stop()

    asyncio.run(run_async(consumer, handle, poll_timeout_s=0.0))
    assert handled == [0, 1, 3, 4, 5]
    assert [s[0] for s in dead_letters[0].sent] == [POISON]
    assert len(events.of(RecordsRetried)) == 3 and len(events.of(RecordDeadLettered)) == 1
    assert factory.last.commits[-1] == {tp(0): 6}


def test_the_asyncio_runner_stops_with_the_handled_records_committed() -> None:
    factory, handled = FakeFactory(script()), []
    consumer = AsyncStaticConsumer(
        settings(failure_backoff_s=0.0),
        env={"POD_NAME": "app-0"},
        seams=Seams(adapter_factory=factory, probe=lambda _s, **_: MODERN),
    )

    def handle(batch: RecordBatch) -> None:
        for r in batch:
            if r.offset == POISON:
                raise RecordFailedError(r, "bad payload")
            handled.append(r.offset)

    with pytest.raises(RecordFailedError):
        asyncio.run(run_async(consumer, handle, poll_timeout_s=0.0))
    assert handled == [0, 1] and factory.last.commits == [{tp(0): 2}]
