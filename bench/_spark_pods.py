"""Scale-out of the Spark bridge: N bridge pods feeding one Spark Connect server, next to Spark's native
Kafka source on the same server, in one run (``python bench/bench_spark.py --pods``).

Every pod is a child process (a StatefulSet pod: static member ``bench-<i>`` with its own partitions,
``static_consumer_lab.children.child`` in ``spark`` mode) with a Spark Connect session on one server started
from PySpark's own launch script; each batch goes to Spark's ``noop`` writer. A round is timed from the
first pod's ``ready`` (session created; the group join is inside the time) to the last batch handed
over by any pod, and read from the first assignment (the rate of a running pod). The native source
reads the same topic through the same server (``spark.read.format("kafka")`` into ``noop``). CPU
seconds of the pods (their own accounting) and of the server JVM (``/proc``) per million records say
what cores a rate would take elsewhere.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from typing import Any

from _bench import process_cpu_s

from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.spark_servers import SparkConnectServer

FETCH: dict[str, Any] = {"fetch.message.max.bytes": 10 * 1024 * 1024, "queued.min.messages": 1_000_000}


def pods_round(
    server: SparkConnectServer, bootstrap: str, topic: str, pods: int, args: Any, handoff: str = "arrow"
) -> dict[str, float]:
    group = f"bench-pods-{uuid.uuid4().hex[:8]}"
    settings = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": [topic],
        "session_timeout_ms": 10_000,
        "max_poll_interval_ms": 300_000,
        "librdkafka": FETCH,
    }
    server_cpu = process_cpu_s(server.pid)
    started = [
        ConsumerProcess(
            {
                "mode": "spark",
                "remote": server.url,
                "settings": {**settings, "instance_id": f"bench-{i}"},
                "sink": "noop",
                "handoff": handoff,
                # The server reads the pods' Parquet files: on one machine any directory is shared.
                "handoff_dir": tempfile.gettempdir() if handoff == "parquet" else None,
                "max_records": args.batch_records,
                "max_wait_s": 2.0,
                "idle_timeout_s": None,  # ends on SIGTERM once every record was handed over (below)
                "lag_interval_s": 10.0,
                "max_runtime_s": 900,
            },
            name=f"bench-pod-{i}",
        )
        for i in range(pods)
    ]
    # An idle timeout would race the group: a static pod that stops while it still owns partitions keeps
    # them for the session timeout, and the others end idle before they get them. So the round ends when
    # the pods together handed over every record, and then they are stopped (SIGTERM, bounded).
    try:
        wait_until(
            lambda: (
                any(pod.returncode is not None for pod in started) or _handed_over(started) >= args.records
            ),
            900,
            f"{pods} pods handing over {args.records} records",
        )
        codes = [pod.stop(60) for pod in started]
    finally:
        for pod in started:
            pod.kill()
    if any(codes):
        tails = "\n".join(f"{p.name}: {p.events('error')}\n{p.stderr_tail(10)}" for p in started)
        raise SystemExit(f"a pod failed ({codes}):\n{tails}")
    records = _handed_over(started)
    if records < args.records:
        raise SystemExit(f"{pods} pods handed over {records} records, expected {args.records}")
    first = min(pod.events("ready")[0]["ts"] for pod in started)
    last = max(e["ts"] for pod in started for e in pod.events("batch"))
    # The first assignment with partitions: from there on the pods read (the join is behind them).
    assigned = min(e["ts"] for pod in started for e in pod.events("assigned") if e["partitions"])
    return {
        "seconds": last - first,
        "read_seconds": last - assigned,
        # From ready (session made, interpreter and imports done) to the end: what a running pod spends.
        "pod_cpu_s": sum(
            pod.events("summary")[0]["cpu_s"] - pod.events("ready")[0]["cpu_s"] for pod in started
        ),
        "server_cpu_s": process_cpu_s(server.pid) - server_cpu,
        "twice": records - args.records,  # handed over again after a partition moved during formation
    }


def _handed_over(pods: list[ConsumerProcess]) -> int:
    return sum(e["records"] for pod in pods for e in pod.events("batch"))


def native_round(spark: Any, server: SparkConnectServer, bootstrap: str, topic: str) -> dict[str, float]:
    server_cpu = process_cpu_s(server.pid)
    begun = time.perf_counter()
    (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.max.partition.fetch.bytes", str(10 * 1024 * 1024))
        .load()
        .write.format("noop")
        .mode("overwrite")
        .save()
    )
    took = time.perf_counter() - begun
    return {
        "seconds": took,
        "read_seconds": took,  # no group to join: the query is the read
        "pod_cpu_s": 0.0,
        "server_cpu_s": process_cpu_s(server.pid) - server_cpu,
    }


def run(args: Any, bootstrap: str, topic: str, jars: list[str]) -> None:
    from pyspark.sql import SparkSession

    counts = [int(n) for n in args.pods.split(",")]
    with SparkConnectServer(jars=jars, master=args.server_master, driver_memory="4g") as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()
        print(
            f"Spark Connect server {spark.version} ({args.server_master}) "
            f"started in {server.start_seconds:.1f} s"
        )
        handoffs = args.pod_handoffs.split(",")
        native_round(spark, server, bootstrap, topic)  # warm-up: JIT, the connector's classes
        for handoff in handoffs:
            pods_round(server, bootstrap, topic, 1, args, handoff)
        rounds = [(n, h) for n in counts for h in handoffs]
        names = {(n, h): f"{n} pod(s) {h}" for n, h in rounds}
        results: dict[str, list[dict[str, float]]] = {"native": [], **{names[r]: [] for r in rounds}}
        for repeat in range(1, args.repeats + 1):
            line = []
            result = native_round(spark, server, bootstrap, topic)
            results["native"].append(result)
            line.append(f"native {result['seconds']:.2f} s")
            for n, h in rounds if repeat % 2 else reversed(rounds):
                result = pods_round(server, bootstrap, topic, n, args, h)
                results[names[(n, h)]].append(result)
                line.append(f"{names[(n, h)]} {result['seconds']:.2f} s")
            print(f"repeat {repeat}: " + ", ".join(line))
        spark.stop()
    report(results, args.records)


def report(results: dict[str, list[dict[str, float]]], records: int) -> None:
    """Two rates per reader: the round (from the first pod's ``ready``, the group join inside it: what a
    pod that just started gets) and the read (from the first assignment: what a running pod reads; the
    native query has no join, so both are its query's time)."""
    native = {k: statistics.median(r[k] for r in results["native"]) for k in ("seconds", "read_seconds")}
    print(
        f"{'reader':<20} {'round rows/s':>13} {'/native':>8} {'read rows/s':>12} {'spread rows/s':>23} "
        f"{'/native':>8} {'pod CPU s/M':>12} {'server CPU s/M':>15} {'twice (max)':>12}"
    )
    for name, rounds in results.items():
        round_s = statistics.median(r["seconds"] for r in rounds)
        read = [r["read_seconds"] for r in rounds]
        read_s = statistics.median(read)
        low, high = records / max(read), records / min(read)
        per_m = 1_000_000 / records
        pod_cpu = statistics.median(r["pod_cpu_s"] for r in rounds) * per_m
        server_cpu = statistics.median(r["server_cpu_s"] for r in rounds) * per_m
        print(
            f"{name:<20} {records / round_s:>13,.0f} {native['seconds'] / round_s:>8.2f} "
            f"{records / read_s:>12,.0f} {low:>11,.0f}-{high:<11,.0f} "
            f"{native['read_seconds'] / read_s:>8.2f} "
            f"{pod_cpu:>12.1f} {server_cpu:>15.1f} {max(r.get('twice', 0) for r in rounds):>12,.0f}"
        )
    print(
        "round: from the first pod's ready (the group join included); read: from its first assignment. "
        "CPU s/M: CPU seconds per million records (pods: their own processes, from ready; server: the "
        "Spark Connect JVM). A rate R (records/s) needs about R x (pod + server CPU s/M) / 1e6 cores."
    )


__all__ = ["native_round", "pods_round", "report", "run"]
