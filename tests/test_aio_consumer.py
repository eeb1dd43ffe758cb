"""AsyncStaticConsumer on the fake adapter: one thread for the client, the loop never blocked, the sync
core's guarantees (commits, fencing, close without leaving) through awaits, cancellation, the runner."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from fakes import FENCED, MODERN, Assign, FakeAdapter, FakeFactory, Step, rec, tp

from static_consumer.aio import AsyncStaticConsumer, run_until_sigterm
from static_consumer.consumer import State
from static_consumer.errors import FencedInstanceError
from static_consumer.events import Assigned, Closed, Joining, MembershipEvent, MembershipListener, Revoked
from static_consumer.settings import ConsumerSettings
from static_consumer.shutdown import exit_code_for
from static_consumer.types import RecordBatch, TopicPartition

SETTINGS = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", topics=("t",))


class ThreadLog:
    """The thread of every client call and every listener call."""

    def __init__(self) -> None:
        self.threads: list[tuple[str, int]] = []

    def note(self, what: str) -> None:
        self.threads.append((what, threading.get_ident()))


class SlowAdapter(FakeAdapter):
    """A fake whose consume waits ``delay`` seconds first, as librdkafka waits for a fetch."""

    delay: float = 0.0
    log: ThreadLog | None = None
    fetching: threading.Event | None = None

    def consume(self, max_records: int, timeout: float) -> Any:
        if self.log is not None:
            self.log.note("consume")
        if self.fetching is not None:
            self.fetching.set()
        time.sleep(self.delay)
        return super().consume(max_records, timeout)

    def commit(self, offsets: Any, *, asynchronous: bool = False) -> None:
        if self.log is not None:
            self.log.note("commit")
        super().commit(offsets, asynchronous=asynchronous)

    def close(self) -> None:
        if self.log is not None:
            self.log.note("close")
        super().close()


class SlowFactory(FakeFactory):
    def __init__(self, *scripts: Iterable[Step], delay: float = 0.0, log: ThreadLog | None = None) -> None:
        super().__init__(*scripts)
        self.delay, self.log, self.fetching = delay, log, threading.Event()

    def __call__(self, config: dict[str, Any]) -> FakeAdapter:
        plain = super().__call__(config)
        adapter = SlowAdapter(plain.config, plain.script)
        adapter.delay, adapter.log, adapter.fetching = self.delay, self.log, self.fetching
        self.adapters[-1] = adapter
        return adapter


class Listener(MembershipListener):
    def __init__(self, log: ThreadLog) -> None:
        self.log = log

    def on_assigned(self, event: Assigned) -> None:
        self.log.note("on_assigned")


def make(
    *scripts: Iterable[Step], delay: float = 0.0, log: ThreadLog | None = None, **kw: Any
) -> tuple[AsyncStaticConsumer, SlowFactory]:
    factory = SlowFactory(*scripts, delay=delay, log=log)
    consumer = AsyncStaticConsumer(
        SETTINGS, env={"POD_NAME": "app-0"}, adapter_factory=factory, probe=lambda s: MODERN, **kw
    )
    return consumer, factory


def offsets(batch: RecordBatch) -> list[int]:
    return [r.offset for r in batch]


def run(coro: Callable[[], Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro(), 60))


def test_every_client_and_listener_call_runs_on_one_thread_that_is_not_the_loops() -> None:
    log = ThreadLog()
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), rec(0, 1), None, rec(0, 2)], log=log)

    async def main() -> int:
        async with consumer:
            assert offsets(await consumer.consume_batch(10, 0.0)) == [0, 1]
            assert await consumer.commit() == {}  # nothing marked processed: consume_batch is not commit
            await consumer.commit(await consumer.consume_batch(10, 0.0))
        return threading.get_ident()

    loop_thread = run(main)
    kinds = [what for what, _ in log.threads]
    assert {"consume", "commit", "close"} <= set(kinds)
    # The core bounds librdkafka's close() by running it on a helper thread while the caller waits (the
    # sync consumer does the same); everything else runs on the consumer's one thread.
    threads = {ident for what, ident in log.threads if what != "close"}
    assert len(threads) == 1 and loop_thread not in threads
    assert loop_thread not in {ident for what, ident in log.threads if what == "close"}
    assert factory.last.commits == [{tp(0): 3}]
    assert "unsubscribe" not in factory.last.calls  # closed without leaving


def test_listeners_run_on_the_consumers_thread() -> None:
    log = ThreadLog()
    consumer, _ = make([Assign((tp(0),)), rec(0, 0)], log=log, listeners=[Listener(log)])

    async def main() -> None:
        async with consumer:
            await consumer.consume_batch(10, 0.0)

    run(main)
    assert "on_assigned" in [what for what, _ in log.threads]
    assert len({ident for what, ident in log.threads if what != "close"}) == 1


def test_the_loop_keeps_running_while_the_client_waits() -> None:
    """A timer keeps firing while every consume blocks its thread for a second, as librdkafka does when
    no data arrives; had the consume run on the loop, the timer would miss a second each time."""
    script: list[Step] = [Assign((tp(0),))]
    for batch in range(3):
        script += [rec(0, batch), None]
    consumer, _ = make(script, delay=1.0)
    gaps: list[float] = []

    async def ticker() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    async def main() -> list[int]:
        tick = asyncio.create_task(ticker())
        got: list[int] = []
        async with consumer:
            for _ in range(3):
                got += offsets(await consumer.consume_batch(10, 1.0))
        tick.cancel()
        return got

    started = time.monotonic()
    assert run(main) == [0, 1, 2]
    took = time.monotonic() - started
    assert took >= 3.0  # the three consumes did wait
    assert len(gaps) > 10 and max(gaps) < 0.5, f"the loop stalled for {max(gaps):.2f}s"


def test_fencing_raises_in_the_awaiting_task_and_the_state_says_so() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), None, FENCED])

    async def main() -> None:
        async with consumer:
            await consumer.commit(await consumer.consume_batch(10, 0.0))
            with pytest.raises(FencedInstanceError):
                await consumer.consume_batch(10, 0.0)
            assert consumer.state is State.FENCED
            status = consumer.status()
            assert (status.state, status.ready) == (State.FENCED, False) and "fenced" in (status.error or "")
            with pytest.raises(FencedInstanceError):  # the same error, every time
                await consumer.commit()

    run(main)
    assert factory.last.commits == [{tp(0): 1}]  # nothing after the fence


def test_batches_commit_each_batch_after_the_body_and_end_on_stop() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), rec(0, 1), None, None, rec(0, 2), None])

    async def main() -> list[list[int]]:
        seen: list[list[int]] = []
        async with consumer:
            async for batch in consumer.batches(10, 0.0):
                assert factory.last.commits == ([] if not seen else [{tp(0): 2}])  # not before the body
                seen.append(offsets(batch))
                if len(seen) == 2:
                    consumer.stop()
        return seen

    assert run(main) == [[0, 1], [2]]
    assert factory.last.commits == [{tp(0): 2}, {tp(0): 3}]


def test_a_cancelled_fetch_gives_its_records_to_the_next_call_in_order() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), rec(0, 1), None, rec(0, 2), None], delay=0.2)

    async def main() -> list[int]:
        async with consumer:
            task = asyncio.create_task(consumer.consume_batch(10, 1.0))
            await asyncio.to_thread(factory.fetching.wait, 10)  # the fetch is under way on the thread
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            first = await consumer.consume_batch(10, 1.0)
            await consumer.commit(first)
            return offsets(first)

    # The cancelled fetch's records come first, then what the client had next: none skipped.
    assert run(main) == [0, 1, 2]
    assert factory.last.commits == [{tp(0): 3}]


def test_one_fetch_at_a_time() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), None], delay=0.3)

    async def main() -> None:
        async with consumer:
            first = asyncio.create_task(consumer.consume_batch(10, 1.0))
            await asyncio.to_thread(factory.fetching.wait, 10)
            with pytest.raises(RuntimeError, match="already awaiting"):
                await consumer.consume_batch(10, 1.0)
            assert offsets(await first) == [0]

    run(main)


def test_status_answers_at_once_while_a_poll_is_under_way() -> None:
    consumer, factory = make([Assign((tp(1), tp(0))), None, rec(0, 0)], delay=1.0)

    async def main() -> None:
        async with consumer:
            assert consumer.status().state is State.JOINING
            await consumer.consume_batch(10, 1.0)
            task = asyncio.create_task(consumer.consume_batch(10, 1.0))
            await asyncio.to_thread(factory.fetching.wait, 10)
            started = time.monotonic()
            status = consumer.status()
            assert time.monotonic() - started < 0.5  # did not wait for the poll
            assert (status.state, status.ready, status.assignment) == (State.RUNNING, True, (tp(0), tp(1)))
            assert (status.instance_id, status.member_id) == ("app-0", "member-1")
            assert consumer.assignment == (tp(0), tp(1))
            consumer.stop()
            assert consumer.status().stopping
            await task

    run(main)


def test_events_reach_the_loop_and_end_with_closed() -> None:
    consumer, _ = make([Assign((tp(0),)), rec(0, 0)])

    async def main() -> list[MembershipEvent]:
        events = consumer.events()
        async with consumer:
            await consumer.consume_batch(10, 0.0)
        return [event async for event in events]

    events = run(main)
    assert [type(e) for e in events] == [Joining, Assigned, Revoked, Closed]  # close() revokes first
    assigned = events[1]
    assert isinstance(assigned, Assigned) and assigned.partitions == (TopicPartition("t", 0),)


def test_runner_on_sigterm_finishes_the_batch_commits_and_closes_without_leaving() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), rec(0, 1), None, rec(0, 2)])
    handled: list[list[int]] = []
    before = signal.getsignal(signal.SIGTERM)

    async def handle(batch: RecordBatch) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # the pod is told to stop while processing
        await asyncio.sleep(0.05)  # the loop runs the handler meanwhile; the batch is still finished
        handled.append(offsets(batch))

    run(lambda: run_until_sigterm(consumer, handle, max_records=10, poll_timeout_s=0.01))
    assert handled == [[0, 1]]
    assert factory.last.commits == [{tp(0): 2}]
    assert "unsubscribe" not in factory.last.calls and factory.last.calls[-1] == "close"
    assert consumer.state is State.CLOSED
    assert signal.getsignal(signal.SIGTERM) == before


def test_runner_ends_a_fenced_member_with_exit_82_semantics() -> None:
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), None, FENCED])
    handled: list[list[int]] = []

    with pytest.raises(FencedInstanceError) as raised:
        run(lambda: run_until_sigterm(consumer, lambda b: handled.append(offsets(b)), poll_timeout_s=0.01))
    assert exit_code_for(raised.value) == 82
    assert handled == [[0]] and factory.last.commits == [{tp(0): 1}]
    assert consumer.state is State.CLOSED
