"""A record that keeps failing does not hold its partition (docs/failures.md), on a real broker, both
group protocols: thousands of records with a few poison ones under each ``failure_action``; a transient
failure handled once; ``kill -9`` between the dead-letter write and the commit; a dead-letter topic that
cannot be written; a pool worker and the asyncio runner with the same policy.

``pytest integration -k "dead_letter or failing_record"`` selects them (and the ACL case in
integration/test_acls.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

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
from static_consumer._kafka import dead_letter as dlt
from static_consumer.aio import AsyncStaticConsumer
from static_consumer.aio import run_until_sigterm as run_async
from static_consumer_lab.brokers.kafka_ops import committed_offsets, high_watermarks, produce
from static_consumer_lab.children.group import shorten_consumer_session

PROTOCOLS = ["classic", "consumer"]
PARTITIONS = 3
RECORDS = 3000
POISON = frozenset({101, 1234, 2345, 2998})
TRANSIENT = 1500  # fails twice, then succeeds
SECRET = "s3cr3t-client-secret"  # a configured secret: masked in the dead-letter headers and events
BOUND_S = 120.0  # upper bounds only: the machine is shared
CHILD = Path(__file__).with_name("_failing_child.py")


class Events(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[MembershipEvent] = []

    def on_event(self, event: MembershipEvent) -> None:
        self.seen.append(event)

    def count(self, kind: type[MembershipEvent]) -> int:
        return sum(isinstance(e, kind) for e in self.seen)


def settings_for(bootstrap: str, group: str, topic: str, protocol: str, **fields: Any) -> ConsumerSettings:
    classic = {"session_timeout_ms": 10_000} if protocol == "classic" else {}
    values: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": [topic],
        "instance_id": "app-0",
        "protocol": protocol,
        "failure_retries": 2,
        "failure_backoff_s": 0.05,
        "failure_max_backoff_s": 0.1,
        "librdkafka": {"sasl.oauthbearer.client.secret": SECRET},
        **classic,
        **fields,
    }
    return ConsumerSettings(**values)


def read_all(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every message of ``topic`` up to its high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    ends = high_watermarks(bootstrap, topic, partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while sum(ends.values()) > len(out) and time.monotonic() < deadline:
            out += [m for m in consumer.consume(500, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return out


def value_of(record: Record) -> int:
    return int(record.value or b"-1")


class Pod:
    """README's pod main, in this process: ``run_until_sigterm`` until every good record was handled."""

    def __init__(self, settings: ConsumerSettings, good: int, settled: type[MembershipEvent] | None) -> None:
        self.settled = settled  # the event each poison record ends with; None: the run ends by itself
        self.events = Events()
        self.consumer = StaticConsumer(settings, listeners=[self.events], env={})
        self.handled: Counter[int] = Counter()
        self.transient_left = 2
        self.good = good
        self.error: BaseException | None = None

    def handle(self, batch: list[Record]) -> None:
        for record in batch:
            value = value_of(record)
            if value in POISON:
                raise RecordFailedError(record) from ValueError(f"poison {value} (client secret {SECRET})")
            if value == TRANSIENT and self.transient_left:
                self.transient_left -= 1
                raise RecordFailedError(record) from TimeoutError("downstream timed out")
            self.handled[value] += 1

    def _watch(self, done: threading.Event) -> None:
        # The last records may be settled without another handler call: stop once all were handled.
        deadline = time.monotonic() + BOUND_S
        while not done.wait(0.1):
            finished = self.settled is not None and self.events.count(self.settled) >= len(POISON)
            if (finished and len(self.handled) >= self.good) or time.monotonic() > deadline:
                self.consumer.stop()

    def run(self) -> int:
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(done,), daemon=True)
        watcher.start()
        try:
            run_until_sigterm(self.consumer, self.handle, poll_timeout_s=0.2)
        except Exception as exc:  # noqa: BLE001 - the pod's exit code
            self.error = exc
        finally:
            done.set()
            watcher.join()
        return exit_code_for(self.error)


@pytest.fixture
def source(kafka_bootstrap_servers: str, kafka_topic_factory: Callable[..., str]) -> str:
    topic = kafka_topic_factory(PARTITIONS, "src")
    assert produce(kafka_bootstrap_servers, topic, RECORDS) == RECORDS
    return topic


