"""duplicate_policy='wait' on a real broker: two pod mains (``run_until_sigterm``) with one
instance id. The process that would exit 82 (classic: the older, fenced one; KIP-848: the newcomer)
stands by instead: no exception, a ``StandingBy`` event, no record handled while the other owns the id.
Once the owner stops (a SIGTERM's close, no leave), the one standing by joins and consumes, without
having exited: no restart loop.

Once per protocol, on the shared broker, with its group defaults (the KIP-848 session stays 45 s: the
take-over after the owner's close is a join the broker accepts after the static leave). The classic
members' session is 10 s. Under the classic protocol the topic is idle while the duplicate joins, so the
first pod learns of the fence from a heartbeat, inside ``poll()``; a fence found by a commit stands by the
same way, then that commit raises CommitFailedError (tests/unit/test_standby.py), which the batch loop must
ride out.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from static_consumer import StaticConsumer, run_until_sigterm
from static_consumer._core.events import Assigned, MembershipListener, StandingBy
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers.kafka_ops import produce

PARTITIONS = 2
STAND_BY_WITHIN_S = 20.0  # classic: the next heartbeat (3 s); KIP-848: the newcomer's proof of life
TAKE_OVER_WITHIN_S = 40.0  # classic: the stopped owner's 10 s session + a look; KIP-848: a join try (10 s)


@dataclass
class Pod(MembershipListener):
    """One pod main in a thread: what it handled and when, its events, how it ended."""

    name: str
    settings: ConsumerSettings
    handled: list[float] = field(default_factory=list)
    standing_by: list[float] = field(default_factory=list)
    assigned: list[float] = field(default_factory=list)
    error: BaseException | None = None
    consumer: StaticConsumer | None = None
    thread: threading.Thread | None = None

    def on_standing_by(self, event: StandingBy) -> None:
        self.standing_by.append(time.monotonic())

    def on_assigned(self, event: Assigned) -> None:
        if event.partitions:
            self.assigned.append(time.monotonic())

    def start(self) -> Pod:
        self.consumer = StaticConsumer(self.settings, listeners=[self], env={})
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        assert self.consumer is not None

        def handle(batch: list[Any]) -> None:
            now = time.monotonic()
            self.handled.extend(now for _ in batch)

        try:
            run_until_sigterm(self.consumer, handle, poll_timeout_s=0.2, signals=())
        except BaseException as exc:  # noqa: BLE001 - recorded: the test asserts there was none
            self.error = exc

    def stop(self) -> None:
        assert self.consumer is not None and self.thread is not None
        self.consumer.stop()
        self.thread.join(timeout=40)
        assert not self.thread.is_alive(), f"{self.name} did not stop"

    def handled_after(self, since: float) -> int:
        return sum(1 for ts in self.handled if ts > since)


class Feeder:
    """Produces a few records every 0.2 s from a thread while not paused."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.running, self.done, self.sent = threading.Event(), threading.Event(), 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            if self.running.is_set():
                self.sent += produce(self.bootstrap, self.topic, 10, start=self.sent, timeout_s=10)
            time.sleep(0.2)

    def close(self) -> None:
        self.done.set()
        self.thread.join(timeout=20)


def wait_for(what: str, check: Callable[[], object], timeout_s: float) -> float:
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < timeout_s, f"{what}: not within {timeout_s} s"
        time.sleep(0.1)
    return time.monotonic() - began


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_process_that_would_exit_82_stands_by_and_takes_over_once_the_other_stops(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    bootstrap, group = kafka_bootstrap_servers, kafka_group_id_factory()
    topic = kafka_topic_factory(PARTITIONS)
    fields: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": [topic],
        "instance_id": "app-0",
        "protocol": protocol,
        "duplicate_policy": "wait",
    }
    if protocol == "classic":
        fields["session_timeout_ms"] = 10_000
    settings = ConsumerSettings(**fields)
    feeder = Feeder(bootstrap, topic)
    feeder.running.set()
    first = Pod("first", settings).start()
    second: Pod | None = None
    try:
        wait_for("the first pod consumes", lambda: first.handled, 30)
        if protocol == "classic":
            time.sleep(1.0)  # its last batch committed
            feeder.running.clear()  # idle: the fence is found by a heartbeat (see the module docstring)
            time.sleep(1.0)
        second = Pod("second", settings).start()
        # Classic: the newest joiner takes the id and the first is fenced; KIP-848: the member in the
        # group keeps it and the newcomer is refused (its commits going on prove it alive).
        waiting, owner = (first, second) if protocol == "classic" else (second, first)
        took = wait_for("a stand-by", lambda: waiting.standing_by, STAND_BY_WITHIN_S)
        print(f"{protocol}: the {waiting.name} pod stood by {took:.1f} s after the duplicate started")
        assert (first.error, second.error) == (None, None)
        since = waiting.standing_by[0]
        feeder.running.set()
        wait_for("the owner consumes", lambda: owner.handled_after(since) > 0, 20)
        time.sleep(3)
        assert waiting.handled_after(since) == 0  # standing by: no client, nothing handed out
        assert waiting.thread is not None and waiting.thread.is_alive()  # no exit: no restart loop

        stopped = time.monotonic()
        owner.stop()  # a SIGTERM: commit, close, no leave
        assert owner.error is None
        took = wait_for("the take-over", lambda: waiting.handled_after(stopped) > 0, TAKE_OVER_WITHIN_S)
        print(f"{protocol}: the {waiting.name} pod consumed again {took:.1f} s after the owner stopped")
        assert waiting.error is None and len(waiting.standing_by) == 1
    finally:
        feeder.close()
        for pod in (first, second):
            if pod is not None and pod.thread is not None and pod.thread.is_alive():
                pod.stop()
