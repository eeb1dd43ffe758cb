"""The pool's health: one answer per worker, readiness for the pod, and the files a probe reads.

A worker reports its consumer's :class:`~static_consumer.Status` to the supervisor after every
membership event and at most once a second while it processes batches; the supervisor adds what only it
knows (pid, restarts, the last exit). The pod is ready when every worker is: each has joined (an
assignment arrived, possibly empty) and has not lost its partitions since, and none is restarting.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from static_consumer._base.records import TopicPartition
from static_consumer._core.consumer import State


@dataclass(frozen=True)
class WorkerStatus:
    """One worker as the supervisor sees it.

    ``state`` is the worker's consumer state as last reported (None before its first report and while it
    is down); ``ready``: joined and not lost since. ``restarts`` counts this worker's restarts,
    ``last_exit`` the exit status of its previous process (None if it never ended), ``error`` why it
    ended or why its consumer failed. ``records`` were handed to the handler by the current process, the
    last batch at ``last_batch_at`` (wall clock).
    """

    index: int
    instance_id: str | None
    pid: int | None = None
    state: State | None = None
    ready: bool = False
    member_id: str | None = None
    generation: int | None = None
    assignment: tuple[TopicPartition, ...] = ()
    restarts: int = 0
    last_exit: int | None = None
    error: str | None = None
    records: int = 0
    last_batch_at: float | None = None
    restart_at: float | None = None  # wall clock of a pending restart

    def reported(self, report: Mapping[str, Any]) -> WorkerStatus:
        """This status updated with a worker's report (see ``_worker.Reporter``)."""
        return replace(
            self,
            state=State(report["state"]),
            ready=bool(report["ready"]),
            member_id=report["member_id"],
            generation=report["generation"],
            assignment=tuple(TopicPartition(t, p) for t, p in report["assignment"]),
            error=report["error"] or self.error,
            records=int(report["records"]),
            last_batch_at=report["last_batch_at"],
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["state"] = None if self.state is None else self.state.value
        data["assignment"] = [str(tp) for tp in self.assignment]
        return data


@dataclass(frozen=True)
class PoolStatus:
    """Every worker's status; ``ready`` when all workers are and the pool is not stopping."""

    workers: tuple[WorkerStatus, ...]
    stopping: bool = False
    exit_code: int | None = None  # set once the pool has ended
    at: float = field(default_factory=time.time)

    @property
    def ready(self) -> bool:
        return not self.stopping and all(w.ready for w in self.workers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "stopping": self.stopping,
            "exit_code": self.exit_code,
            "at": self.at,
            "workers": [w.to_dict() for w in self.workers],
        }


class StatusFiles:
    """Keeps a readiness file (exists while the pool is ready: for an ``exec: test -f`` probe) and a
    JSON status file (every worker's status, replaced atomically) in step with the pool. Either may be
    None. Call it with each new :class:`PoolStatus`; :meth:`clear` removes the readiness file."""

    def __init__(self, ready_file: str | os.PathLike[str] | None, status_file: str | os.PathLike[str] | None):
        self.ready_file = Path(ready_file) if ready_file is not None else None
        self.status_file = Path(status_file) if status_file is not None else None
        for path in (self.ready_file, self.status_file):
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        self.clear()  # a file left by the previous container of this pod must not count

    def __call__(self, status: PoolStatus) -> None:
        if self.status_file is not None:
            partial = self.status_file.with_name(f".{self.status_file.name}.{os.getpid()}")
            partial.write_text(json.dumps(status.to_dict(), indent=1) + "\n")
            os.replace(partial, self.status_file)
        if self.ready_file is not None:
            if status.ready:
                self.ready_file.touch()
            else:
                self.ready_file.unlink(missing_ok=True)

    def clear(self) -> None:
        if self.ready_file is not None:
            self.ready_file.unlink(missing_ok=True)


__all__ = ["PoolStatus", "StatusFiles", "WorkerStatus"]
