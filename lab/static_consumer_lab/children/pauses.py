"""Pausing a member (SIGSTOP/SIGCONT) and judging what it handed out, for tests and benchmarks.

Ownership is read from each member's own assigned/revoked/lost events, so "stale" means: handed out by
one member while another member's callbacks said the partition was theirs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from static_consumer_lab.brokers.kafka_ops import QUIET_LOGGER
from static_consumer_lab.children.processes import ConsumerProcess, Event

Partition = tuple[str, int]


def pause(proc: ConsumerProcess, seconds: float) -> tuple[float, float]:
    """Freeze ``proc`` for ``seconds`` (every thread stops, as in a GC pause); (frozen, thawed) times."""
    return pause_until(proc, seconds, lambda: True, settle_s=0.0)


def pause_until(
    proc: ConsumerProcess,
    seconds: float,
    done: Callable[[], bool],
    max_s: float = 60.0,
    settle_s: float = 1.0,
) -> tuple[float, float]:
    """Freeze ``proc`` for at least ``seconds`` and until ``done()`` (checked every 0.1 s, for at most
    ``max_s``), then ``settle_s`` more: a pause that outlasts what it waits for even on a loaded host,
    where the broker may expire the member, or the others react, seconds late. (frozen, thawed) times."""
    frozen = proc.freeze()
    try:
        time.sleep(seconds)
        deadline = frozen + max_s
        while not done() and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(settle_s)
    finally:
        thawed = proc.thaw()
    return frozen, thawed


def owned_at(proc: ConsumerProcess, at: float) -> set[Partition]:
    """What ``proc`` owned at wall time ``at``, from its assigned/revoked/lost events."""
    owned: set[Partition] = set()
    for event in proc.events():
        if event["ts"] > at:
            break
        if event["kind"] == "assigned":
            owned |= {(t, p) for t, p in event["partitions"]}
        elif event["kind"] in ("revoked", "lost"):
            owned -= {(t, p) for t, p in event["partitions"]}
    return owned


def _time_of(event: Event, key: str) -> float:
    return float(event[key]) if key in event else float(event["ts"])


def handed_out_at(event: Event) -> float:
    """When a ``records`` event's records were handed out: when ``consume()`` returned them (its
    ``returned``), which a freeze can separate from the event's own time."""
    return _time_of(event, "returned")


def checked_at(event: Event) -> float:
    """When the library's stall guard checked a ``records`` event's records (its ``checked``, in wall
    time): after the client returned them and before ``consume()`` handed them out. A freeze between the
    two (inside ``consume()``) leaves a batch checked before the freeze and handed out after it: the
    window no client can close, as a freeze right after the hand-over. Events without it: when handed out.
    """
    return _time_of(event, "checked") if "checked" in event else handed_out_at(event)


def taken_over(other: ConsumerProcess, partitions: set[Partition], since: float) -> bool:
    """Whether ``other`` was handed some of ``partitions`` after ``since`` (by its own events)."""
    return any(
        e["ts"] > since and partitions & {(t, p) for t, p in e["partitions"]}
        for e in other.events("assigned")
    )


def _not_its_own(
    proc: ConsumerProcess, others: list[ConsumerProcess], at: float
) -> Callable[[str, int], bool]:
    """Whether a partition was, at ``at``, not owned by ``proc`` or owned by one of ``others``."""
    mine = owned_at(proc, at)
    theirs = set().union(*(owned_at(other, at) for other in others))
    return lambda t, p: (t, p) in theirs or (t, p) not in mine


def stale_records(
    proc: ConsumerProcess, others: Iterable[ConsumerProcess], since: float
) -> list[tuple[str, int, int]]:
    """Records ``proc``'s stall guard checked after ``since`` (see :func:`checked_at`) and handed out,
    of partitions it did not own then or another member did."""
    others = list(others)
    found = []
    for event in proc.events("records"):
        at = checked_at(event)
        if at > since:
            stale = _not_its_own(proc, others, at)
            found += [(t, p, o) for t, p, o in event["records"] if stale(t, p)]
    return found


