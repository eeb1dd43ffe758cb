"""The rolling-deploy demo repeated: each configuration N times on one broker, median and spread.

    python bench/bench_rolling_deploy.py --repeats 3 --strategies all \\
        --config members=6,restart_delay_s=0 --config members=6,restart_delay_s=10

Each ``--config`` sets :class:`static_consumer_lab.demo.strategies.DemoConfig` fields (``partitions``
defaults to 2 x ``members``); each run is one ``static-consumer demo`` bounce, its events and table
saved under ``--out/<config>/<n>/`` (``static-consumer demo --recount`` reads any of them back). Runs of
a configuration alternate with the other configurations' (config A, B, A, B, ...), so a change in the
machine's load spreads over all of them. Prints per configuration every metric as ``median (min-max)``
over the runs, writes ``summary.json``, and prints (and writes to ``tables.md``) the same as Markdown
tables, each with its run count, bounce windows, wall times and load averages, read back from the runs'
``bounce.json`` files (a failed run wrote none). The broker comes from KAFKA_BOOTSTRAP_SERVERS, else the
harness's lab profile (as the demo's: lowered group minimums, so its numbers are "lab" numbers).

    python bench/bench_rolling_deploy.py --tables out/bench_rolling_deploy   # re-render, run nothing
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

from static_consumer_lab.brokers import local_cluster
from static_consumer_lab.demo import plot
from static_consumer_lab.demo.metrics import ROWS, Metrics, differences
from static_consumer_lab.demo.recount import recount_dir
from static_consumer_lab.demo.report import header, write_json
from static_consumer_lab.demo.rundata import prepare
from static_consumer_lab.demo.runner import run_demo
from static_consumer_lab.demo.strategies import ALL_STRATEGIES, DemoConfig


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
    # This bench runs the lab broker (below): its groups take the lab sessions, and its header says LAB.
    values.setdefault("lab", True)
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


# The Markdown tables leave out the rows that are the same for every strategy (restarts, kills,
# records produced): the text above each table says them.
_MD_SKIP = {"restarts", "kills", "produced"}


def _md_value(value: float, like: object) -> str:
    if isinstance(like, int) and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.1f}" if isinstance(like, float) or not float(value).is_integer() else f"{value:,g}"


def _md_cell(values: list[Any]) -> str:
    known = [v for v in values if v is not None]
    if not known:
        return "n/a"
    median = _md_value(statistics.median(known), known[0])
    low, high = _md_value(min(known), known[0]), _md_value(max(known), known[0])
    return median if low == high else f"{median} ({low}-{high})"


def _span(values: list[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:g}{unit}" if round(low, 1) == round(high, 1) else f"{low:g}-{high:g}{unit}"


def markdown(out: Path) -> str:
    """Per configuration under ``out``, a Markdown table of median (min-max) over its runs' bounce.json."""
    sections = []
    for config_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        docs = [json.loads(f.read_text()) for f in sorted(config_dir.glob("*/bounce.json"))]
        if not docs:
            continue
        runs = [{s: Metrics.from_json(m) for s, m in d["strategies"].items()} for d in docs]
        columns = list(runs[0])
        lines = [
            f"{config_dir.name}: {len(runs)} runs; bounce window "
            + _span([round(d["window"][1] - d["window"][0], 1) for d in docs], " s")
            + "; run wall time "
            + _span([d["meta"]["wall_s"] for d in docs], " s")
            + "; 1-min load average before "
            + _span([d["meta"]["load_before"][0] for d in docs])
            + ", after "
            + _span([d["meta"]["load_after"][0] for d in docs]),
            "",
            "| | " + " | ".join(columns) + " |",
            "|---|" + "---|" * len(columns),
        ]
        for key, label, _f in ROWS:
            if key not in _MD_SKIP:
                cells = [_md_cell([getattr(r[c], key) for r in runs]) for c in columns]
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        sections.append("\n".join(lines))
    return "\n\n".join(sections) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", action="append", default=[], help="DemoConfig fields, k=v,k=v")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--strategies", default="all", help="comma-separated, or all")
    parser.add_argument("--out", type=Path, default=Path("out/bench_rolling_deploy"))
    parser.add_argument("--no-plot", action="store_true", help="skip the pictures (matplotlib)")
    parser.add_argument("--tables", type=Path, metavar="OUT", help="print OUT's Markdown tables, run nothing")
    args = parser.parse_args()
    if args.tables is not None:
        print(markdown(args.tables), end="")
        return 0
    if not args.config:
        parser.error("--config is required (or --tables OUT)")
    strategies = ALL_STRATEGIES if args.strategies == "all" else tuple(args.strategies.split(","))
    configs = {text: _config(text, strategies) for text in args.config}
    results: dict[str, list[dict[str, Metrics]]] = {text: [] for text in configs}
    headers: dict[str, str] = {}
    failures: list[str] = []

    def progress(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')}   {line}", flush=True)

    # The demo's broker: the lab profile (its KIP-848 groups take the demo's session and 500 ms heartbeats).
    with local_cluster(os.environ, profile="lab") as cluster:
        for n in range(1, args.repeats + 1):
            for text, cfg in configs.items():
                out = args.out / text.replace(",", "_").replace("=", "-") / str(n)
                progress(f"run {n}/{args.repeats} of {text}")
                events = prepare(out / "events")
                (out / "bounce.json").unlink(missing_ok=True)  # a failed run must not leave an old one
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
    tables = markdown(args.out)
    (args.out / "tables.md").write_text(tables)
    print(f"\n{tables}", end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
