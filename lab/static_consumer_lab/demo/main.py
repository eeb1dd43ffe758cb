"""static-consumer demo: what a rolling deploy costs under each group strategy, side by side.

Starts (or uses) a real Apache Kafka broker with Apache Kafka's default group settings (``--lab``: lowered
minimums, labelled so) and runs one consumer group per strategy on one topic fed by one producer:
dynamic members with the eager range assignor, with cooperative-sticky, under the KIP-848 consumer
protocol, and static_consumer members under the classic and the consumer protocol. Every group's
members are restarted in turn from the same moment, each group at its own pace; the table says what that
cost each group over its own bounce window, computed from raw per-member events saved under
``--out``/events (``--recount`` recomputes it from those files alone). Writes ``bounce.json`` and
``bounce.png`` to ``--out``.

The default run (four strategies, 6 members, one round, stock broker) took 93 s on 2 cores in one run,
broker start-up included. The full set adds eager dynamic members, a second round and a hard-kill round:
``--strategies all --rounds 2 --kill`` (hard kills wait for the session timeout, 45 s on a stock broker,
so that round adds up to members x 45 s). ``--sweep DIR`` runs the demo over a grid of its options
(docs/rolling-deploys.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from static_consumer_lab.demo.metrics import differences
from static_consumer_lab.demo.strategies import ALL_STRATEGIES, BY_NAME, DEFAULT_STRATEGIES, DemoConfig
from static_consumer_lab.demo.sweep import Cell, grid, summary, sweep

if TYPE_CHECKING:
    from static_consumer_lab.brokers.jvm import Profile
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
        shown = "" if default is None else f" (default {default})"  # None: the text says what it means
        p.add_argument(flag, dest=field, type=kind, default=default, help=text + shown)
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
    sweep = p.add_argument_group(
        "sweep",
        "the long sweep behind docs/rolling-deploys.md's decision guide (static_consumer_lab.demo.sweep)",
    )
    sweep.add_argument(
        "--sweep",
        type=Path,
        metavar="DIR",
        help="run the grid below (--runs each; the runs DIR already holds are kept) and print medians",
    )
    sweep.add_argument("--sweep-members", default="6,24", help="group sizes (default 6,24)")
    sweep.add_argument("--sweep-delays", default="0,10,30,60", help="restart delays, s (default 0,10,30,60)")
    sweep.add_argument("--sweep-warmups", default="0,1", help="state warm-ups, s (0: stateless; default 0,1)")
    sweep.add_argument("--sweep-restarts", default="clean,hard", help="clean and/or hard (default both)")
    sweep.add_argument("--runs", type=int, default=3, help="runs per cell (default 3)")
    sweep.add_argument(
        "--budget-min",
        type=float,
        default=15.0,
        help="start no run that would end later than this (default 15; 0: only print DIR's summary)",
    )
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
        cells = None if args.sweep is None else _cells(args)
    except ValueError as exc:
        print(f"static-consumer demo: {exc}", file=sys.stderr)
        return 2
    if cells is not None:
        return run_sweep(cfg, cells, args.sweep, args.runs, 60.0 * args.budget_min)
    return run_and_report(cfg, args.out)


def _cells(args: argparse.Namespace) -> list[Cell]:
    def numbers(text: str, kind: type) -> list[Any]:
        return [kind(word) for word in text.split(",") if word.strip()]

    return grid(
        numbers(args.sweep_members, int),
        numbers(args.sweep_delays, float),
        numbers(args.sweep_warmups, float),
        [word.strip() for word in args.sweep_restarts.split(",") if word.strip()],
    )


def _progress(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def run_sweep(base: DemoConfig, cells: list[Cell], out: Path, runs: int, budget_s: float) -> int:
    """Run the sweep's missing runs on one broker within ``budget_s``, then print the summary."""
    from static_consumer_lab.brokers.backends import local_cluster
    from static_consumer_lab.demo.recount import recount_dir
    from static_consumer_lab.demo.report import write_json
    from static_consumer_lab.demo.rundata import prepare
    from static_consumer_lab.demo.runner import run_demo

    unfinished: list[str] = []
    if budget_s > 0:
        began = time.monotonic()
        profile: Profile = "lab" if base.lab else "stock"
        _progress(f"starting a real Apache Kafka broker, {profile} profile")
        with local_cluster(os.environ, profile=profile) as cluster:

            def run_one(cfg: DemoConfig, target: Path) -> None:
                outcome = run_demo(cluster, cfg, prepare(target / "events"), lambda _line: None)
                _, recounted = recount_dir(outcome.events_dir)
                diffs = {n: differences(outcome.tally[n], recounted[n]) for n in outcome.tally}
                write_json(target / "bounce.json", outcome.run, outcome.tally, diffs)
                line = ", ".join(
                    f"{n} p99 {m.latency_p99_ms} ms unowned {m.unowned_s:.1f} s rebuilds {m.rebuilds}"
                    for n, m in outcome.tally.items()
                )
                _progress(
                    f"  {outcome.run.meta['wall_s']} s: {line}"
                    + (f"; RECOUNT DIFFERS: {diffs}" if any(diffs.values()) else "")
                )

            left = budget_s - (time.monotonic() - began)
            unfinished = sweep(out, cells, base, runs, left, run_one, _progress)
    print()
    print(summary(out, cells))
    if unfinished:
        print(f"\nnot finished within the budget (run the same command again): {', '.join(unfinished)}")
    return 0


def run_and_report(cfg: DemoConfig, out: Path) -> int:
    from static_consumer_lab.brokers.backends import local_cluster
    from static_consumer_lab.demo.rundata import prepare
    from static_consumer_lab.demo.runner import run_demo

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
