"""A whole consumer group of child processes, for integration tests, benchmarks and the demo."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from static_consumer_lab.brokers.jvm import STOCK_GROUP_CONFIG
from static_consumer_lab.brokers.kafka_ops import committed_offsets, set_group_config
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec

Partition = tuple[str, int]
# On the lab broker, KIP-848 groups get a per-group session timeout and heartbeat interval so tests need
# not wait out the stock 45 s session (a stock broker refuses both: its minimums are 45 s and 5 s).
CONSUMER_PROTOCOL_SESSION_MS = 10000
CONSUMER_PROTOCOL_HEARTBEAT_MS = 500
# Apache Kafka's group.consumer.session.timeout.ms, from the stock profile's one source.
STOCK_CONSUMER_PROTOCOL_SESSION_MS = int(STOCK_GROUP_CONFIG["group.consumer.session.timeout.ms"])


def shorten_consumer_session(bootstrap: str, group_id: str, session_ms: int | None = None) -> None:
    """Lab broker only: give the KIP-848 group ``group_id`` the test session (``session_ms``, by default
    CONSUMER_PROTOCOL_SESSION_MS) and heartbeat interval as group overrides."""
    set_group_config(
        bootstrap,
        group_id,
        {
            "consumer.session.timeout.ms": str(session_ms or CONSUMER_PROTOCOL_SESSION_MS),
            "consumer.heartbeat.interval.ms": str(CONSUMER_PROTOCOL_HEARTBEAT_MS),
        },
    )


@dataclass
class Group:
    """Named members (instance ids) of one consumer group, each a child process, restartable."""

    start_process: Callable[..., ConsumerProcess]
    bootstrap: str
    group_id: str
    topic: str
    partitions: int
    protocol: str = "classic"
    static: bool = True
    # The group's session timeout: a group config under KIP-848, each member's session_timeout_ms under
    # classic. None: under KIP-848 CONSUMER_PROTOCOL_SESSION_MS on the lab broker, the broker's own (no
    # group config) on a stock one; the spec's default under classic.
    session_ms: int | None = None
    spec_factory: Callable[[str], dict[str, Any]] | None = None  # overrides the StaticConsumer spec
    # ConsumerSettings fields for every member, over the test defaults (e.g. max_poll_interval_ms).
    settings: Mapping[str, Any] = field(default_factory=dict)
    # Per-member keys merged into the default spec (e.g. event_log, otel, leave_on_exit, batch).
    spec_extra: Callable[[str], Mapping[str, Any]] | None = None
    # On the lab broker (group minimums lowered): KIP-848 groups get the short test session and heartbeat.
    lab: bool = False
    members: dict[str, ConsumerProcess] = field(default_factory=dict)
    retired: list[ConsumerProcess] = field(default_factory=list)
    stop_requested: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.protocol != "consumer":
            return
        if self.lab:
            shorten_consumer_session(self.bootstrap, self.group_id, self.session_ms)
        elif self.session_ms is not None:  # within the stock bounds (45-60 s) or the broker refuses it
            set_group_config(
                self.bootstrap, self.group_id, {"consumer.session.timeout.ms": str(self.session_ms)}
            )

    @property
    def consumer_session_s(self) -> float:
        """The KIP-848 group's session timeout in seconds, as this group set it up."""
        if self.session_ms is not None:
            return self.session_ms / 1000
        return (CONSUMER_PROTOCOL_SESSION_MS if self.lab else STOCK_CONSUMER_PROTOCOL_SESSION_MS) / 1000

    @classmethod
    def new(
        cls,
        start_process: Callable[..., ConsumerProcess],
        bootstrap: str,
        topic_factory: Callable[..., str],
        group_factory: Callable[..., str],
        partitions: int,
        **options: Any,
    ) -> Group:
        """A group on a new topic of ``partitions`` with a new group id (the fixtures' factories)."""
        topic = topic_factory(partitions)
        return cls(start_process, bootstrap, group_factory(), topic, partitions, **options)

    def form(self, names: Iterable[str], timeout_s: float = 90.0) -> dict[str, set[Partition]]:
        """Start ``names``, the first alone (it leads a classic group), and wait for a settled assignment."""
        first, *rest = names
        self.start(first).wait_for_kind("assigned", timeout_s=60)
        for name in rest:
            self.start(name)
        return self.wait_stable(timeout_s)

    def spec(self, name: str) -> dict[str, Any]:
        if self.spec_factory is not None:
            return self.spec_factory(name)
        settings: dict[str, Any] = {"protocol": self.protocol, **self.settings}
        if self.session_ms is not None:  # left out under KIP-848 by static_spec (a group config there)
            settings["session_timeout_ms"] = self.session_ms
        if not self.static:
            settings["static_policy"] = "dynamic"
        spec = static_spec(
            self.bootstrap, self.group_id, [self.topic], name if self.static else None, **settings
        )
        if self.spec_extra is not None:
            spec.update(self.spec_extra(name))
        return spec

    def start(self, name: str) -> ConsumerProcess:
        proc = self.start_process(self.spec(name), name=f"{name}#{len(self.retired) + 1}")
        self.members[name] = proc
        return proc

    def first_partitions(
        self, name: str, timeout_s: float, exits: list[int]
    ) -> tuple[ConsumerProcess, float]:
        """The running process of member ``name`` once it got partitions, and when (its event's time); a
        process that exits first (75 when a wait for its instance id gave up) is counted in ``exits`` and
        started again, as Kubernetes would."""
        deadline = time.monotonic() + timeout_s
        while True:
            proc = self.members[name]
            event = proc.wait_for(
                lambda e: e["kind"] == "exit" or (e["kind"] == "assigned" and bool(e["partitions"])),
                max(1.0, deadline - time.monotonic()),
                "partitions",
            )
            if event["kind"] == "assigned":
                return proc, float(event["ts"])
            exits.append(int(event["code"]))
            self.members.pop(name)
            self.retired.append(proc)
            self.start(name)

    def spawn_held(self, name: str) -> ConsumerProcess:
        """A process for member ``name`` that loads its interpreter now and starts only at :meth:`admit`."""
        number = len(self.retired) + len(self.members) + 1
        return self.start_process({**self.spec(name), "hold": True}, name=f"{name}#{number}")

    def admit(self, name: str, proc: ConsumerProcess) -> ConsumerProcess:
        """Start a :meth:`spawn_held` process as member ``name`` (whose previous process has stopped)."""
        assert name not in self.members, f"{name} is still running"
        proc.release()
        self.members[name] = proc
        return proc

    def stop(self, name: str) -> ConsumerProcess:
        """SIGTERM and wait: the member finishes its batch, commits and closes (no LeaveGroup)."""
        proc = self.members.pop(name)
        self.stop_requested[id(proc)] = time.time()
        code = proc.stop(timeout_s=60)
        assert code == 0, f"{proc.name} exited {code}\n{proc.stderr_tail()}"
        self.retired.append(proc)
        return proc

    def kill(self, name: str) -> ConsumerProcess:
        proc = self.members.pop(name)
        self.stop_requested[id(proc)] = time.time()
        proc.kill()
        self.retired.append(proc)
        return proc

    def retire(self, name: str, *, kill: bool = False) -> ConsumerProcess:
        """Send SIGTERM (or SIGKILL) to member ``name`` and retire it without waiting for it to exit."""
        proc = self.members.pop(name)
        self.stop_requested[id(proc)] = time.time()
        if kill:
            proc.kill()
        else:
            proc.terminate()
        self.retired.append(proc)
        return proc

    def bounce_all(self, names: Iterable[str], timeout_s: float = 60.0) -> dict[str, ConsumerProcess]:
        """Kafka's bounce_mode "all": SIGTERM every member of ``names`` at once, wait until each exited
        0 (committed and closed), then start them all at once (interpreters loaded beforehand)."""
        names = list(names)
        fresh = {name: self.spawn_held(name) for name in names}
        for proc in fresh.values():
            proc.wait_for_kind("held", timeout_s=timeout_s)
        stopping = [self.retire(name) for name in names]
        for proc in stopping:
            code = proc.wait(timeout_s=timeout_s)
            assert code == 0, f"{proc.name} exited {code}\n{proc.stderr_tail()}"
        return {name: self.admit(name, proc) for name, proc in fresh.items()}

    def all_processes(self) -> list[ConsumerProcess]:
        return [*self.retired, *self.members.values()]

    # -------------------------------------------------------------------------------- observations
    def owned(self) -> dict[str, set[Partition]]:
        return {name: proc.assignment() for name, proc in self.members.items()}

    def wait_stable(self, timeout_s: float = 90.0, settle_s: float = 3.0) -> dict[str, set[Partition]]:
        """Every partition owned by exactly one live member, every live member owning some, and no change
        for ``settle_s`` (KIP-848 reconciles step by step, so a complete cover can still be moving)."""
        everything = {(self.topic, p) for p in range(self.partitions)}
        last: dict[str, set[Partition]] = {}
        since = time.monotonic()

        def settled() -> bool:
            nonlocal last, since
            owned = self.owned()
            parts = [tp for s in owned.values() for tp in s]
            complete = all(owned.values()) and len(parts) == len(set(parts)) and set(parts) == everything
            if not complete or owned != last:
                last, since = owned, time.monotonic()
                return False
            return time.monotonic() - since >= settle_s

        wait_until(
            settled,
            timeout_s,
            f"a settled assignment of {self.partitions} partitions to {sorted(self.members)}",
        )
        return last

    def revocations_since(self, since: float, processes: Iterable[ConsumerProcess] | None = None) -> int:
        """Revoked/lost events with partitions, seen by members while they were not being stopped."""
        count = 0
        for proc in processes if processes is not None else self.all_processes():
            until = self.stop_requested.get(id(proc), float("inf"))
            for event in proc.events():
                if (
                    event["kind"] in ("revoked", "lost")
                    and event["partitions"]
                    and since <= event["ts"] < until
                ):
                    count += 1
        return count

    def moves_since(self, since: float, before: Mapping[str, set[Partition]]) -> int:
        """Partitions handed, after ``since``, to a member (any of its processes) that did not own them
        in ``before`` (member name -> partitions): what a rebalance moved, counted over the whole group."""
        moved = set()
        for proc in self.all_processes():
            name = proc.name.split("#")[0]
            for event in proc.events("assigned"):
                if event["ts"] >= since:
                    moved |= {
                        (name, t, p) for t, p in event["partitions"] if (t, p) not in before.get(name, ())
                    }
        return len(moved)

    def consumed(self) -> Counter[tuple[str, int, int]]:
        return Counter(r for proc in self.all_processes() for r in proc.records())

    def wait_consumed(
        self, total: int, timeout_s: float = 120.0, also: Callable[[], str] | None = None
    ) -> Counter[tuple[str, int, int]]:
        """Until ``total`` distinct records were consumed; a timeout names what each member did last (and
        ``also()``, e.g. the producer's counts)."""

        def described() -> str:
            seen = len(self.consumed())
            extra = f"; {also()}" if also is not None else ""
            return f"{total} distinct records consumed (saw {seen}); {self.describe()}{extra}"

        wait_until(lambda: len(self.consumed()) >= total, timeout_s, described)
        return self.consumed()

    def describe(self) -> str:
        """Each member's record count, last three event kinds and exit code, for a timeout's message."""
        return "; ".join(
            f"{name}: {len(proc.records())} records, last events "
            f"{[e['kind'] for e in proc.events()[-3:]]}, exit {proc.returncode}"
            for name, proc in self.members.items()
        )

    def committed(self) -> dict[int, int]:
        return committed_offsets(self.bootstrap, self.group_id, self.topic, self.partitions)

    def stop_all_exactly_once(self, produced: int) -> Counter[tuple[str, int, int]]:
        """Stop every member cleanly, then check what clean shutdowns promise: each of the ``produced``
        records consumed exactly once, and every partition's committed position right after its last
        record. Returns what was consumed."""
        for name in list(self.members):
            self.stop(name)
        consumed = self.consumed()
        assert len(consumed) == produced, f"{len(consumed)} distinct records consumed, {produced} produced"
        twice = sorted(r for r, n in consumed.items() if n > 1)
        assert not twice, f"{len(twice)} records delivered more than once, e.g. {twice[:5]}"
        last = {p: 1 + max(o for (_t, pp, o) in consumed if pp == p) for p in range(self.partitions)}
        committed = self.committed()
        assert committed == last, f"committed {committed} differs from what was consumed {last}"
        return consumed
