"""A member paused past its session timeout: records of partitions it no longer owns, with and without the
stall guard, side by side in one run.

    python bench/bench_stall.py [--runs 3] [--protocols classic consumer] [--session-ms 6000]
                                [--pause-s 12] [--members 3] [--partitions 6] [--rate 200]

Per protocol, the same scenario runs with two consumers of the same librdkafka configuration:

- ``librdkafka``: a plain confluent-kafka consumer, configured from ConsumerSettings exactly as
  StaticConsumer configures librdkafka (static member, manual commits after each batch): what the
  application gets without the guard, and what StaticConsumer did before it;
- ``static``: StaticConsumer with its stall guard.

A group of ``--members`` static members reads a topic fed at ``--rate`` records/s in batches of at most
100, committing after each. The last member is frozen (SIGSTOP) for ``--pause-s`` and resumed (SIGCONT).
Per run: *stale* records (handed out after SIGCONT for a partition another member's callbacks said it
owned then), duplicates across the group, records missing below the high watermark, committed offsets
that went backwards (sampled every 0.25 s), how long into the pause the others took over, SIGCONT to the
victim's loss callback, and the guard's verdict. Refused commits do not end the consumers (at-least-once:
their records come again).

The broker comes from KAFKA_BOOTSTRAP_SERVERS, else the JVM harness's lab profile (docs/testing.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from static_consumer._core.modes import client_config
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers import create_topic, local_cluster
from static_consumer_lab.brokers.kafka_ops import committed_offsets, high_watermarks, metadata
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.pauses import (
    pause,
    refused_batches,
    sampling_commits,
    stale_records,
    went_backwards,
)
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

BATCH = 100
VARIANTS = ("librdkafka", "static")


@dataclass(frozen=True)
class Run:
    stale: int
    duplicates: int
    missing: int
    backwards: int
    takeover_s: float | None
    lost_ms: float | None
    verdict: str
    dropped: int | None
    check_ms: float | None
    refused: int


def _spec_factory(
    variant: str, protocol: str, bootstrap: str, group_id: str, topic: str, session_ms: int, process_s: float
) -> Callable[[str], dict[str, Any]]:
    settings: dict[str, Any] = {"protocol": protocol}
    if protocol == "classic":
        settings.update(session_timeout_ms=session_ms, heartbeat_interval_ms=500)
    extra = {"batch": BATCH, "process_s": process_s}

    def static(name: str) -> dict[str, Any]:
        return {**static_spec(bootstrap, group_id, [topic], name, **settings), **extra}

    def plain(name: str) -> dict[str, Any]:
        config = client_config(
            ConsumerSettings(bootstrap_servers=bootstrap, group_id=group_id, topics=(topic,), **settings),
            name,
        )
        return {"mode": "confluent", "topics": [topic], "config": config, **extra}

    return static if variant == "static" else plain


def run_once(bootstrap: str, args: argparse.Namespace, protocol: str, variant: str) -> Run:
    suffix = uuid.uuid4().hex[:8]
    topic = create_topic(bootstrap, f"bench-stall-{suffix}", args.partitions)
    group_id = f"bench-stall-{suffix}"
    spec = _spec_factory(variant, protocol, bootstrap, group_id, topic, args.session_ms, args.process_s)
    group = Group(
        ConsumerProcess,
        bootstrap,
        group_id,
        topic,
        args.partitions,
        protocol=protocol,
        session_ms=args.session_ms,
        spec_factory=spec,
        lab=True,
    )
    names = [f"app-{k}" for k in range(args.members)]
    try:
        with (
            SteadyProducer(bootstrap, topic, args.rate, max_s=3600.0) as producer,
            sampling_commits(bootstrap, group_id, topic, args.partitions) as samples,
        ):
            group.form(names)
            victim = group.members[names[-1]]
            others = [group.members[n] for n in names[:-1]]
            victim.wait_for_kind("committed", timeout_s=60, after=time.time())
            if args.process_s:  # the residual window: frozen while processing a batch handed out
                victim.wait_for_kind("records", timeout_s=60, after=time.time())
                time.sleep(args.process_s / 3)
            frozen, thawed = pause(victim, args.pause_s)
            taken = [
                e["ts"] - frozen for o in others for e in o.events("assigned") if frozen < e["ts"] < thawed
            ]
            if taken:  # the victim's partitions moved: wait for it to hear of the loss
                victim.wait_for(lambda e: e["kind"] == "lost" and e["ts"] > thawed, 30, "the loss")
            lost = [e["ts"] - thawed for e in victim.events("lost") if e["ts"] > thawed]
            group.wait_stable(timeout_s=120, settle_s=1.0)
            time.sleep(2.0)
            producer.stop()
        marks = high_watermarks(bootstrap, topic, args.partitions)
        everything = {(topic, p, o) for p, high in marks.items() for o in range(high)}
        wait_until(lambda: set(group.consumed()) >= everything, 120, "every record consumed", poll_s=0.5)
        wait_until(lambda: group.committed() == marks, 60, "commits up to the high watermarks", poll_s=0.5)
        consumed: Counter[tuple[str, int, int]] = group.consumed()
        after = [e for e in victim.events("stalled") if e["ts"] > thawed]
        return Run(
            stale=len(stale_records(victim, others, thawed)),
            duplicates=sum(n - 1 for n in consumed.values()),
            missing=len(everything - set(consumed)),
            backwards=len(
                went_backwards([*samples, committed_offsets(bootstrap, group_id, topic, args.partitions)])
            ),
            takeover_s=min(taken) if taken else None,
            lost_ms=lost[0] * 1000 if lost else None,
            verdict=after[0]["verdict"] if after else "-",
            dropped=after[0]["dropped"] if after else None,
            check_ms=after[0]["waited_s"] * 1000 if after else None,
            refused=len(refused_batches(victim)),
        )
    finally:
        for proc in group.all_processes():
            proc.kill()


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{min(values):.1f}-{max(values):.1f} (median {statistics.median(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--protocols", nargs="+", default=["classic", "consumer"])
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--pause-s", type=float, default=12.0)
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument(
        "--process-s",
        type=float,
        default=0.0,
        help="seconds each batch takes to process; when set, the freeze lands a third into processing",
    )
    args = parser.parse_args()
    # The lab broker: KIP-848 groups get the --session-ms group session and 500 ms heartbeats, below the
    # stock minimums (45 s, 5 s). What the pause exposes depends on the pause outlasting the session, not
    # on its length; numbers from this bench are "lab" numbers.
    with local_cluster(os.environ, profile="lab") as cluster:
        bootstrap = cluster.bootstrap_servers
        metadata(bootstrap, timeout_s=30)
        setup = f"lab broker; pause {args.pause_s} s, session {args.session_ms} ms, heartbeats 500 ms"
        if args.process_s:
            setup += f", frozen {args.process_s / 3:.2f} s into processing a batch ({args.process_s} s)"
        group = f"{args.members} members, {args.partitions} partitions, {args.rate} records/s"
        print(f"{setup}, {group}, batches <= {BATCH}; broker at {bootstrap}")
        columns = ["stale", "duplicates", "missing", "offsets back", "taken over (s)", "SIGCONT -> lost (ms)"]
        columns += ["verdict", "dropped", "check (ms)", "refused commits"]
        print("| protocol | consumer | run | " + " | ".join(columns) + " |")
        print("|---" * (len(columns) + 3) + "|")
        results: dict[tuple[str, str], list[Run]] = {}
        for protocol in args.protocols:
            for k in range(args.runs):
                for variant in VARIANTS:  # interleaved, so load on the shared host hits both alike
                    r = run_once(bootstrap, args, protocol, variant)
                    results.setdefault((protocol, variant), []).append(r)
                    print(
                        f"| {protocol} | {variant} | {k + 1} | {r.stale} | {r.duplicates} | {r.missing} "
                        f"| {r.backwards} | {_fmt(r.takeover_s)} | {_fmt(r.lost_ms, 0)} | {r.verdict} "
                        f"| {_fmt(r.dropped, 0)} | {_fmt(r.check_ms)} | {r.refused} |",
                        flush=True,
                    )
        print("\nsummary (min-max over runs)")
        columns = ["stale per run", "runs with stale", "duplicates", "missing", "offsets back"]
        print("| protocol | consumer | runs | " + " | ".join(columns) + " |")
        print("|---|---|---|---|---|---|---|---|")
        for (protocol, variant), runs in results.items():
            stale = [r.stale for r in runs]
            print(
                f"| {protocol} | {variant} | {len(runs)} | {', '.join(map(str, stale))} | "
                f"{sum(1 for s in stale if s)}/{len(runs)} | {_spread([r.duplicates for r in runs])} | "
                f"{sum(r.missing for r in runs)} | {sum(r.backwards for r in runs)} |"
            )


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


if __name__ == "__main__":
    main()
