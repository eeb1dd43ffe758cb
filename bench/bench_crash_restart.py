"""A crash restart side by side: classic, the consumer protocol waiting for its id, and the consumer
protocol with ``restart_state_dir`` (the restart releases its dead predecessor and joins at once).

    python bench/bench_crash_restart.py [--runs 3] [--kills 3] [--setups classic,consumer,consumer+dir]
                                        [--json PATH]

Each run starts one Apache Kafka broker on the JVM with the ``stock`` profile (Kafka's group settings: a
45 s KIP-848 session, 5 s heartbeats; classic members ask for a 45 s session with the library's default
heartbeat) and, for each setup in turn, a new group of three StaticConsumer child processes (README's
pod main) over six partitions while a producer writes 100 records/s and every member commits after each
batch. Each kill: once the group is stable, ``kill -9`` one member (rotating), start it again 1 s later
in the same restart directory (what a container restart in its pod sees), and measure:

- restart -> its partitions: from starting the new process (interpreter start-up included) to its first
  non-empty assignment;
- same partitions: whether that assignment is the one the killed member had;
- others changed: whether any other member's assignment changed (revoked, lost or assigned) between the
  kill and the group being stable again;
- records twice: records handled more than once because of this kill, and how many of them lie outside
  the killed member's uncommitted tail (its partitions, at or after the offset committed at the kill):
  that column must be 0.

Prints one table per run and the table of all runs (median [min-max] over every kill), and the load
average after each setup, since the timings vary with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from static_consumer_lab.brokers import JvmKafkaCluster, create_topic
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
RATE = 100  # records per second
SESSION_S = 45.0  # the stock broker's KIP-848 session; classic members ask for the same
RESTART_AFTER_S = 1.0
SETUPS = {
    "classic": ("classic", False),
    "consumer": ("consumer", False),
    "consumer+dir": ("consumer", True),
}
Partition = tuple[str, int]


@dataclass
class Kill:
    setup: str
    run: int
    restart_s: float
    same: bool
    others_changed: bool
    twice: int
    beyond_tail: int
    exits: list[int] = field(default_factory=list)


def new_group(bootstrap: str, setup: str, directory: str) -> Group:
    protocol, with_dir = SETUPS[setup]
    suffix = uuid.uuid4().hex[:6]
    topic = create_topic(bootstrap, f"bench-crash-{suffix}", PARTITIONS)
    group_id = f"bench-crash-{setup.replace('+', '-')}-{suffix}"

    def spec(name: str) -> dict[str, Any]:
        settings: dict[str, Any] = {"protocol": protocol, "max_poll_interval_ms": 300000}
        if protocol == "classic":
            settings.update(session_timeout_ms=int(SESSION_S * 1000), heartbeat_interval_ms=None)
        if with_dir:
            settings["restart_state_dir"] = directory
        result = static_spec(bootstrap, group_id, [topic], name, **settings)
        result.update(batch=100, max_runtime_s=3600)
        return result

    return Group(
        ConsumerProcess, bootstrap, group_id, topic, PARTITIONS, protocol=protocol, spec_factory=spec
    )


def changed(others: Sequence[ConsumerProcess], since: float) -> bool:
    """Whether any of ``others`` saw its assignment change after ``since``."""
    return any(
        e["ts"] >= since and e["kind"] in ("assigned", "revoked", "lost") and e["partitions"]
        for proc in others
        for e in proc.events()
    )


def kill_once(group: Group, setup: str, run: int, name: str) -> Kill:
    before = group.wait_stable(timeout_s=180)
    time.sleep(2)
    consumed_before = group.consumed()
    mine = before[name]
    group.kill(name)
    killed_at = time.time()
    committed = group.committed()  # nothing commits the killed member's partitions until its restart
    time.sleep(RESTART_AFTER_S)
    restart_at = time.time()
    group.start(name)
    exits: list[int] = []
    restarted, assigned_at = group.first_partitions(name, 3 * SESSION_S + 90, exits)
    group.wait_stable(timeout_s=180)
    time.sleep(3)  # what the killed member had handled but not committed comes again meanwhile
    others = [p for n, p in group.members.items() if n != name]
    after = group.consumed()
    twice = [r for r, n in after.items() if n > consumed_before.get(r, 0) and n > 1]
    tail = [(t, p, o) for t, p, o in twice if (t, p) in mine and o >= committed.get(p, 0)]
    return Kill(
        setup,
        run,
        assigned_at - restart_at,
        restarted.assignment() == mine,
        changed(others, killed_at),
        len(twice),
        len(twice) - len(tail),
        exits,
    )


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def run_setup(bootstrap: str, setup: str, run: int, kills: int) -> list[Kill]:
    with tempfile.TemporaryDirectory(prefix="bench-crash-") as directory:
        group = new_group(bootstrap, setup, directory)
        out = []
        with SteadyProducer(bootstrap, group.topic, RATE, max_s=3600.0):
            group.form(MEMBERS, timeout_s=180)
            for k in range(kills):
                out.append(kill_once(group, setup, run, MEMBERS[(k + 1) % len(MEMBERS)]))
        for proc in group.all_processes():
            proc.kill()
        return out


def cell(values: Sequence[float]) -> str:
    mid = statistics.median(values)
    return f"{mid:.2f} [{min(values):.2f}-{max(values):.2f}]" if len(values) > 1 else f"{mid:.2f}"


def table(kills: Sequence[Kill], setups: Sequence[str]) -> str:
    lines = [
        "| setup | kills | restart -> its partitions (s) | same partitions | others changed | records "
        "twice | beyond the uncommitted tail | restart exits |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for setup in setups:
        mine = [k for k in kills if k.setup == setup]
        if not mine:
            continue
        n = len(mine)
        exits = Counter(code for k in mine for code in k.exits)
        lines.append(
            f"| {setup} | {n} | {cell([k.restart_s for k in mine])} | {sum(k.same for k in mine)}/{n} | "
            f"{sum(k.others_changed for k in mine)}/{n} | {sum(k.twice for k in mine)} "
            f"(per kill {cell([float(k.twice) for k in mine])}) | {sum(k.beyond_tail for k in mine)} | "
            f"{', '.join(f'{c} x{m}' for c, m in sorted(exits.items())) or 'none'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kills", type=int, default=3, help="kills per setup and run")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--json", help="write every kill's values here")
    args = parser.parse_args()
    setups = args.setups.split(",")
    kills: list[Kill] = []
    loads = [f"start {load()}"]
    for run in range(1, args.runs + 1):
        with JvmKafkaCluster(1, profile="stock") as cluster:
            print(f"run {run}: Apache Kafka {cluster.version} (stock broker) at {cluster.bootstrap_servers}")
            for setup in setups:
                kills += run_setup(cluster.bootstrap_servers, setup, run, args.kills)
                loads.append(f"run {run} {setup} {load()}")
                print(f"  load average (1/5/15 min) after {setup}: {load()}", flush=True)
            print(table([k for k in kills if k.run == run], setups), flush=True)
    print(f"\nall runs ({args.runs} runs x {args.kills} kills per setup):")
    print(table(kills, setups))
    print("load average (1/5/15 min): " + "; ".join(loads))
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "loads": loads, "kills": [vars(k) for k in kills]}, out, indent=1)


if __name__ == "__main__":
    main()