def dead_letter_topic(bootstrap: str, source: str, **config: str) -> str:
    from static_consumer_lab.brokers.kafka_ops import create_topic

    return create_topic(bootstrap, f"{source}-dlt", PARTITIONS, config=config or None)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letter_takes_the_poison_records_of_thousands_and_the_rest_flows_once(
    protocol: str, kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    target = dead_letter_topic(bootstrap, source)
    settings = settings_for(bootstrap, group, source, protocol, failure_action="dead_letter")
    pod = Pod(settings, RECORDS - 4, RecordDeadLettered)
    assert pod.run() == 0, pod.error
    # Every good record handled exactly once, the transient one included (two failures, then handled).
    assert set(pod.handled) == set(range(RECORDS)) - POISON and set(pod.handled.values()) == {1}
    assert committed_offsets(bootstrap, group, source, PARTITIONS) == high_watermarks(
        bootstrap, source, PARTITIONS
    )
    sources = {int(m.value()): m for m in read_all(bootstrap, source, PARTITIONS) if int(m.value()) in POISON}
    lettered = read_all(bootstrap, target, PARTITIONS)
    assert sorted(int(m.value()) for m in lettered) == sorted(POISON)  # each once: nothing was killed
    for message in lettered:
        original = sources[int(message.value())]
        headers = dict(message.headers())
        assert message.key() == original.key() and message.partition() == original.partition()
        assert dlt.origin_of(message.headers()) == dlt.Origin(source, original.partition(), original.offset())
        assert headers[dlt.ORIGINAL_TIMESTAMP] == str(original.timestamp()[1]).encode()
        assert headers[dlt.EXCEPTION_TYPE] == b"ValueError" and headers[dlt.ATTEMPTS] == b"3"
        assert headers[dlt.GROUP] == group.encode() and headers[dlt.INSTANCE_ID] == b"app-0"
        message_text = headers[dlt.EXCEPTION_MESSAGE].decode()
        assert SECRET not in message_text and "poison" in message_text
    assert pod.events.count(RecordDeadLettered) == len(POISON)
    retried = [e for e in pod.events.seen if isinstance(e, RecordsRetried)]
    assert len(retried) == 2 * len(POISON) + 2 and all(SECRET not in e.error for e in retried)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_failing_record_skip_and_stop_commit_nothing_unhandled_past_a_record_still_failing(
    protocol: str, kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap = kafka_bootstrap_servers
    skip_group = kafka_group_id_factory("skip")
    pod = Pod(
        settings_for(bootstrap, skip_group, source, protocol, failure_action="skip"),
        RECORDS - 4,
        RecordSkipped,
    )
    assert pod.run() == 0, pod.error
    assert set(pod.handled) == set(range(RECORDS)) - POISON and set(pod.handled.values()) == {1}
    assert pod.events.count(RecordSkipped) == len(POISON)
    ends = high_watermarks(bootstrap, source, PARTITIONS)
    assert committed_offsets(bootstrap, skip_group, source, PARTITIONS) == ends

    stop_group = kafka_group_id_factory("stop")
    pod = Pod(settings_for(bootstrap, stop_group, source, protocol), RECORDS - 4, None)  # the default: stop
    assert pod.run() == 70 and isinstance(pod.error, RecordFailedError), pod.error
    failed = pod.error.record
    committed = committed_offsets(bootstrap, stop_group, source, PARTITIONS)
    assert committed.get(failed.partition, 0) <= failed.offset  # nothing past the failing record
    assert value_of(failed) in POISON and value_of(failed) not in pod.handled


def _run_child(spec: dict[str, Any], timeout_s: float = BOUND_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), json.dumps(spec)], capture_output=True, text=True, timeout=timeout_s
    )


