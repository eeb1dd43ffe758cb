"""The Python Kafka clients side by side, in one run on one topic: records/s, CPU per record, and a static
member's restart-to-first-record.

    pip install -e '.[bench]'      # aiokafka, for this benchmark only (kafka-python is a dependency)
    python bench/bench_clients.py [--records 500000] [--passes 3] [--restarts 5] [--quick]
                                  [--cells none:100,lz4:100,none:1024:100000,lz4:1024:100000]
                                  [--protocol classic|consumer]

Clients, each with its own defaults: raw confluent-kafka (the idiomatic loop: ``consume(500, 1.0)``,
``m.value()``, ``commit(asynchronous=False)``), the same raw loop given the librdkafka defaults
StaticConsumer changes ("confluent-kafka (library's settings)"), and for context the same with
librdkafka's own ``commit(asynchronous=True)`` (unordered, its failures unseen: not a loop that keeps
at-least-once's promises), ``StaticConsumer.consume`` and ``.consume_batch`` (``for r in ...:
len(r.value)``, ``commit(records)``, which by default does not wait for the broker: see
docs/semantics.md), kafka-python (``poll(max_records=500)``, ``commit()``) and aiokafka
(``getmany(max_records=500)``, ``await commit()``). Every one is a static member (``group.instance.id`` /
``group_instance_id``, classic protocol: kafka-python and aiokafka have no KIP-848; ``--protocol
consumer`` runs the librdkafka-based clients as KIP-848 members), reads every value and commits every
batch.

A cell is a compression, a value size and optionally a record count (``none:100``: ``--records``
uncompressed 100 B records; the 1 KiB cells default to 100,000, which kafka-python reads at about 5,000
a second); each gets a topic of its own (kafka-python reads lz4 through python-lz4, aiokafka through
cramjam: the ``bench`` extra). Each pass runs in a process of its own (``_client_child.py``) and reads
the whole topic with a new group: records/s from its first record to its last, and that process's CPU
time over the same span per record (the client's own threads included; the broker runs elsewhere). Per
cell a warm-up round, then ``--passes`` rounds, clients in a rotated order each round; the ratio of
StaticConsumer to another client is taken per round and given as median [min-max].

Restart-to-first-record: for each client a member with a fixed instance id joins a new group, reads a
batch, commits and closes (no client sends LeaveGroup for a static member); then, ``--restarts`` times,
a NEW process with the same instance id is started and timed from the moment it is started to its first
record (interpreter start and imports included, as for a restarted pod), and from the construction of
its client to its first record, on the first cell's topic. The library's modules are compiled to
bytecode first, as a wheel install has them (``_bench.compile_like_pip``). Median [min-max] for every
number. The broker is KAFKA_BOOTSTRAP_SERVERS if set, else the embedded one (see docs/testing.md).
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

from _bench import compile_like_pip, machine, produce

from static_consumer_lab.brokers import create_topic, local_cluster

CHILD = Path(__file__).with_name("_client_child.py")
CLIENTS = [
    "confluent-kafka",
    "confluent-kafka (library's settings)",
    "confluent-kafka (library's settings, async commits)",
    "StaticConsumer.consume",
    "StaticConsumer.consume_batch",
    "kafka-python",
    "aiokafka",
]
PARTITIONS = 6
CHILD_TIMEOUT_S = 900.0


CLASSIC_ONLY = ("kafka-python", "aiokafka")  # no KIP-848 in either


def child(
    client: str, what: str, bootstrap: str, topic: str, group: str, instance: str, count: int, protocol: str
) -> dict[str, Any]:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            str(CHILD),
            client,
            what,
            bootstrap,
            topic,
            group,
            instance,
            str(count),
            protocol,
        ],
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


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}-{max(values):{fmt}}]"


OURS = ("StaticConsumer.consume", "StaticConsumer.consume_batch")


def read_cell(
    bootstrap: str, cell: str, clients: list[str], records: int, passes: int, protocol: str
) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """Produce the cell's topic and read it ``passes`` times with every client (after a warm-up)."""
    compression, size, *count = cell.split(":")
    records = int(count[0]) if count else records
    topic = create_topic(bootstrap, f"clients-{uuid.uuid4().hex[:6]}", PARTITIONS)
    took = produce(bootstrap, topic, records, int(size), compression=compression)
    print(f"{cell}: {records:,} records of {size} B, {compression}, {PARTITIONS} partitions ({took:.1f} s)")
    reads: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
    for number in range(passes + 1):
        order = clients[number % len(clients) :] + clients[: number % len(clients)]
        line = []
        for client in order:
            group = f"r-{uuid.uuid4().hex[:8]}"
            got = child(client, "read", bootstrap, topic, group, "bench-0", records, protocol)
            if got["records"] < records:
                raise RuntimeError(f"{client} read {got['records']} of {records} records")
            if number:
                reads[client].append(got)
            line.append(f"{client} {got['records'] / got['wall_s']:,.0f}/s")
        print(f"  {'warm-up' if number == 0 else f'pass {number}'}: " + ", ".join(line), flush=True)
    return topic, reads


