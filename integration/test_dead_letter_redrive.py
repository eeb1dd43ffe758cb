"""``static-consumer redrive`` on a real broker (docs/failures.md#re-driving, docs/cli.md): records a
static member dead-lettered go back to their source partitions with their key, value and own headers;
the run's group keeps its place (a second run sends nothing, ``--dry-run`` sends and commits nothing);
records without ``dlt.original.*`` headers are passed over; a dead-letter topic that does not exist is
a typed error with its documented exit code. The command runs as a user runs it: the installed script
in a child process.

``pytest integration -k "dead_letter or failing_record"`` selects them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from static_consumer import (
    ConsumerSettings,
    DeadLetterTopicError,
    MembershipListener,
    RecordDeadLettered,
    RecordFailedError,
    StaticConsumer,
    run_until_sigterm,
)
from static_consumer._base.records import Record
from static_consumer._kafka import dead_letter as dlt
from static_consumer.admin import redrive
from static_consumer_lab.brokers.kafka_ops import committed_offsets, create_topic, high_watermarks, metadata

PROTOCOLS = ["classic", "consumer"]
PARTITIONS = 3  # source partitions; record i goes to partition i % 3
DLT_PARTITIONS = 2  # fewer: failures of source partition 2 land in either, only the headers say where from
RECORDS = 300
POISON = frozenset({3, 50, 100, 152, 206, 298})  # 1, 2 and 3 of them in source partitions 0, 1, 2
KEYLESS = 100  # produced without a key
BOUND_S = 60.0  # upper bounds only: the machine is shared
SCRIPT = Path(sys.executable).with_name("static-consumer")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "static_consumer.command"]


def own_headers(i: int) -> list[tuple[str, str | bytes | None]]:
    """The source record's own headers: a repeated name and a null value, which must survive."""
    return [("trace", f"t-{i}".encode()), ("hop", b"a"), ("hop", b"b"), ("none", None)]


def produce_source(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[Any] = []
    for i in range(RECORDS):
        producer.produce(
            topic,
            key=None if i == KEYLESS else f"k-{i}".encode(),
            value=str(i).encode(),
            headers=own_headers(i),
            partition=i % PARTITIONS,
            on_delivery=lambda err, _msg: failed.append(err) if err is not None else None,
        )
    assert producer.flush(BOUND_S) == 0 and not failed, failed


def read(bootstrap: str, topic: str, starts: dict[int, int], ends: dict[int, int]) -> list[Any]:
    """The messages of ``topic`` from ``starts`` up to ``ends`` (per partition)."""
    from confluent_kafka import Consumer, TopicPartition

    todo = {p: end for p, end in ends.items() if end > starts.get(p, 0)}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, starts.get(p, 0)) for p in todo])
    out: list[Any] = []
    deadline = time.monotonic() + BOUND_S
    try:
        while len(out) < sum(end - starts.get(p, 0) for p, end in todo.items()):
            assert time.monotonic() < deadline, f"read {len(out)} records of {topic} within {BOUND_S:g} s"
            for m in consumer.consume(500, 0.5):
                p, offset = m.partition(), m.offset()
                if m.error() is None and p is not None and offset is not None and offset < ends[p]:
                    out.append(m)
    finally:
        consumer.close()
    return out


class Lettered(MembershipListener):
    def __init__(self) -> None:
        self.count = 0

    def on_record_dead_lettered(self, event: RecordDeadLettered) -> None:
        self.count += 1


def dead_letter_the_poison(bootstrap: str, group: str, source: str, protocol: str) -> str:
    """A static member runs README's pod loop over the source topic with ``failure_action='dead_letter'``
    and a handler that fails on the POISON records, until each good record was handled and each poison
    one dead-lettered; returns the dead-letter topic."""
    target = create_topic(bootstrap, f"{source}-dlt", DLT_PARTITIONS)
    classic = {"session_timeout_ms": 10_000} if protocol == "classic" else {}
    values: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": [source],
        "instance_id": "app-0",
        "protocol": protocol,
        "failure_retries": 0,
        "failure_action": "dead_letter",
        **classic,
    }
    settings = ConsumerSettings(**values)
    lettered, handled = Lettered(), Counter[int]()
    consumer = StaticConsumer(settings, listeners=[lettered], env={})

    def handle(batch: list[Record]) -> None:
        for record in batch:
            value = int(record.value or b"-1")
            if value in POISON:
                raise RecordFailedError(record) from ValueError(f"poison {value}")
            handled[value] += 1

    def watch(done: threading.Event) -> None:
        deadline = time.monotonic() + BOUND_S
        while not done.wait(0.1):
            finished = lettered.count >= len(POISON) and len(handled) >= RECORDS - len(POISON)
            if finished or time.monotonic() > deadline:
                consumer.stop()

    done = threading.Event()
    watcher = threading.Thread(target=watch, args=(done,), daemon=True)
    watcher.start()
    try:
        run_until_sigterm(consumer, handle, poll_timeout_s=0.2)
    finally:
        done.set()
        watcher.join()
    assert lettered.count == len(POISON) and set(handled) == set(range(RECORDS)) - POISON
    return target


