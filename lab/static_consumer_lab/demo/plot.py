"""The picture: per strategy, who owned which partition when, and end-to-end latency, on one time axis.

Drawn from the raw events (through :mod:`.recount`'s holding intervals), so it shows what the files
hold. Black marks a partition nobody owned; hatching, a member rebuilding a partition's state before it
processes it; dotted lines, the restart signals. Latency is the p99 of the records produced in each
second (by their producer timestamp), so a partition that waited shows up at the time its records
were written.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from static_consumer_lab.demo.metrics import Metrics
from static_consumer_lab.demo.recount import holdings, unowned_gaps
from static_consumer_lab.demo.rundata import RunData, StrategyRun, window_of


def _p99_per_second(
    strategy: StrategyRun, created: Mapping[tuple[int, int], int]
) -> list[tuple[float, float]]:
    first: dict[tuple[int, int], int] = {}
    for inc in strategy.incarnations:
        for e in inc.events:
            if e["kind"] == "records" and "done_ms" in e:
                for (_t, p, o), done in zip(e["records"], e["done_ms"], strict=True):
                    key = (int(p), int(o))
                    first[key] = min(int(done), first.get(key, int(done)))
    per_second: dict[int, list[int]] = defaultdict(list)
    for key, done in first.items():
        if key in created:
            per_second[created[key] // 1000].append(done - created[key])
    out = []
    for second, values in sorted(per_second.items()):
        values.sort()
        out.append((float(second), float(values[-(-99 * len(values) // 100) - 1])))
    return out


def member_order(member: str) -> tuple[str, int, str]:
    """demo-2 before demo-10: by the name's text before its trailing number, then by that number."""
    stem = member.rstrip("0123456789")
    number = member[len(stem) :]
    return (stem, int(number) if number else -1, member)


def write(run: RunData, tallied: Mapping[str, Metrics], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    w0, w1 = run.window
    cfg = run.meta.get("config", {})
    lo, hi = w0 - float(cfg.get("lead_s", 5.0)), w1 + float(cfg.get("tail_s", 5.0))
    created = {(p, o): c for p, o, c in run.produced}
    members = sorted({inc.member for s in run.strategies for inc in s.incarnations}, key=member_order)
    # Member colours from a qualitative map; black is kept for "no owner".
    cmap = plt.get_cmap("tab20" if len(members) > 10 else "tab10")
    colour = {m: cmap(i % cmap.N) for i, m in enumerate(members)}
    own_h = max(2.0, 0.16 * run.partitions)
    ratios = [r for _ in run.strategies for r in (own_h, 1.1)]
    fig, axes = plt.subplots(
        len(ratios),
        1,
        figsize=(13, sum(ratios) + 1.2),
        sharex=True,
        squeeze=False,
        gridspec_kw={"height_ratios": ratios, "hspace": 0.35},
    )
    label_size = 8 if run.partitions <= 16 else 6.5
    series = {s.strategy: _p99_per_second(s, created) for s in run.strategies}
    worst = max((v for pts in series.values() for _t, v in pts), default=1000.0)
    best = min((v for pts in series.values() for _t, v in pts), default=1.0)
    schedule = run.meta.get("schedule", [])
    for n, strategy in enumerate(run.strategies):
        signals = [
            float(e["ts"]) - w0 for e in schedule if e.get("strategy", strategy.strategy) == strategy.strategy
        ]
        own_w1 = window_of(run, strategy)[1]
        own, lat = axes[2 * n, 0], axes[2 * n + 1, 0]
        by_partition = defaultdict(list)
        for h in holdings(strategy):
            by_partition[h.partition].append(h)
            start, end = max(h.start, lo), min(h.end, hi)
            if end > start:
                own.broken_barh(
                    [(start - w0, end - start)], (h.partition - 0.4, 0.8), facecolors=colour[h.member]
                )
        for p in range(run.partitions):
            gaps = [(a - w0, b - a) for a, b in unowned_gaps(by_partition[p], lo, hi) if b > a]
            own.broken_barh(gaps, (p - 0.4, 0.8), facecolors="black")
        for inc in strategy.incarnations:
            for e in inc.events:
                if e["kind"] == "rebuild":
                    spans = [(float(e["started"]) - w0, float(e["seconds"]))]
                    for _t, p in e["partitions"]:
                        own.broken_barh(
                            spans, (p - 0.4, 0.8), facecolors="none", hatch="////", edgecolor="black"
                        )
        m = tallied.get(strategy.strategy)
        title = strategy.strategy
        if m is not None:
            title += (
                f": {m.partition_moves} moves, {m.live_revocations} revocations in live members, "
                f"{m.unowned_s:.1f} partition-s unowned, {m.rebuilds} rebuilds, p99 {m.latency_p99_ms} ms"
            )
        own.set_title(title, fontsize=9, loc="left")
        own.set_yticks(range(run.partitions), [f"p{p}" for p in range(run.partitions)], fontsize=label_size)
        own.set_ylim(run.partitions - 0.5, -0.5)
        pts = series[strategy.strategy]
        lat.plot([t - w0 for t, _v in pts], [v for _t, v in pts], color="black", linewidth=1)
        lat.set_yscale("log")
        lat.set_ylim(max(best * 0.7, 1.0), worst * 1.5)
        lat.set_ylabel("p99 ms", fontsize=8)
        lat.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0)))
        lat.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        lat.yaxis.set_minor_formatter(NullFormatter())
        lat.tick_params(labelsize=7)
        for ax in (own, lat):
            for x in signals:
                ax.axvline(x, color="grey", linestyle=":", linewidth=0.8)
            ax.axvspan(lo - w0, 0, color="0.93", zorder=-1)
            ax.axvspan(own_w1 - w0, hi - w0, color="0.93", zorder=-1)
    axes[-1, 0].set_xlim(lo - w0, hi - w0)
    axes[-1, 0].set_xlabel(
        "seconds since the first restart (grey: before and after each group's own bounce window)"
    )
    handles: list[Any] = [Patch(color=colour[m], label=m) for m in members]
    handles += [
        Patch(color="black", label="no owner"),
        Patch(facecolor="none", hatch="////", label="rebuilding state"),
    ]
    axes[0, 0].legend(
        handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.12), ncol=min(len(handles), 8), fontsize=8
    )
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
