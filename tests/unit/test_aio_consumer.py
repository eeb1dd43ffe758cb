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
from fakes import (
    FENCED,
    MAX_POLL,
    MODERN,
    UNKNOWN_MEMBER,
    Assign,
    FakeAdapter,
    FakeFactory,
    Lose,
    Revoke,
    Step,
    rec,
    tp,
)

from static_consumer._base.errors import FencedInstanceError, exit_code_for
from static_consumer._base.records import RecordBatch, TopicPartition
from static_consumer._core.consumer import State
from static_consumer._core.events import (
    Assigned,
    Closed,
    CommitRefused,
    Joining,
    Lost,
    MembershipEvent,
    MembershipListener,
    Revoked,
)
from static_consumer._core.seams import Seams
from static_consumer.aio import AsyncStaticConsumer, run_until_sigterm
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.children.loop_lag import LoopLag

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
    busy: float = 0.0
    log: ThreadLog | None = None
    fetching: threading.Event | None = None

    def consume(self, max_records: int, timeout: float) -> Any:
        if self.log is not None:
            self.log.note("consume")
        if self.fetching is not None:
            self.fetching.set()
        time.sleep(self.delay)
        spin_until = time.monotonic() + self.busy
        while time.monotonic() < spin_until:  # Python work that holds the GIL, as building records does
            pass
        return super().consume(max_records, timeout)

    def commit(self, offsets: Any) -> None:
        if self.log is not None:
            self.log.note("commit")
        super().commit(offsets)

    def close(self) -> None:
        if self.log is not None:
            self.log.note("close")
        super().close()


class SlowFactory(FakeFactory):
    def __init__(
        self, *scripts: Iterable[Step], delay: float = 0.0, busy: float = 0.0, log: ThreadLog | None = None
    ) -> None:
        super().__init__(*scripts)
        self.delay, self.busy, self.log, self.fetching = delay, busy, log, threading.Event()

    def __call__(self, config: dict[str, Any]) -> FakeAdapter:
        plain = super().__call__(config)
        adapter = SlowAdapter(plain.config, plain.script)
        adapter.delay, adapter.busy, adapter.log, adapter.fetching = (
            self.delay,
            self.busy,
            self.log,
            self.fetching,
        )
        self.adapters[-1] = adapter
        return adapter


class Listener(MembershipListener):
    def __init__(self, log: ThreadLog) -> None:
        self.log = log

    def on_assigned(self, event: Assigned) -> None:
        self.log.note("on_assigned")


