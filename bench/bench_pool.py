"""What a process pool per pod buys (records/s with a CPU-bound handler) and costs (memory; restarts).

    python bench/bench_pool.py throughput [--runs 3] [--records 200000] [--work-us 50] [--partitions 8]
    python bench/bench_pool.py restart [--runs 3] [--protocols classic,consumer] [--restart-state-dir]

One Apache Kafka broker on the JVM (the test harness) with Apache Kafka's default group settings
(the harness's ``stock`` profile, ``static_consumer_lab.brokers.jvm.STOCK_GROUP_CONFIG``: KIP-848 session 45 s
and heartbeats 5 s, classic minimum session 6 s, initial rebalance delay 3 s), not the harness's fast
test settings. Pods are ``static-consumer run --processes N
static_consumer_lab.children.pool_app:handle`` child processes
(:class:`static_consumer_lab.children.pods.PoolPod`), the control the README's single-process pod main
(``run_until_sigterm``) around the same handler.

throughput: per round, one pod of each kind reads a topic of ``--records`` 100 B records from its start
(a new topic and group each), the handler doing ``--work-us`` of pure-Python work per record (a loop
calibrated to that much CPU time on this machine before the run, so it is the same work whatever the
load). Rate: records over
the time from the first batch's start to the last batch's end, across the pod's workers. The kinds run
back to back, in alternating order, after a warm-up round; ratios are taken within a round. Memory: RSS,
PSS and USS (private) of every process of the pod, read from /proc near the end of the read. CPU: the
cores the pod's consuming processes, the broker and the whole machine kept busy over the middle of the
read (20-80 % of the records handled), from /proc, and the rate per core the pod's processes got: on a
2-core machine the broker and librdkafka's threads take part of the second core, which the ratio of rates
counts against the pool and the rate per core does not. And per round the control without Kafka: the
same work per record in 2 plain processes against 1 (what the machine's two cores give two CPU-bound
Python processes), with the pool's ratio to it. The split: each consuming process's CPU per thread group
(/proc/PID/task: the main thread, with the handler's work loop timed apart by the handler, librdkafka's
rdk:main and rdk:broker* threads, the rest) and context switches, the supervisor, this script, the
broker per JVM thread group, the hypervisor's steal time; and the cores the pool of 2 kept in the
handler's loop over the pool of 1's, which the host's CPU speed drifting between two reads cannot move.
No producer runs during a read.

restart: per run and protocol, two pods of 2 workers (app-<run>-0, app-<run>-1) on 8 partitions, a
producer writing 200 records/s; (a) a rolling restart of the first (SIGTERM, wait for its exit, start it
again), (b) SIGKILL to one worker of the first (the pool restarts it in place). Counts broker rebalances
(classic generations, KIP-848 group epoch bumps, from the broker log) and revocations seen by the other
pod and by the other worker; times from the signal; and whether the partitions came back to the same
workers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _bench import machine, process_cpu_s

from static_consumer_lab.brokers import JvmKafkaCluster, create_topic
from static_consumer_lab.brokers.kafka_ops import produce
from static_consumer_lab.children.pods import PoolPod, event_time
from static_consumer_lab.children.pool_app import calibrate, work
from static_consumer_lab.children.processes import wait_until
from static_consumer_lab.producer import SteadyProducer

KINDS = {"plain pod main": (1, True), "pool, 1 process": (1, False), "pool, 2 processes": (2, False)}


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.1f}/{five:.1f}"


def spread(values: list[float], digits: int = 0) -> str:
    if not values:
        return "-"
    f = f"{{:,.{digits}f}}"
    mid, low, high = statistics.median(values), min(values), max(values)
    return f"{f.format(mid)} [{f.format(low)}-{f.format(high)}]"


def memory(pid: int) -> tuple[float, float, float]:
    """RSS, PSS and USS (private pages) of ``pid`` in MiB, from /proc/PID/smaps_rollup."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_ = line.split()
        fields[name.rstrip(":")] = int(value)
    private = fields["Private_Clean"] + fields["Private_Dirty"]
    return fields["Rss"] / 1024, fields["Pss"] / 1024, private / 1024


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> tuple[float, float]:
    """CPU seconds every core of the machine spent not idle (nor waiting for I/O), and of those the
    seconds the hypervisor ran something else while this VM's cores wanted to run (steal), from
    /proc/stat. Linux does not count stolen time into any process's CPU time."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) * TICK_S, steal * TICK_S


def _thread_group(pid: int, tid: str, comm: str) -> str:
    if tid == str(pid):
        return "main thread"
    if comm.startswith("rdk:broker"):
        return "rdk:broker*"
    return comm if comm.startswith("rdk:") else "other threads"


def jvm_thread_group(pid: int, tid: str, comm: str) -> str:
    """A JVM thread's name without its number (``GC Thread#1``, ``data-plane-kafka-network-thread-1``
    cut to 15 characters by Linux): the broker's request handlers, network threads, GC, JIT, ..."""
    return re.sub(r"[-#]?\d+$", "", comm) or comm


