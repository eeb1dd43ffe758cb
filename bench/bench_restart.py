"""What a crash, a clean restart and a duplicate process cost a static member, under each group protocol.

    python bench/bench_restart.py [--kills 6] [--closes 4] [--duplicates 3] [--session-s 45]
                                  [--group-session-s S] [--profile stock|lab] [--protocols classic,consumer]
                                  [--scenarios kill,close,duplicate,idle] [--burn N] [--json PATH]

Starts one Apache Kafka broker on the JVM (the test harness), by default with the ``stock`` profile:
Apache Kafka's group settings, a 45 s KIP-848 session and 5 s heartbeats, what users run. Its KIP-848
session is ``--session-s`` (``group.consumer.session.timeout.ms``; a stock broker accepts 45-60 s, the
``lab`` profile down to 1 s) and the heartbeat interval stays at Kafka's 5 s default; StaticConsumer
child processes (classic: ``session_timeout_ms`` = the same session, the library's default heartbeat).
``--group-session-s`` gives every KIP-848 group its own ``consumer.session.timeout.ms`` override instead
(within the broker's group.consumer.min/max.session.timeout.ms: 45-60 s on a stock broker). Every
scenario runs on a new group of three members over six partitions while a producer writes 100 records/s
and every member commits after each batch:

- kill: SIGKILL one member once the group is stable, restart it at once (rotating through the members);
- close: SIGTERM (the member commits and closes without leaving), restart it at once;
- duplicate: start a second process with the id of a member that owns everything, with traffic (the
  member commits) and idle (nothing to commit).

Prints one row per scenario: times in seconds from the kill, SIGTERM or start of the duplicate, as
median [min-max] over the runs; the refused joins and session expiries the broker logged; and the load
average, since timings vary with the machine's load. "old member gone" is when ConsumerGroupDescribe
(polled every 0.25 s) stopped listing the old member id: its expiry under KIP-848 after a crash, its
replacement otherwise; it can trail the restart's assignment by a poll, hence small negative "gone ->
assigned". "others took its partitions": whether another member was assigned any of the restarted
member's partitions in between. "verdict headroom" (KIP-848 kills): kill + session + ``release_margin_s``
- old member gone, a lower bound on how much earlier the dead member was released than the earliest
moment the wait could have called it alive (exit 75); it must stay positive on a loaded broker.
``--burn N`` runs N busy-looping processes for the whole run (a loaded machine); ``--json`` writes the
raw per-run values.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from static_consumer_lab.brokers import JvmKafkaCluster, create_topic, describe_consumer_group
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
RATE = 100  # records per second
MARGIN_S = 5.0  # release_margin_s's default, which the children use


@dataclass
class Row:
    """The runs of one scenario: numeric columns as lists (spread), counts as totals."""

    name: str
    n: int = 0
    values: dict[str, list[float]] = field(default_factory=dict)
    counts: dict[str, list[str]] = field(default_factory=dict)

    def add(self, column: str, value: float | None) -> None:
        if value is not None:
            self.values.setdefault(column, []).append(value)

    def note(self, column: str, value: object) -> None:
        self.counts.setdefault(column, []).append(str(value))

    def cell(self, column: str) -> str:
        if column in self.values:
            got = self.values[column]
            low, mid, high = min(got), statistics.median(got), max(got)
            dash = " to " if low < 0 else "-"
            text = f"{low:.1f}" if high - low < 0.05 else f"{mid:.1f} [{low:.1f}{dash}{high:.1f}]"
            return text if len(got) == self.n else f"{text} ({len(got)}/{self.n})"
        if column in self.counts:
            notes = self.counts[column]
            distinct = sorted(set(notes), key=notes.index)
            return ", ".join(f"{v} x{notes.count(v)}" if notes.count(v) > 1 else v for v in distinct)
        return "-"


class Broker:
    """The harness broker, its log (refusals and expiries per group) and a stream of unique names."""

    def __init__(self, cluster: JvmKafkaCluster, session_s: float, group_session_s: float | None) -> None:
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap_servers
        self.session_s = session_s
        self.group_session_s = group_session_s

    def session_of(self, protocol: str) -> float:
        """The session a member of ``protocol`` has: the KIP-848 group override when one is set."""
        if protocol == "consumer" and self.group_session_s is not None:
            return self.group_session_s
        return self.session_s

    def log_count(self, group: str, what: str) -> int:
        patterns = {
            "refused": rf"\[GroupId {re.escape(group)}\] Static member .* cannot join the group because",
            "expired": rf"\[GroupId {re.escape(group)}\] .*session expired",
        }
        pattern = re.compile(patterns[what])
        return sum(
            len(pattern.findall(path.read_text(errors="replace")))
            for path in self.cluster.log_paths()
            if path.exists()
        )


def new_group(broker: Broker, protocol: str, tag: str) -> Group:
    """A group of StaticConsumer children: classic members ask for the broker's session with the
    library's default heartbeat; KIP-848 groups get the broker's session, or ``broker.group_session_s``."""
    suffix = uuid.uuid4().hex[:6]
    topic = create_topic(broker.bootstrap, f"bench-restart-{tag}-{suffix}", PARTITIONS)
    group_id = f"bench-restart-{protocol}-{tag}-{suffix}"
    # KIP-848: the broker's session, or the --group-session-s override (set by Group); classic: the
    # members' own. No heartbeat override: the broker's 5 s, as on a stock deployment.
    group_session_ms = int(broker.group_session_s * 1000) if broker.group_session_s is not None else None

    def spec(name: str) -> dict[str, Any]:
        settings: dict[str, Any] = {"protocol": protocol, "max_poll_interval_ms": 300000}
        if protocol == "classic":
            settings.update(session_timeout_ms=int(broker.session_s * 1000), heartbeat_interval_ms=None)
        result = static_spec(broker.bootstrap, group_id, [topic], name, **settings)
        result.update(batch=100, max_runtime_s=3600)
        return result

    return Group(
        ConsumerProcess,
        broker.bootstrap,
        group_id,
        topic,
        PARTITIONS,
        protocol=protocol,
        spec_factory=spec,
        session_ms=group_session_ms if protocol == "consumer" else None,
    )


def member_id(bootstrap: str, group: str, instance_id: str) -> str | None:
    return next(
        (
            m.member_id
            for m in describe_consumer_group(bootstrap, group).members
            if m.group_instance_id == instance_id
        ),
        None,
    )


@contextmanager
def watching_release(bootstrap: str, group: str, old: str | None, limit_s: float) -> Iterator[list[float]]:
    """Yields [time the member id ``old`` left the group] once it did (polled every 0.25 s)."""
    seen: list[float] = []
    stop = threading.Event()

    def run() -> None:
        deadline = time.monotonic() + limit_s
        while not stop.is_set() and time.monotonic() < deadline and old is not None:
            try:
                ids = {m.member_id for m in describe_consumer_group(bootstrap, group).members}
            except Exception:  # noqa: BLE001 - a describe during a coordinator hiccup: look again
                ids = {old}
            if old not in ids:
                seen.append(time.time())
                return
            stop.wait(0.25)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=30)


def took(others: Sequence[ConsumerProcess], partitions: set[tuple[str, int]], since: float) -> bool:
    """Whether any of ``others`` was assigned one of ``partitions`` after ``since``."""
    return any(
        {(t, p) for t, p in e["partitions"]} & partitions
        for proc in others
        for e in proc.events("assigned")
        if e["ts"] >= since
    )


def restarts(broker: Broker, protocol: str, how: str, runs: int) -> Row:
    """``how`` = kill or close: stop a member that way and restart it at once, ``runs`` times."""
    row = Row(f"{protocol}, {'kill -9' if how == 'kill' else 'SIGTERM (close)'} + restart")
    session_s = broker.session_of(protocol)
    group = new_group(broker, protocol, how)
    with SteadyProducer(broker.bootstrap, group.topic, RATE, max_s=3600.0):
        group.form(MEMBERS, timeout_s=180)
        for i in range(runs):
            name = MEMBERS[i % len(MEMBERS)]
            group.wait_stable(timeout_s=180)
            time.sleep(2)
            before = group.owned()[name]
            old = member_id(broker.bootstrap, group.group_id, name)
            refused, expired = (broker.log_count(group.group_id, w) for w in ("refused", "expired"))
            exits: list[int] = []
            with watching_release(broker.bootstrap, group.group_id, old, 2 * session_s + 60) as released:
                began = time.time()
                if how == "kill":
                    group.kill(name)
                else:
                    stopped = group.stop(name)
                    row.add("stop -> exit (s)", stopped.events("exit")[-1]["ts"] - began)
                group.start(name)
                restarted, assigned_at = group.first_partitions(name, 3 * session_s + 90, exits)
                group.wait_stable(timeout_s=180)
            row.n += 1
            row.add("-> assigned (s)", assigned_at - began)
            row.add("old member gone (s)", released[0] - began if released else None)
            if released:
                row.add("gone -> assigned (s)", assigned_at - released[0])
                if protocol == "consumer" and how == "kill":
                    row.add("verdict headroom (s)", began + session_s + MARGIN_S - released[0])
            row.note("same partitions", restarted.assignment() == before)
            others = [p for n, p in group.members.items() if n != name]
            row.note("others took its partitions", took(others, before, began))
            row.note("revocations elsewhere", group.revocations_since(began, others))
            row.note("refused joins", broker.log_count(group.group_id, "refused") - refused)
            row.note("expiries", broker.log_count(group.group_id, "expired") - expired)
            row.note("restart exit", ", ".join(map(str, exits)) or "none")
    twice = sum(1 for count in group.consumed().values() if count > 1)
    row.note("records twice", twice)
    for proc in group.all_processes():
        proc.kill()
    return row


def duplicates(broker: Broker, protocol: str, runs: int, traffic: bool) -> Row:
    """A second process with the id of a member that owns every partition, ``runs`` times."""
    row = Row(f"{protocol}, duplicate, {'traffic + commits' if traffic else 'idle'}")
    session_s = broker.session_of(protocol)
    for _ in range(runs):
        group = new_group(broker, protocol, "dup")
        with SteadyProducer(broker.bootstrap, group.topic, RATE, max_s=3600.0) if traffic else nullcontext():
            duplicate(group, row, traffic, session_s)
    return row


def duplicate(group: Group, row: Row, traffic: bool, session_s: float) -> None:
    original = group.start("app-0")
    procs = [original]
    try:
        wait_until(lambda: len(original.assignment()) == PARTITIONS, 120, "the original owning all")
        if traffic:
            original.wait_for_kind("committed", timeout_s=60)
        began = time.time()
        twin = group.start("app-0")  # the same spec, so the same instance id
        procs.append(twin)
        wait_until(lambda: any(p.returncode is not None for p in procs), 2 * session_s + 90, "an exit")
        loser = next(p for p in procs if p.returncode is not None)
        exit_event = loser.wait_for_kind("exit", timeout_s=5)
        row.n += 1
        row.note("loser", "the newcomer" if loser is twin else "the original")
        row.note("exit code", exit_event["code"])
        row.add("start -> exit (s)", exit_event["ts"] - began)
        if loser is twin:
            row.add("joining -> exit (s)", exit_event["ts"] - twin.wait_for_kind("ready", timeout_s=5)["ts"])
        survivor = twin if loser is original else original
        row.note("survivor", "running" if survivor.returncode is None else survivor.returncode)
    finally:
        for proc in procs:
            proc.kill()


RESTART_COLUMNS = (
    "stop -> exit (s)",
    "-> assigned (s)",
    "old member gone (s)",
    "gone -> assigned (s)",
    "verdict headroom (s)",
    "same partitions",
    "others took its partitions",
    "revocations elsewhere",
    "refused joins",
    "expiries",
    "restart exit",
    "records twice",
)
DUPLICATE_COLUMNS = ("loser", "exit code", "start -> exit (s)", "joining -> exit (s)", "survivor")


def table(rows: Sequence[Row]) -> str:
    """A markdown table of ``rows`` with the columns any of them has, in the order above."""
    have = {c for r in rows for c in [*r.values, *r.counts]}
    columns = [c for c in (*RESTART_COLUMNS, *DUPLICATE_COLUMNS) if c in have]
    lines = [
        "| scenario | n | " + " | ".join(columns) + " |",
        "|---|---|" + "---|" * len(columns),
    ]
    lines.extend(f"| {r.name} | {r.n} | " + " | ".join(r.cell(c) for c in columns) + " |" for r in rows)
    return "\n".join(lines)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


@contextmanager
def burning(processes: int) -> Iterator[None]:
    """``processes`` busy loops at normal priority for the duration: a loaded machine."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)]
    try:
        yield
    finally:
        for proc in burners:
            proc.kill()
            proc.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=6)
    parser.add_argument("--closes", type=int, default=4)
    parser.add_argument("--duplicates", type=int, default=3)
    parser.add_argument("--session-s", type=float, default=45.0, help="Kafka's default")
    parser.add_argument(
        "--profile", choices=("stock", "lab"), default="stock", help="the broker's group settings"
    )
    parser.add_argument("--group-session-s", type=float, help="a per-group override for KIP-848 groups")
    parser.add_argument("--protocols", default="classic,consumer")
    parser.add_argument("--scenarios", default="kill,close,duplicate,idle")
    parser.add_argument("--burn", type=int, default=0, help="busy-looping processes for the whole run")
    parser.add_argument("--json", help="write every run's raw values here")
    args = parser.parse_args()
    config = {"group.consumer.session.timeout.ms": str(int(args.session_s * 1000))}
    loads = [load()]
    with JvmKafkaCluster(1, profile=args.profile, extra_config=config) as cluster, burning(args.burn):
        broker = Broker(cluster, args.session_s, args.group_session_s)
        group_note = f", KIP-848 group override {args.group_session_s:g} s" if args.group_session_s else ""
        burn_note = f"; {args.burn} CPU burners running" if args.burn else ""
        print(
            f"Apache Kafka {cluster.version} ({args.profile} broker) at {broker.bootstrap}; session "
            f"{args.session_s:g} s (both "
            f"protocols{group_note}), heartbeat: Kafka's and the library's defaults{burn_note}; load "
            f"average (1/5/15 min) {loads[0]}",
            flush=True,
        )
        rows: list[Row] = []
        scenarios: dict[str, Callable[[str], Row]] = {
            "kill": lambda p: restarts(broker, p, "kill", args.kills),
            "close": lambda p: restarts(broker, p, "close", args.closes),
            "duplicate": lambda p: duplicates(broker, p, args.duplicates, True),
            "idle": lambda p: duplicates(broker, p, args.duplicates, False),
        }
        for name in args.scenarios.split(","):
            for protocol in args.protocols.split(","):
                rows.append(scenarios[name](protocol))
                loads.append(load())
                print(table(rows[-1:]), flush=True)
    print()
    print(table([r for r in rows if "duplicate" not in r.name]))
    print()
    print(table([r for r in rows if "duplicate" in r.name]))
    print(f"load average (1/5/15 min) after each scenario: {', '.join(loads)}")
    if args.json:
        raw = [{"name": r.name, "n": r.n, "values": r.values, "counts": r.counts} for r in rows]
        with open(args.json, "w") as out:
            json.dump({"args": vars(args), "loads": loads, "rows": raw}, out, indent=1)


if __name__ == "__main__":
    main()
