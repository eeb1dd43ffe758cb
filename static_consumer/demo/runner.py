"""Run a rolling bounce of N consumer processes on a real broker, first dynamic, then static."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from static_consumer.demo.metrics import (
    Interval,
    MemberRun,
    delivery,
    live_revocations,
    ownership,
    partition_moves,
    rebalances,
    stall_seconds,
)
from static_consumer.testing.backends import KafkaCluster
from static_consumer.testing.group import Group
from static_consumer.testing.kafka_ops import QUIET_LOGGER, create_topic
from static_consumer.testing.processes import ConsumerProcess
from static_consumer.testing.specs import static_spec

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BounceConfig:
    members: int = 6
    rounds: int = 2
    partitions: int = 12
    rate_per_s: int = 400
    static_session_timeout_ms: int = 30000


@dataclass
class ModeResult:
    mode: str
    restarts: int
    rebalances: int | None
    live_revocations: int
    partition_moves: int
    stall_seconds: float
    produced: int
    duplicated: int
    lost: int
    wall_seconds: float
    first_join_seconds: float
    bounce_started_at: float
    intervals: list[Interval] = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["intervals"] = [asdict(i) for i in self.intervals]
        return data


class ContinuousProducer:
    """Produces sequence-numbered records at a steady rate until stopped (bounded by ``max_s``)."""

    def __init__(self, bootstrap: str, topic: str, rate_per_s: int, max_s: float = 1800.0) -> None:
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": QUIET_LOGGER})
        self._topic, self._rate, self._max_s = topic, rate_per_s, max_s
        self._stop = threading.Event()
        self.acked = 0
        self._thread = threading.Thread(target=self._run, name="demo-producer", daemon=True)

    def _ack(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.acked += 1

    def _run(self) -> None:
        sent, began = 0, time.monotonic()
        while not self._stop.is_set() and time.monotonic() - began < self._max_s:
            due = int((time.monotonic() - began) * self._rate)
            while sent < due:
                self._producer.produce(self._topic, value=str(sent).encode(), on_delivery=self._ack)
                sent += 1
            self._producer.poll(0.02)

    def __enter__(self) -> ContinuousProducer:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=10)
        self._producer.flush(30)
        return self.acked

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _spec_factory(
    mode: str, bootstrap: str, group_id: str, topic: str, cfg: BounceConfig
) -> Callable[[str], dict[str, Any]]:
    if mode == "dynamic":
        # Plain confluent-kafka with its defaults: what most applications run today.
        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        return lambda _name: {"mode": "confluent", "topics": [topic], "config": config}
    return lambda name: static_spec(
        bootstrap,
        group_id,
        [topic],
        name,
        session_timeout_ms=cfg.static_session_timeout_ms,
        heartbeat_interval_ms=1000,
    )


def _runs(group: Group, now: float) -> list[MemberRun]:
    runs = []
    for proc in group.all_processes():
        name = proc.name.split("#", 1)[0]
        exits = [e["ts"] for e in proc.events() if e["kind"] == "exit"]
        runs.append(
            MemberRun(name, proc.events(), group.stop_requested.get(id(proc)), exits[0] if exits else now)
        )
    return runs


def run_mode(
    mode: str,
    cluster: KafkaCluster,
    start_process: Callable[..., ConsumerProcess],
    cfg: BounceConfig,
    progress: Progress,
) -> ModeResult:
    bootstrap = cluster.bootstrap_servers
    topic = create_topic(bootstrap, f"bounce-{mode}-{uuid.uuid4().hex[:6]}", cfg.partitions)
    group_id = f"bounce-{mode}-{uuid.uuid4().hex[:6]}"
    names = [f"demo-{i}" for i in range(cfg.members)]
    group = Group(
        start_process,
        bootstrap,
        group_id,
        topic,
        cfg.partitions,
        spec_factory=_spec_factory(mode, bootstrap, group_id, topic, cfg),
    )

    def generations(group: str) -> list[int]:
        # Only the JVM harness can read the broker's log; elsewhere rebalances are reported as n/a.
        read: Callable[[str], list[int]] | None = getattr(cluster, "group_generations", None)
        return read(group) if read is not None else []

    began = time.monotonic()
    with ContinuousProducer(bootstrap, topic, cfg.rate_per_s) as producer:
        for name in names:
            group.start(name)
        group.wait_stable(timeout_s=120, settle_s=2.0)
        first_join = time.monotonic() - began
        progress(
            f"[{mode}] group of {cfg.members} formed in {first_join:.1f} s; bouncing {cfg.rounds} rounds"
        )
        baseline = max(generations(group_id), default=0)
        since = time.time()
        for round_ in range(1, cfg.rounds + 1):
            for name in names:
                t0 = time.monotonic()
                group.stop(name)
                group.start(name).wait_for_kind("assigned", timeout_s=120)
                group.wait_stable(timeout_s=120, settle_s=2.0)
                progress(
                    f"[{mode}] round {round_}/{cfg.rounds}: {name} restarted, group settled in "
                    f"{time.monotonic() - t0:.1f} s"
                )
        until, last_generation = time.time(), max(generations(group_id), default=0)
        produced = producer.stop()
    group.wait_consumed(produced, timeout_s=180)
    for name in names:
        group.stop(name)
    now = time.time()
    runs = _runs(group, now)
    intervals = ownership(runs)
    records = [r for proc in group.all_processes() for r in proc.records()]
    got = delivery(produced, records)
    return ModeResult(
        mode=mode,
        restarts=cfg.members * cfg.rounds,
        rebalances=rebalances(generations(group_id), baseline, last_generation),
        live_revocations=live_revocations(runs, since, until),
        partition_moves=partition_moves(intervals, since, until),
        stall_seconds=round(stall_seconds(runs, since, until), 2),
        produced=produced,
        duplicated=got.duplicated,
        lost=got.lost,
        wall_seconds=round(time.monotonic() - began, 1),
        first_join_seconds=round(first_join, 2),
        bounce_started_at=since,
        intervals=intervals,
    )