def restart_times(
    bootstrap: str, topic: str, client: str, restarts: int, protocol: str
) -> list[tuple[float, float]]:
    group, out = f"restart-{uuid.uuid4().hex[:8]}", []
    for number in range(restarts + 1):  # the first start joins a new group
        got = child(client, "restart", bootstrap, topic, group, "bench-restart", 1, protocol)
        if number:
            out.append((got["first_at"] - got["started_at"], got["first_at"] - got["constructed_at"]))
    print(f"  restarts of {client}: " + ", ".join(f"{a:.2f} s" for a, _ in out), flush=True)
    return out


def report(cell: str, reads: dict[str, list[dict[str, Any]]]) -> None:
    rates = {c: [r["records"] / r["wall_s"] for r in got] for c, got in reads.items()}
    count = len(next(iter(rates.values())))
    print(f"\n{cell}: median [min-max] of {count} passes")
    print("| client | records/s | CPU us/record |\n|---|---|---|")
    for client, got in reads.items():
        cpu = [r["cpu_s"] / r["records"] * 1e6 for r in got]
        print(f"| {client} | {spread(rates[client], ',.0f')} | {spread(cpu, '.2f')} |")
    ours = [c for c in OURS if c in rates]
    others = [c for c in rates if c not in OURS]
    if ours and others:
        print(f"\n{cell}: records/s of StaticConsumer / the other client's, pass by pass")
        print("| | " + " | ".join(others) + " |\n|---|" + "---|" * len(others))
        for mine in ours:
            ratios = [[a / b for a, b in zip(rates[mine], rates[o], strict=True)] for o in others]
            print(f"| {mine} | " + " | ".join(spread(r, ".2f") for r in ratios) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    cells = "none:100,lz4:100,none:1024:100000,lz4:1024:100000"
    parser.add_argument("--cells", default=cells, help="compression:bytes[:records]")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--clients", default=";".join(CLIENTS), help="names separated by ';'")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 5,000 records, 1 pass, 1 restart")
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    args = parser.parse_args()
    if args.quick:
        args.records, args.passes, args.restarts = 5000, 1, 1
        print("smoke run (--quick): checks the clients run; its numbers mean nothing")
    clients = [name.strip() for name in args.clients.split(";")]
    unknown = set(clients) - set(CLIENTS)
    if unknown:
        parser.error(f"unknown clients {sorted(unknown)}; known: {', '.join(CLIENTS)}")
    if args.protocol == "consumer" and (classic := [c for c in clients if c in CLASSIC_ONLY]):
        parser.error(f"{', '.join(classic)} only speak the classic protocol: leave them out with --clients")
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    restarts: dict[str, list[tuple[float, float]]] = {}
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        header = f"Kafka {cluster.version} ({cluster.backend}); {machine()}; {versions()}"
        print(f"{header}; {args.protocol} protocol")
        for number, cell in enumerate(args.cells.split(",")):
            topic, results[cell] = read_cell(
                bootstrap, cell, clients, args.records, args.passes, args.protocol
            )
            if number == 0 and args.restarts:
                print(f"  {compile_like_pip()}")
                for client in clients:
                    restarts[client] = restart_times(bootstrap, topic, client, args.restarts, args.protocol)
    print(f"\n1-minute load average at the end: {os.getloadavg()[0]:.1f}")
    for cell, reads in results.items():
        report(cell, reads)
    if restarts:
        print(f"\nrestart to first record, s, median [min-max] of {args.restarts}")
        print("| client | from process start | from client creation |")
        print("|---|---|---|")
        for client, times in restarts.items():
            whole, joined = [a for a, _ in times], [b for _, b in times]
            print(f"| {client} | {spread(whole, '.3f')} | {spread(joined, '.3f')} |")


if __name__ == "__main__":
    main()
