"""When is a group done rebalancing, and has it processed everything? Watched for all groups at once.

The runner polls this while the consumers run, in the process that also reads every consumer's event
stream: it reads each stream incrementally, so polling costs the same late in a run as early on
(re-reading whole streams starved the reader threads, and the children then blocked on their stdout).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess

POLL_S = 0.25
Partition = tuple[str, int]


class Watcher:
    """Ownership and processed records per group, kept up to date from new events only."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}
        self._owned: dict[int, set[Partition]] = {}
        self._processed: dict[int, set[tuple[str, int, int]]] = {}

    def _advance(self, proc: ConsumerProcess) -> None:
        key = id(proc)  # the group keeps every process it started, so ids stay unique
        new = proc.events_since(self._seen.get(key, 0))
        self._seen[key] = self._seen.get(key, 0) + len(new)
        owned = self._owned.setdefault(key, set())
        processed = self._processed.setdefault(key, set())
        for event in new:
            kind = event["kind"]
            if kind == "assigned":
                owned.update((t, p) for t, p in event["partitions"])
            elif kind in ("revoked", "lost"):
                owned.difference_update((t, p) for t, p in event["partitions"])
            elif kind == "records":
                processed.update((t, p, o) for t, p, o in event["records"])

    def owned(self, group: Group) -> dict[str, set[Partition]]:
        for proc in group.members.values():
            self._advance(proc)
        return {name: set(self._owned[id(proc)]) for name, proc in group.members.items()}

    def processed(self, group: Group) -> int:
        """Distinct records the group's processes (live or retired) have processed."""
        procs = group.all_processes()
        for proc in procs:
            self._advance(proc)
        return len(set().union(*(self._processed[id(p)] for p in procs)))


def _check_alive(strategy: str, group: Group) -> None:
    for proc in group.members.values():
        if proc.returncode is not None:
            raise RuntimeError(
                f"{strategy}: {proc.name} exited by itself with code {proc.returncode}\n{proc.stderr_tail()}"
            )


def wait_settled(
    watchers: Mapping[str, Watcher], groups: dict[str, Group], timeout_s: float, settle_s: float
) -> tuple[float, list[str], dict[str, float]]:
    """``watchers``: each group's own (each group may be watched from a thread of its own).

    Until every group has each partition owned by exactly one live member, every live member owning
    some, unchanged for ``settle_s`` (or ``timeout_s`` passed). Returns the seconds waited, the groups
    that had not settled, and for the others the seconds until their final assignment was complete;
    raises if a member process died on its own."""
    began = time.monotonic()
    last: dict[str, dict[str, set[Partition]]] = {}
    since: dict[str, float] = {}
    while True:
        now = time.monotonic()
        pending = []
        for name, group in groups.items():
            _check_alive(name, group)
            owned = watchers[name].owned(group)
            parts = [tp for held in owned.values() for tp in held]
            complete = all(owned.values()) and len(parts) == len(set(parts)) == group.partitions
            if not complete or owned != last.get(name):
                last[name], since[name] = owned, now
                pending.append(name)
            elif now - since[name] < settle_s:
                pending.append(name)
        if not pending or now - began > timeout_s:
            settled = {name: since[name] - began for name in groups if name not in pending}
            return now - began, pending, settled
        time.sleep(POLL_S)
