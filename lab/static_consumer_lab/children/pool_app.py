"""The handler a lab pod runs under ``static-consumer run`` (:mod:`static_consumer_lab.children.pods`).

``static-consumer run --setup static_consumer_lab.children.pool_app:setup
static_consumer_lab.children.pool_app:handle``; what it does comes from the environment:

- ``POOL_APP_WORK_ITERATIONS``: pure-Python work per record (a loop of that many iterations; the
  benchmark calibrates it to CPU time per record, so the work is the same whatever the load);
- ``POOL_APP_RECORDS``: append ``topic partition offset instance_id pid handed`` per record to this file
  (``pid`` the handling process, ``handed`` the wall clock when the handler got the batch);
- ``POOL_APP_BATCHES``: append ``instance_id records started ended work_cpu`` per batch to this file
  (started and ended wall clock; work_cpu the CPU seconds of this thread the work loop took).

Each worker opens the files in ``setup`` (after the fork) with O_APPEND and writes a batch in one call,
so the workers of a pod can share them. ``python -m static_consumer_lab.children.pool_app`` is the same
handler in the single-process pod main of the README (``run_until_sigterm``, no pool): the control.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from static_consumer import Record
from static_consumer.pool import WorkerInfo

_worker: dict[str, Any] = {"instance_id": None, "records": None, "batches": None, "iterations": 0}


def work(iterations: int) -> int:
    """Pure-Python work: the CPU-bound part of a handler (a GIL-holding loop, no I/O)."""
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return total


def calibrate(seconds_per_record: float, rounds: int = 5) -> int:
    """The iterations of :func:`work` that take ``seconds_per_record`` of this thread's CPU time (the
    median of ``rounds`` measurements; CPU time, not wall time, so other processes on the machine do not
    shrink the work)."""
    probe = 200_000
    taken = statistics.median(_cpu_time(probe) for _ in range(rounds))
    return max(1, round(probe * seconds_per_record / taken))


def _cpu_time(iterations: int) -> float:
    began = time.thread_time()
    work(iterations)
    return time.thread_time() - began


def _open(variable: str) -> int | None:
    path = os.environ.get(variable)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None


def setup(info: WorkerInfo) -> None:
    _worker.update(
        instance_id=info.instance_id,
        records=_open("POOL_APP_RECORDS"),
        batches=_open("POOL_APP_BATCHES"),
        iterations=int(os.environ.get("POOL_APP_WORK_ITERATIONS", "0")),
    )


def handle(batch: list[Record]) -> None:
    started, cpu = time.time(), time.thread_time()
    iterations = _worker["iterations"]
    if iterations:
        for _ in batch:
            work(iterations)
    cpu = time.thread_time() - cpu
    who = _worker["instance_id"]
    if _worker["records"] is not None:
        tail = f"{who} {os.getpid()} {started:.6f}\n"
        lines = "".join(f"{r.topic} {r.partition} {r.offset} {tail}" for r in batch)
        os.write(_worker["records"], lines.encode())
    if _worker["batches"] is not None:
        os.write(
            _worker["batches"], f"{who} {len(batch)} {started:.6f} {time.time():.6f} {cpu:.6f}\n".encode()
        )


def main() -> int:
    """The README's single-process pod main around :func:`handle`."""
    from static_consumer import ConsumerSettings, StaticConsumer, exit_code_for, run_until_sigterm

    try:
        consumer = StaticConsumer(ConsumerSettings.load())
        setup(WorkerInfo(0, 1, os.environ.get("POD_NAME"), os.environ.get("POD_NAME")))
        run_until_sigterm(consumer, handle)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a documented exit code
        return exit_code_for(exc)
    return 0


__all__ = ["calibrate", "handle", "main", "setup", "work"]


if __name__ == "__main__":
    raise SystemExit(main())
