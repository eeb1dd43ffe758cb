"""What the README's pod main logs when no broker listens at its address, and how it ends.

    python bench/measure_unreachable_broker.py [--runs 3] [--address 127.0.0.1:1] [--connect-timeout-s 30]

Runs the README's "A pod's main" block (as tests/docs/doc_blocks.py extracts it, ``localhost:9092``
replaced by ``--address``) ``--runs`` times, one after the other, and prints per run: the lines at INFO
or above (in total and per logger), the exit code and the wall time, then the first run's first lines
at WARNING or above. Nothing listens on 127.0.0.1:1, so every connection is refused at once.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "docs"))

from doc_blocks import blocks  # noqa: E402 - the tests' own extraction of the README's blocks

SHOWN = 12  # the first run's lines at WARNING or above that are printed
_LINE = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+): (.*)$")


def run_once(program: str, connect_timeout_s: float) -> tuple[int, float, list[tuple[str, str, str]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATIC_CONSUMER_")}
    env["STATIC_CONSUMER_CONNECT_TIMEOUT_S"] = f"{connect_timeout_s:g}"
    with tempfile.TemporaryDirectory(prefix="unreachable-") as work:
        script = Path(work) / "pod_main.py"
        script.write_text(program)
        began = time.monotonic()
        done = subprocess.run(
            [sys.executable, script.name], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        took = time.monotonic() - began
    lines = [m.groups() for line in done.stderr.splitlines() if (m := _LINE.match(line))]
    shown = [(level, name, message) for level, name, message in lines if level != "DEBUG"]
    return done.returncode, took, shown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--address", default="127.0.0.1:1")
    parser.add_argument("--connect-timeout-s", type=float, default=30.0)
    args = parser.parse_args()
    block = next(b for b in blocks() if b.page.name == "README.md" and "run_until_sigterm" in b.code)
    program = block.program(args.address)
    first: list[tuple[str, str, str]] = []
    print("| run | lines at INFO+ | per logger | exit | seconds |")
    print("|---|---|---|---|---|")
    for run in range(1, args.runs + 1):
        code, took, shown = run_once(program, args.connect_timeout_s)
        first = first or shown
        per_logger = ", ".join(f"{name} {n}" for name, n in Counter(n for _, n, _ in shown).most_common())
        print(f"| {run} | {len(shown)} | {per_logger} | {code} | {took:.1f} |")
    print()
    warnings = [f"{level} {name}: {message}" for level, name, message in first if level != "INFO"]
    print(
        "\n".join(warnings[:SHOWN])
        + (f"\n... and {len(warnings) - SHOWN} more" if len(warnings) > SHOWN else "")
    )


if __name__ == "__main__":
    main()
