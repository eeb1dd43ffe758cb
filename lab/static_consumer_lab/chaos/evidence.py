"""What a chaos run leaves behind, as plain data, and its files in the run directory.

Raw evidence only: every record each process handed to the handler, every acknowledged record, every
fault as carried out, every process exit, the committed offsets sampled from outside the members, the
committed offsets and log end offsets at the end, and the group's rebalances from the broker log. The
invariants (``invariants.py``) are computed from these files alone, so a saved run can be checked again.

Files of a run directory:

- ``config.json``: the run's settings (seed, protocol, members, session, ...) and its phase times;
- ``schedule.json``: the planned faults (``schedule.Fault``);
- ``faults.jsonl``: the faults as carried out (:class:`Done`);
- ``acked.txt``: ``partition offset`` per acknowledged record;
- ``<member>/records.txt``: ``topic partition offset instance_id pid handed`` per handled record (the
  handler of ``children/pool_app.py``, appended by every process of that member in handling order);
- ``exits.jsonl``: (:class:`Exit`); ``samples.jsonl``: (:class:`Sample`);
- ``end.json``: ``committed`` and ``log_end`` per partition, and ``rebalances`` ([kind, value, ts]).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Handled:
    """One record handed to the handler: by process ``pid`` of ``member`` at wall time ``at``."""

    partition: int
    offset: int
    member: str
    pid: int
    at: float


@dataclass(frozen=True)
class Done:
    """A fault as carried out: started at ``start`` (the signal, the kill, the revoke), over at ``end``
    (the member's new process started, SIGCONT sent, the broker answering again, the ACL granted back).
    ``pids``: the processes it hit; ``coordinator``: for a broker fault, whether the node was the group's
    coordinator when it went down."""

    index: int
    kind: str
    targets: tuple[str, ...]
    start: float
    end: float
    pids: tuple[int, ...] = ()
    coordinator: bool | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Done:
        return cls(**{**data, "targets": tuple(data["targets"]), "pids": tuple(data["pids"])})


@dataclass(frozen=True)
class Exit:
    """A member's process ended with ``code`` (``-N``: killed by signal N) at ``at``."""

    member: str
    pid: int
    code: int
    at: float


@dataclass(frozen=True)
class Sample:
    """The group's committed offsets as a separate client read them; asked at ``at``."""

    at: float
    committed: dict[int, int]


@dataclass
class Evidence:
    """Everything a run recorded. ``began``/``stopped``: when the faults phase began and when the final
    SIGTERM went to every member; ``session_s``, ``grace_s``: what the windows are made of."""

    acked: set[tuple[int, int]]
    handled: list[Handled]
    faults: list[Done]
    exits: list[Exit]
    samples: list[Sample]
    committed: dict[int, int]
    log_end: dict[int, int]
    rebalances: list[tuple[str, int, float]]
    began: float
    stopped: float
    session_s: float
    grace_s: float


# ------------------------------------------------------------------------------------------- files
def append_json(path: Path, item: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(item, separators=(",", ":")) + "\n")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                yield json.loads(line)


def write_acked(path: Path, acked: Iterable[tuple[int, int]]) -> None:
    path.write_text("".join(f"{p} {o}\n" for p, o in sorted(acked)))


def read_handled(path: Path) -> Iterator[Handled]:
    """The records file of one member (``children/pool_app.py``'s lines), in the order written."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        parts = line.split(" ")
        if len(parts) == 6:  # a line cut by a SIGKILL mid-write has fewer
            _topic, partition, offset, member, pid, at = parts
            yield Handled(int(partition), int(offset), member, int(pid), float(at))


def load(run_dir: Path) -> Evidence:
    config = json.loads((run_dir / "config.json").read_text())
    end = json.loads((run_dir / "end.json").read_text())
    acked = {
        (int(p), int(o))
        for p, o in (line.split() for line in (run_dir / "acked.txt").read_text().splitlines() if line)
    }
    handled = [h for path in sorted(run_dir.glob("*/records.txt")) for h in read_handled(path)]
    return Evidence(
        acked=acked,
        handled=handled,
        faults=[Done.from_json(d) for d in read_jsonl(run_dir / "faults.jsonl")],
        exits=[Exit(**d) for d in read_jsonl(run_dir / "exits.jsonl")],
        samples=[
            Sample(d["at"], {int(p): o for p, o in d["committed"].items()})
            for d in read_jsonl(run_dir / "samples.jsonl")
        ],
        committed={int(p): o for p, o in end["committed"].items()},
        log_end={int(p): o for p, o in end["log_end"].items()},
        rebalances=[(k, int(v), float(ts)) for k, v, ts in end["rebalances"]],
        began=config["began"],
        stopped=config["stopped"],
        session_s=config["session_s"],
        grace_s=config["grace_s"],
    )


__all__ = [
    "Done",
    "Evidence",
    "Exit",
    "Handled",
    "Sample",
    "append_json",
    "load",
    "read_handled",
    "read_jsonl",
    "write_acked",
]
