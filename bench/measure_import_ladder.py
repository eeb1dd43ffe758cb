"""How much of a restart is imports: a ladder of fresh interpreters, each step importing one thing more.

Restart to first record is timed from process start. Raw confluent-kafka's script imports only
``confluent_kafka``; a StaticConsumer's also imports the settings model's pydantic and pydantic-settings
and the library itself. Each step starts ``--processes`` fresh ``python -c`` processes (after compiling
the library to bytecode, as a wheel install has it) and prints the minimum and median wall time, run by
run, so the cost of each layer is seen against the one below it:

    python bench/measure_import_ladder.py --runs 3 --processes 10
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

from _bench import compile_like_pip

WHOLE_RUN_LIMIT_S = 900
SETTINGS = (
    "from static_consumer import ConsumerSettings as C; "
    "C(bootstrap_servers='127.0.0.1:9092', group_id='g', topics=('t',), instance_id='i')"
)
LADDER = (
    ("bare interpreter", "pass"),
    ("confluent_kafka", "import confluent_kafka"),
    ("+ pydantic", "import confluent_kafka, pydantic"),
    ("+ pydantic_settings", "import confluent_kafka, pydantic_settings"),
    ("static_consumer", "import static_consumer"),
    ("static_consumer + settings", SETTINGS),
)


def wall_ms(code: str) -> float:
    """Wall time of one fresh interpreter running ``code``, in ms (a failure stops the measurement). No
    ``timeout=`` here: with one, ``Popen.wait`` polls in sleeps of up to 50 ms and the times come out in
    50 ms steps; :func:`main`'s alarm bounds the whole measurement instead."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return (time.perf_counter() - began) * 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--processes", type=int, default=10, help="fresh processes per step and run")
    args = parser.parse_args()
    if args.runs < 1 or args.processes < 1:
        parser.error("--runs and --processes must be at least 1")
    signal.alarm(WHOLE_RUN_LIMIT_S)  # every wait has an end: SIGALRM stops a hung interpreter's bench
    print(compile_like_pip())
    for run in range(1, args.runs + 1):
        print(
            f"run {run}: 1-minute load {os.getloadavg()[0]:.2f}; min / median [max] of {args.processes}, ms"
        )
        for label, code in LADDER:
            times = [wall_ms(code) for _ in range(args.processes)]
            print(f"  {label:28s} {min(times):6.0f} / {statistics.median(times):6.0f} [{max(times):.0f}]")


if __name__ == "__main__":
    main()