def threads(
    pid: int, grouping: Callable[[int, str, str], str] = _thread_group
) -> dict[str, tuple[float, int]]:
    """CPU seconds and context switches (voluntary + involuntary: how often a thread went to sleep or was
    preempted) per thread group of ``pid`` so far, from /proc/PID/task/TID/stat and status: the main
    thread, librdkafka's ``rdk:main`` and ``rdk:broker*`` threads, the rest together. A thread that
    ended between two samples takes its CPU time with it (the groups here live as long as the client)."""
    out: dict[str, tuple[float, int]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
        except OSError:  # the thread ended
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) * TICK_S
        switches = sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)
        group = grouping(pid, task.name, comm)
        was_cpu, was_switches = out.get(group, (0.0, 0))
        out[group] = (was_cpu + cpu, was_switches + switches)
    return out


def _work_share(iterations: int, records: int, done: Any) -> None:
    cpu = time.thread_time()
    for _ in range(records):
        work(iterations)
    done.put((time.monotonic(), (time.thread_time() - cpu) / records))


def machine_ceiling(iterations: int, records: int) -> tuple[float, float, float]:
    """The control without Kafka: the handler's work for ``records`` records in 2 plain processes at once
    (half each) against 1 process doing all of it; the rate ratio is what this machine's two cores give
    two CPU-bound Python processes, the ceiling for a pool of 2. Also the CPU microseconds the work took
    per record with 1 process and with 2 (the same loop is slower when both cores are busy)."""
    context = multiprocessing.get_context("fork")

    def rate(processes: int) -> tuple[float, float]:
        done = context.Queue()
        share = records // processes
        children = [
            context.Process(target=_work_share, args=(iterations, share, done)) for _ in range(processes)
        ]
        began = time.monotonic()
        for child in children:
            child.start()
        got = [done.get(timeout=600) for _ in children]
        for child in children:
            child.join(timeout=60)
        ended = max(at for at, _ in got)
        return share * processes / (ended - began), statistics.mean(us for _, us in got) * 1e6

    (two, two_us), (one, one_us) = rate(2), rate(1)
    return two / one, one_us, two_us


def settings(bootstrap: str, group: str, topic: str, protocol: str = "classic") -> dict[str, Any]:
    return {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": topic,
        "protocol": protocol,
        "shutdown_timeout_s": 20.0,
    }


