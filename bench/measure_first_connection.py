"""How long a fresh librdkafka consumer waits before it can join, by ``reconnect.backoff.ms``.

    python bench/measure_first_connection.py [--processes 7] [--backoffs 100,50,20,10]

librdkafka closes a consumer's bootstrap connection once the metadata names the brokers, and holds back
its first connection to those brokers by its sparse-connection interval (half of ``reconnect.backoff.ms``,
at least about 10 ms; "Not selecting any broker for cluster connection: still suppressed for 47ms" in its
debug log). The coordinator lookup waits for that connection, and the JoinGroup (or the KIP-848
heartbeat) for the coordinator's. Each value runs in ``--processes`` fresh processes, interleaved; each
process builds a raw confluent-kafka consumer, subscribes to a 6-partition topic, and reports, from the
consumer's construction, when librdkafka logged its connection to the group coordinator
(``GroupCoordinator/<id>: Connected``). Prints the median and every process's time per value (a process
waits all of the interval or none of it). The broker is KAFKA_BOOTSTRAP_SERVERS if set, else the
embedded one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid

CHILD = r"""
import json, sys, time
from confluent_kafka import Consumer
bootstrap, protocol, backoff = sys.argv[1], sys.argv[2], int(sys.argv[3])
seen = {}
class Log:
    def log(self, level, fmt, *args):
        line = fmt % args if args else fmt
        if "GroupCoordinator" in line and ": Connected to" in line and "coordinator" not in seen:
            seen["coordinator"] = time.monotonic()
started = time.monotonic()
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "first-connection-" + sys.argv[4],
                     "group.protocol": protocol, "reconnect.backoff.ms": backoff, "debug": "broker",
                     "logger": Log()})
consumer.subscribe([sys.argv[5]])
deadline = started + 10.0
while "coordinator" not in seen and time.monotonic() < deadline:
    consumer.poll(0.01)
consumer.close()
print(json.dumps({"coordinator_ms": (seen["coordinator"] - started) * 1000 if seen else None}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=7)
    parser.add_argument("--backoffs", default="100,50,20,10")
    parser.add_argument("--protocols", default="classic,consumer")
    args = parser.parse_args()
    from static_consumer_lab.brokers import create_topic, local_cluster

    backoffs = [int(b) for b in args.backoffs.split(",")]
    protocols = args.protocols.split(",")
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = create_topic(bootstrap, f"first-connection-{uuid.uuid4().hex[:6]}", 6)
        print(f"Kafka {cluster.version} ({cluster.backend}); load {os.getloadavg()[0]:.2f} at the start")
        got: dict[tuple[str, int], list[float]] = {(p, b): [] for p in protocols for b in backoffs}
        for _ in range(args.processes):
            for protocol in protocols:
                for backoff in backoffs:
                    out = subprocess.run(
                        [
                            sys.executable,
                            "-c",
                            CHILD,
                            bootstrap,
                            protocol,
                            str(backoff),
                            uuid.uuid4().hex[:8],
                            topic,
                        ],
                        capture_output=True,
                        text=True,
                        timeout=60,
                        check=True,
                    )
                    ms = json.loads(out.stdout.strip().splitlines()[-1])["coordinator_ms"]
                    if ms is None:
                        raise SystemExit(f"no coordinator connection within 10 s ({protocol}, {backoff} ms)")
                    got[(protocol, backoff)].append(ms)
        print(f"load {os.getloadavg()[0]:.2f} at the end")
    print("\nms from the consumer's construction to its group coordinator connection: median of")
    print(f"{args.processes} fresh processes (each process's, sorted)\n")
    print("| reconnect.backoff.ms | " + " | ".join(protocols) + " |")
    print("|---|" + "---|" * len(protocols))
    for backoff in backoffs:
        cells = []
        for protocol in protocols:
            values = got[(protocol, backoff)]
            every = ", ".join(f"{v:.0f}" for v in sorted(values))
            cells.append(f"{statistics.median(values):.1f} ({every})")
        print(f"| {backoff} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
