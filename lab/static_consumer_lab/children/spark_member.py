"""The ``spark`` mode of the child consumer: a MicroBatchRunner pod (a bridge pod as in a StatefulSet).

Spec keys besides the common ones (see :mod:`static_consumer_lab.children.child`):

- ``settings``: ConsumerSettings fields; ``remote`` (a Spark Connect URL) or ``master`` (default
  ``local[2]``), ``driver_host``;
- ``sink``: ``noop`` (Spark's noop writer, for benchmarks), ``append`` (plain ``df.write.parquet`` to
  ``path``: at-least-once), ``parquet`` (:func:`~static_consumer.spark.write_parquet`) or ``delta``
  (:func:`~static_consumer.spark.write_delta`, partitioned by ``delta_partition_by``), both exactly-once;
  or ``sinks``, ``{kind: path}``, every batch written to each in turn;
- ``max_records``, ``max_wait_s``, ``handoff``, ``handoff_dir``, ``event_log`` (a JSONL event log,
  which gets the ``batch`` lines), ``conf`` (Spark conf of a session this process drives),
  ``native_to`` (after the run, Spark's own Kafka source writes the topics there as Parquet),
  ``stop_session_at`` (stop the SparkSession inside that batch),
  ``hold_from_batch`` and ``hold_s`` (from that batch on, fn waits ``hold_s`` after writing: a window
  in which the batch is in the sink but neither checkpointed as done nor committed, for a kill);
  ``hold_file`` (the same once, for the first batch written after the test created that file);
  ``pause_file`` and ``pause_s`` (once that file exists, fn waits ``pause_s`` before writing the next
  batch, after a ``pausing`` event with its offsets: a window for a SIGSTOP);
  ``block`` (as the static mode's: fn blocks once, after writing, when the trigger file appears).

Events: ready (with the process's CPU seconds so far), assigned, revoked, lost, fenced, closed,
commit_refused, pausing, batch (after the writes: batch_id, records, version, first and last offsets per
partition), holding, blocking and unblocked (with ``block``), summary (with ``stop_s``, SIGTERM to run()
returning, and ``cpu_s``), error (with the error class and exit code), exit. SIGTERM stops the runner
(bounded by shutdown_timeout_s); the exit code says what happened (75: the session died).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from static_consumer import ConsumerSettings, MembershipListener, exit_code_for
from static_consumer_lab.children.static_member import _Streamer, block_if_asked

Emit = Callable[..., None]


def _sink(spec: dict[str, Any], spark: Any, emit: Emit) -> Callable[[Any, Any], None]:
    from static_consumer.spark import write_delta, write_parquet

    sinks: dict[str, str] = spec.get("sinks") or {spec.get("sink", "noop"): str(spec.get("path"))}
    partition_by = spec.get("delta_partition_by", ())
    stop_at = spec.get("stop_session_at")
    hold_from, hold_s = spec.get("hold_from_batch"), float(spec.get("hold_s", 0.0))
    hold_file, pause_file = spec.get("hold_file"), spec.get("pause_file")

    def once(flag: str | None) -> bool:
        """True the first time ``flag`` (a file the test creates) is seen; it is removed."""
        if flag is None:
            return False
        try:
            os.unlink(flag)
        except FileNotFoundError:
            return False
        return True

    def fn(df: Any, info: Any) -> None:
        offsets = {f"{tp.topic}:{tp.partition}": [r.first, r.last] for tp, r in info.offsets.items()}
        if stop_at is not None and info.batch_id >= stop_at:
            spark.stop()  # the session dies under the batch, as when its driver or server goes away
        if once(pause_file):  # a window before the write, for a SIGSTOP: the write comes after a thaw
            emit("pausing", batch_id=info.batch_id, offsets=offsets)
            time.sleep(float(spec.get("pause_s", 5.0)))
        for kind, path in sinks.items():
            if kind == "noop":
                df.write.format("noop").mode("overwrite").save()
            elif kind == "append":
                df.write.mode("append").parquet(path)
            elif kind == "parquet":
                write_parquet(df, info, path)
            elif kind == "delta":
                write_delta(df, info, path, partition_by=partition_by)
            else:
                raise ValueError(f"unknown sink {kind!r}")
        version = info.key.version if info.key is not None else None
        emit("batch", batch_id=info.batch_id, records=info.records, version=version, offsets=offsets)
        block_if_asked(spec.get("block"), emit)
        if (hold_from is not None and info.batch_id >= hold_from) or once(hold_file):
            emit("holding", batch_id=info.batch_id)
            time.sleep(hold_s)

    return fn


def _native_read(spark: Any, settings: ConsumerSettings, path: str) -> None:
    """The topics as Spark's own Kafka source reads them, written to Parquet at ``path`` (to compare)."""
    (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.bootstrap_servers)
        .option("subscribe", ",".join(settings.topics))
        .option("includeHeaders", "true")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
        .write.mode("overwrite")
        .parquet(path)
    )