# ------------------------------------------------------------------------------------------ throughput
def one_read(
    bootstrap: str, kind: str, records: int, partitions: int, iterations: int, workdir: Path, broker_pid: int
) -> dict[str, Any]:
    processes, plain = KINDS[kind]
    tag = uuid.uuid4().hex[:8]
    topic = create_topic(bootstrap, f"bench-pool-{tag}", partitions)
    produce(bootstrap, topic, records)
    pod = PoolPod(
        f"bench-{tag}-0",
        processes=processes,
        plain=plain,
        settings=settings(bootstrap, f"bench-pool-{tag}", topic),
        workdir=workdir,
        env={"POOL_APP_WORK_ITERATIONS": str(iterations)},
        record_offsets=False,
    )
    pod.start()
    sampled: list[tuple[str, tuple[float, float, float]]] = []
    # CPU over the read's middle (from 20 % to 80 % handled, so start-up and the tail are left out):
    # (wall, the pod's consuming processes, the broker, the whole machine) at each end, and the split
    # (per thread group of each consuming process, the supervisor, this script, the handler's work loop).
    cpu: list[tuple[float, float, float, tuple[float, float]]] = []
    splits: list[dict[str, tuple[float, int]]] = []

    def consuming() -> list[int]:
        assert pod.proc is not None
        return [pod.proc.pid] if plain else [w["pid"] for w in pod.workers() if w["pid"]]

    def cpu_sample(handled: int) -> None:
        pids = consuming()
        pods = sum(process_cpu_s(pid) for pid in pids)
        cpu.append((time.monotonic(), pods, process_cpu_s(broker_pid), machine_busy_s()))
        split: dict[str, tuple[float, int]] = {"records": (0.0, handled), "work loop": (pod.work_cpu_s(), 0)}
        for pid in pids:
            for group, (seconds, switches) in threads(pid).items():
                was = split.get(f"worker {group}", (0.0, 0))
                split[f"worker {group}"] = (was[0] + seconds, was[1] + switches)
        assert pod.proc is not None
        if not plain:
            split["supervisor"] = (process_cpu_s(pod.proc.pid), 0)
        split["bench script"] = (process_cpu_s(os.getpid()), 0)
        for group, (seconds, switches) in threads(broker_pid, jvm_thread_group).items():
            split[f"broker: {group}"] = (seconds, switches)
        splits.append(split)

    try:

        def done() -> bool:
            handled = sum(count for _, count, _, _ in pod.batches())
            if not cpu and handled >= records * 0.2:
                cpu_sample(handled)
            if not sampled and handled >= records * 0.8:  # memory once, near the end of the read
                cpu_sample(handled)
                assert pod.proc is not None
                pids = [("main", pod.proc.pid)] if plain else [("supervisor", pod.proc.pid)]
                pids += [("worker", w["pid"]) for w in pod.workers() if w["pid"]]
                sampled.extend((role, memory(pid)) for role, pid in pids)
            return handled >= records

        wait_until(done, 600, lambda: f"{kind} to read {records} records; {pod.describe()}", poll_s=0.2)
    finally:
        code = pod.stop(timeout_s=60)
    batches = pod.batches()
    wall = max(b[3] for b in batches) - min(b[2] for b in batches)
    (t0, pods0, broker0, (busy0, steal0)), (t1, pods1, broker1, (busy1, steal1)) = cpu[0], cpu[-1]
    span = t1 - t0
    cores = {
        "pod": (pods1 - pods0) / span,
        "broker": (broker1 - broker0) / span,
        "machine": (busy1 - busy0) / span,
        "steal": (steal1 - steal0) / span,
    }
    # per group: cores over the middle of the read, and context switches per 1,000 records
    first, last = splits[0], splits[-1]
    middle = last["records"][1] - first["records"][1]
    split = {
        group: ((last[group][0] - first[group][0]) / span, (last[group][1] - first[group][1]) * 1e3 / middle)
        for group in last
        if group in first and group != "records"
    }
    split["records/s"] = (middle / span, 0.0)
    return {"rate": records / wall, "memory": sampled, "exit": code, "cores": cores, "split": split}


