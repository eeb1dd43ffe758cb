"""KIP-814 on a real broker: after the static group leader restarts, new partitions still get an owner.

Under the classic protocol a static member that restarts within its session gets its old assignment
without a rebalance. When that member was the leader, JoinGroup below v9 (librdkafka speaks v5) does not
tell the new incarnation that it leads: the coordinator answers with the old member id as leader and no
member list, while it records the new member id as leader. KIP-814 (JoinGroup v9, `SkipAssignment`) was
Kafka's fix for the Java client, whose leader alone watches the metadata of the whole group's
subscription, so new partitions could stay unowned. With librdkafka every member revokes and rejoins
when the metadata of its own subscription changes, and the coordinator rebalances when the member it
records as leader rejoins (broker log: "Leader <the restarted member> re-joining group during Stable"),
so nothing is left unowned; these tests pin that down on both protocols, for the two ways a
subscription grows: partitions added to a named topic, and a new topic matching a `^regex`.

The bound: librdkafka sees topic changes at its next metadata refresh, `topic.metadata.refresh.interval.ms`
(5 min by default; REFRESH_MS here), and the rebalance that follows takes seconds. Under KIP-848 the
broker assigns: it sees added partitions itself, and it re-resolves a group's `^regex` subscriptions at
most every 10 s, on a member's heartbeat.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from _side_by_side import side_by_side

from static_consumer_lab.brokers import add_partitions, create_topic
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec

pytestmark = pytest.mark.lab_broker(
    "KIP-848 groups settle in seconds with 500 ms heartbeats; the point is who owns new partitions after "
    "a leader restart, not the session"
)

Partition = tuple[str, int]
REFRESH_MS = 3000  # topic.metadata.refresh.interval.ms of every member
# The stated bound: one metadata refresh, then a rebalance (a join round of every member, seconds on a
# loaded CI machine); generous, as the suite asserts no tight times.
BOUND_S = REFRESH_MS / 1000 + 30


def _owners(group: Group) -> dict[Partition, list[str]]:
    owners: dict[Partition, list[str]] = {}
    for name, partitions in group.owned().items():
        for tp in partitions:
            owners.setdefault(tp, []).append(name)
    return owners


def _covered(group: Group, expected: set[Partition]) -> Callable[[], bool]:
    def check() -> bool:
        owners = _owners(group)
        return set(owners) >= expected and all(len(owners[tp]) == 1 for tp in expected)

    return check


def test_new_partitions_get_an_owner_after_the_static_leader_restarted(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    """The classic and the KIP-848 group side by side."""
    side_by_side(
        lambda protocol: _leader_restarted(
            protocol,
            kafka_bootstrap_servers,
            kafka_topic_factory,
            kafka_group_id_factory,
            kafka_consumer_process_factory,
        )
    )


def _leader_restarted(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap = kafka_bootstrap_servers
    named = kafka_topic_factory(4)
    prefix = f"kip814-{uuid.uuid4().hex[:8]}-"
    matched = create_topic(bootstrap, f"{prefix}a", 2)
    group_id = kafka_group_id_factory()
    refresh = {"topic.metadata.refresh.interval.ms": REFRESH_MS}

    def spec(name: str) -> dict[str, Any]:
        topics = [named, f"^{prefix}.*"]
        return static_spec(bootstrap, group_id, topics, name, protocol=protocol, librdkafka=refresh)

    group = Group(
        kafka_consumer_process_factory,
        bootstrap,
        group_id,
        named,
        4,
        protocol=protocol,
        spec_factory=spec,
        lab=True,
    )
    # The first member joins alone and leads the classic group.
    group.start("app-0").wait_for_kind("assigned", timeout_s=60)
    for name in ("app-1", "app-2"):
        group.start(name)
    start = {(named, p) for p in range(4)} | {(matched, p) for p in range(2)}
    wait_until(lambda: all(group.owned().values()), 60, "every member to own partitions")
    wait_until(_covered(group, start), 60, "the first 6 partitions owned once each")

    # The leader restarts (a rolling restart: SIGTERM, close without leaving, start again at once).
    _restart_leader_without_rebalance(group, start, checked=protocol == "classic")

    add_partitions(bootstrap, named, 7)
    added_at = time.monotonic()
    grown = start | {(named, p) for p in range(4, 7)}
    wait_until(_covered(group, grown), BOUND_S, f"the 3 partitions added to {named} to get an owner")
    print(f"{protocol}: added partitions owned {time.monotonic() - added_at:.1f} s after they were added")

    created = create_topic(bootstrap, f"{prefix}b", 3)
    created_at = time.monotonic()
    every = grown | {(created, p) for p in range(3)}
    wait_until(_covered(group, every), BOUND_S, f"{created} (matching ^{prefix}.*) to get owners")
    print(f"{protocol}: new matching topic owned {time.monotonic() - created_at:.1f} s after it was created")
    assert all(proc.returncode is None for proc in group.members.values())


def _generation(group: Group) -> int:
    return max(int(e["generation"]) for p in group.members.values() for e in p.events("assigned"))


def _restart_leader_without_rebalance(group: Group, owned: set[Partition], *, checked: bool) -> None:
    """Restart app-0 (the classic leader) until the restart is a static rejoin without a new generation,
    which is the state KIP-814 is about: a leader that does not know it leads. A rebalance after the
    restart makes the new incarnation the leader knowingly; librdkafka did that once in 8 restarts seen
    (a rejoin 0.4 s after the static join), so the restart is tried again, at most 3 times."""
    for _ in range(3):
        before = _generation(group)
        group.stop("app-0")
        group.start("app-0").wait_for_kind("assigned", timeout_s=60)
        wait_until(_covered(group, owned), 60, "the restarted leader to take its partitions back")
        time.sleep(3)  # a rejoin right after the static join comes within a second
        if not checked or _generation(group) == before:
            return
        print(f"the leader's restart moved the group to generation {_generation(group)}; restarting again")
    raise AssertionError("every restart of the static leader rebalanced the group")
