"""The ``static`` mode of the child consumer: a StaticConsumer whose membership events are streamed."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from static_consumer import (
    Assigned,
    Closed,
    CommitFailedError,
    ConsumerSettings,
    FatalError,
    Fenced,
    FencedInstanceError,
    Lost,
    MembershipListener,
    Revoked,
    Stalled,
    StaticConsumer,
    StaticConsumerError,
    TopicPartition,
    exit_code_for,
)
from static_consumer.shutdown import BatchCommitter
from static_consumer_lab.child_work import Workload

Emit = Callable[..., None]


def _tps(partitions: tuple[TopicPartition, ...]) -> list[list[Any]]:
    return sorted([tp.topic, tp.partition] for tp in partitions)


class _Streamer(MembershipListener):
    """Streams membership events; ``generation`` is the group generation (classic) or member epoch."""

    def __init__(self, emit: Emit, work: Workload | None) -> None:
        self.emit = emit
        self.work = work

    def on_assigned(self, event: Assigned) -> None:
        self.emit(
            "assigned",
            partitions=_tps(event.partitions),
            member_id=event.member_id,
            generation=event.generation,
        )
        if self.work is not None:
            self.work.assigned((tp.topic, tp.partition) for tp in event.partitions)

    def on_revoked(self, event: Revoked) -> None:
        self.emit("revoked", partitions=_tps(event.partitions), generation=event.generation)
        if self.work is not None:
            self.work.revoked((tp.topic, tp.partition) for tp in event.partitions)

    def on_lost(self, event: Lost) -> None:
        self.emit("lost", partitions=_tps(event.partitions), generation=event.generation)
        if self.work is not None:
            self.work.revoked((tp.topic, tp.partition) for tp in event.partitions)

    def on_fenced(self, event: Fenced) -> None:
        self.emit("fenced", error=event.error)

    def on_fatal(self, event: FatalError) -> None:
        self.emit("fatal", error=event.error)

    def on_closed(self, event: Closed) -> None:
        self.emit("closed", left_group=event.left_group)

    def on_stalled(self, event: Stalled) -> None:
        rewound = sorted([tp.topic, tp.partition, offset] for tp, offset in event.rewound)
        self.emit(
            "stalled",
            gap_s=event.gap_s,
            verdict=event.verdict,
            dropped=event.dropped,
            threshold_s=event.threshold_s,
            rewound=rewound,
            waited_s=event.waited_s,
            member_id=event.member_id,
        )


def block_if_asked(trigger: str | None, emit: Emit) -> None:
    """A handler that blocks when told: when the file ``trigger`` exists, read "SECONDS" or
    "SECONDS MAX_SECONDS" from it, remove it and block between handing the batch out and committing it:
    SECONDS, or with MAX_SECONDS at least SECONDS and until a file ``trigger + ".release"`` appears (at
    most MAX_SECONDS), so a test can hold the handler until what it waits for happened."""
    if not trigger or not os.path.exists(trigger):
        return
    least, *most = (float(word) for word in Path(trigger).read_text().split())
    os.unlink(trigger)
    emit("blocking", seconds=least)
    began = time.monotonic()
    time.sleep(least)
    release = Path(trigger + ".release")
    while most and not release.exists() and time.monotonic() - began < most[0]:
        time.sleep(0.05)
    release.unlink(missing_ok=True)
    emit("unblocked")


def run_static(spec: dict[str, Any], emit: Emit, should_stop: Callable[[], bool]) -> int:
    settings = ConsumerSettings(**spec["settings"])
    work = Workload(spec["workload"], emit) if spec.get("workload") is not None else None
    listeners: list[MembershipListener] = [_Streamer(emit, work)]
    if spec.get("event_log"):  # a JSONL membership event log at this path (appended to)
        from static_consumer.telemetry import EventLog

        listeners.append(EventLog(spec["event_log"]))
    if spec.get("otel"):  # OpenTelemetry metrics, streamed as "metrics" events
        from static_consumer_lab.child_otel import otel_listeners

        listeners.extend(otel_listeners(emit))
    consumer = StaticConsumer(settings, listeners=listeners, env=spec.get("env", {}))
    committer = BatchCommitter(consumer)
    deadline = time.monotonic() + float(spec.get("max_runtime_s", 300))
    max_records = spec.get("max_records")
    seen = 0
    try:
        consumer.start()
        emit("ready", instance_id=consumer.instance_id, static=consumer.static)
        while (
            not should_stop() and time.monotonic() < deadline and (max_records is None or seen < max_records)
        ):
            records = consumer.consume(int(spec.get("batch", 500)), 0.2)
            returned = time.time()  # handed out now: a freeze may come before the records event
            if work is not None:
                work.tick()
                work.settle()
            if not records:
                continue
            seen += len(records)
            if work is not None:
                work.process([(r.topic, r.partition, r.offset, r.timestamp_ms) for r in records])
            else:
                handed = [[r.topic, r.partition, r.offset] for r in records]
                emit("records", records=handed, returned=returned)
            time.sleep(float(spec.get("process_s", 0)))
            block_if_asked(spec.get("block"), emit)
            if spec.get("commit", True):
                called = time.time()
                try:
                    sent = committer.commit(records)  # like run_until_sigterm: rides out coordinator moves
                except CommitFailedError as exc:
                    if not spec.get("go_on_after_refused_commit"):
                        raise
                    emit("commit_refused", reason=str(exc))  # the records come again (at-least-once)
                    continue
                if sent is None:
                    emit("commit_deferred")
                else:
                    emit(
                        "committed",
                        offsets=sorted([tp.topic, tp.partition, o] for tp, o in sent.items()),
                        called=called,
                    )
        if spec.get("leave_on_exit"):
            consumer.leave_group()
        else:
            consumer.close()
        return 0
    except FencedInstanceError as exc:
        emit("error", kind_of="FencedInstanceError", reason=str(exc), exit_code=exc.exit_code)
        consumer.close()
        return exit_code_for(exc)
    except StaticConsumerError as exc:
        emit("error", kind_of=type(exc).__name__, reason=str(exc), exit_code=exc.exit_code)
        consumer.close()
        return exit_code_for(exc)
