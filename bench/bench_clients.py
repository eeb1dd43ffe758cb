"""The Python Kafka clients side by side, in one run on one topic: records/s, CPU per record, and a static
member's restart-to-first-record.

    pip install -e '.[bench]'      # aiokafka, for this benchmark only (kafka-python is a dependency)
    python bench/bench_clients.py [--records 500000] [--size 100] [--passes 5] [--restarts 5] [--quick]

Clients: raw confluent-kafka (the idiomatic loop: ``consume(500, 1.0)``, ``m.value()``,
``commit(asynchronous=False)``), ``StaticConsumer.consume`` and ``.consume_batch`` (``for r in ...:
len(r.value)``, ``commit(records)``), kafka-python (``poll(max_records=500)``, ``commit()``) and aiokafka
(``getmany(max_records=500)``, ``await commit()``). Every one is a static member (``group.instance.id`` /
``group_instance_id``, classic protocol: kafka-python and aiokafka have no KIP-848), reads every value and
commits every batch synchronously. The records are produced uncompressed (kafka-python and aiokafka read
lz4 and zstd batches only with extra packages).

Each pass runs in a process of its own (``_client_child.py``) and reads the whole topic with a new group:
records/s from its first record to its last, and that process's CPU time over the same span per record
(the client's own threads included; the broker runs elsewhere). A warm-up round, then ``--passes``
rounds, clients in a rotated order each round.

Restart-to-first-record: for each client a member with a fixed instance id joins a new group, reads a
batch, commits and closes (no client sends LeaveGroup for a static member); then, ``--restarts`` times,
a NEW process with the same instance id is started and timed from the moment it is started to its first
record (interpreter start and imports included, as for a restarted pod), and from the construction of
its client to its first record. Best and median of the passes for every number. The broker is
KAFKA_BOOTSTRAP_SERVERS if set, else the embedded one (see docs/testing.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from _bench import machine, produce

from static_consumer_lab import create_topic, local_cluster

CHILD = Path(__file__).with_name("_client_child.py")
CLIENTS = [
    "confluent-kafka",
    "StaticConsumer.consume",
    "StaticConsumer.consume_batch",
    "kafka-python",
    "aiokafka",
]
PARTITIONS = 6
CHILD_TIMEOUT_S = 900.0


def child(
    client: str, what: str, bootstrap: str, topic: str, group: str, instance: str, count: int
) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(CHILD), client, what, bootstrap, topic, group, instance, str(count)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"{client} {what} failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["started_at"] = started
    return result


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("kafka-python", "aiokafka"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def best_median(values: list[float], *, higher_is_better: bool, fmt: str) -> str:
    best = max(values) if higher_is_better else min(values)
    return f"{best:{fmt}} / {statistics.median(values):{fmt}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5,000 records, 1 pass, 1 restart")
    args = parser.parse_args()
    if args.quick:
        args.records, args.passes, args.restarts = 5000, 1, 1
        print("smoke run (--quick): checks the clients run; its numbers mean nothing")
    clients = args.clients.split(",")
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients {sorted(unknown)}; known: {', '.join(CLIENTS)}")
    reads: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    restarts: dict[str, list[tuple[float, float]]] = {c: [] for c in clients}
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}; {versions()}")
        topic = create_topic(bootstrap, f"clients-{uuid.uuid4().hex[:6]}", PARTITIONS)
        # Uncompressed: kafka-python and aiokafka need extra packages for lz4 or zstd batches.
        took = produce(bootstrap, topic, args.records, args.size, compression="none")
        print(
            f"{args.records:,} records of {args.size} B, {PARTITIONS} partitions (produced in {took:.1f} s)"
        )
        for number in range(args.passes + 1):
            order = clients[number % len(clients) :] + clients[: number % len(clients)]
            label = "warm-up" if number == 0 else f"pass {number}"
            line = []
            for client in order:
                got = child(
                    client, "read", bootstrap, topic, f"r-{uuid.uuid4().hex[:8]}", "bench-0", args.records
                )
                if got["records"] < args.records:
                    raise RuntimeError(f"{client} read {got['records']} of {args.records} records")
                if number:
                    reads[client].append(got)
                line.append(f"{client} {got['records'] / got['wall_s']:,.0f}/s")
            print(f"  {label}: " + ", ".join(line), flush=True)
        for client in clients:
            group = f"restart-{uuid.uuid4().hex[:8]}"
            for number in range(args.restarts + 1):  # the first start joins a new group
                got = child(client, "restart", bootstrap, topic, group, "bench-restart", 1)
                if number:
                    restarts[client].append(
                        (got["first_at"] - got["started_at"], got["first_at"] - got["constructed_at"])
                    )
            print(
                f"  restarts of {client}: " + ", ".join(f"{a:.2f} s" for a, _ in restarts[client]), flush=True
            )
    load = os.getloadavg()[0]
    print(f"\n{args.passes} passes of {args.records:,} records of {args.size} B; best / median")
    print(f"1-minute load average at the end: {load:.1f}")
    print("| client | records/s | CPU us/record | restart to first record, s | from client creation, s |")
    print("|---|---|---|---|---|")
    for client in clients:
        rates = [r["records"] / r["wall_s"] for r in reads[client]]
        cpu = [r["cpu_s"] / r["records"] * 1e6 for r in reads[client]]
        whole = [a for a, _ in restarts[client]]
        joined = [b for _, b in restarts[client]]
        print(
            f"| {client} | {best_median(rates, higher_is_better=True, fmt=',.0f')} "
            f"| {best_median(cpu, higher_is_better=False, fmt='.2f')} "
            f"| {best_median(whole, higher_is_better=False, fmt='.2f')} "
            f"| {best_median(joined, higher_is_better=False, fmt='.2f')} |"
        )


if __name__ == "__main__":
    main()
