"""Time until a killed static member's partitions are owned again: remove-members vs session-timeout expiry.

    python bench/bench_remove_members.py [--members 3] [--partitions 6] [--session-timeout-ms 45000]

Starts real consumers (librdkafka configured exactly as StaticConsumer configures it, from
ConsumerSettings), SIGKILLs one, then either runs ``static-consumer remove-members`` (the console
script, in a subprocess, as an operator would) or waits. Prints the seconds from the command (or from
the kill) until the survivors own every partition again, and whether remove-members stayed under 5 s.

The broker comes from KAFKA_BOOTSTRAP_SERVERS, else the harness (Docker or the JVM, see docs/testing.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from static_consumer._core.modes import client_config
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers import create_topic, local_cluster
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import confluent_spec

BOUND_S = 5.0


def run(bootstrap: str, args: argparse.Namespace, remove: bool) -> tuple[float, float | None]:
    """``(seconds until re-owned, seconds the command took or None)`` for one kill."""
    suffix = uuid.uuid4().hex[:8]
    topic = create_topic(bootstrap, f"bench-remove-{suffix}", args.partitions)
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id=f"bench-remove-{suffix}",
        session_timeout_ms=args.session_timeout_ms,
    )
    members = []
    try:
        for k in range(args.members):
            config = client_config(settings, f"consumer-{k}")
            spec = confluent_spec(bootstrap, settings.group_id, [topic], **config)
            members.append(ConsumerProcess(spec, name=f"consumer-{k}"))
        share = args.partitions // args.members
        wait_until(lambda: all(len(m.assignment()) >= share for m in members), 120, "an even split")
        victim, survivors = members[-1], members[:-1]
        victim.kill()
        began = time.monotonic()
        command_s = None
        if remove:
            script = Path(sys.executable).with_name("static-consumer")
            cmd = [
                str(script),
                "remove-members",
                settings.group_id,
                "--instance-id",
                f"consumer-{args.members - 1}",
            ]
            env = {**os.environ, "STATIC_CONSUMER_BOOTSTRAP_SERVERS": bootstrap}
            subprocess.run(cmd, env=env, check=True, timeout=60, capture_output=True)
            command_s = time.monotonic() - began
        limit = args.session_timeout_ms / 1000 * 2 + 30
        wait_until(
            lambda: sum(len(m.assignment()) for m in survivors) == args.partitions,
            limit,
            "re-ownership",
            0.02,
        )
        return time.monotonic() - began, command_s
    finally:
        for m in members:
            m.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--session-timeout-ms", type=int, default=45_000, help="the library's default")
    parser.add_argument("--repeats", type=int, default=3, help="remove-members runs (expiry runs once)")
    args = parser.parse_args()
    with local_cluster(os.environ) as cluster:
        bootstrap = cluster.bootstrap_servers
        heartbeat = client_config(
            ConsumerSettings(
                bootstrap_servers=bootstrap, group_id="x", session_timeout_ms=args.session_timeout_ms
            ),
            None,
        )["heartbeat.interval.ms"]
        print(
            f"{args.members} static members, {args.partitions} partitions, session.timeout.ms="
            f"{args.session_timeout_ms}, heartbeat.interval.ms={heartbeat}; broker {bootstrap}"
        )
        removed = [run(bootstrap, args, remove=True) for _ in range(args.repeats)]
        expired, _ = run(bootstrap, args, remove=False)
    best = min(t for t, _ in removed)
    worst = max(t for t, _ in removed)
    commands = ", ".join(f"{c:.2f}" for _, c in removed if c is not None)
    print(f"  {'how the dead member goes':<38} {'re-owned after (s)':>20}")
    spread = f"{best:.2f} - {worst:.2f}"
    print(f"  {'static-consumer remove-members':<38} {spread:>20}  (the command took {commands} s)")
    print(f"  {'session-timeout expiry (no command)':<38} {expired:>20.2f}")
    verdict = "yes" if worst < BOUND_S else "no"
    print(f"remove-members under {BOUND_S:.0f} s: {verdict}; {expired / worst:.0f}x sooner than expiry")


if __name__ == "__main__":
    main()