def static_consumer(
    *args: str, env: dict[str, str] | None = None, json_out: bool = True
) -> tuple[int, Any, subprocess.CompletedProcess[str]]:
    """``static-consumer ARGS`` in a child process, with none of this process's STATIC_CONSUMER_* but
    ``env``: the exit code, the JSON document (``json_out``) and the finished process."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("STATIC_CONSUMER_")}
    argv = [*COMMAND, *args, *(["--json"] if json_out else [])]
    done = subprocess.run(argv, env={**clean, **(env or {})}, capture_output=True, text=True, timeout=BOUND_S)
    doc = json.loads(done.stdout) if json_out and done.stdout.strip() else None
    return done.returncode, doc, done


def per_source_partition() -> dict[str, int]:
    counts = Counter(i % PARTITIONS for i in POISON)
    return {str(p): n for p, n in counts.items()}


@pytest.fixture
def source(kafka_bootstrap_servers: str, kafka_topic_factory: Callable[..., str]) -> str:
    topic = kafka_topic_factory(PARTITIONS, "src")
    produce_source(kafka_bootstrap_servers, topic)
    return topic


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_dead_letter_redrive_sends_each_record_back_to_its_source_partition_without_the_dlt_headers(
    protocol: str, kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    target = dead_letter_the_poison(bootstrap, group, source, protocol)
    originals = {
        int(m.value()): m
        for m in read(bootstrap, source, {}, high_watermarks(bootstrap, source, PARTITIONS))
        if int(m.value()) in POISON
    }
    before = high_watermarks(bootstrap, source, PARTITIONS)
    dlt_ends = high_watermarks(bootstrap, target, DLT_PARTITIONS)
    lettered = read(bootstrap, target, {}, dlt_ends)
    assert len(lettered) == len(POISON) and all(dlt.origin_of(m.headers()) for m in lettered)

    began = time.monotonic()
    code, doc, done = static_consumer("redrive", target, "--group", group, "-b", bootstrap)
    print(f"{protocol}: redrive of {len(POISON)} records took {time.monotonic() - began:.2f} s (a child)")
    assert code == 0, done.stderr[-2000:]
    sent = {f"{source}[{p}]": n for p, n in per_source_partition().items()}
    committed = {str(p): end for p, end in dlt_ends.items() if end}
    assert doc == {
        "dead_letter_topic": target,
        "group": f"{group}.redrive",
        "sent": sent,
        "total": len(POISON),
        "foreign": 0,
        "committed": committed,
        "dry_run": False,
        "exit_code": 0,
    }
    after = high_watermarks(bootstrap, source, PARTITIONS)
    redriven = read(bootstrap, source, before, after)
    assert sorted(int(m.value()) for m in redriven) == sorted(POISON)  # each once, nothing else
    for message in redriven:
        original = originals[int(message.value())]
        assert message.partition() == original.partition()
        assert message.key() == original.key() and message.value() == original.value()
        assert message.headers() == original.headers() == own_headers(int(message.value()))
    assert committed_offsets(bootstrap, f"{group}.redrive", target, DLT_PARTITIONS) == {
        int(p): o for p, o in committed.items()
    }


def test_dead_letter_redrive_dry_run_sends_nothing_and_a_second_run_goes_on_where_the_first_stopped(
    kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    target = dead_letter_the_poison(bootstrap, group, source, "consumer")
    # The consumers' own environment (a shared ConfigMap): no flags.
    env = {
        "STATIC_CONSUMER_BOOTSTRAP_SERVERS": bootstrap,
        "STATIC_CONSUMER_GROUP_ID": group,
        "STATIC_CONSUMER_TOPICS": source,
        "STATIC_CONSUMER_PROTOCOL": "consumer",
        "STATIC_CONSUMER_FAILURE_ACTION": "dead_letter",
    }
    before = high_watermarks(bootstrap, source, PARTITIONS)
    run_group = f"{group}.redrive"

    code, _, done = static_consumer("redrive", target, "--dry-run", env=env, json_out=False)
    assert code == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"would send {len(POISON)} records from {target} (group {run_group}):"
    assert lines[1:] == [f"  {source}[{p}]: {n}" for p, n in sorted(per_source_partition().items())]
    assert high_watermarks(bootstrap, source, PARTITIONS) == before  # nothing sent
    assert committed_offsets(bootstrap, run_group, target, DLT_PARTITIONS) == {}  # nothing committed

    code, doc, done = static_consumer("redrive", target, env=env)
    assert code == 0, done.stderr[-2000:]
    assert (doc["total"], doc["foreign"], doc["dry_run"]) == (len(POISON), 0, False)
    grown = {p: end - before[p] for p, end in high_watermarks(bootstrap, source, PARTITIONS).items()}
    assert {str(p): n for p, n in grown.items() if n} == per_source_partition()
    ends = high_watermarks(bootstrap, target, DLT_PARTITIONS)
    assert committed_offsets(bootstrap, run_group, target, DLT_PARTITIONS) == {
        p: e for p, e in ends.items() if e
    }

    code, doc, done = static_consumer("redrive", target, env=env)
    assert code == 0, done.stderr[-2000:]
    assert (doc["total"], doc["sent"], doc["foreign"], doc["committed"]) == (0, {}, 0, {})
    assert high_watermarks(bootstrap, source, PARTITIONS) == {p: before[p] + grown[p] for p in before}


def test_dead_letter_redrive_passes_over_records_without_the_original_headers_and_counts_them(
    kafka_bootstrap_servers: str, source: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    from confluent_kafka import Producer

    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    target = dead_letter_the_poison(bootstrap, group, source, "consumer")
    # Written by something else: no headers; own headers only; the origin unreadable.
    foreign: list[list[tuple[str, str | bytes | None]]] = [
        [],
        [("trace", b"t-x")],
        [
            (dlt.ORIGINAL_TOPIC, source.encode()),
            (dlt.ORIGINAL_PARTITION, b"two"),
            (dlt.ORIGINAL_OFFSET, b"7"),
        ],
    ]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for n, headers in enumerate(foreign):
        producer.produce(target, value=f"foreign-{n}".encode(), headers=headers, partition=n % DLT_PARTITIONS)
    assert producer.flush(BOUND_S) == 0
    before = high_watermarks(bootstrap, source, PARTITIONS)
    dlt_ends = high_watermarks(bootstrap, target, DLT_PARTITIONS)

    code, doc, done = static_consumer("redrive", target, "--group", group, "-b", bootstrap)
    assert code == 0, done.stderr[-2000:]
    assert (doc["total"], doc["foreign"]) == (len(POISON), len(foreign))
    after = high_watermarks(bootstrap, source, PARTITIONS)
    assert sorted(m.value() for m in read(bootstrap, source, before, after)) == sorted(
        str(i).encode() for i in POISON
    )  # none of the foreign records
    # Passed over for good: committed past them, so the next run does not count them again.
    assert doc["committed"] == {str(p): e for p, e in dlt_ends.items()}
    code, doc, done = static_consumer("redrive", target, "--group", group, "-b", bootstrap)
    assert code == 0 and (doc["total"], doc["foreign"]) == (0, 0), done.stderr[-2000:]


def test_dead_letter_redrive_of_a_topic_that_does_not_exist_exits_78_with_dead_letter_topic_error(
    kafka_bootstrap_servers: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    absent = f"{group}-dlt"

    code, doc, done = static_consumer("redrive", absent, "--group", group, "-b", bootstrap)
    assert code == 78 and doc["exit_code"] == 78, done.stderr[-2000:]
    assert doc["error"]["type"] == "DeadLetterTopicError" and doc["error"]["exit_code"] == 78
    assert f"{absent!r} does not exist" in doc["error"]["message"]

    code, _, done = static_consumer("redrive", absent, "--group", group, "-b", bootstrap, json_out=False)
    assert code == 78 and done.stdout == ""
    assert done.stderr.startswith(f"static-consumer redrive: DeadLetterTopicError: re-driving {absent!r}")

    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)
    with pytest.raises(DeadLetterTopicError) as raised:
        redrive(settings, absent, timeout_s=BOUND_S)
    assert raised.value.topic == absent
    # Asking for it did not create it (the broker's auto.create.topics.enable is on by default).
    assert absent not in metadata(bootstrap, timeout_s=10.0).topics
    assert committed_offsets(bootstrap, f"{group}.redrive", absent, 1) == {}