@pytest.mark.lab_broker("KIP-848: the killed member's id is held for the group's 10 s session, not 45 s")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letter_survives_kill_9_between_the_write_and_the_commit(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    tmp_path: Path,
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    source = kafka_topic_factory(2, "src")
    total, poison = 400, 150
    produce(bootstrap, source, total)
    target = dead_letter_topic(bootstrap, source)
    if protocol == "consumer":
        shorten_consumer_session(bootstrap, group)
    fields = settings_for(bootstrap, group, source, protocol, failure_action="dead_letter").model_dump(
        exclude_unset=True
    )
    handled = tmp_path / "handled"
    spec = {"settings": fields, "poison": [poison], "good": total - 1, "handled": str(handled)}
    killed = _run_child({**spec, "kill_on_dead_letter": True})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    first = [int(m.value()) for m in read_all(bootstrap, target, PARTITIONS)]
    assert first == [poison]  # acknowledged before the process died
    again = _run_child(spec)
    assert again.returncode == 0, again.stderr[-2000:]
    values = [int(m.value()) for m in read_all(bootstrap, target, PARTITIONS)]
    assert set(values) == {poison} and len(values) >= 1  # at least once (here: again after the restart)
    seen = {int(line) for line in handled.read_text().split()}
    assert seen == set(range(total)) - {poison}  # none lost
    assert committed_offsets(bootstrap, group, source, 2) == high_watermarks(bootstrap, source, 2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letter_topic_missing_or_unwritable_ends_typed_with_nothing_committed_past_the_record(
    protocol: str, kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap = kafka_bootstrap_servers
    missing = kafka_group_id_factory("missing")
    began = time.monotonic()
    settings = settings_for(bootstrap, missing, source, protocol, failure_action="dead_letter")
    pod = Pod(settings, RECORDS - 4, None)
    assert pod.run() == 78 and isinstance(pod.error, DeadLetterTopicError), pod.error
    assert pod.error.topic == f"{source}-dlt" and not pod.handled  # before joining: nothing consumed
    print(f"{protocol}: missing dead-letter topic refused {time.monotonic() - began:.2f} s after start")

    # Exists, may be written, but refuses every write: each dead-lettered record (its value and the
    # dlt.* headers) is larger than the topic takes.
    dead_letter_topic(bootstrap, source, **{"max.message.bytes": "128"})
    group = kafka_group_id_factory("unwritable")
    settings = settings_for(
        bootstrap, group, source, protocol, failure_action="dead_letter", dead_letter_timeout_s=2.0
    )
    pod = Pod(settings, RECORDS - 4, None)
    assert pod.run() == 75 and isinstance(pod.error, DeadLetterError), pod.error
    _, partition, offset = pod.error.record
    committed = committed_offsets(bootstrap, group, source, PARTITIONS)
    assert committed.get(partition, 0) <= offset  # the record is read again after the restart


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letter_in_a_pool_worker(
    protocol: str,
    kafka_bootstrap_servers: str,
    source: str,
    kafka_group_id_factory: Callable[..., str],
    tmp_path: Path,
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    target = dead_letter_topic(bootstrap, source)
    handled = tmp_path / "handled"
    (tmp_path / "poison_app.py").write_text(
        textwrap.dedent(
            f"""
            from static_consumer import RecordFailedError

            def handle(batch):
                with open({str(handled)!r}, "a") as out:
                    for record in batch:
                        value = int(record.value)
                        if value in {sorted(POISON)!r}:
                            raise RecordFailedError(record) from ValueError(f"poison {{value}}")
                        out.write(f"{{value}}\\n")
            """
        )
    )
    env = {
        **os.environ,
        "POD_NAME": "app-0",
        "STATIC_CONSUMER_BOOTSTRAP_SERVERS": bootstrap,
        "STATIC_CONSUMER_GROUP_ID": group,
        "STATIC_CONSUMER_TOPICS": source,
        "STATIC_CONSUMER_PROTOCOL": protocol,
        "STATIC_CONSUMER_FAILURE_ACTION": "dead_letter",
        "STATIC_CONSUMER_FAILURE_RETRIES": "1",
        "STATIC_CONSUMER_FAILURE_BACKOFF_S": "0.05",
    }
    pod = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "static_consumer.command",
            "run",
            "--processes",
            "1",
            "--app-dir",
            str(tmp_path),
            "poison_app:handle",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + BOUND_S
        good = set(range(RECORDS)) - POISON
        while time.monotonic() < deadline:
            seen = {int(v) for v in handled.read_text().split()} if handled.exists() else set()
            if seen >= good and committed_offsets(bootstrap, group, source, PARTITIONS) == high_watermarks(
                bootstrap, source, PARTITIONS
            ):
                break
            assert pod.poll() is None, pod.communicate()[1][-2000:]
            time.sleep(0.5)
        pod.send_signal(signal.SIGTERM)
        _, stderr = pod.communicate(timeout=60)
    finally:
        if pod.poll() is None:
            pod.kill()
    assert pod.returncode == 0, stderr[-2000:]
    assert seen == good
    assert sorted(int(m.value()) for m in read_all(bootstrap, target, PARTITIONS)) == sorted(POISON)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letter_in_the_asyncio_runner(
    protocol: str, kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    target = dead_letter_topic(bootstrap, source)
    events = Events()
    consumer = AsyncStaticConsumer(
        settings_for(bootstrap, group, source, protocol, failure_action="dead_letter"),
        listeners=[events],
        env={},
    )
    handled: Counter[int] = Counter()

    async def handle(batch: RecordBatch) -> None:
        for record in batch:
            value = value_of(record)
            if value in POISON:
                raise RecordFailedError(record) from ValueError(f"poison {value}")
            handled[value] += 1

    async def watch() -> None:
        while len(handled) < RECORDS - len(POISON) or events.count(RecordDeadLettered) < len(POISON):
            await asyncio.sleep(0.1)
        consumer.stop()

    async def main() -> None:
        watcher = asyncio.create_task(watch())
        try:
            await asyncio.wait_for(run_async(consumer, handle, poll_timeout_s=0.2), BOUND_S)
        finally:
            watcher.cancel()

    asyncio.run(main())
    assert set(handled) == set(range(RECORDS)) - POISON and set(handled.values()) == {1}
    assert sorted(int(m.value()) for m in read_all(bootstrap, target, PARTITIONS)) == sorted(POISON)
    assert committed_offsets(bootstrap, group, source, PARTITIONS) == high_watermarks(
        bootstrap, source, PARTITIONS
    )