def throughput(bootstrap: str, args: argparse.Namespace, workdir: Path, broker_pid: int) -> None:
    iterations = calibrate(args.work_us / 1e6)
    print(f"work: {iterations} iterations per record = {args.work_us:g} us of CPU time (calibrated)")
    began, broker, (busy, _) = time.monotonic(), process_cpu_s(broker_pid), machine_busy_s()
    time.sleep(5)  # the broker with no client: its own floor (controller, GC, timers)
    span = time.monotonic() - began
    print(
        f"broker idle (no client, 5 s): {(process_cpu_s(broker_pid) - broker) / span:.2f} cores; "
        f"whole machine {(machine_busy_s()[0] - busy) / span:.2f} cores busy"
    )
    got: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    ceilings: list[float] = []
    control_us: list[tuple[float, float]] = []
    for number in range(args.runs + 1):
        order = list(KINDS) if number % 2 else list(KINDS)[::-1]
        row = {
            kind: one_read(bootstrap, kind, args.records, args.partitions, iterations, workdir, broker_pid)
            for kind in order
        }
        ceiling, one_us, two_us = machine_ceiling(iterations, args.records // 4)
        label = "warm-up" if number == 0 else f"round {number}"
        print(
            f"  {label} (load {load()}): "
            + ", ".join(
                f"{k} {r['rate']:,.0f}/s (cores: pod {r['cores']['pod']:.2f}, "
                f"broker {r['cores']['broker']:.2f}, machine {r['cores']['machine']:.2f}, "
                f"stolen {r['cores']['steal']:.2f}; work loop {work_us(r):.1f} us CPU/record)"
                for k, r in row.items()
            )
            + f"; without Kafka, 2 processes / 1: {ceiling:.2f} (work loop {one_us:.1f} / {two_us:.1f} us)"
        )
        if number:
            for kind, result in row.items():
                got[kind].append(result)
            ceilings.append(ceiling)
            control_us.append((one_us, two_us))
    base = [r["rate"] for r in got["pool, 1 process"]]
    plain = [r["rate"] for r in got["plain pod main"]]
    print(
        f"\n{args.records:,} records of 100 B, {args.partitions} partitions, {args.work_us:g} us of "
        f"pure-Python work per record; median [min-max] of {args.runs} rounds"
    )
    print(
        "| pod | records/s | to 1 process | to the plain main | RSS per worker, MiB | PSS per worker | "
        "USS per worker | supervisor RSS / USS | exit codes |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, results in got.items():
        rates = [r["rate"] for r in results]
        to_one = [r / b for r, b in zip(rates, base, strict=True)]
        to_plain = [r / b for r, b in zip(rates, plain, strict=True)]
        workers = [m for r in results for role, m in r["memory"] if role in ("worker", "main")]
        supers = [m for r in results for role, m in r["memory"] if role == "supervisor"]
        sup = f"{spread([m[0] for m in supers], 1)} / {spread([m[2] for m in supers], 1)}" if supers else "-"
        print(
            f"| {kind} | {spread(rates)} | {spread(to_one, 2)} | {spread(to_plain, 2)} | "
            f"{spread([m[0] for m in workers], 1)} | {spread([m[1] for m in workers], 1)} | "
            f"{spread([m[2] for m in workers], 1)} | {sup} | {sorted({r['exit'] for r in results})} |"
        )
    pool = [r["rate"] / b for r, b in zip(got["pool, 2 processes"], base, strict=True)]
    print(
        f"\nThe control without Kafka (the same work per record, 1/4 of the records, in 2 plain processes "
        f"against 1): {spread(ceilings, 2)}; the pool of 2's ratio to it, round by round: "
        f"{spread([p / c for p, c in zip(pool, ceilings, strict=True)], 2)}; the control's work loop took "
        f"{spread([one for one, _ in control_us], 1)} us of CPU per record in 1 process, "
        f"{spread([two for _, two in control_us], 1)} in each of 2 at once"
    )
    # The same loop runs at different speeds minutes apart on a shared VM (the calibration, the control and
    # the work loop's CPU per record say so), and the two reads of a ratio run minutes apart: the cores
    # the pods kept in their handler's loop compare the pods without that drift.
    loop_cores = [
        two["split"]["work loop"][0] / one["split"]["work loop"][0]
        for two, one in zip(got["pool, 2 processes"], got["pool, 1 process"], strict=True)
    ]
    loop_us = {kind: spread([work_us(r) for r in results], 1) for kind, results in got.items()}
    print(
        f"Cores kept in the handler's work loop over the middle of the read, pool of 2 / pool of 1: "
        f"{spread(loop_cores, 2)}; the work loop's CPU per record: "
        + ", ".join(f"{kind} {us} us" for kind, us in loop_us.items())
    )
    # The machine's share: how many of its cores the pod's consuming processes got (the broker, the
    # producer-less read's librdkafka threads and this script take the rest), and the rate per such core.
    print(
        "\nCPU over the middle of each read (20-80 % handled), cores busy; records/s per core the pod's "
        "consuming processes used"
    )
    print(
        "| pod | pod's processes | broker | whole machine | stolen by the hypervisor | records/s per pod "
        "core | per core, to 1 process |"
    )
    print("|---|---|---|---|---|---|---|")
    per_core_base = [r["rate"] / r["cores"]["pod"] for r in got["pool, 1 process"]]
    for kind, results in got.items():
        per_core = [r["rate"] / r["cores"]["pod"] for r in results]
        print(
            f"| {kind} | {spread([r['cores']['pod'] for r in results], 2)} | "
            f"{spread([r['cores']['broker'] for r in results], 2)} | "
            f"{spread([r['cores']['machine'] for r in results], 2)} | "
            f"{spread([r['cores']['steal'] for r in results], 2)} | {spread(per_core)} | "
            f"{spread([p / b for p, b in zip(per_core, per_core_base, strict=True)], 2)} |"
        )
    print_split(got)


def work_us(result: dict[str, Any]) -> float:
    """CPU microseconds the handler's work loop took per record over the middle of the read."""
    split = result["split"]
    return float(split["work loop"][0] / split["records/s"][0] * 1e6)


def print_split(got: dict[str, list[dict[str, Any]]]) -> None:
    """Where the cores went over the middle of each read: the consuming processes' thread groups (the
    main thread split into the handler's work loop and the rest: the library's loop, record conversion,
    commits), the supervisor, this script (its /proc polling), the broker; and CPU microseconds per record
    of each, so a pool of 2 compares with a pool of 1 per record."""
    print(
        "\nThe split over the middle of each read: cores busy (CPU microseconds per record handled) "
        "[context switches per 1,000 records]; medians over the rounds"
    )
    groups = sorted({g for results in got.values() for r in results for g in r["split"]} - {"records/s"})
    # the broker's thread groups that used at least 0.01 cores in the median round of some pod
    groups = [
        g
        for g in groups
        if not g.startswith("broker: ")
        or any(
            statistics.median(r["split"].get(g, (0.0, 0))[0] for r in results) >= 0.01
            for results in got.values()
        )
    ]
    print("| group | " + " | ".join(got) + " |")
    print("|---|" + "---|" * len(got))

    def cell(splits: list[dict[str, tuple[float, float]]], group: str) -> str:
        rows = [split for split in splits if group in split]
        if not rows:
            return "-"
        cores = statistics.median(row[group][0] for row in rows)
        per_record = statistics.median(row[group][0] / row["records/s"][0] * 1e6 for row in rows)
        switches = statistics.median(row[group][1] for row in rows)
        return f"{cores:.2f} ({per_record:.1f} us)" + (f" [{switches:.0f}]" if switches else "")

    minus = "worker main thread minus the work loop"
    with_minus = [[{**r["split"], minus: _minus(r["split"])} for r in results] for results in got.values()]
    for group in [minus, *groups]:
        cells = [cell(splits, group) for splits in with_minus]
        print(f"| {group} | " + " | ".join(cells) + " |")
    broker = [statistics.median(r["cores"]["broker"] for r in results) for results in got.values()]
    print("| broker (JVM) | " + " | ".join(f"{b:.2f}" for b in broker) + " |")
    rates = [statistics.median(r["split"]["records/s"][0] for r in results) for results in got.values()]
    print("| records/s over the middle | " + " | ".join(f"{x:,.0f}" for x in rates) + " |")


def _minus(split: dict[str, tuple[float, float]]) -> tuple[float, float]:
    main, work = split["worker main thread"], split["work loop"]
    return (main[0] - work[0], 0.0)


# --------------------------------------------------------------------------------------------- restarts
PARTITIONS = 8


def stable(pods: list[PoolPod], topic: str, settle_s: float = 3.0) -> dict[str, set[tuple[str, int]]]:
    everything = {(topic, p) for p in range(PARTITIONS)}
    last: dict[str, set[tuple[str, int]]] = {}
    since = time.monotonic()

    def settled() -> bool:
        nonlocal last, since
        owned = {k: v for pod in pods for k, v in pod.owned().items()}
        parts = [tp for s in owned.values() for tp in s]
        if len(parts) != len(set(parts)) or set(parts) != everything or owned != last:
            last, since = owned, time.monotonic()
            return False
        return time.monotonic() - since >= settle_s

    wait_until(settled, 180, lambda: f"a settled assignment; now {last}")
    return last


def first_assigned(pod: PoolPod, instance_id: str, since: float) -> float | None:
    times = [
        event_time(e)
        for e in pod.events(since)
        if e["event"] == "assigned" and e["instance_id"] == instance_id and e["partitions"]
    ]
    return min(times) if times else None


def one_restart_run(
    cluster: JvmKafkaCluster, protocol: str, workdir: Path, restart_dir: bool = False
) -> dict[str, Any]:
    bootstrap = cluster.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    topic = create_topic(bootstrap, f"bench-pool-restart-{tag}", PARTITIONS)
    group = f"bench-pool-restart-{protocol}-{tag}"
    conf = settings(bootstrap, group, topic, protocol)
    if restart_dir:  # one directory for both pods: its files are per instance id, as in each pod's own
        conf["restart_state_dir"] = str(workdir / f"restart-{tag}")
    # StatefulSet pod names (app-<run>-<ordinal>): the pool derives its workers' ids from them
    a, b = (PoolPod(f"app-{tag}-{n}", processes=2, settings=conf, workdir=workdir) for n in (0, 1))
    pods = [a, b]
    out: dict[str, Any] = {}
    with SteadyProducer(bootstrap, topic, rate_per_s=200, max_s=900):
        try:
            for pod in pods:
                pod.start()
            for pod in pods:
                pod.wait_ready(120)
            owned = stable(pods, topic)
            # (a) rolling restart of pod a
            before, since = cluster.group_rebalances(group), time.time()
            signalled = time.monotonic()
            out["roll_exit"] = a.stop(timeout_s=60)
            out["roll_down_s"] = time.monotonic() - signalled
            a.start()
            a.wait_ready(120)
            out["roll_ready_s"] = time.monotonic() - signalled
            after = stable(pods, topic)
            out["roll_rebalances"] = len(cluster.group_rebalances(group)) - len(before)
            out["roll_revoked_other_pod"] = len(b.revocations(since))
            out["roll_revoked_restarted"] = len(a.revocations(since + out["roll_down_s"]))
            out["roll_same"] = after == owned
            # (b) a worker of pod a killed: restarted in place
            owned = after
            before, since = cluster.group_rebalances(group), time.time()
            victim = a.workers()[1]["instance_id"]
            a.kill_worker(1)
            wait_until(
                lambda: a.workers()[1]["restarts"] == 1 and a.workers()[1]["ready"],
                180,
                lambda: f"the killed worker back; {a.describe()}",
            )
            back = first_assigned(a, victim, since)
            out["crash_back_s"] = None if back is None else back - since
            after = stable(pods, topic)
            out["crash_rebalances"] = len(cluster.group_rebalances(group)) - len(before)
            out["crash_revoked_other_pod"] = len(b.revocations(since))
            out["crash_revoked_other_worker"] = len(
                [e for e in a.revocations(since) if e["instance_id"] != victim]
            )
            out["crash_same"] = after == owned
            out["stop_exits"] = [pod.stop(timeout_s=60) for pod in pods]
        finally:
            for pod in pods:
                pod.kill()
    return out


def restarts(cluster: JvmKafkaCluster, args: argparse.Namespace, workdir: Path) -> None:
    for protocol in args.protocols.split(","):
        runs = []
        for number in range(1, args.runs + 1):
            got = one_restart_run(cluster, protocol, workdir, args.restart_state_dir)
            runs.append(got)
            print(f"  {protocol} run {number} (load {load()}): {got}")
        kept = ", restart_state_dir" if args.restart_state_dir else ""
        print(f"\n{protocol}: two pods of 2 workers, 8 partitions, 200 records/s{kept}; {args.runs} runs")
        print(
            "| event | rebalances | revocations, other pod | revocations, other worker of the pod | "
            "seconds | same partitions | exits |"
        )
        print("|---|---|---|---|---|---|---|")
        rolls = [r["roll_ready_s"] for r in runs]
        downs = [r["roll_down_s"] for r in runs]
        print(
            f"| rolling restart of a pod (SIGTERM, start) | {sum(r['roll_rebalances'] for r in runs)} | "
            f"{sum(r['roll_revoked_other_pod'] for r in runs)} | - | SIGTERM to exit {spread(downs, 1)}, "
            f"to ready again {spread(rolls, 1)} | {sum(r['roll_same'] for r in runs)} of {len(runs)} | "
            f"{sorted({r['roll_exit'] for r in runs})} |"
        )
        backs = [r["crash_back_s"] for r in runs if r["crash_back_s"] is not None]
        print(
            f"| SIGKILL to one worker (restarted in place) | {sum(r['crash_rebalances'] for r in runs)} | "
            f"{sum(r['crash_revoked_other_pod'] for r in runs)} | "
            f"{sum(r['crash_revoked_other_worker'] for r in runs)} | kill to its assignment "
            f"{spread(backs, 1)} | {sum(r['crash_same'] for r in runs)} of {len(runs)} | "
            f"{sorted({c for r in runs for c in r['stop_exits']})} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["throughput", "restart"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--work-us", type=float, default=50.0)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--protocols", default="classic,consumer")
    parser.add_argument(
        "--restart-state-dir",
        action="store_true",
        help="restart: the pods keep a restart_state_dir (a KIP-848 worker releases its dead predecessor)",
    )
    args = parser.parse_args()
    print(machine())
    print(f"load average (1/5 min) at start {load()}; timings vary with it")
    with (
        tempfile.TemporaryDirectory(prefix="bench-pool-") as tmp,
        JvmKafkaCluster(1, profile="stock") as cluster,
    ):
        print(f"Apache Kafka {cluster.version} at {cluster.bootstrap_servers}, stock group settings")
        if args.what == "throughput":
            broker = cluster.nodes[0].process
            assert broker is not None
            throughput(cluster.bootstrap_servers, args, Path(tmp), broker.pid)
        else:
            restarts(cluster, args, Path(tmp))
    print(f"load average (1/5 min) at the end {load()}")


if __name__ == "__main__":
    main()
