"""What the capability gate costs a restart, option by option, in fresh processes (imports included).

    python bench/measure_restart_options.py [--runs 5]

Probe options, each timed in a new process from after the settings are built to the capabilities in
hand: ``kafka-python`` (the probe before: librdkafka's login check, then kafka-python's ApiVersions,
metadata and DescribeConfigs, as ``probe(settings, broker_version=True)`` still does for the ``check``
command) and ``librdkafka`` (the consumer's probe now: the login check keeps librdkafka's own
ApiVersions, its DescribeConfigs gives the group configs). Then restart to the first record of a static
member (a new process rejoining with its instance id, timed from its start): the gate then the client, as
StaticConsumer does (``serial``), against the client built and connecting while the gate runs,
subscribed only once the gate passed (``overlap``: the "probe while the client connects" option). The
options run interleaved, ``--runs`` times each; median [min-max]. The broker is KAFKA_BOOTSTRAP_SERVERS
if set, else the embedded one.
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

CHILD = r"""
import json, sys, time
started = time.monotonic()
what, bootstrap, topic, group = sys.argv[1:5]
from static_consumer._core.modes import client_config
from static_consumer import ConsumerSettings
from static_consumer._kafka.probe import probe
settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group, topics=(topic,),
                            instance_id="options-0", session_timeout_ms=30000)
built = time.monotonic()
if what in ("kafka-python", "librdkafka"):
    caps = probe(settings, broker_version=what == "kafka-python")
    print(json.dumps({"probe_s": time.monotonic() - built, "join_group": caps.join_group_max_version}))
    sys.exit(0)
from confluent_kafka import Consumer
config = dict(client_config(settings, "options-0"))
if what == "serial":
    probe(settings)
    consumer = Consumer(config)
else:  # overlap: the client connects (bootstrap, coordinator) while the gate runs; no JoinGroup before it
    consumer = Consumer(config)
    probe(settings)
consumer.subscribe([topic])
while True:
    msg = consumer.poll(1.0)
    if msg is not None and msg.error() is None:
        break
first = time.monotonic()
consumer.commit(message=msg, asynchronous=False)
consumer.close()
print(json.dumps({"first_s": first - started}))
"""


def child(*args: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(__file__))
    from _bench import compile_like_pip, machine, produce

    from static_consumer_lab.brokers import create_topic, local_cluster

    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        print(f"Kafka {cluster.version} ({cluster.backend}); {machine()}; {compile_like_pip()}")
        topic = create_topic(bootstrap, f"options-{uuid.uuid4().hex[:6]}", 6)
        produce(bootstrap, topic, 10_000, 100)
        groups = {mode: f"options-{mode}-{uuid.uuid4().hex[:6]}" for mode in ("serial", "overlap")}
        for mode, group in groups.items():
            child(mode, bootstrap, topic, group)  # the first start joins a new group
        probes: dict[str, list[float]] = {"kafka-python": [], "librdkafka": []}
        restarts: dict[str, list[float]] = {"serial": [], "overlap": []}
        for number in range(args.runs):
            for option in probes:
                probes[option].append(child(option, bootstrap, topic, "options-probe")["probe_s"])
            for mode in restarts:
                restarts[mode].append(child(mode, bootstrap, topic, groups[mode])["first_s"])
            time.sleep(0.1)
            print(
                f"  run {number + 1}: "
                + ", ".join(f"probe {o} {v[-1]:.3f} s" for o, v in probes.items())
                + ", "
                + ", ".join(f"restart {m} {v[-1]:.3f} s" for m, v in restarts.items()),
                flush=True,
            )
    print(f"\n1-minute load average at the end: {os.getloadavg()[0]:.1f}")
    print("| option | s, median [min-max] |\n|---|---|")
    for option, values in probes.items():
        print(f"| probe through {option} | {spread(values)} |")
    for mode, values in restarts.items():
        print(f"| restart to first record, {mode} | {spread(values)} |")


if __name__ == "__main__":
    main()