def make(
    *scripts: Iterable[Step], delay: float = 0.0, busy: float = 0.0, log: ThreadLog | None = None, **kw: Any
) -> tuple[AsyncStaticConsumer, SlowFactory]:
    factory = SlowFactory(*scripts, delay=delay, busy=busy, log=log)
    consumer = AsyncStaticConsumer(
        SETTINGS,
        env={"POD_NAME": "app-0"},
        **kw,
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
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

    async def main() -> tuple[list[int], LoopLag]:
        got: list[int] = []
        async with consumer, LoopLag() as lag:
            for _ in range(3):
                got += offsets(await consumer.consume_batch(10, 1.0))
        return got, lag

    started = time.monotonic()
    got, lag = run(main)
    assert got == [0, 1, 2]
    assert time.monotonic() - started >= 3.0  # the three consumes did wait
    assert lag.ticks > 10 and lag.worst < 0.5, f"the loop stalled for {lag.worst:.2f}s"


def test_the_loop_keeps_running_while_the_client_hands_out_full_batches_at_full_rate() -> None:
    """At full rate the consumer's thread is busy in Python (building records), holding the GIL, rather
    than waiting: every consume here spins for 0.6 s and returns a full batch. The loop still gets its
    turns (CPython hands the GIL over every few milliseconds); a consume run on the loop would hold the
    timer back for at least 0.6 s each time."""
    script: list[Step] = [Assign((tp(0),)), *[rec(0, i) for i in range(3 * 500)]]
    consumer, factory = make(script, busy=0.6)

    async def main() -> tuple[int, LoopLag]:
        handled = 0
        async with consumer, LoopLag() as lag:
            while handled < 1500:
                batch = await consumer.consume_batch(500, 1.0)
                assert len(batch) == 500  # full batches, no waiting for data
                handled += len(batch)
                await consumer.commit(batch)
        return handled, lag

    started = time.monotonic()
    handled, lag = run(main)
    took = time.monotonic() - started
    assert handled == 1500 and factory.last.commits[-1] == {tp(0): 1500}
    assert took >= 1.8  # the three consumes did keep their thread busy
    assert lag.ticks > 20 and lag.worst < 0.3, f"the loop stalled for {lag.worst:.2f}s of {took:.1f}s"


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


def test_a_revoke_commits_what_was_processed_before_the_partitions_go() -> None:
    """The sync core's commit on revoke, through the async path: the rebalance runs inside an awaited
    fetch, on the consumer's thread, and commits the records marked processed before the revoke."""
    log = ThreadLog()
    rebalance = [Revoke((tp(0), tp(1))), Assign((tp(1),))]
    consumer, factory = make(
        [Assign((tp(0), tp(1))), rec(0, 0), rec(1, 0), None, *rebalance, rec(1, 1)], log=log
    )

    async def main() -> tuple[list[MembershipEvent], int]:
        events = consumer.events()
        async with consumer:
            for record in (await consumer.consume_batch(10, 0.0)).records():
                await consumer.mark_processed(record)
            assert factory.last.commits == []  # marked, not committed yet
            assert offsets(await consumer.consume_batch(10, 0.0)) == [1]  # the rebalance ran in this fetch
            assert factory.last.commits == [{tp(0): 1, tp(1): 1}]  # committed before the partitions went
            assert consumer.assignment == (tp(1),)
            assert await consumer.commit() == {}  # revoked offsets are not committed again
        return [e async for e in events], threading.get_ident()

    events, loop_thread = run(main)
    assert [type(e) for e in events] == [Joining, Assigned, Revoked, Assigned, Revoked, Closed]
    assert events[2].partitions == (tp(0), tp(1))  # type: ignore[attr-defined]
    commit_threads = {ident for what, ident in log.threads if what == "commit"}
    consume_threads = {ident for what, ident in log.threads if what == "consume"}
    assert commit_threads == consume_threads and loop_thread not in commit_threads


def test_lost_partitions_are_never_committed_through_the_async_path() -> None:
    """max_poll_interval_ms exceeded, the partition lost: what was marked processed before is not
    committed, not by commit(), not by the reassignment, not by close()."""
    consumer, factory = make(
        [Assign((tp(0),)), rec(0, 4), None, MAX_POLL, Lose((tp(0),)), Assign((tp(0),)), rec(0, 4), None]
    )

    async def main() -> list[MembershipEvent]:
        events = consumer.events()
        async with consumer:
            [record] = (await consumer.consume_batch(10, 0.0)).records()
            await consumer.mark_processed(record)
            assert offsets(await consumer.consume_batch(10, 0.0)) == []  # _MAX_POLL_EXCEEDED, logged
            assert offsets(await consumer.consume_batch(10, 0.0)) == [4]  # lost, reassigned, read again
            assert await consumer.commit() == {}  # the processed offset died with the lost assignment
        return [e async for e in events]

    events = run(main)
    assert Lost in [type(e) for e in events]
    assert factory.last.commits == []


def test_nothing_is_committed_after_a_fence_through_the_async_path() -> None:
    """Records marked processed before the fence stay uncommitted: the awaiting task gets
    FencedInstanceError, and neither commit() nor close() sends anything afterwards."""
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), rec(0, 1), None, FENCED])

    async def main() -> None:
        async with consumer:
            for record in (await consumer.consume_batch(10, 0.0)).records():
                await consumer.mark_processed(record)
            with pytest.raises(FencedInstanceError):
                await consumer.consume_batch(10, 0.0)
            with pytest.raises(FencedInstanceError):
                await consumer.commit()
        assert consumer.state is State.CLOSED

    run(main)
    assert factory.last.commits == []
    assert "unsubscribe" not in factory.last.calls


def test_batches_raise_a_fence_refusing_the_commit_and_commit_nothing_after_it() -> None:
    """The commit of a batch refused because another process took the instance id (FENCED_INSTANCE_ID):
    the `async for` ends with FencedInstanceError, and close() commits nothing."""
    consumer, factory = make([Assign((tp(0),)), rec(0, 0), None, rec(0, 1), None, rec(0, 2)])

    async def main() -> list[list[int]]:
        seen: list[list[int]] = []
        async with consumer:
            with pytest.raises(FencedInstanceError):
                async for batch in consumer.batches(10, 0.0):
                    seen.append(offsets(batch))
                    if len(seen) == 2:
                        factory.last.commit_failures.append(FENCED)  # the commit of this batch is refused
        return seen

    assert run(main) == [[0], [1]]
    assert factory.last.commits == [{tp(0): 1}]  # the first batch; nothing of the second, nothing at close
    assert "unsubscribe" not in factory.last.calls


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


def test_runner_goes_on_after_a_refused_commit_and_commits_nothing_it_lost() -> None:
    """The asyncio runner rides out a commit refused after a lost session as the sync runner does: a
    CommitRefused event on the loop's stream, no exit, and never a commit for the lost partition."""
    consumer, factory = make(
        [Assign((tp(0),)), rec(0, 0), None, Lose((tp(0),)), Assign((tp(1),)), rec(1, 5), None, rec(1, 6)]
    )
    handled: list[list[int]] = []

    async def main() -> list[MembershipEvent]:
        events = consumer.events()

        def handle(batch: RecordBatch) -> None:
            handled.append(offsets(batch))
            if len(handled) == 1:  # the session ends while the first batch is processed
                factory.last.commit_failures.append(UNKNOWN_MEMBER)
            if len(handled) == 3:
                os.kill(os.getpid(), signal.SIGTERM)

        await run_until_sigterm(consumer, handle, max_records=10, poll_timeout_s=0.01)
        return [event async for event in events]

    events = run(main)
    assert handled == [[0], [5], [6]]
    refused = [e for e in events if isinstance(e, CommitRefused)]
    assert [(e.error, e.partitions) for e in refused] == [("UNKNOWN_MEMBER_ID", (tp(0),))]
    assert factory.last.commits == [{tp(1): 6}, {tp(1): 7}]
    assert consumer.state is State.CLOSED
