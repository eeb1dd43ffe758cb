"""AsyncStaticConsumer on a real broker, both group protocols.

- A clean static restart of the asyncio runner (a signal through the loop: finish the batch, commit,
  close without leaving) gets the same partitions back, the bystander (a StaticConsumer child process)
  sees no revocation, and over the bounce every record of the async member's partitions is handled
  exactly once (offsets 0 .. high watermark, none twice).
- Classic: a second process with the same group.instance.id fences the async member; the awaiting task
  ends with FencedInstanceError (exit code 82), after closing without committing anything more.
  Consumer protocol (KIP-848): the member already in the group wins; the duplicate is refused
  (UNRELEASED_INSTANCE_ID) and the async member keeps consuming, undisturbed.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from _side_by_side import raise_first

from static_consumer import ConsumerSettings, State
from static_consumer._base.errors import FencedInstanceError, exit_code_for
from static_consumer._base.records import RecordBatch
from static_consumer._core.events import Assigned, CommitRefused, Fenced, Revoked
from static_consumer.aio import AsyncStaticConsumer, run_until_sigterm
from static_consumer_lab.brokers import produce
from static_consumer_lab.brokers.kafka_ops import high_watermarks
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.loop_lag import LoopLag
from static_consumer_lab.children.pauses import owned_at, sampling_commits, taken_over, went_backwards
from static_consumer_lab.children.processes import ConsumerProcess
from static_consumer_lab.producer import SteadyProducer

pytestmark = pytest.mark.lab_broker(
    "KIP-848 groups take a 10 s session (an idle duplicate's exit 75 waits session + margin); what is "
    "tested is the asyncio consumer, whatever the session length"
)

PARTITIONS = 4
SIGNAL = signal.SIGUSR2  # sent to this process; the runner handles it through the loop like SIGTERM
WAIT_S = 90.0  # upper bounds only: the machine is shared and loaded


Factories = tuple[Callable[..., ConsumerProcess], str, Callable[..., str], Callable[..., str]]


def _group(protocol: str, factories: Factories) -> Group:
    start_process, bootstrap, topics, groups = factories
    return Group.new(start_process, bootstrap, topics, groups, PARTITIONS, protocol=protocol, lab=True)


@pytest.fixture
def factories(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> Factories:
    start, bootstrap = kafka_consumer_process_factory, kafka_bootstrap_servers
    return start, bootstrap, kafka_topic_factory, kafka_group_id_factory


class Incarnation:
    """One run of the asyncio runner in this process, handling batches into ``seen``."""

    def __init__(self, group: Group, name: str, seen: Counter[tuple[int, int]]) -> None:
        self.consumer = AsyncStaticConsumer(ConsumerSettings(**group.spec(name)["settings"]))
        self.events = self.consumer.events()
        self.seen = seen
        self.handled = 0

    async def handle(self, batch: RecordBatch) -> None:
        for record in batch:
            self.seen[(record.partition, record.offset)] += 1
        self.handled += len(batch)
        await asyncio.sleep(0)

    def run(self) -> asyncio.Task[None]:
        return asyncio.create_task(
            run_until_sigterm(
                self.consumer, self.handle, max_records=200, poll_timeout_s=0.2, signals=(SIGNAL,)
            )
        )

    async def assigned(self) -> tuple[tuple[str, int], ...]:
        await _until(lambda: self.consumer.status().ready and bool(self.consumer.assignment), "assigned")
        return tuple((tp.topic, tp.partition) for tp in self.consumer.assignment)


async def _until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await asyncio.sleep(0.1)


async def _stable(group: Group, bystander: str, incarnation: Incarnation) -> dict[str, set[tuple[str, int]]]:
    """Bystander and async member together own every partition, unchanged for 3 s."""
    everything = {(group.topic, p) for p in range(PARTITIONS)}
    last: tuple[set[tuple[str, int]], set[tuple[str, int]]] = (set(), set())
    since = time.monotonic()

    def settled() -> bool:
        nonlocal last, since
        now = (group.members[bystander].assignment(), set(incarnation.consumer.assignment))
        if now != last or now[0] | now[1] != everything or now[0] & now[1] or not all(now):
            last, since = now, time.monotonic()
            return False
        return time.monotonic() - since >= 3.0

    await _until(settled, "a settled assignment")
    return {bystander: last[0], "async": last[1]}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_clean_static_restart_keeps_partitions_and_handles_every_record_once(
    protocol: str, factories: Factories
) -> None:
    started = time.monotonic()
    group = _group(protocol, factories)
    group.start("app-0").wait_for_kind("assigned", timeout_s=60)
    seen: Counter[tuple[int, int]] = Counter()

    async def bounce() -> tuple[set[tuple[str, int]], tuple[tuple[str, int], ...], float]:
        first = Incarnation(group, "app-1", seen)
        task = first.run()
        owned = (await _stable(group, "app-0", first))["async"]
        stable_since = time.time()
        # Produced only now, so every record of the async member's partitions is its own to handle.
        await asyncio.to_thread(produce, group.bootstrap, group.topic, 2000)
        await _until(lambda: sum(seen.values()) >= 200, "the first records")
        await asyncio.to_thread(produce, group.bootstrap, group.topic, 1000, start=2000)
        os.kill(os.getpid(), SIGNAL)  # mid-stream: finish the batch, commit, close without leaving
        await asyncio.wait_for(task, WAIT_S)
        assert first.consumer.state is State.CLOSED
        await asyncio.to_thread(produce, group.bootstrap, group.topic, 500, start=3000)  # while it is down

        second = Incarnation(group, "app-1", seen)
        task = second.run()
        again = await second.assigned()
        hw = await asyncio.to_thread(high_watermarks, group.bootstrap, group.topic, PARTITIONS)
        mine = {p for _, p in owned}
        await _until(lambda: all(seen[(p, hw[p] - 1)] for p in mine if hw[p]), "the rest of the records")
        os.kill(os.getpid(), SIGNAL)
        await asyncio.wait_for(task, WAIT_S)
        assert second.handled > 0
        revoked = [e async for e in second.events if isinstance(e, Revoked)]
        # The only revoke the restarted member saw is its own close (it never lost anything while running).
        assert [tuple(e.partitions) for e in revoked] in ([], [tuple(sorted(again))])
        return owned, again, stable_since

    owned, again, stable_since = asyncio.run(asyncio.wait_for(bounce(), 4 * WAIT_S))
    assert set(again) == owned, "the restarted static member got other partitions"
    assert group.revocations_since(stable_since) == 0, "the bystander noticed the restart"
    hw = high_watermarks(group.bootstrap, group.topic, PARTITIONS)
    for partition in {p for _, p in owned}:
        offsets = sorted(o for (p, o), _ in seen.items() if p == partition)
        assert offsets == list(range(hw[partition])), f"partition {partition}: records lost"
    twice = {key: count for key, count in seen.items() if count > 1}
    assert twice == {}, f"records handled twice over a clean bounce: {sorted(twice)[:10]}"
    print(f"{protocol}: async clean bounce test took {time.monotonic() - started:.1f}s")


FULL_RATE_RECORDS = 500_000
LOOP_BOUND_S = 0.5  # the most a 10 ms timer may be late while consuming (bench/bench_async.py: 4-15 ms)


def test_the_loop_stays_responsive_while_consuming_a_full_topic_at_full_rate(factories: Factories) -> None:
    """A pre-filled topic read as fast as the consumer goes (``batches()``, 5,000 records a fetch, each
    batch committed with the next fetch) while a 10 ms timer runs on the loop. ``batches()`` yields to
    the loop only by awaiting the consumer's thread, so a consume run on the loop would hold the timer
    back for the whole read: the worst lateness must stay under a third of the read's duration, and
    under LOOP_BOUND_S."""
    started = time.monotonic()
    group = _group("classic", factories)
    produce(group.bootstrap, group.topic, FULL_RATE_RECORDS)
    consumer = AsyncStaticConsumer(ConsumerSettings(**group.spec("app-0")["settings"]))

    async def read_all() -> tuple[Counter[int], float, LoopLag]:
        per_partition: Counter[int] = Counter()
        first = last = 0.0
        async with LoopLag() as lag, consumer:
            async for batch in consumer.batches(5_000, 1.0):
                first = first or time.monotonic()
                last = time.monotonic()
                per_partition.update(batch.partitions)
                if sum(per_partition.values()) >= FULL_RATE_RECORDS:
                    consumer.stop()
        return per_partition, last - first, lag

    # At full rate the consumer allocates fast, and every full collection of the garbage collector
    # stops all threads, the loop's too, for as long as scanning the whole heap takes (in a diagnostic
    # run on a loaded 2-core machine: one every 0.1-0.3 s, 15-146 ms each). In a long pytest session
    # that heap is mostly the test suite's; frozen, the objects from before the read are no longer
    # scanned, while the consumer's own allocations still are.
    gc.freeze()
    try:
        per_partition, took, lag = asyncio.run(asyncio.wait_for(read_all(), WAIT_S))
    finally:
        gc.unfreeze()
    hw = high_watermarks(group.bootstrap, group.topic, PARTITIONS)
    assert dict(per_partition) == {p: n for p, n in hw.items() if n}, "records missing or read twice"
    assert group.committed() == hw, "every batch committed"
    rate = FULL_RATE_RECORDS / took if took else 0.0
    print(
        f"full rate: {FULL_RATE_RECORDS:,} records in {took:.2f} s ({rate:,.0f}/s); worst lateness of a "
        f"10 ms timer {lag.worst * 1000:.1f} ms over {lag.ticks} ticks; "
        f"test took {time.monotonic() - started:.1f}s"
    )
    bound = min(LOOP_BOUND_S, took / 3)
    assert lag.worst < bound, f"the loop stalled for {lag.worst:.2f} s of a {took:.2f} s read"


def test_classic_fencing_ends_the_awaiting_task_with_fenced_instance_error(
    factories: Factories,
) -> None:
    started = time.monotonic()
    group = _group("classic", factories)
    produce(group.bootstrap, group.topic, 500)

    async def fenced() -> tuple[BaseException | None, list[object], float]:
        inc = Incarnation(group, "app-0", Counter())
        task = inc.run()
        await inc.assigned()
        await _until(lambda: sum(inc.seen.values()) >= 500, "the first records")
        duplicate = group.start("app-0")  # same instance id, another process: the newest joiner wins
        joined_at = time.monotonic()
        await asyncio.to_thread(duplicate.wait_for_kind, "assigned", 60)
        await asyncio.to_thread(produce, group.bootstrap, group.topic, 200, start=500)
        error = None
        try:
            await asyncio.wait_for(task, WAIT_S)
        except FencedInstanceError as exc:
            error = exc
        took = time.monotonic() - joined_at
        events = [e async for e in inc.events]
        assert inc.consumer.state is State.CLOSED
        return error, events, took

    error, events, took = asyncio.run(asyncio.wait_for(fenced(), 3 * WAIT_S))
    assert isinstance(error, FencedInstanceError) and exit_code_for(error) == 82
    assert any(isinstance(e, Fenced) for e in events)
    print(f"classic: fenced {took:.1f}s after the duplicate joined; took {time.monotonic() - started:.1f}s")
    assert group.members["app-0"].returncode is None, "the new holder of the instance id keeps running"


def test_consumer_protocol_duplicate_is_refused_and_the_async_member_goes_on(
    factories: Factories,
) -> None:
    started = time.monotonic()
    group = _group("consumer", factories)
    produce(group.bootstrap, group.topic, 500)

    async def undisturbed() -> None:
        inc = Incarnation(group, "app-0", Counter())
        task = inc.run()
        owned = await inc.assigned()
        await _until(lambda: sum(inc.seen.values()) >= 500, "the first records")
        duplicate = group.start("app-0")
        await asyncio.to_thread(duplicate.wait_for_kind, "ready", 60)
        await asyncio.to_thread(produce, group.bootstrap, group.topic, 300, start=500)
        await _until(lambda: sum(inc.seen.values()) >= 800, "records produced after the duplicate started")
        await asyncio.sleep(3)
        assert not task.done(), "the async member ended"
        assert inc.consumer.state is State.RUNNING and inc.consumer.assignment
        assert tuple((tp.topic, tp.partition) for tp in inc.consumer.assignment) == owned
        assert duplicate.events("assigned") == [], "the duplicate got partitions"
        duplicate.kill()
        os.kill(os.getpid(), SIGNAL)
        await asyncio.wait_for(task, WAIT_S)

    asyncio.run(asyncio.wait_for(undisturbed(), 3 * WAIT_S))
    print(f"consumer: duplicate refused, async member undisturbed; took {time.monotonic() - started:.1f}s")


def test_consumer_protocol_newcomer_with_a_live_id_ends_its_task_with_fenced_instance_error(
    factories: Factories,
) -> None:
    """KIP-848 keeps the id with the member already in the group: here the async consumer is the newcomer.
    Refused (UNRELEASED_INSTANCE_ID), it watches the group; the holder's commits prove it alive, so the
    awaiting task ends with FencedInstanceError (82) and the holder keeps its partitions."""
    started = time.monotonic()
    group = _group("consumer", factories)
    holder = group.start("app-0")
    holder.wait_for_kind("assigned", timeout_s=60)
    owned = holder.assignment()

    async def refused() -> tuple[BaseException | None, float]:
        inc = Incarnation(group, "app-0", Counter())
        began = time.monotonic()
        task = inc.run()
        sent = 0
        while not task.done() and time.monotonic() - began < WAIT_S:  # traffic: the holder commits
            await asyncio.to_thread(produce, group.bootstrap, group.topic, 20, start=sent)
            sent += 20
            await asyncio.sleep(0.5)
        error = None
        try:
            await asyncio.wait_for(task, 5)
        except FencedInstanceError as exc:
            error = exc
        assert inc.handled == 0, "the refused newcomer handled records"
        return error, time.monotonic() - began

    error, took = asyncio.run(asyncio.wait_for(refused(), 3 * WAIT_S))
    assert isinstance(error, FencedInstanceError) and exit_code_for(error) == 82, error
    assert holder.returncode is None, "the holder of the instance id keeps running"
    assert holder.assignment() == owned and holder.events("revoked") == []
    print(f"consumer: async newcomer fenced after {took:.1f}s; took {time.monotonic() - started:.1f}s")


def test_the_asyncio_service_example_reports_health_and_stops_on_sigterm(factories: Factories) -> None:
    """examples/asyncio_service.py as a pod would run it: ready once in the group, every record handled
    and committed, SIGTERM -> exit 0 after closing."""
    started = time.monotonic()
    group = _group("classic", factories)
    settings = group.spec("svc-0")["settings"]
    env = {
        **os.environ,
        "STATIC_CONSUMER_BOOTSTRAP_SERVERS": group.bootstrap,
        "STATIC_CONSUMER_GROUP_ID": group.group_id,
        "STATIC_CONSUMER_TOPICS": group.topic,
        "STATIC_CONSUMER_SESSION_TIMEOUT_MS": str(settings["session_timeout_ms"]),
        "STATIC_CONSUMER_HEARTBEAT_INTERVAL_MS": str(settings["heartbeat_interval_ms"]),
        "POD_NAME": "svc-0",
        "HEALTH_PORT": "0",
    }
    example = Path(__file__).parent.parent / "examples" / "asyncio_service.py"
    proc = subprocess.Popen(
        [sys.executable, str(example)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True).start()
    try:
        _wait(lambda: any(line.startswith("health on port") for line in lines), "the health server")
        port = int(next(line for line in lines if line.startswith("health on port")).split()[-1])
        _wait(lambda: _get(port, "/readyz")[0] == 200, "readiness")
        code, body = _get(port, "/healthz")
        assert code == 200 and body["state"] == "running" and body["instance_id"] == "svc-0"
        produce(group.bootstrap, group.topic, 300)
        handled = lambda: sum(int(x.split()[1]) for x in list(lines) if x.startswith("handled"))  # noqa: E731
        _wait(lambda: handled() >= 300, "300 records handled")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=WAIT_S) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
    hw = high_watermarks(group.bootstrap, group.topic, PARTITIONS)
    assert group.committed() == hw, "every handled record committed before the exit"
    print(f"asyncio service example: took {time.monotonic() - started:.1f}s")


def _get(port: int, path: str) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())
    except OSError:
        return 0, {}


def _wait(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.1)


BLOCK_S = 16.0  # past max_poll_interval_ms (7 s) + session (6 s)


# One runner per protocol in the same event loop, each stopped by a signal of its own.
RIDE_OUT_SIGNALS = {"classic": signal.SIGUSR2, "consumer": signal.SIGUSR1}


def test_the_asyncio_runner_rides_out_a_commit_refused_after_a_blocked_handler(factories: Factories) -> None:
    """A blocked handler through the asyncio runner: its handler awaits a slow call past max.poll.interval +
    session, the other member takes the partitions, and the batch's commit is refused. The runner does
    not end: a CommitRefused event, the member rejoins and handles records again, and it hands out no
    record of a partition the other member owned then; nothing is lost, committed offsets never go
    backwards. Both protocols at once, in one event loop (a runner and a signal each): each run mostly
    awaits its block and the takeover."""
    runs = {protocol: _RideOut(protocol, factories) for protocol in RIDE_OUT_SIGNALS}
    with contextlib.ExitStack() as stack:
        for run in runs.values():
            run.producer = stack.enter_context(SteadyProducer(run.bootstrap, run.group.topic))
            run.samples = stack.enter_context(run.sampler)

        async def both() -> list[BaseException | None]:
            ended = await asyncio.gather(*(run.scenario() for run in runs.values()), return_exceptions=True)
            return [e if isinstance(e, BaseException) else None for e in ended]

        errors = dict(zip(runs, asyncio.run(asyncio.wait_for(both(), 4 * WAIT_S)), strict=True))
    failed = [(protocol, error) for protocol, error in errors.items() if error is not None]
    for protocol, run in runs.items():
        if errors[protocol] is None:
            try:
                run.check()
            except AssertionError as error:
                failed.append((protocol, error))
    raise_first(failed)


class _RideOut:
    """One protocol's run of the blocked-handler scenario: its group, its records, its checks."""

    def __init__(self, protocol: str, factories: Factories) -> None:
        start_process, self.bootstrap, topics, groups = factories
        self.protocol, self.signal = protocol, RIDE_OUT_SIGNALS[protocol]
        self.group = Group.new(
            start_process,
            self.bootstrap,
            topics,
            groups,
            PARTITIONS,
            protocol=protocol,
            lab=True,
            session_ms=6000,  # the classic members' session, the KIP-848 group's
            settings={"max_poll_interval_ms": 7000},
        )
        self.group.form(["app-0"])
        self.other = self.group.members["app-0"]
        self.handled: list[tuple[float, int, int]] = []  # (when, partition, offset)
        self.sampler = sampling_commits(self.bootstrap, self.group.group_id, self.group.topic, PARTITIONS)
        self.producer: SteadyProducer | None = None
        self.samples: list[dict[int, int]] = []
        self.acked = 0
        self.seen: list[object] = []
        self.began = self.returned = 0.0

    async def scenario(self) -> None:
        group, other, handled, producer = self.group, self.other, self.handled, self.producer
        assert producer is not None
        consumer = AsyncStaticConsumer(ConsumerSettings(**group.spec("app-1")["settings"]))
        events = consumer.events()
        blocked: list[float] = []

        async def handle(batch: RecordBatch) -> None:
            now = time.time()
            handled.extend((now, r.partition, r.offset) for r in batch)
            if not blocked and len(handled) > 300 and consumer.assignment:
                owned = {(tp.topic, tp.partition) for tp in consumer.assignment}
                blocked.append(time.time())
                # A slow downstream call: nothing polls meanwhile. At least BLOCK_S, and on until the
                # other member took over (a loaded machine expires the member late), plus a second.
                await asyncio.sleep(BLOCK_S)
                await _until(lambda: taken_over(other, owned, blocked[0]), "the takeover", 60)
                await asyncio.sleep(1.0)
                blocked.append(time.time())

        task = asyncio.create_task(
            run_until_sigterm(consumer, handle, max_records=100, poll_timeout_s=0.2, signals=(self.signal,))
        )
        await _until(lambda: len(blocked) == 2, "the blocked handler's return", 120)
        await _until(lambda: any(t > blocked[1] + 3 for t, _p, _o in handled), "records after the rejoin")
        self.acked = await asyncio.to_thread(producer.stop)
        marks = await asyncio.to_thread(high_watermarks, self.bootstrap, group.topic, PARTITIONS)
        # Everything consumed and committed up to the end, by the two members, before the async one stops.
        await _until(lambda: group.committed() == marks, "every partition committed up to its end")
        os.kill(os.getpid(), self.signal)
        await asyncio.wait_for(task, WAIT_S)  # ends on the signal, not on the refusal
        self.seen, self.began, self.returned = [e async for e in events], blocked[0], blocked[1]

    def check(self) -> None:
        group, other, handled, returned = self.group, self.other, self.handled, self.returned
        refused = [e for e in self.seen if isinstance(e, CommitRefused)]
        back = [e for e in self.seen if isinstance(e, Assigned) and e.at > returned and e.partitions]
        print(
            f"{self.protocol}: blocked {returned - self.began:.1f} s; refused {[e.error for e in refused]}; "
            f"assigned again {back[0].at - returned:.1f} s after the return"
            if back
            else "not assigned again"
        )
        assert refused and refused[0].at >= returned - 1.0, "the blocked batch's commit was not refused"
        assert back, "the member did not rejoin"
        stale = [(t, p, o) for t, p, o in handled if t > returned and (group.topic, p) in owned_at(other, t)]
        assert stale == [], f"handed out while the other member owned them: {stale[:5]}"
        everything = {(p, o) for _t, p, o in handled} | {(p, o) for _t, p, o in other.records()}
        assert len(everything) == self.acked, "records lost"
        assert went_backwards([*self.samples, group.committed()]) == []
