"""Run one rolling bounce of every chosen strategy at once, on one topic fed by one producer.

Each strategy is its own consumer group of the same members (``demo-0`` ...) reading the same topic.
The bounce is the same for all of them and starts at the same moment: member i of a group is stopped
(SIGTERM, or SIGKILL in the ``--kill`` round), comes back ``restart_delay_s`` after its process exited,
and the group's next member goes when that group has settled again, as a rolling deploy that waits for
readiness would. Each group goes at its own pace, so each has its own bounce window (a fast strategy is
not measured over the slow one's). The strategies share the machine's load, the broker, the records and
one clock.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

from static_consumer_lab.brokers.backends import KafkaCluster
from static_consumer_lab.brokers.kafka_ops import create_topic
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess
from static_consumer_lab.demo import broker_log
from static_consumer_lab.demo.metrics import Event, Metrics
from static_consumer_lab.demo.rundata import Incarnation, RunData, StrategyRun, write_run
from static_consumer_lab.demo.settle import Watcher, wait_settled
from static_consumer_lab.demo.strategies import BY_NAME, MAX_POLL_MS, DemoConfig, Strategy, spec
from static_consumer_lab.demo.tally import tally
from static_consumer_lab.producer import SteadyProducer

Progress = Callable[[str], None]
FORMATION_TIMEOUT_S = 120.0  # plus 3 s per consumer process: starting many interpreters takes a while
STEP_GRACE_S = 60.0  # beyond the session timeout, before a group that has not settled is reported
# Members started at once while the groups form. Each static member reads the broker's capabilities
# within its connect_timeout_s (10 s) before it joins; 96 members and their replacements starting at once
# on 2 cores starved 14 of 48 static members past it (they exit 75). A step starts once the one before
# it said ``ready``, so a probe competes with at most FORM_STEP - 1 interpreters loading.
FORM_STEP = 8
READY_TIMEOUT_S = 120.0


def _wait_ready(proc: ConsumerProcess) -> None:
    """Until ``proc`` said ``ready``; RuntimeError, with its stderr, if it exited first."""
    event = proc.wait_for(lambda e: e["kind"] in ("ready", "exit"), READY_TIMEOUT_S, what="ready")
    if event["kind"] == "exit":
        raise RuntimeError(f"{proc.name} exited {event.get('code')} while forming\n{proc.stderr_tail()}")


@dataclass(frozen=True)
class Outcome:
    run: RunData
    tally: dict[str, Metrics]
    events_dir: Path


def _parallel(calls: Sequence[Callable[[], object]]) -> None:
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


class _Bounce:
    def __init__(
        self, cluster: KafkaCluster, cfg: DemoConfig, events_dir: Path, state_root: Path, progress: Progress
    ) -> None:
        self.cfg, self.events_dir, self.state_root, self.progress = cfg, events_dir, state_root, progress
        self.bootstrap = cluster.bootstrap_servers
        tag = uuid.uuid4().hex[:6]
        self.topic = create_topic(self.bootstrap, f"demo-{tag}", cfg.partitions)
        self.names = [f"demo-{i}" for i in range(cfg.members)]
        self.started: list[ConsumerProcess] = []
        self.schedule: list[dict[str, Any]] = []
        self.unsettled: list[dict[str, Any]] = []
        self.watchers: dict[str, Watcher] = {}
        self.formation_s: dict[str, float] = {}
        self.windows: dict[str, tuple[float, float]] = {}
        self.groups = {name: self._group(BY_NAME[name], f"demo-{name}-{tag}") for name in cfg.strategies}

    def _group(self, strategy: Strategy, group_id: str) -> Group:
        self.watchers[strategy.name] = Watcher()
        state_dir = self.state_root / strategy.name
        state_dir.mkdir()
        log_dir = self.events_dir / strategy.name
        log_dir.mkdir()

        def start(child_spec: dict[str, Any], name: str) -> ConsumerProcess:
            proc = ConsumerProcess(child_spec, name=name, log_path=log_dir / f"{name}.jsonl")
            self.started.append(proc)
            return proc

        def member_spec(member: str) -> dict[str, Any]:
            return spec(strategy, self.cfg, self.bootstrap, group_id, self.topic, member, state_dir)

        return Group(
            start,
            self.bootstrap,
            group_id,
            self.topic,
            self.cfg.partitions,
            protocol=strategy.protocol,
            static=strategy.static,
            spec_factory=member_spec,
            # Stock: no group config, the broker's own KIP-848 session and heartbeat (45 s, 5 s). Lab: the
            # KIP-848 group takes the lab session and 500 ms heartbeats as group configs.
            session_ms=self.cfg.sessions()["consumer"][0] if self.cfg.lab else None,
            lab=self.cfg.lab,
        )

    def _settle(
        self, strategies: Sequence[str], timeout_s: float, after: str
    ) -> tuple[float, dict[str, float]]:
        groups = {name: self.groups[name] for name in strategies}
        waited, pending, settled = wait_settled(self.watchers, groups, timeout_s, self.cfg.settle_s)
        if pending:
            # Reported, not fatal: the other groups' numbers stand, and this group's events show why.
            self.unsettled.append({"after": after, "groups": pending, "waited_s": round(waited, 1)})
            self.progress(f"WARNING: {', '.join(pending)} had not settled {waited:.0f} s after {after}")
        return waited, settled

    def form(self) -> dict[str, dict[str, ConsumerProcess]]:
        """Start every group, FORM_STEP members at a time (each step once the last said ``ready``);
        returns the first round's replacements, loaded while the groups settle."""
        began = time.monotonic()
        starting = [(group, name) for name in self.names for group in self.groups.values()]
        for first in range(0, len(starting), FORM_STEP):
            step = [group.start(name) for group, name in starting[first : first + FORM_STEP]]
            for proc in step:
                _wait_ready(proc)
        started_s = time.monotonic() - began
        fresh = self.spawn_replacements(wait=False)
        formed, settled = self._settle(
            list(self.groups), FORMATION_TIMEOUT_S + 3.0 * len(self.started), "forming"
        )
        self.formation_s = {name: round(started_s + s, 1) for name, s in settled.items()}
        self.progress(
            f"{len(self.groups)} groups of {self.cfg.members} formed in {started_s + formed:.1f} s "
            f"(all started after {started_s:.1f} s)"
        )
        return self._loaded(fresh)

    def spawn_replacements(self, wait: bool = True) -> dict[str, dict[str, ConsumerProcess]]:
        """One held process per member and group for the next round (by default, once all have loaded).

        The replacements load their interpreters before the round: the restart delay is then the knob's
        value, not the knob plus however long Python takes to import on this machine at that moment.
        """
        fresh = {n: {s: g.spawn_held(n) for s, g in self.groups.items()} for n in self.names}
        return self._loaded(fresh) if wait else fresh

    @staticmethod
    def _loaded(fresh: dict[str, dict[str, ConsumerProcess]]) -> dict[str, dict[str, ConsumerProcess]]:
        for procs in fresh.values():
            for proc in procs.values():
                proc.wait_for_kind("held", timeout_s=300)
        return fresh

    def arm_state(self) -> None:
        """State rebuilds are charged from now on (a group's formation is a cold start)."""
        for name in self.groups:
            (self.state_root / name / "armed").touch()

    def bounce(
        self, strategy: str, rounds: Sequence[tuple[str, int]], fresh: dict[str, ConsumerProcess]
    ) -> None:
        """Every round of ``strategy``'s group, one member after the other, each once the group settled;
        records the group's own bounce window."""
        group = self.groups[strategy]
        w0 = time.time()
        for n, (how, round_) in enumerate(rounds):
            if n:
                fresh = {name: group.spawn_held(name) for name in self.names}
                for proc in fresh.values():
                    proc.wait_for_kind("held", timeout_s=300)
            for name in self.names:
                self.step(strategy, name, how, round_, fresh[name])
        self.windows[strategy] = (w0, time.time())

    def step(self, strategy: str, name: str, how: str, round_: int, fresh: ConsumerProcess) -> None:
        group = self.groups[strategy]
        signalled = time.time()
        # The member comes back restart_delay_s after its own process said its last word (interpreter
        # teardown can take seconds on a busy machine; a pod's restart clock starts when the app has
        # closed its consumer).
        old = group.retire(name, kill=how == "KILL")
        if how == "TERM":
            old.wait_for(lambda e: e["kind"] == "exit", timeout_s=60, what="exit")
        time.sleep(self.cfg.restart_delay_s)
        group.admit(name, fresh)
        waited, _ = self._settle([strategy], self.cfg.longest_session_s + STEP_GRACE_S, f"{name}'s restart")
        code = old.wait(timeout_s=60)
        if how == "TERM" and code != 0:
            raise RuntimeError(f"{strategy}: {old.name} exited {code}\n{old.stderr_tail()}")
        which = f"round {round_}/{self.cfg.rounds}" if how == "TERM" else "kill round"
        self.progress(
            f"{strategy} {which}: {name} {'stopped' if how == 'TERM' else 'killed'}, back after "
            f"{self.cfg.restart_delay_s:g} s, settled {waited:.1f} s later; "
            f"revocations in live members: {group.revocations_since(signalled)}"
        )
        self.schedule.append(
            {"strategy": strategy, "member": name, "signal": how, "round": round_, "ts": signalled}
        )

    def drain(self, produced: int, timeout_s: float = 120.0) -> None:
        """Until every group has processed every record (or give up: the table then shows losses)."""
        deadline = time.monotonic() + timeout_s
        behind = list(self.groups)
        while behind and time.monotonic() < deadline:
            behind = [name for name, g in self.groups.items() if self.watchers[name].processed(g) < produced]
            if behind:
                time.sleep(1.0)
        if behind:
            self.progress(f"{behind} had not processed all {produced} records after {timeout_s:.0f} s")

    def stop_all(self) -> None:
        _parallel([partial(g.stop, n) for g in self.groups.values() for n in list(g.members)])

    def cleanup(self) -> None:
        for proc in self.started:
            proc.kill()
            proc.close_log()


