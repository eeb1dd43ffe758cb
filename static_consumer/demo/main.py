"""``static-consumer demo``: the rolling-bounce experiment, dynamic members vs static_consumer.

Starts (or uses) a real Apache Kafka broker, runs N consumer processes on a topic fed by a continuous
producer, restarts every member in turn for some rounds — first plain confluent-kafka dynamic members,
then static_consumer members — and prints what each bounce cost, side by side. It writes
``bounce.json`` and a ``bounce.png`` ownership timeline to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from static_consumer.demo.report import table, write_json, write_timeline
from static_consumer.demo.runner import BounceConfig, ModeResult, run_mode
from static_consumer.testing.backends import local_cluster
from static_consumer.testing.processes import ConsumerProcess


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="static-consumer demo", description=__doc__.splitlines()[0])
    p.add_argument("--members", type=int, default=6, help="consumer processes (default 6)")
    p.add_argument("--rounds", type=int, default=2, help="rolling-bounce rounds (default 2)")
    p.add_argument("--partitions", type=int, default=12, help="topic partitions (default 12)")
    p.add_argument("--rate", type=int, default=400, help="records per second produced (default 400)")
    p.add_argument("--modes", default="dynamic,static", help="which modes to run, in order")
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="where to write JSON and PNG")
    return p


@contextlib.contextmanager
def _processes() -> Iterator[list[ConsumerProcess]]:
    started: list[ConsumerProcess] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.kill()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("dynamic", "static") for m in modes):
        print("--modes takes dynamic and/or static", file=sys.stderr)
        return 2
    if args.members < 2 or args.rounds < 1 or args.partitions < args.members:
        print("need --members >= 2, --rounds >= 1 and --partitions >= --members", file=sys.stderr)
        return 2
    cfg = BounceConfig(args.members, args.rounds, args.partitions, args.rate)
    args.out.mkdir(parents=True, exist_ok=True)

    def progress(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    progress("starting a real Apache Kafka broker (KAFKA_BOOTSTRAP_SERVERS to use an existing one)")
    results: list[ModeResult] = []
    with local_cluster(os.environ) as cluster, _processes() as started:
        progress(f"Apache Kafka {cluster.version} via {cluster.backend} at {cluster.bootstrap_servers}")

        def start(spec: dict[str, object], name: str) -> ConsumerProcess:
            proc = ConsumerProcess(spec, name=name)
            started.append(proc)
            return proc

        for mode in modes:
            results.append(run_mode(mode, cluster, start, cfg, progress))
        meta = {"kafka_version": cluster.version, "backend": cluster.backend, **vars(cfg)}
    print()
    print(
        f"Rolling bounce: {cfg.members} members x {cfg.rounds} rounds, {cfg.partitions} partitions, "
        f"{cfg.rate_per_s} records/s produced throughout"
    )
    print(table(results))
    write_json(results, args.out / "bounce.json", meta)
    write_timeline(results, args.out / "bounce.png")
    print(f"\nwrote {args.out / 'bounce.json'} and {args.out / 'bounce.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
