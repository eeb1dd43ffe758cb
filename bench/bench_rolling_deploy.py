"""The rolling-deploy demo repeated: each configuration N times on one broker, median and spread.

    python bench/bench_rolling_deploy.py --repeats 3 --strategies all \\
        --config members=6,restart_delay_s=0 --config members=6,restart_delay_s=10

Each ``--config`` sets :class:`static_consumer.demo.strategies.DemoConfig` fields (``partitions``
defaults to 2 x ``members``); each run is one ``static-consumer demo`` bounce, its events and table
saved under ``--out/<config>/<n>/`` (``static-consumer demo --recount`` reads any of them back). Runs of
a configuration alternate with the other configurations' (config A, B, A, B, ...), so a change in the
machine's load spreads over all of them. Prints per configuration every metric as ``median (min-max)``
over the runs, and writes ``summary.json``. The broker comes from KAFKA_BOOTSTRAP_SERVERS, else the
harness.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

from static_consumer.demo import plot
from static_consumer.demo.metrics import ROWS, Metrics, differences
from static_consumer.demo.recount import recount_dir
from static_consumer.demo.report import header, write_json
from static_consumer.demo.rundata import prepare
from static_consumer.demo.runner import run_demo
from static_consumer.demo.strategies import ALL_STRATEGIES, DemoConfig
from static_consumer.testing import local_cluster


def _config(text: str, strategies: tuple[str, ...]) -> DemoConfig:
    types = {f.name: f.type for f in fields(DemoConfig)}
    values: dict[str, Any] = {"strategies": strategies}
    for item in filter(None, text.split(",")):
        key, _, raw = item.partition("=")
        kind = types[key.strip()]
        values[key.strip()] = (
            raw.lower() == "true" if kind == "bool" else (int if kind == "int" else float)(raw)
        )
    values.setdefault("partitions", 2 * values.get("members", DemoConfig.members))
    return DemoConfig(**values)


def _cell(values: list[Any]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    spread = f" ({min(known):g}-{max(known):g})" if min(known) != max(known) else ""
    return f"{statistics.median(known):g}{spread}"


def _table(runs: list[dict[str, Metrics]]) -> str:
    columns = list(runs[0])
    head = ["", *columns]
    body = [
        [label, *[_cell([round(getattr(r[c], key), 1) for r in runs]) for c in columns]]
        for key, label, _f in ROWS
    ]
    widths = [max(len(row[i]) for row in [head, *body]) for i in range(len(head))]
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [head, *body]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", required=True, help="DemoConfig fields, k=v,k=v")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strategies", default="all", help="comma-separated, or all")
    parser.add_argument("--out", type=Path, default=Path("out/bench_rolling_deploy"))
    parser.add_argument("--no-plot", action="store_true", help="skip the pictures (matplotlib)")
    args = parser.parse_args()
    strategies = ALL_STRATEGIES if args.strategies == "all" else tuple(args.strategies.split(","))
    configs = {text: _config(text, strategies) for text in args.config}
    results: dict[str, list[dict[str, Metrics]]] = {text: [] for text in configs}
    headers: dict[str, str] = {}
    failures: list[str] = []

    def progress(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')}   {line}", flush=True)

    with local_cluster(os.environ) as cluster:
        for n in range(1, args.repeats + 1):
            for text, cfg in configs.items():
                out = args.out / text.replace(",", "_").replace("=", "-") / str(n)
                progress(f"run {n}/{args.repeats} of {text}")
                events = prepare(out / "events")
                try:
                    outcome = run_demo(cluster, cfg, events, progress)
                except Exception as exc:  # noqa: BLE001 - one failed run is reported, the others go on
                    progress(f"FAILED: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    failures.append(f"{text} run {n}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                    continue
                _, recounted = recount_dir(events)
                diffs = {s: differences(outcome.tally[s], recounted[s]) for s in outcome.tally}
                write_json(out / "bounce.json", outcome.run, outcome.tally, diffs)
                if not args.no_plot:
                    plot.write(outcome.run, outcome.tally, out / "bounce.png")
                if any(diffs.values()):
                    raise SystemExit(f"{out}: the recount disagrees with the tally: {diffs}")
                results[text].append(outcome.tally)
                headers[text] = header(outcome.run)
                loads = outcome.run.meta.get("load_before"), outcome.run.meta.get("load_after")
                progress(f"done in {outcome.run.meta.get('wall_s')} s (load average before/after {loads})")
    summary: dict[str, Any] = {}
    for failure in failures:
        print(f"\nFAILED (left out of the table): {failure}")
    for text, runs in results.items():
        if not runs:
            continue
        print(f"\n=== {text}: {len(runs)} runs, median (min-max)\n{headers[text]}\n")
        print(_table(runs))
        summary[text] = [{s: m.to_json() for s, m in r.items()} for r in runs]
    summary["failures"] = failures
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
