"""Where a batch's time goes on its way to a Spark Connect server, by phase, per handoff (docs/spark.md).

    python bench/measure_spark_connect.py [--records 100000] [--repeats 10] [--server-master local[2]]

Starts a Spark Connect server from PySpark's launch script (as the integration tests and
``bench_spark.py --pods`` do) and connects to it from this process, as a bridge pod does. Each repeat
hands the same batch of ``--records`` records (100 B values, keys, 6 partitions: the benchmark's) to
Spark and writes it to the ``noop`` sink, once per way, interleaved:

- ``arrow artifacts``: ``spark.createDataFrame(table)`` as PySpark does it with the server's
  ``spark.sql.session.localRelationCacheThreshold`` (1 MiB in Spark 4.2): the table is uploaded first as
  Arrow IPC chunks (artifacts, hashed with SHA-256) and the plan names them; the server turns them
  into rows on its driver;
- ``arrow inline``: the runner's ``handoff="arrow"``, which raises that threshold to 64 MiB for its
  session: the table travels inside the plan (one protobuf message over gRPC);
- ``parquet``: ``handoff="parquet"`` with ``handoff_dir`` a directory the server reads too (here the
  same disk): the table goes to a Parquet file and the server's executors read it.

Phases, each with wall seconds and CPU seconds of this process (``time.process_time``: the pod's side)
and of the server JVM (``/proc``), per million records:

- ``table``: the Arrow table from the consumer's columns (``batches_to_table``; the same for both);
- ``frame``: the DataFrame (``arrow``: createDataFrame: a config round trip, cast, no data sent yet;
  ``parquet``: the file written, and ``spark.read.parquet`` planned);
- ``write``: ``df.write.format("noop").save()``: for ``arrow`` the plan with the table is serialised
  and sent, the server converts it and runs the job; for ``parquet`` the server reads the file.

Prints the median of each phase and the totals. ``--profile`` then hands over five more ``arrow inline``
batches under a JFR recording of the server (its hottest methods, from ``jfr print --events
jdk.ExecutionSample``) and cProfile of this process.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _spark_pods import jvm_cpu_s
from measure_spark_handoff import synthetic_batch

from static_consumer.spark._handoff import FrameMaker
from static_consumer.spark._schema import batches_to_table
from static_consumer_lab.spark_servers import SparkConnectServer

PHASES = ("table", "frame", "write")


class Phases:
    """Wall, pod CPU and server CPU seconds per phase of one way, over the repeats."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.seconds: dict[str, list[tuple[float, float, float]]] = {p: [] for p in PHASES}

    def measure(self, phase: str, work: Callable[[], Any]) -> Any:
        wall, cpu, server = time.perf_counter(), time.process_time(), jvm_cpu_s(self.pid)
        result = work()
        self.seconds[phase].append(
            (time.perf_counter() - wall, time.process_time() - cpu, jvm_cpu_s(self.pid) - server)
        )
        return result


CACHE_THRESHOLD = "spark.sql.session.localRelationCacheThreshold"


def one_batch(
    spark: Any, maker: FrameMaker, batch: Any, phases: Phases, threshold: str | None = None
) -> None:
    """One batch through ``maker``; ``threshold``: PySpark's cache threshold for this call only."""
    if threshold is None:
        _one_batch(spark, maker, batch, phases)
        return
    kept = spark.conf.get(CACHE_THRESHOLD)
    spark.conf.set(CACHE_THRESHOLD, threshold)
    try:
        _one_batch(spark, maker, batch, phases)
    finally:
        spark.conf.set(CACHE_THRESHOLD, kept)


def _one_batch(spark: Any, maker: FrameMaker, batch: Any, phases: Phases) -> None:
    table = phases.measure("table", lambda: batches_to_table([batch]))
    df, cleanup = phases.measure("frame", lambda: maker(table))
    try:
        phases.measure("write", lambda: df.write.format("noop").mode("overwrite").save())
    finally:
        cleanup()


def report(name: str, phases: Phases, records: int) -> None:
    per_m = 1_000_000 / records
    total = [0.0, 0.0, 0.0]
    for phase in PHASES:
        rows = phases.seconds[phase]
        med = [statistics.median(r[i] for r in rows) for i in range(3)]
        total = [t + m for t, m in zip(total, med, strict=True)]
        walls = [r[0] for r in rows]
        print(
            f"  {name:<15} {phase:<6} wall {med[0]:.3f} s [{min(walls):.3f}-{max(walls):.3f}]  "
            f"pod CPU {med[1] * per_m:5.2f} s/M  server CPU {med[2] * per_m:5.2f} s/M"
        )
    print(
        f"  {name:<15} total  wall {total[0]:.3f} s ({records / total[0]:,.0f} rows/s)  "
        f"pod CPU {total[1] * per_m:5.2f} s/M  server CPU {total[2] * per_m:5.2f} s/M"
    )