def _broker_events(
    cluster: KafkaCluster, group_ids: list[str], began: float, events_dir: Path
) -> list[Event] | None:
    """The groups' generations/epochs from the broker log (its lines on them are kept in
    ``broker.log``); None where no log can be read."""
    paths: Callable[[], Any] | None = getattr(cluster, "log_paths", None)
    if paths is None:
        return None
    logs = [p for p in paths() if p.exists()]
    broker_log.keep_lines(logs, group_ids, events_dir / "broker.log")
    events = broker_log.read(logs, group_ids)
    if any(abs(float(e["ts"]) - began) > 24 * 3600 for e in events):
        return None  # the JVM logs in another time zone than this process reads: no trustworthy times
    return events


def _version(answer: object) -> str:
    """confluent_kafka.version() is a (text, int) tuple in older releases and the text in 2.16."""
    return str(answer[0] if isinstance(answer, tuple) else answer)


def run_demo(cluster: KafkaCluster, cfg: DemoConfig, events_dir: Path, progress: Progress) -> Outcome:
    """Run the bounce; the raw events go to ``events_dir`` (made by :func:`.rundata.prepare`)."""
    import confluent_kafka

    began, load_before = time.time(), os.getloadavg()
    rounds = [("TERM", r) for r in range(1, cfg.rounds + 1)] + ([("KILL", 0)] if cfg.kill else [])
    with tempfile.TemporaryDirectory(prefix="demo-state-") as state_root:
        bounce = _Bounce(cluster, cfg, events_dir, Path(state_root), progress)
        producer = SteadyProducer(
            bounce.bootstrap, bounce.topic, cfg.rate_per_s, max_s=3600.0, keep_deliveries=True
        )
        try:
            fresh = bounce.form()
            bounce.arm_state()
            producer.start()
            time.sleep(cfg.lead_s)
            _parallel(
                [
                    partial(bounce.bounce, s, rounds, {n: fresh[n][s] for n in bounce.names})
                    for s in cfg.strategies
                ]
            )
            time.sleep(cfg.tail_s)
            bounce.drain(producer.stop())
            bounce.stop_all()
        finally:
            producer.halt()
            bounce.cleanup()

    groups = bounce.groups
    broker = _broker_events(cluster, [g.group_id for g in groups.values()], began, events_dir)
    meta = {
        "config": {**asdict(cfg), "strategies": list(cfg.strategies)},
        "descriptions": {name: BY_NAME[name].description for name in groups},
        "kafka_version": cluster.version,
        "backend": cluster.backend,
        "librdkafka": confluent_kafka.libversion()[0],
        "confluent_kafka": _version(confluent_kafka.version()),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "began": began,
        "wall_s": round(time.time() - began, 1),
        "schedule": bounce.schedule,
        "unsettled": bounce.unsettled,
        "formation_s": bounce.formation_s,
        "formation_step": FORM_STEP,
        "broker_profile": "lab" if cfg.lab else "stock",
        "sessions_ms": cfg.sessions(),
        "max_poll_ms": MAX_POLL_MS,
    }
    windows = bounce.windows
    run = RunData(
        window=(min(w0 for w0, _w1 in windows.values()), max(w1 for _w0, w1 in windows.values())),
        topic=bounce.topic,
        partitions=cfg.partitions,
        produced=list(producer.delivered),
        strategies=[
            StrategyRun(
                name,
                group.group_id,
                group.protocol,
                [Incarnation(p.name, p.events()) for p in group.all_processes()],
                None if broker is None else [e for e in broker if e["group"] == group.group_id],
                windows[name],
            )
            for name, group in groups.items()
        ],
        meta=meta,
    )
    write_run(events_dir, run, streams=False)
    return Outcome(run, tally(run), events_dir)
