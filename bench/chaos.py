"""The long chaos run: seeded faults against README pod mains (and pool pods) on a 3-node cluster.

    python bench/chaos.py [--seed N] [--minutes 10 | --faults N] [--protocol classic|consumer|both]
                          [--members 6] [--pools 0] [--rate 300] [--partitions 12] [--session-s 45] [--lab]
                          [--kinds kill,term,...] [--coordinator-share 0.5] [--broker KEY=VALUE]
                          [--out DIR]
    make chaos CHAOS_ARGS="--seed 7 --protocol consumer"

One 3-node Apache Kafka cluster (stock group settings, KRaft's StandardAuthorizer; ``--lab``: the lab
profile, whose lower minimums allow a KIP-848 session under 45 s) for every protocol asked; per protocol
one run of ``static_consumer_lab.chaos.run`` with the same seed, its evidence and ``figures.json`` in
``OUT/<protocol>``, its figures printed (docs/chaos.md explains them). Exits 1 when an invariant failed,
and prints the command that replays the run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

from static_consumer_lab.brokers.authorizer import start_acl_cluster
from static_consumer_lab.chaos.invariants import Limits
from static_consumer_lab.chaos.report import figures, render
from static_consumer_lab.chaos.run import STOCK_SESSION_S, ChaosConfig, run
from static_consumer_lab.chaos.schedule import KINDS


def _args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: drawn)")
    parser.add_argument("--minutes", type=float, default=10.0, help="of faults, per protocol")
    parser.add_argument("--faults", type=int, default=None, help="exactly this many faults instead")
    parser.add_argument("--protocol", choices=["classic", "consumer", "both"], default="both")
    parser.add_argument("--members", type=int, default=6, help="README pod mains")
    parser.add_argument("--pools", type=int, default=0, help="pool pods of --processes workers each")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--rate", type=int, default=300, help="records/s produced")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--session-s", type=float, default=STOCK_SESSION_S)
    parser.add_argument("--grace-s", type=float, default=15.0)
    parser.add_argument("--lag-age-s", type=float, default=Limits.lag_age_s)
    parser.add_argument("--lag-share", type=float, default=Limits.lag_fraction)
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"fault kinds, of {','.join(KINDS)}")
    parser.add_argument("--coordinator-share", type=float, default=0.5, help="of the broker faults")
    parser.add_argument("--lab", action="store_true", help="the lab broker profile (sessions under 45 s)")
    parser.add_argument("--broker", action="append", default=[], metavar="KEY=VALUE", help="broker config")
    parser.add_argument("--out", type=Path, default=None)
    return parser.parse_args(argv)


def replay(args: argparse.Namespace, seed: int) -> str:
    """The command that runs the same schedule again."""
    flags = [f"--seed {seed}", f"--minutes {args.minutes:g}", f"--protocol {args.protocol}"]
    flags += [f"--faults {args.faults}"] if args.faults is not None else []
    flags += [f"--members {args.members}", f"--pools {args.pools}", f"--rate {args.rate}"]
    flags += [f"--partitions {args.partitions}", f"--session-s {args.session_s:g}", f"--kinds {args.kinds}"]
    flags += [f"--grace-s {args.grace_s:g}", f"--coordinator-share {args.coordinator_share:g}"]
    flags += [f"--broker {item}" for item in args.broker]
    return "python bench/chaos.py " + " ".join(flags) + (" --lab" if args.lab else "")


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    out = args.out or Path(tempfile.mkdtemp(prefix="static-consumer-chaos-"))
    protocols = ["classic", "consumer"] if args.protocol == "both" else [args.protocol]
    limits = Limits(lag_age_s=args.lag_age_s, lag_fraction=args.lag_share)
    print(f"seed {seed}; evidence in {out}; {os.cpu_count()} cores, {platform.python_version()}")
    failed = False
    broker = dict(item.split("=", 1) for item in args.broker)
    acl = start_acl_cluster(3, profile="lab" if args.lab else "stock", extra_config=broker)
    try:
        for protocol in protocols:
            config = ChaosConfig(
                seed=seed,
                protocol=protocol,
                members=args.members,
                pools=args.pools,
                processes=args.processes,
                minutes=args.minutes,
                faults=args.faults,
                rate=args.rate,
                partitions=args.partitions,
                session_s=args.session_s,
                grace_s=args.grace_s,
                kinds=tuple(args.kinds.split(",")),
                coordinator_share=args.coordinator_share,
            )
            began = time.time()
            evidence = run(acl, config, out / protocol)
            fig = figures(evidence, limits)
            fig["run"] = {
                "command": " ".join(sys.argv),
                "seed": seed,
                "date": time.strftime("%Y-%m-%d", time.localtime(began)),
                "kafka": acl.cluster.version,
                "load_1min_at_end": os.getloadavg()[0],
                "wall_s": round(time.time() - began, 1),
            }
            (out / protocol / "figures.json").write_text(json.dumps(fig, indent=1))
            print(f"== {protocol}\n{render(fig)}")
            failed = failed or any(fig["invariants"].values())
    finally:
        acl.cluster.stop()
    if failed:
        print(f"an invariant failed; replay with: {replay(args, seed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
