"""A pod main for integration/test_failing_records.py, in a process of its own: ``run_until_sigterm``
with the settings given as JSON, a handler that fails on the poison values, and (``kill_on_dead_letter``)
a listener that kill -9s the process on its first ``RecordDeadLettered`` event: after the dead-letter
write was acknowledged and before the source offset is committed past it. Handled values go to
``handled`` (one line each, flushed)."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any

from static_consumer import (
    ConsumerSettings,
    MembershipListener,
    RecordDeadLettered,
    RecordFailedError,
    StaticConsumer,
    exit_code_for,
    run_until_sigterm,
)
from static_consumer._base.records import Record


class OnDeadLetter(MembershipListener):
    def __init__(self, kill: bool) -> None:
        self.kill = kill
        self.count = 0

    def on_record_dead_lettered(self, event: RecordDeadLettered) -> None:
        if self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        self.count += 1


def main(spec: dict[str, Any]) -> int:
    settings = ConsumerSettings(**spec["settings"])
    lettered = OnDeadLetter(bool(spec.get("kill_on_dead_letter")))
    consumer = StaticConsumer(settings, listeners=[lettered], env={})
    poison = set(spec["poison"])
    want = int(spec["good"])
    seen: set[int] = set()
    out = open(spec["handled"], "a", encoding="utf-8")  # noqa: SIM115 - the process's life

    def handle(batch: list[Record]) -> None:
        for record in batch:
            value = int(record.value or b"-1")
            if value in poison:
                raise RecordFailedError(record) from ValueError(f"poison {value}")
            out.write(f"{value}\n")
            seen.add(value)
        out.flush()

    def watch() -> None:  # the last records may be settled without another handler call
        while not consumer.stopping:
            if len(seen) >= want and lettered.count >= len(poison):
                consumer.stop()
            time.sleep(0.1)

    threading.Thread(target=watch, daemon=True).start()
    try:
        run_until_sigterm(consumer, handle, poll_timeout_s=0.2)
    except Exception as exc:  # noqa: BLE001 - the exit code a pod would end with
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return exit_code_for(exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(json.loads(sys.argv[1])))
