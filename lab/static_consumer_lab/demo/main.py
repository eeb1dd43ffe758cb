"""static-consumer demo: what a rolling deploy costs under each group strategy, side by side.

Starts (or uses) a real Apache Kafka broker and runs one consumer group per strategy on one topic fed
by one producer: dynamic members with the eager range assignor, with cooperative-sticky, under the
KIP-848 consumer protocol, and static_consumer members under the classic and the consumer protocol.
Every member of every group is restarted at the same moments; the table says what that cost each
group, computed from raw per-member events saved under ``--out``/events (``--recount`` recomputes it
from those files alone). Writes ``bounce.json`` and ``bounce.png`` to ``--out``.

The default run (four strategies, 6 members, one round) took 64 s on 2 cores in one run, broker
start-up included. The full set adds eager dynamic members, a second round and a hard-kill round:
``--strategies all --rounds 2 --kill`` (hard kills wait for the session timeout, so that round adds up
to members x session timeout).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from static_consumer_lab.demo.metrics import differences
from static_consumer_lab.demo.strategies import ALL_STRATEGIES, BY_NAME, DEFAULT_STRATEGIES, DemoConfig

if TYPE_CHECKING:
    from static_consumer_lab.demo.runner import Outcome

# (flag, DemoConfig field, type, help): the knobs shown in the report header.
_KNOBS: tuple[tuple[str, str, type, str], ...] = (
    ("--members", "members", int, "members per group"),
    ("--rounds", "rounds", int, "graceful rolling rounds"),
    ("--rate", "rate_per_s", int, "records/s produced"),
    (
        "--restart-delay-s",
        "restart_delay_s",
        float,
        "how long a pod takes to come back: from the old process's exit to the new one's consumer start",
    ),
    ("--processing-ms", "processing_ms", float, "processing time per record"),
    (
        "--state-warmup-s",
        "state_warmup_s",
        float,
        "seconds a member spends per partition it receives without holding its state (a local store or "
        "cache rebuild; 0: stateless)",
    ),
    (
        "--session-timeout-s",
        "session_timeout_s",
        float,
        "with --lab: every group's session timeout, classic and KIP-848 (default 20)",
    ),
)


def parser() -> argparse.ArgumentParser:
    d = DemoConfig()
    p = argparse.ArgumentParser(
        prog="static-consumer demo",
        description=(__doc__ or "").split("\n\n")[0],
        epilog=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--strategies",
        default=",".join(DEFAULT_STRATEGIES),
        help=f"any of {', '.join(BY_NAME)}, or all (default {','.join(DEFAULT_STRATEGIES)})",
    )
    for flag, field, kind, text in _KNOBS:
        default = getattr(d, field)
        p.add_argument(flag, dest=field, type=kind, default=default, help=f"{text} (default {default})")
    p.add_argument("--partitions", type=int, help="topic partitions (default 2 x --members)")
    p.add_argument(
        "--lab",
        action="store_true",
        help="run on a lab broker (lowered group minimums: --session-timeout-s and 500 ms heartbeats for "
        "every group, KIP-848 included, which no stock or hosted broker allows; the header says LAB)",
    )
    p.add_argument(
        "--kill", action="store_true", help="add a round that SIGKILLs each member, then restarts it"
    )
    p.add_argument("--out", type=Path, default=Path("out/demo"), help="where to write (default out/demo)")
    p.add_argument("--recount", type=Path, metavar="DIR", help="recompute the table from DIR's saved events")
    return p


def _recount(directory: Path) -> int:
    import json

    from static_consumer_lab.demo.metrics import Metrics
    from static_consumer_lab.demo.recount import recount_dir
    from static_consumer_lab.demo.report import header, table

    try:
        run, metrics = recount_dir(directory)
    except (FileNotFoundError, ValueError) as exc:
        print(f"static-consumer demo --recount: {exc}", file=sys.stderr)
        return 2
    print(header(run))
    print()
    print(table(metrics))
    report = (
        directory / "bounce.json"
        if (directory / "bounce.json").exists()
        else directory.parent / "bounce.json"
    )
    if report.exists():
        saved = json.loads(report.read_text())["strategies"]
        diffs = {
            name: differences(m, Metrics.from_json(saved[name]))
            for name, m in metrics.items()
            if name in saved
        }
        bad = {name: d for name, d in diffs.items() if d}
        print(f"\n{report}: " + ("the run's own tally agrees" if not bad else f"DISAGREES: {bad}"))
        return 1 if bad else 0
    return 0


def config(args: argparse.Namespace) -> DemoConfig:
    """The run's knobs from the parsed command line; ValueError says what to change."""
    return DemoConfig(
        **{field: getattr(args, field) for _flag, field, _kind, _text in _KNOBS},
        partitions=args.partitions if args.partitions is not None else 2 * args.members,
        kill=args.kill,
        lab=args.lab,
        strategies=ALL_STRATEGIES
        if args.strategies == "all"
        else tuple(s.strip() for s in args.strategies.split(",") if s.strip()),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.recount is not None:
        return _recount(args.recount)
    try:
        cfg = config(args)
    except ValueError as exc:
        print(f"static-consumer demo: {exc}", file=sys.stderr)
        return 2
    return run_and_report(cfg, args.out)


def run_and_report(cfg: DemoConfig, out: Path) -> int:
    from static_consumer_lab.backends import local_cluster
    from static_consumer_lab.demo.rundata import prepare
    from static_consumer_lab.demo.runner import run_demo
    from static_consumer_lab.jvm import Profile

    def progress(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    try:
        events_dir = prepare(out / "events")
    except ValueError as exc:
        print(f"static-consumer demo: {exc}", file=sys.stderr)
        return 2
    profile: Profile = "lab" if cfg.lab else "stock"
    progress(
        f"starting a real Apache Kafka broker, {profile} profile "
        "(KAFKA_BOOTSTRAP_SERVERS to use an existing one)"
    )
    # Stock by default: every protocol's session and heartbeat as a hosted service has them. --lab: lowered
    # group minimums, so KIP-848 groups can take --session-timeout-s and 500 ms heartbeats as group configs.
    with local_cluster(os.environ, profile=profile) as cluster:
        progress(f"Apache Kafka {cluster.version} via {cluster.backend} at {cluster.bootstrap_servers}")
        outcome = run_demo(cluster, cfg, events_dir, progress)
    return report(outcome, out)


def report(outcome: Outcome, out: Path) -> int:
    """Recount the run from its saved events, write ``bounce.json`` and ``bounce.png`` to ``out`` and
    print the table; 1 when the recount disagrees with the run's own tally."""
    from static_consumer_lab.demo import plot
    from static_consumer_lab.demo.recount import recount_dir
    from static_consumer_lab.demo.report import header, table, write_json

    _, recounted = recount_dir(outcome.events_dir)
    diffs = {name: differences(outcome.tally[name], recounted[name]) for name in outcome.tally}
    write_json(out / "bounce.json", outcome.run, outcome.tally, diffs)
    plot.write(outcome.run, outcome.tally, out / "bounce.png")
    print()
    print(header(outcome.run))
    print()
    print(table(outcome.tally))
    bad = {name: d for name, d in diffs.items() if d}
    verdict = "agrees with the table" if not bad else f"DISAGREES with the table: {bad}"
    print(f"\nrecount from {outcome.events_dir} (raw per-member events) {verdict}")
    print(f"wrote {out / 'bounce.json'}, {out / 'bounce.png'} and {outcome.events_dir}/")
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
