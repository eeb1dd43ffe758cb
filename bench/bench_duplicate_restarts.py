"""Two pods holding one ``group.instance.id`` under Kubernetes-style restarts (``restartPolicy: Always``).

    python bench/bench_duplicate_restarts.py [--runs 1] [--duration-s 120] [--backoff-s 10]
                                             [--protocols classic,consumer] [--policies exit,wait]
                                             [--json PATH]

Each pod is the example app a StatefulSet runs (``examples/consumer_app.py``: ``run_until_sigterm`` with
its readiness file), configured through ``STATIC_CONSUMER_*`` variables as in a manifest, under a
supervisor that restarts it ``--backoff-s`` after every exit, whatever the code (a kubelet with
``restartPolicy: Always``; the kubelet's back-off starts at 10 s and doubles up to 5 min, which slows a
loop down but does not end it). Pod A starts and owns the partitions; pod B, with the same instance id,
starts 5 s later, and both are supervised for ``--duration-s`` from then while a producer writes 200
records/s to 4 partitions. Every scenario (protocol x ``duplicate_policy``) runs on its own group and topic,
all at the same time on one broker, so the rows are side by side in each run.

Per row: the exits of each pod with their codes (every exit is a restart), how often the partitions
changed hands between the pods (seconds in which the other pod handled the records), the share of the
time each pod was ready (its readiness file existed), the records handled more than once, and how many
records acknowledged more than 10 s before the end neither pod handled (lost). Before
``duplicate_policy`` existed, a run without ``--policies`` measured the library's only behaviour (what
``exit`` keeps).

The broker is the test harness's JVM broker with the ``stock`` profile: Apache Kafka's default group
settings (KIP-848 session 45 s and heartbeat 5 s, classic minimum session 6 s, initial rebalance delay 3 s;
classic heartbeat the library's 3 s).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from static_consumer_lab.brokers import JvmKafkaCluster, create_topic
from static_consumer_lab.producer import SteadyProducer

APP = Path(__file__).resolve().parent.parent / "examples" / "consumer_app.py"
PARTITIONS = 4
RATE = 200  # records per second
START_GAP_S = 5.0  # pod B starts this long after pod A
RECORD = re.compile(r"DEBUG consumer_app: (\S+)\[(\d+)\]@(\d+) ")
READY_SAMPLE_S = 0.2
MISSED_BEFORE_END_S = 10.0


@dataclass
class Pod:
    """One pod: its container restarted after every exit, its stderr read as it comes."""

    name: str
    env: dict[str, str]
    ready_file: Path
    exits: list[tuple[float, int]] = field(default_factory=list)
    handled: list[tuple[float, tuple[str, int, int]]] = field(default_factory=list)
    ready_s: float = 0.0
    proc: subprocess.Popen[bytes] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, str(APP)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.proc = proc
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            match = RECORD.search(raw.decode(errors="replace"))
            if match:
                with self.lock:
                    self.handled.append((time.time(), (match[1], int(match[2]), int(match[3]))))

    def supervise(self, until: float, backoff_s: float) -> None:
        """Run the container, restart it ``backoff_s`` after each exit, until ``until``; then SIGTERM."""
        while time.time() < until:
            self.start()
            assert self.proc is not None
            while self.proc.poll() is None and time.time() < until:
                time.sleep(0.1)
            if self.proc.poll() is None:
                break
            self.exits.append((time.time(), self.proc.returncode))
            self.ready_file.unlink(missing_ok=True)  # a kubelet would mark the pod unready
            time.sleep(min(backoff_s, max(0.0, until - time.time())))
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@dataclass
class Scenario:
    protocol: str
    policy: str | None
    topic: str
    group: str
    pods: tuple[Pod, Pod]
    produced: int = 0
    delivered: list[tuple[int, int, int]] = field(default_factory=list)  # partition, offset, ts ms
    began: float = 0.0
    ended: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.protocol:8} {self.policy or '(none)':6}"


def scenario(bootstrap: str, workdir: Path, protocol: str, policy: str | None) -> Scenario:
    tag = f"{protocol}-{policy or 'none'}-{uuid.uuid4().hex[:6]}"
    topic = create_topic(bootstrap, f"dup-{tag}", PARTITIONS)
    group = f"dup-{tag}"
    pods = []
    for name in ("A", "B"):
        ready = workdir / f"{tag}-{name}.ready"
        env = {
            **os.environ,
            "STATIC_CONSUMER_BOOTSTRAP_SERVERS": bootstrap,
            "STATIC_CONSUMER_GROUP_ID": group,
            "STATIC_CONSUMER_TOPICS": topic,
            "STATIC_CONSUMER_PROTOCOL": protocol,
            "POD_NAME": "orders-0",  # the same id in both pods
            "CONSUMER_READY_FILE": str(ready),
            "LOG_LEVEL": "DEBUG",
        }
        if policy is not None:
            env["STATIC_CONSUMER_DUPLICATE_POLICY"] = policy
        pods.append(Pod(name, env, ready))
    return Scenario(protocol, policy, topic, group, (pods[0], pods[1]))


def sample_readiness(scenarios: list[Scenario], until: float) -> None:
    last = time.monotonic()
    while time.time() < until:
        time.sleep(READY_SAMPLE_S)
        now = time.monotonic()
        for s in scenarios:
            for pod in s.pods:
                if s.began <= time.time() and pod.ready_file.exists():
                    pod.ready_s += now - last
        last = now


def summary(s: Scenario) -> dict[str, Any]:
    a, b = s.pods
    window = [(ts, rec, pod.name) for pod in s.pods for ts, rec in pod.handled if ts >= s.began]
    per_second: dict[int, set[str]] = {}
    for ts, _, name in window:
        per_second.setdefault(int(ts - s.began), set()).add(name)
    owners = [min(per_second[k]) if len(per_second[k]) == 1 else "both" for k in sorted(per_second)]
    handovers = sum(1 for x, y in zip(owners, owners[1:], strict=False) if x != y)
    counts = Counter(rec for pod in s.pods for _, rec in pod.handled)
    seconds = s.ended - s.began
    # Records acknowledged up to MISSED_BEFORE_END_S before the pods were stopped and handled by neither:
    # lost (the last seconds are left out: a stop drops what was fetched but not yet handed out).
    cutoff_ms = (s.ended - MISSED_BEFORE_END_S) * 1000
    missed = sum(1 for p, o, ts in s.delivered if ts < cutoff_ms and (s.topic, p, o) not in counts)
    return {
        "protocol": s.protocol,
        "policy": s.policy,
        "exits_a": [code for _, code in a.exits],
        "exits_b": [code for _, code in b.exits],
        "handovers": handovers,
        "ready_a": a.ready_s / seconds,
        "ready_b": b.ready_s / seconds,
        "handled_twice": sum(1 for n in counts.values() if n > 1),
        "produced": s.produced,
        "handled": len(counts),
        "missed": missed,
        "records_a": sum(1 for ts, _, name in window if name == "A"),
        "records_b": sum(1 for ts, _, name in window if name == "B"),
    }


def row(r: dict[str, Any]) -> str:
    return (
        f"{r['protocol']:8} {str(r['policy']):6} exits A {_codes(r['exits_a']):14} "
        f"B {_codes(r['exits_b']):14} "
        f"handovers {r['handovers']:3}  ready A {r['ready_a']:4.0%} B {r['ready_b']:4.0%}  "
        f"handled by A {r['records_a']:6} B {r['records_b']:6}  twice {r['handled_twice']:5}  "
        f"missed {r['missed']}"
    )


def _codes(codes: list[int]) -> str:
    if not codes:
        return "none"
    counted = Counter(codes)
    return ", ".join(f"{n}x{code}" for code, n in sorted(counted.items()))


def run_once(bootstrap: str, args: argparse.Namespace, workdir: Path) -> list[dict[str, Any]]:
    policies = args.policies.split(",") if args.policies else [None]
    scenarios = [scenario(bootstrap, workdir, p, pol) for p in args.protocols.split(",") for pol in policies]
    producers = [SteadyProducer(bootstrap, s.topic, rate_per_s=RATE, keep_deliveries=True) for s in scenarios]
    for producer in producers:
        producer.__enter__()
    try:
        until = time.time() + START_GAP_S + args.duration_s
        first = [
            threading.Thread(target=s.pods[0].supervise, args=(until, args.backoff_s)) for s in scenarios
        ]
        for thread in first:
            thread.start()
        time.sleep(START_GAP_S)
        second = [
            threading.Thread(target=s.pods[1].supervise, args=(until, args.backoff_s)) for s in scenarios
        ]
        for s, thread in zip(scenarios, second, strict=True):
            s.began, s.ended = time.time(), until
            thread.start()
        sample_readiness(scenarios, until)
        for thread in first + second:
            thread.join(timeout=60)
    finally:
        for s, producer in zip(scenarios, producers, strict=True):
            producer.__exit__(None, None, None)
            s.produced, s.delivered = producer.acked, list(producer.delivered)
    time.sleep(1)
    return [summary(s) for s in scenarios]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--duration-s", type=float, default=120.0)
    parser.add_argument("--backoff-s", type=float, default=10.0)
    parser.add_argument("--protocols", default="classic,consumer")
    parser.add_argument("--policies", default="exit,wait", help="'' for a library without the setting")
    parser.add_argument("--json", help="write every run's rows here")
    args = parser.parse_args()
    results: list[list[dict[str, Any]]] = []
    with JvmKafkaCluster(1) as cluster, tempfile.TemporaryDirectory() as tmp:
        print(
            f"Apache Kafka {cluster.version} at {cluster.bootstrap_servers}; {args.duration_s:g} s per run "
            f"from pod B's start, back-off {args.backoff_s:g} s; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        for run in range(args.runs):
            rows = run_once(cluster.bootstrap_servers, args, Path(tmp))
            results.append(rows)
            print(f"run {run + 1} (load {os.getloadavg()[0]:.1f}):")
            for r in rows:
                print("  " + row(r), flush=True)
    if args.runs > 1:
        print("medians over the runs [min-max]:")
        for i, first in enumerate(results[0]):

            def spread(key: str, rows_at: int = i) -> str:
                values = [run[rows_at][key] for run in results]
                return f"{statistics.median(values):g} [{min(values):g}-{max(values):g}]"

            restarts = [len(run[i]["exits_a"]) + len(run[i]["exits_b"]) for run in results]
            print(
                f"  {first['protocol']:8} {str(first['policy']):6} restarts "
                f"{statistics.median(restarts):g} [{min(restarts)}-{max(restarts)}]  handovers "
                f"{spread('handovers')}  handled twice {spread('handled_twice')}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