def run_spark(spec: dict[str, Any], emit: Emit) -> int:
    from static_consumer.spark import BatchLimits, MicroBatchRunner, spark_session

    started = time.monotonic()
    if spec.get("remote"):
        spark = spark_session(spec["remote"])
    else:
        spark = spark_session(
            master=spec.get("master", "local[2]"),
            driver_memory=spec.get("driver_memory", "1g"),
            driver_host=spec.get("driver_host"),
            delta=spec.get("sink") == "delta",
            conf={"spark.sql.shuffle.partitions": "2", **spec.get("conf", {})},
        )
    listeners: list[MembershipListener] = [_Streamer(emit, None, ready_on_join=False)]  # ready: below
    if spec.get("event_log"):
        from static_consumer.telemetry import EventLog

        listeners.append(EventLog(spec["event_log"], look_up_held=False))
    runner = MicroBatchRunner(
        ConsumerSettings(**spec["settings"]),
        _sink(spec, spark, emit),
        spark=spark,
        limits=BatchLimits(
            max_records=int(spec.get("max_records", 500)),
            min_records=1,
            max_wait_s=float(spec.get("max_wait_s", 1.0)),
        ),
        handoff=spec.get("handoff", "auto"),
        handoff_dir=spec.get("handoff_dir"),
        checkpoint=spec.get("checkpoint"),
        listeners=listeners,
        lag_interval_s=float(spec.get("lag_interval_s", 2.0)),
    )
    stop_at: list[float] = []  # when SIGTERM came: the summary says how long run() took from there

    def on_sigterm(_s: int, _f: object) -> None:
        stop_at.append(time.monotonic())
        runner.stop()

    signal.signal(signal.SIGTERM, on_sigterm)
    timer = threading.Timer(float(spec.get("max_runtime_s", 240)), runner.stop)  # every run ends
    timer.daemon = True
    timer.start()
    emit("ready", session_s=round(time.monotonic() - started, 3), cpu_s=round(time.process_time(), 3))
    try:
        summary = runner.run(idle_timeout_s=spec.get("idle_timeout_s"), max_batches=spec.get("max_batches"))
        returned_at = time.monotonic()
        if spec.get("native_to"):
            _native_read(spark, ConsumerSettings(**spec["settings"]), str(spec["native_to"]))
    except Exception as exc:  # noqa: BLE001 - reported to the test, then the exit code says what happened
        emit("error", kind_of=type(exc).__name__, reason=str(exc)[:500], exit_code=exit_code_for(exc))
        return exit_code_for(exc)
    finally:
        timer.cancel()
        try:
            spark.stop()
        except Exception:  # noqa: BLE001 - a session that died already
            pass
    emit(
        "summary",
        batches=summary.batches,
        records=summary.records,
        seconds=round(summary.seconds, 3),
        cpu_s=round(time.process_time(), 3),
        stop_s=round(returned_at - stop_at[0], 3) if stop_at else None,
    )
    return 0


__all__ = ["run_spark"]