# Where a server thread was: the first of these marks, in this order, found anywhere in its stack.
STAGES = (
    ("ArrowConverters", "Arrow IPC -> rows (driver)"),
    ("UnsafeProjection", "Arrow IPC -> rows (driver)"),
    ("ObjectOutputStream", "task serialisation (rows into tasks)"),
    ("JavaSerializer", "task serialisation (rows into tasks)"),
    ("ObjectInputStream", "task deserialisation (executors)"),
    ("LocalTableScanExec", "local rows scan"),
    ("RuleExecutor", "planning (analysis, optimisation)"),
    ("QueryPlanner", "planning (analysis, optimisation)"),
    ("SparkConnectPlanner", "Connect planner (proto -> plan)"),
    ("io.grpc", "gRPC / protobuf"),
    ("com.google.protobuf", "gRPC / protobuf"),
    ("CodeGenerator", "code generation"),
)


def hottest(recording: Path, top: int = 15) -> None:
    """The server's time by stage and its hottest methods, from JFR's execution samples."""
    out = subprocess.run(
        ["jfr", "print", "--events", "jdk.ExecutionSample", "--stack-depth", "200", str(recording)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    frames: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    samples = 0
    for block in out.split("jdk.ExecutionSample")[1:]:
        stack = [line.strip() for line in block.splitlines() if "line:" in line]
        if not stack:
            continue
        samples += 1
        frames[stack[0].split("(")[0]] += 1
        stage = next((name for mark, name in STAGES if any(mark in frame for frame in stack)), "other")
        stages[stage] += 1
    print(f"server JFR during 5 arrow inline batches: {samples} samples, by stage:")
    for stage, n in stages.most_common():
        print(f"  {n / samples:6.1%}  {stage}")
    print("hottest methods (the sample's own frame):")
    for frame, n in frames.most_common(top):
        print(f"  {n / samples:6.1%}  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--server-master", default="local[2]")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from pyspark.sql import SparkSession

    batch = synthetic_batch(args.records)
    table_bytes = batches_to_table([batch]).nbytes
    shared = tempfile.mkdtemp(prefix="measure-connect-handoff-")
    with SparkConnectServer(master=args.server_master, driver_memory="4g") as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()
        print(f"{os.cpu_count()} cores; Spark Connect server {spark.version} ({args.server_master})")
        default = spark.conf.get(CACHE_THRESHOLD)
        print(f"{CACHE_THRESHOLD}: the server's {default}; the table: {table_bytes:,} bytes")
        arrow = FrameMaker(spark, "arrow")  # raises the session's threshold (the runner's way)
        makers = {
            "arrow artifacts": arrow,
            "arrow inline": arrow,
            "parquet": FrameMaker(spark, "parquet", shared),
        }
        thresholds = {"arrow artifacts": default}  # PySpark's way with the server's default
        phases = {name: Phases(server.pid) for name in makers}
        for name, maker in makers.items():  # warm-up: the first job of each kind compiles code
            one_batch(spark, maker, batch, Phases(server.pid), thresholds.get(name))
        for repeat in range(args.repeats):
            for name in makers if repeat % 2 == 0 else reversed(list(makers)):
                one_batch(spark, makers[name], batch, phases[name], thresholds.get(name))
        print(f"one batch of {args.records:,} records into the noop sink, median of {args.repeats}:")
        for name in makers:
            report(name, phases[name], args.records)
        if args.profile:
            profile_arrow(spark, arrow, batch, server.pid, Path(shared) / "server.jfr")
        for maker in {id(m): m for m in makers.values()}.values():
            maker.close()
        spark.stop()


def profile_arrow(spark: Any, maker: FrameMaker, batch: Any, server_pid: int, recording: Path) -> None:
    """Five more batches the runner's arrow way under a JFR recording of the server and cProfile of this
    process."""
    import cProfile
    import pstats

    subprocess.run(["jcmd", str(server_pid), "JFR.start", "name=arrow", "settings=profile"], check=True)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(5):
        one_batch(spark, maker, batch, Phases(server_pid))
    profiler.disable()
    subprocess.run(
        ["jcmd", str(server_pid), "JFR.stop", "name=arrow", f"filename={recording}"],
        check=True,
        capture_output=True,
    )
    print("pod side (this process), 5 arrow inline batches, by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    hottest(recording)


if __name__ == "__main__":
    main()