def stale_commits(
    proc: ConsumerProcess, others: Iterable[ConsumerProcess], since: float
) -> list[tuple[float, str, int]]:
    """(when, topic, partition) of every offset ``proc`` committed after ``since`` for a partition it
    did not own then, or that another member owned then (by their own events).

    A commit whose call began before ``since`` (the event's ``called``) is not counted: the broker may
    have accepted it before a pause and the answer arrived after it (a synchronous commit in flight when
    the process was frozen)."""
    others = list(others)
    found = []
    for event in proc.events("committed"):
        if _time_of(event, "called") > since:
            stale = _not_its_own(proc, others, event["ts"])
            found += [(event["ts"], t, p) for t, p, _o in event["offsets"] if stale(t, p)]
    return found


def timeline(procs: Iterable[ConsumerProcess], start: float, end: float) -> str:
    """Every member's events between ``start`` and ``end``, one line each, in time order (for a failing
    assertion's message: what each member saw, and when)."""
    rows = []
    for proc in procs:
        for event in proc.events():
            if start <= event["ts"] <= end and event["kind"] != "metrics":
                brief = {k: v for k, v in event.items() if k not in ("ts", "kind", "records")}
                if "records" in event:  # the records themselves, or a count (a Spark pod's batch event)
                    records = event["records"]
                    brief["records"] = records if isinstance(records, int) else len(records)
                rows.append((event["ts"], f"{event['ts'] - start:7.3f} {proc.name} {event['kind']} {brief}"))
    return "\n".join(line for _ts, line in sorted(rows))


def refused_batches(proc: ConsumerProcess) -> list[tuple[float, int]]:
    """(checked at, records) of each batch whose commit was refused (``commit_refused`` events); see
    :func:`checked_at`."""
    out, batch = [], None
    for event in proc.events():
        if event["kind"] == "records":
            batch = event
        elif event["kind"] == "commit_refused" and batch is not None:
            out.append((checked_at(batch), len(batch["records"])))
    return out


def checked_before(proc: ConsumerProcess, at: float) -> list[tuple[float, float, int]]:
    """(checked at, handed out at, records) of each batch checked before ``at`` and handed out after it:
    a freeze at ``at`` fell inside ``consume()``, between the guard's check and the hand-over."""
    return [
        (checked_at(e), handed_out_at(e), len(e["records"]))
        for e in proc.events("records")
        if checked_at(e) < at < handed_out_at(e)
    ]


@contextmanager
def sampling_commits(
    bootstrap: str, group_id: str, topic: str, partitions: int, every_s: float = 0.25
) -> Iterator[list[dict[int, int]]]:
    """The group's committed offsets (partition -> offset), sampled in the background meanwhile.

    Read through a consumer of the group that never subscribes (so it never joins): librdkafka 2.16's
    AdminClient crashes (a NULL group handle in rd_kafka_handle_OffsetFetch, seen under gdb) when an
    offset fetch is answered while the coordinator of a fresh broker is still loading.
    """
    from confluent_kafka import Consumer, TopicPartition

    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "logger": QUIET_LOGGER})
    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    samples: list[dict[int, int]] = []
    halt = threading.Event()

    def run() -> None:
        while not halt.wait(every_s):
            try:
                found = reader.committed(wanted, timeout=5)
            except Exception:  # noqa: BLE001 - a sample the busy broker did not answer in time
                continue
            samples.append({tp.partition: tp.offset for tp in found if tp.offset >= 0})

    thread = threading.Thread(target=run, name="commit-sampler", daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        halt.set()
        thread.join(timeout=30)
        reader.close()


def went_backwards(samples: Iterable[dict[int, int]]) -> list[str]:
    """Every committed offset that was lower than one sampled before it."""
    found: list[str] = []
    highest: dict[int, int] = {}
    for sample in samples:
        for partition, offset in sample.items():
            if offset < highest.get(partition, -1):
                found.append(f"partition {partition}: {highest[partition]} -> {offset}")
            highest[partition] = max(offset, highest.get(partition, -1))
    return found


__all__ = [
    "checked_at",
    "checked_before",
    "handed_out_at",
    "owned_at",
    "pause",
    "pause_until",
    "refused_batches",
    "sampling_commits",
    "stale_commits",
    "stale_records",
    "taken_over",
    "timeline",
    "went_backwards",
]
