"""A pod that runs ``static-consumer run --processes N`` in a child process, as a StatefulSet pod would.

Everything the pod says is read from the files the command writes: its readiness file, its status file
(every worker: pid, state, assignment, restarts, last exit), its JSONL membership event log (every
worker's events, with instance ids and generations), and the records and batches
:mod:`static_consumer_lab.children.pool_app` handled. Used by integration/test_pool.py and
bench/bench_pool.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from static_consumer.telemetry import read_event_log
from static_consumer_lab.children.processes import wait_until

APP = "static_consumer_lab.children.pool_app"


def settings_env(settings: Mapping[str, Any]) -> dict[str, str]:
    """ConsumerSettings fields as the ``STATIC_CONSUMER_*`` variables a pod's manifest would set."""
    env = {}
    for field, value in settings.items():
        if isinstance(value, list | tuple):
            value = ",".join(map(str, value))
        env[f"STATIC_CONSUMER_{field.upper()}"] = str(value)
    return env


class PoolPod:
    """``static-consumer run --processes N static_consumer_lab.children.pool_app:handle`` with
    ``POD_NAME=name``.

    ``settings``: ConsumerSettings fields, passed as ``STATIC_CONSUMER_*`` variables; ``env``: more
    variables (e.g. ``POOL_APP_WORK_ITERATIONS``). The pod's files live in ``workdir / name``; they are
    kept across restarts of the pod (each start appends to the event log and the records).
    """

    def __init__(
        self,
        name: str,
        *,
        processes: int,
        settings: Mapping[str, Any],
        workdir: Path,
        env: Mapping[str, str] | None = None,
        record_offsets: bool = True,
        plain: bool = False,
    ) -> None:
        self.name = name
        self.plain = plain  # the single-process pod main instead (no pool, no status file): the control
        self.processes = processes
        self.dir = workdir / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.ready_file = self.dir / "ready"
        self.status_file = self.dir / "status.json"
        self.event_log = self.dir / "events.jsonl"
        self.records_file = self.dir / "records.txt"
        self.batches_file = self.dir / "batches.txt"
        self._env = {
            **os.environ,
            **settings_env(settings),
            "POD_NAME": name,
            "POOL_APP_BATCHES": str(self.batches_file),
            **({"POOL_APP_RECORDS": str(self.records_file)} if record_offsets else {}),
            **(env or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.starts = 0

    def argv(self) -> list[str]:
        if self.plain:
            return [sys.executable, "-m", APP]
        return [
            sys.executable,
            "-m",
            "static_consumer.command",  # the static-consumer script's module
            "run",
            "--processes",
            str(self.processes),
            "--setup",
            f"{APP}:setup",
            "--ready-file",
            str(self.ready_file),
            "--status-file",
            str(self.status_file),
            "--event-log",
            str(self.event_log),
            f"{APP}:handle",
        ]

    def start(self, processes: int | None = None) -> PoolPod:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
        if processes is not None:
            self.processes = processes
        self.status_file.unlink(missing_ok=True)
        self.starts += 1
        with open(self.dir / f"stderr-{self.starts}.txt", "wb") as err:
            self.proc = subprocess.Popen(self.argv(), env=self._env, stdout=subprocess.DEVNULL, stderr=err)
        self.started_at = time.time()
        return self

    # ---------------------------------------------------------------------------------- observing
    def status(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads(self.status_file.read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def workers(self) -> list[dict[str, Any]]:
        status = self.status()
        return list(status["workers"]) if status else []

    @property
    def ready(self) -> bool:
        return self.ready_file.exists()

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        wait_until(lambda: self.ready, timeout_s, lambda: f"{self.name} ready; {self.describe()}")

    def owned(self) -> dict[str, set[tuple[str, int]]]:
        """instance id -> partitions, from the status file."""
        owned = {}
        for worker in self.workers():
            owned[worker["instance_id"]] = {_partition(tp) for tp in worker["assignment"]}
        return owned

    def events(self, since: float = 0.0) -> list[dict[str, Any]]:
        if not self.event_log.exists():
            return []
        return [e for e in read_event_log(self.event_log) if event_time(e) >= since]

    def revocations(self, since: float, until: float = float("inf")) -> list[dict[str, Any]]:
        """Revoked or lost events with partitions between ``since`` and ``until`` (wall clock)."""
        return [
            e
            for e in self.events(since)
            if e["event"] in ("revoked", "lost") and e["partitions"] and event_time(e) < until
        ]

    def records(self) -> list[tuple[str, int, int]]:
        if not self.records_file.exists():
            return []
        out = []
        for line in self.records_file.read_text().splitlines():
            topic, partition, offset, *_ = line.split(" ")
            out.append((topic, int(partition), int(offset)))
        return out

    def batches(self) -> list[tuple[str, int, float, float]]:
        """``(instance id, records, started, ended)`` per batch handled."""
        return [
            (who, int(count), float(began), float(ended))
            for who, count, began, ended, _ in self._batch_lines()
        ]

    def work_cpu_s(self) -> float:
        """CPU seconds the handler's work loop took so far, over every batch of every worker."""
        return sum(float(work_cpu) for *_, work_cpu in self._batch_lines())

    def _batch_lines(self) -> list[list[str]]:
        """The batches file's lines, split: ``instance_id records started ended work_cpu`` (pool_app)."""
        if not self.batches_file.exists():
            return []
        return [line.split(" ") for line in self.batches_file.read_text().splitlines()]

    def describe(self) -> str:
        code = None if self.proc is None else self.proc.poll()
        tail = (self.dir / f"stderr-{self.starts}.txt").read_text(errors="replace").splitlines()[-15:]
        return f"exit {code}; workers {self.workers()}\nstderr:\n" + "\n".join(tail)

    # ----------------------------------------------------------------------------------- stopping
    def terminate(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.name} did not exit within {timeout_s} s; {self.describe()}"
            ) from None

    def stop(self, timeout_s: float = 60.0) -> int:
        """SIGTERM to the pod's main, as the kubelet sends it; its exit code."""
        self.terminate()
        return self.wait(timeout_s)

    def kill(self) -> None:
        """SIGKILL to the pod's main (its workers get SIGTERM from Linux: PR_SET_PDEATHSIG)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def kill_worker(self, index: int) -> int:
        """SIGKILL to one worker (an OOM kill); its pid."""
        pid = self.workers()[index]["pid"]
        assert pid, f"worker {index} of {self.name} is not running: {self.workers()}"
        os.kill(pid, signal.SIGKILL)
        return int(pid)


def event_time(event: Mapping[str, Any]) -> float:
    """An event log record's time, as a wall-clock timestamp."""
    return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()


def _partition(text: str) -> tuple[str, int]:
    topic, _, rest = text.rpartition("[")
    return topic, int(rest.rstrip("]"))


__all__ = ["APP", "PoolPod", "event_time", "settings_env"]
