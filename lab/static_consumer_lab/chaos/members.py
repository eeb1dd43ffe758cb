"""The members of a chaos run, restarted like pods: every process that ends is started again.

Each member is a :class:`~static_consumer_lab.children.pods.PoolPod`: the README's single-process pod
main (``plain``, one static member named after the pod) or a pool pod (``static-consumer run
--processes N``, N static members ``<pod>-<k>``), each with a ``restart_state_dir`` of its own as the
Kubernetes kit sets on the pod's ``emptyDir``. A supervisor thread plays the kubelet: it records
every exit (``exits.jsonl``) and starts the pod again ``restart_delay_s`` later (twice as late, up to
10 s, when it keeps ending with an error within 30 s of its start, as a crash-loop back-off would). A
pool pod restarts its own workers.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from static_consumer_lab.chaos.evidence import Exit, append_json
from static_consumer_lab.children.pods import PoolPod
from static_consumer_lab.children.processes import wait_until

_QUICK_EXIT_S = 30.0
_MAX_DELAY_S = 10.0


class Members:
    """Pods named ``names`` (``pools``: those run as pools of ``processes`` workers), in ``run_dir``."""

    def __init__(
        self,
        names: Iterable[str],
        *,
        settings: Mapping[str, Any],
        run_dir: Path,
        pools: Iterable[str] = (),
        processes: int = 2,
        restart_delay_s: float = 1.0,
    ) -> None:
        pooled = set(pools)
        self.pods = {
            name: PoolPod(
                name,
                processes=processes,
                # The kit's emptyDir: a directory of the pod's own that outlives its container's restarts.
                settings={**settings, "restart_state_dir": str(run_dir / "restart" / name)},
                workdir=run_dir,
                plain=name not in pooled,
            )
            for name in names
        }
        self.exits_file = run_dir / "exits.jsonl"
        self.exits: list[Exit] = []
        self._delay = restart_delay_s
        self._delays = dict.fromkeys(self.pods, restart_delay_s)
        self._due: dict[str, float] = {}
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._supervise, name="chaos-pods", daemon=True)

    # ----------------------------------------------------------------------------------- lifecycle
    def start(self) -> Members:
        for pod in self.pods.values():
            pod.start()
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> float:
        """SIGTERM to every pod (the final stop), each exit recorded; when the SIGTERMs went out."""
        self._stopping.set()
        self._thread.join(timeout=10)
        stopped = time.time()
        for pod in self.pods.values():
            pod.terminate()
        for name, pod in self.pods.items():
            if pod.proc is None:
                continue
            try:
                code = pod.proc.wait(timeout=timeout_s)
            except Exception:  # noqa: BLE001 - did not stop: killed, and recorded as such
                pod.proc.kill()
                code = pod.proc.wait(timeout=10)
            self._record(name, pod.proc.pid, code)
        return stopped

    def kill_all(self) -> None:
        """SIGKILL to whatever still runs (a failed run's clean-up)."""
        self._stopping.set()
        for pod in self.pods.values():
            if pod.proc is not None and pod.proc.poll() is None:
                pod.proc.send_signal(signal.SIGCONT)
                pod.kill()

    # ----------------------------------------------------------------------------------- observing
    def pid(self, name: str) -> int:
        proc = self.pods[name].proc
        assert proc is not None, f"{name} never started"
        return proc.pid

    def handler_pids(self, name: str) -> list[int]:
        """The processes that handle records: the pod main itself, or a pool pod's running workers."""
        pod = self.pods[name]
        if pod.plain:
            return [self.pid(name)]
        return [int(w["pid"]) for w in pod.workers() if w.get("pid")]

    def wait_started_after(self, name: str, at: float, timeout_s: float = 90.0) -> float:
        """When ``name``'s pod was started again after ``at``."""
        pod = self.pods[name]
        wait_until(lambda: pod.started_at > at, timeout_s, f"{name} started again", poll_s=0.05)
        return pod.started_at

    def wait_worker_replaced(self, name: str, pid: int, timeout_s: float = 60.0) -> float:
        """When a pool pod's worker ``pid`` (killed) was seen replaced by a new process."""
        pod = self.pods[name]

        def replaced() -> bool:
            workers = pod.workers()
            return bool(workers) and all(w.get("pid") and w["pid"] != pid for w in workers)

        wait_until(replaced, timeout_s, f"{name}'s worker {pid} replaced", poll_s=0.05)
        return time.time()

    # --------------------------------------------------------------------------------- supervision
    def _record(self, name: str, pid: int, code: int) -> None:
        with self._lock:
            ended = Exit(name, pid, code, time.time())
            self.exits.append(ended)
            append_json(self.exits_file, ended.__dict__)

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            now = time.time()
            for name, pod in self.pods.items():
                proc = pod.proc
                if proc is None:
                    continue
                if name not in self._due and proc.poll() is not None:
                    self._record(name, proc.pid, proc.returncode)
                    quick = now - pod.started_at < _QUICK_EXIT_S and proc.returncode > 0
                    self._delays[name] = min(_MAX_DELAY_S, self._delays[name] * 2) if quick else self._delay
                    self._due[name] = now + self._delays[name]
                elif name in self._due and now >= self._due[name]:
                    del self._due[name]
                    pod.start()
            self._stopping.wait(0.05)


__all__ = ["Members"]
