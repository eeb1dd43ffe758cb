"""A Spark bridge pod for integration tests: a MicroBatchRunner whose fn appends each batch to a Parquet
directory, streaming JSON lines (ready, assigned, revoked, lost, batch, exit) on stdout.

``python integration/spark_child.py '<json spec>'``; spec keys: ``settings`` (ConsumerSettings fields),
``sink`` (Parquet directory), ``max_records``, ``max_wait_s``, ``max_runtime_s`` (default 240: every run
ends). SIGTERM finishes the current batch, commits it and closes without leaving the group.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import Any

from static_consumer import Assigned, ConsumerSettings, Lost, MembershipListener, Revoked, exit_code_for
from static_consumer.spark import BatchInfo, BatchLimits, MicroBatchRunner, spark_session


def emit(kind: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"kind": kind, "ts": time.time(), **fields}) + "\n")
    sys.stdout.flush()


class Streamer(MembershipListener):
    def on_assigned(self, event: Assigned) -> None:
        emit("assigned", partitions=[[tp.topic, tp.partition] for tp in event.partitions])

    def on_revoked(self, event: Revoked) -> None:
        emit("revoked", partitions=[[tp.topic, tp.partition] for tp in event.partitions])

    def on_lost(self, event: Lost) -> None:
        emit("lost", partitions=[[tp.topic, tp.partition] for tp in event.partitions])


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    spark = spark_session(driver_memory="1g", conf={"spark.sql.shuffle.partitions": "2"})
    sink = spec["sink"]

    def write(df: Any, info: BatchInfo) -> None:
        df.write.mode("append").parquet(sink)
        emit("batch", batch_id=info.batch_id, records=info.records, instance_id=info.instance_id)

    runner = MicroBatchRunner(
        ConsumerSettings(**spec["settings"]),
        write,
        spark=spark,
        limits=BatchLimits(
            max_records=int(spec.get("max_records", 500)),
            min_records=1,
            max_wait_s=float(spec.get("max_wait_s", 1.0)),
        ),
        listeners=[Streamer()],
    )
    signal.signal(signal.SIGTERM, lambda _s, _f: runner.stop())
    timer = threading.Timer(float(spec.get("max_runtime_s", 240)), runner.stop)
    timer.daemon = True
    timer.start()
    emit("ready")
    try:
        summary = runner.run()
    except Exception as exc:  # noqa: BLE001 - reported to the test, then the exit code says what happened
        emit("error", error=repr(exc))
        return exit_code_for(exc)
    finally:
        timer.cancel()
        spark.stop()
    emit("summary", batches=summary.batches, records=summary.records)
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    emit("exit", code=code)
    raise SystemExit(code)
