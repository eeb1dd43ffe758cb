"""Exactly-once that does not depend on which pod writes: three bridge pods on one Spark Connect server,
once per group protocol, each batch written to a Delta table and a Parquet directory (keyed by topic,
partition and offset, no checkpoint), with a pod killed (``kill -9``) inside the window where its batch
is in both sinks but not committed to Kafka, while partitions move to other pods:

1. a scale-down 3 -> 2: the killed pod never returns; its partitions go to the others once its
   session times out, and they read the batch again from the committed offsets;
2. a restart that comes back after its partitions moved (the session timed out meanwhile): the
   other pod wrote the batch again first;
3. a session timeout with the pod alive: frozen (SIGSTOP) with a batch about to be written, its
   partitions go to the other pod, which writes that range; thawed, the zombie writes its stale batch
   after it, and is killed inside the window.

Then the pod that is left finishes the topic: every record once in the Delta table and in the Parquet
directory (0 duplicates, 0 missing), offsets committed up to the end. The scenarios run in sequence on
one group per protocol, and the two groups (classic and KIP-848) at the same time on one Spark Connect
server, so the broker, the server and the pods' sessions are shared (the CI budget).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _side_by_side import PROTOCOLS, side_by_side
from test_spark_exactly_once import delta_positions, parquet_positions

from static_consumer_lab.brokers import committed_offsets, produce
from static_consumer_lab.brokers.kafka_ops import high_watermarks
from static_consumer_lab.children.group import shorten_consumer_session
from static_consumer_lab.children.processes import ConsumerProcess, wait_until

pytestmark = pytest.mark.lab_broker(
    "a killed or frozen pod's session expires in seconds under both protocols (the stock broker's KIP-848 "
    "minimum is 45 s), and pods join without the 3 s initial rebalance delay; the sinks' exactly-once does "
    "not depend on how long a partition takes to move"
)

PARTITIONS = 6
SESSION_MS = 6_000
Ranges = dict[str, list[int]]  # "topic:partition" -> [first, last]


class Pods:
    """Bridge pods of one group writing every batch to both sinks; a pod is named by its instance id."""

    def __init__(
        self,
        start: Callable[..., ConsumerProcess],
        spec: Callable[[str], dict[str, Any]],
        flags: Path,
        label: str,
    ):
        self._start, self._spec, self.flags, self._label = start, spec, flags, label
        self.running: dict[str, ConsumerProcess] = {}
        self.all: list[ConsumerProcess] = []
        flags.mkdir()

    def start(self, name: str) -> ConsumerProcess:
        incarnation = 1 + sum(p.spec["settings"]["instance_id"] == name for p in self.all)
        pod = self._start(self._spec(name), name=f"{self._label} {name}#{incarnation}")
        self.running[name] = pod
        self.all.append(pod)
        return pod

    def flag(self, name: str, what: str) -> None:
        (self.flags / f"{name}.{what}").touch()

    def written(self, pods: list[ConsumerProcess]) -> dict[str, int]:
        """The highest offset per partition that ``pods`` wrote (batch events come after the writes)."""
        last: dict[str, int] = {}
        for pod in pods:
            for event in pod.events("batch"):
                for key, (_, high) in event["offsets"].items():
                    last[key] = max(last.get(key, -1), high)
        return last

    def wait_written_past(self, ranges: Ranges, pods: list[ConsumerProcess], what: str) -> None:
        """Until ``pods`` wrote every partition of ``ranges`` up to its last offset or beyond."""
        wait_until(
            lambda: all(self.written(pods).get(k, -1) >= last for k, (_, last) in ranges.items()),
            240,
            what,
        )


def kill_in_window(pods: Pods, name: str, feed: Callable[[], None]) -> Ranges:
    """Let pod ``name`` write its next batch and hold it (in the sinks, not committed); kill -9 it there.
    ``feed`` produces the records of that batch once the flag is set. Returns the ranges of that batch."""
    pod = pods.running.pop(name)
    pods.flag(name, "hold")
    feed()
    holding = pod.wait_for(lambda e: e["kind"] == "holding", 240, "a batch written and held")
    [held] = [e for e in pod.events("batch") if e["batch_id"] == holding["batch_id"]]
    pod.kill()
    ranges: Ranges = held["offsets"]
    return ranges


def moves(protocol: str, remote: str, kafka: Kafka, tmp_path: Path) -> str:
    """The three kills of the module's docstring in one group of ``protocol``; what happened, said."""
    bootstrap, topic, group = kafka.bootstrap, kafka.topic(PARTITIONS), kafka.group()
    if protocol == "consumer":
        shorten_consumer_session(bootstrap, group, SESSION_MS)
    delta, parquet = tmp_path / "delta", tmp_path / "parquet"

    def spec(name: str) -> dict[str, Any]:
        settings: dict[str, Any] = {
            "bootstrap_servers": bootstrap,
            "group_id": group,
            "topics": [topic],
            "instance_id": name,
            "protocol": protocol,
            "max_poll_interval_ms": 180_000,  # a first Delta write can take long on a loaded machine
            "connect_timeout_s": 10.0,
            "shutdown_timeout_s": 10.0,
        }
        if protocol == "classic":  # under KIP-848 the broker's group config decides (set above)
            settings |= {"session_timeout_ms": SESSION_MS, "heartbeat_interval_ms": 500}
        return {
            "mode": "spark",
            "remote": remote,
            "settings": settings,
            "sinks": {"delta": str(delta), "parquet": str(parquet)},
            "delta_partition_by": ["partition"],
            "max_records": 300,
            "max_wait_s": 0.5,
            "hold_file": str(tmp_path / "flags" / f"{name}.hold"),
            "hold_s": 300,
            "pause_file": str(tmp_path / "flags" / f"{name}.pause"),
            "pause_s": 6,
            "lag_interval_s": 30.0,
            "max_runtime_s": 500,
        }

    pods = Pods(kafka.start, spec, tmp_path / "flags", protocol)
    began, phases = time.monotonic(), []  # how long each part took (printed: the CI budget is tight)
    for name in ("spark-0", "spark-1", "spark-2"):
        pods.start(name)
    for pod in pods.running.values():  # records only once all three hold partitions: a batch each
        pod.wait_for(lambda e: e["kind"] == "assigned" and e["partitions"], 240, "partitions")
    produced = 600
    produce(bootstrap, topic, produced)
    for pod in pods.running.values():
        pod.wait_for(lambda e: e["kind"] == "batch", 240, "a first batch")
    phases.append(("3 pods up, a batch each", time.monotonic()))

    def feed(count: int) -> Callable[[], None]:
        def more() -> None:
            nonlocal produced
            produce(bootstrap, topic, count, start=produced)
            produced += count

        return more

    # 1. Scale-down 3 -> 2: spark-2 dies with a batch in the sinks and never comes back.
    held = kill_in_window(pods, "spark-2", feed(300))
    rest = list(pods.running.values())
    pods.wait_written_past(held, rest, f"spark-2's batch {held} written again by spark-0/1")
    phases.append(("scale-down", time.monotonic()))

    # 2. spark-1 dies in the window and comes back once its partitions moved to spark-0.
    held = kill_in_window(pods, "spark-1", feed(300))
    pods.wait_written_past(
        held, [pods.running["spark-0"]], f"spark-1's batch {held} written again by spark-0"
    )
    back = pods.start("spark-1")
    back.wait_for(lambda e: e["kind"] == "assigned" and e["partitions"], 120, "partitions after the restart")
    phases.append(("restart after the move", time.monotonic()))

    # 3. spark-0 freezes with a batch about to be written; spark-1 takes its partitions and writes that
    # range; thawed, spark-0 writes the stale batch after it and dies in the window.
    zombie = pods.running.pop("spark-0")
    pods.flag("spark-0", "pause")
    feed(300)()
    paused = zombie.wait_for(lambda e: e["kind"] == "pausing", 240, "a batch about to be written")
    zombie.freeze()
    stale: Ranges = paused["offsets"]
    pods.wait_written_past(stale, [back], f"spark-0's paused batch {stale} written by spark-1 first")
    pods.flag("spark-0", "hold")
    zombie.thaw()
    holding = zombie.wait_for(lambda e: e["kind"] == "holding", 120, "the stale batch written and held")
    [late] = [e for e in zombie.events("batch") if e["batch_id"] == holding["batch_id"]]
    assert late["offsets"] == stale  # it did write the stale batch, after spark-1 wrote the range
    zombie.kill()
    phases.append(("zombie", time.monotonic()))

    # The rest: spark-1 alone finishes the topic.
    feed(150)()
    ends = high_watermarks(bootstrap, topic, PARTITIONS)
    assert sum(ends.values()) == produced
    wait_until(
        lambda: committed_offsets(bootstrap, group, topic, PARTITIONS) == ends,
        240,
        f"offsets committed up to {ends}",
    )
    assert back.stop(60) == 0, back.stderr_tail()
    phases.append(("the rest", time.monotonic()))

    expected = {(p, o) for p, n in ends.items() for o in range(n)}
    for name, written in (("delta", delta_positions(delta)), ("parquet", parquet_positions(parquet))):
        duplicates = sorted(k for k, n in written.items() if n > 1)
        missing = sorted(expected - set(written))
        assert (len(duplicates), len(missing), len(written)) == (0, 0, produced), (
            name,
            duplicates[:10],
            missing[:10],
        )
    handed = sum(e["records"] for p in pods.all for e in p.events("batch"))
    assert handed > produced  # records were handed to fn (and written) again: the sinks kept them once
    steps, previous = [], began
    for what, at in phases:
        steps.append(f"{what} {at - previous:.0f} s")
        previous = at
    return (
        f"{protocol}: {produced} records once in Delta and Parquet after 3 kills; {handed} handed to fn; "
        f"pod exits {dict(Counter(p.returncode for p in pods.all))}; {', '.join(steps)}"
    )


@dataclass(frozen=True)
class Kafka:
    """The broker and what the test's fixtures make on it (fetched on the test's thread)."""

    bootstrap: str
    topic: Callable[[int], str]
    group: Callable[[], str]
    start: Callable[..., ConsumerProcess]


def test_exactly_once_when_partitions_move_after_kill_9(
    spark_connect_server: Any, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Both protocols' groups at the same time on the one server, each on a topic and sinks of its own:
    most of each group's time is waiting (for a session to expire, a rebalance, a write), so side by
    side they take little more than one of them (one after the other: 186 s and 108 s here)."""
    kafka = Kafka(
        request.getfixturevalue("kafka_bootstrap_servers"),
        request.getfixturevalue("kafka_topic_factory"),
        request.getfixturevalue("kafka_group_id_factory"),
        request.getfixturevalue("kafka_consumer_process_factory"),
    )
    for protocol in PROTOCOLS:
        (tmp_path / protocol).mkdir()
    results = side_by_side(lambda p: moves(p, spark_connect_server.url, kafka, tmp_path / p))
    for result in results.values():
        print(result)
