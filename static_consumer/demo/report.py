"""Render a bounce experiment: a side-by-side table, a JSON file and a PNG ownership timeline."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from static_consumer.demo.runner import ModeResult

ROWS: tuple[tuple[str, str], ...] = (
    ("restarts", "member restarts"),
    ("rebalances", "rebalances (broker generations)"),
    ("live_revocations", "revocations seen by live members"),
    ("partition_moves", "partition moves"),
    ("stall_seconds", "s live members spent without partitions"),
    ("produced", "records produced"),
    ("duplicated", "records duplicated"),
    ("lost", "records lost"),
    ("first_join_seconds", "s to form the group (first join)"),
    ("wall_seconds", "wall time, s"),
)


def table(results: Sequence[ModeResult]) -> str:
    header = ["", *[r.mode for r in results]]
    body = [
        [label, *["n/a" if getattr(r, key) is None else str(getattr(r, key)) for r in results]]
        for key, label in ROWS
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *body]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def write_json(results: Sequence[ModeResult], path: Path, meta: dict[str, Any]) -> None:
    path.write_text(json.dumps({"meta": meta, "results": [r.to_json() for r in results]}, indent=2) + "\n")


def write_timeline(results: Sequence[ModeResult], path: Path) -> None:
    """One panel per mode: a row per partition, coloured by the member that owned it over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(len(results), 1, figsize=(12, 3.2 * len(results)), squeeze=False)
    owners = sorted({i.owner for r in results for i in r.intervals})
    cmap = plt.get_cmap("tab10")
    colours = {owner: cmap(n % 10) for n, owner in enumerate(owners)}
    for ax, result in zip(axes[:, 0], results, strict=True):
        start = min((i.start for i in result.intervals), default=0.0)
        for interval in result.intervals:
            ax.broken_barh(
                [(interval.start - start, max(interval.end - interval.start, 0.05))],
                (interval.partition - 0.4, 0.8),
                facecolors=colours[interval.owner],
            )
        ax.axvline(result.bounce_started_at - start, color="black", linestyle="--", linewidth=1)
        ax.set_title(
            f"{result.mode}: {result.live_revocations} revocations in live members, "
            f"{result.partition_moves} partition moves, {result.rebalances} rebalances"
        )
        ax.set_ylabel("partition")
        ax.set_xlabel("seconds (dashed line: the rolling bounce starts)")
    handles = [Rectangle((0, 0), 1, 1, color=colours[o]) for o in owners]
    fig.legend(handles, owners, loc="upper right", ncol=min(len(owners), 6))
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.savefig(path, dpi=110)
    plt.close(fig)
