"""A consumer in a child process that streams what happens to it as JSON lines on stdout.

``python -m static_consumer_lab.children.child '<json spec>'``. Spec keys:

- ``mode``: ``"confluent"`` (a plain confluent-kafka consumer, ``config`` is its librdkafka config),
  ``"static"`` (README's pod main: ``run_until_sigterm`` on a StaticConsumer, ``settings`` are
  ConsumerSettings fields, ``env`` its environment; see :mod:`static_consumer_lab.children.static_member`) or
  ``"spark"`` (a Spark bridge pod, see :mod:`static_consumer_lab.children.spark_member`);
- ``topics``; ``commit``: commit processed offsets after each batch (default true);
- ``batch``: records per batch; ``max_records``; ``max_runtime_s`` (default 300: every run ends);
- ``process_s``: seconds each batch takes to process (a sleep between handing it out and committing);
- ``block`` (static mode): a path; once a file exists there, the next batch's handler blocks for the
  seconds written in it before its commit, and the file is removed (``blocking``, ``unblocked``); with a
  second number, at least the first and until a file ``<path>.release`` appears, at most the second;
- ``leave_on_exit``: StaticConsumer.leave_group() instead of close() on SIGTERM;
- ``event_log``: path of a JSONL membership event log; ``otel``: OpenTelemetry totals as ``metrics``;
- ``hold``: import everything, emit ``held`` and wait for a line on stdin before starting the consumer;
- ``workload``: per-record processing time, modelled state rebuilds and liveness ticks, with processing
  times in ``records`` events (see ``static_consumer_lab.children.workload``); both modes then commit only the
  records processed (the static mode in a loop of its own, see
  ``static_consumer_lab.children.static_member``).

Events: ready, assigned, revoked, lost, records (with [topic, partition, offset] triples), committed,
commit_deferred (a transient commit failure: the offsets go with the next commit), commit_refused,
stalled (StaticConsumer's stall guard), blocking and unblocked (with ``block``), error, fenced, closed,
metrics (with ``otel``), rebuild and alive (with ``workload``), held, exit. SIGTERM finishes the current
batch, commits and closes.

A refused commit (the partitions moved, or the session ended during the batch) never ends a child: the
static mode's loop is the library's, which goes on (``commit_refused`` comes from its ``CommitRefused``
event); the plain consumer goes on after a commit error that is not fatal, as a plain confluent-kafka
application that catches it does (its records come again), and ends on a fatal one.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from static_consumer_lab.children.workload import Workload

_stop = False
_lines = threading.Lock()  # a workload's liveness ticks come from a thread of their own


def emit(kind: str, **fields: Any) -> None:
    line = json.dumps({"kind": kind, "ts": time.time(), **fields}) + "\n"
    with _lines:
        sys.stdout.write(line)
        sys.stdout.flush()


def _on_sigterm(_signum: int, _frame: Any) -> None:
    global _stop
    _stop = True


def _tps(partitions: Any) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in partitions)


def run_confluent(spec: dict[str, Any]) -> int:
    """A plain confluent-kafka consumer written the way its documentation tells users to: commit what was
    processed after each batch, and in the revoke callback commit what was processed of the partitions
    being revoked before they go (a commit refused meanwhile is reported and consumption goes on)."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    work = Workload(spec["workload"], emit) if spec.get("workload") is not None else None
    processed: dict[tuple[str, int], int] = {}  # next offsets processed, not yet committed (no workload)
    commit_enabled = spec.get("commit", True)

    def commit(c: Any, partitions: set[tuple[str, int]] | None = None) -> None:
        if work is not None:
            offsets = work.take_done(partitions)
        else:
            keys = [k for k in processed if partitions is None or k in partitions]
            offsets = {k: processed.pop(k) for k in keys}
        if not offsets or not commit_enabled:
            return
        try:
            c.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())], asynchronous=False
            )
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise
            emit("commit_refused", error=exc.args[0].name(), reason=str(exc))
            return
        emit("committed", offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])

    def on_assign(c: Any, ps: Any) -> None:
        emit("assigned", partitions=_tps(ps), member_id=c.memberid())
        if work is not None:
            work.assigned((tp.topic, tp.partition) for tp in ps)

    def on_revoke(kind: str) -> Callable[[Any, Any], None]:
        def revoke(c: Any, ps: Any) -> None:
            gone = {(tp.topic, tp.partition) for tp in ps}
            if work is not None:
                work.revoked(gone)
            if kind == "revoked":  # still ours: commit what was processed of them (lost: too late)
                commit(c, gone)
            else:
                for key in gone:
                    processed.pop(key, None)
                if work is not None:
                    work.take_done(gone)
            emit(kind, partitions=_tps(ps))

        return revoke

    consumer = Consumer(spec["config"])
    consumer.subscribe(
        spec["topics"], on_assign=on_assign, on_revoke=on_revoke("revoked"), on_lost=on_revoke("lost")
    )
    emit("ready")
    deadline = time.monotonic() + float(spec.get("max_runtime_s", 300))
    seen = 0
    max_records = spec.get("max_records")
    try:
        while not _stop and time.monotonic() < deadline and (max_records is None or seen < max_records):
            msgs = consumer.consume(int(spec.get("batch", 500)), 0.2)
            if work is not None:
                work.tick()
                work.settle()
            batch: list[list[Any]] = []
            created: list[int | None] = []
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    emit("error", code=err.code(), name=err.name(), reason=err.str(), fatal=err.fatal())
                    if err.code() == KafkaError._FATAL:
                        return 3
                    continue
                batch.append([msg.topic(), msg.partition(), msg.offset()])
                created.append(msg.timestamp()[1])
            if batch:
                seen += len(batch)
                if work is not None:
                    work.process([(t, p, o, c) for (t, p, o), c in zip(batch, created, strict=True)])
                else:
                    emit("records", records=batch)
                    for topic, partition, offset in batch:
                        processed[(topic, partition)] = max(offset + 1, processed.get((topic, partition), 0))
                time.sleep(float(spec.get("process_s", 0)))
            commit(consumer)  # also what a rebuild worker processed meanwhile
    finally:
        consumer.close()
        emit("closed")
    return 0


def _hold(mode: str) -> bool:
    """Load everything the mode needs, say ``held``, and wait for a line on stdin; False on EOF.

    Lets a caller start the interpreter ahead of time, so that when the consumer starts does not depend
    on how long Python takes to import on a busy machine.
    """
    import confluent_kafka  # noqa: F401 - imported for its load time

    if mode == "static":
        import static_consumer_lab.children.static_member  # noqa: F401 - imported for its load time
    emit("held")
    return bool(sys.stdin.readline())


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    signal.signal(signal.SIGTERM, _on_sigterm)
    mode = spec.get("mode", "confluent")
    if spec.get("hold") and not _hold(mode):
        code = 0
    elif mode == "confluent":
        code = run_confluent(spec)
    elif mode == "static":
        from static_consumer_lab.children.static_member import run_static

        code = run_static(spec, emit, lambda: _stop)
    elif mode == "spark":
        from static_consumer_lab.children.spark_member import run_spark

        code = run_spark(spec, emit)
    else:
        emit("error", reason=f"unknown mode {mode!r}")
        code = 2
    emit("exit", code=code)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
