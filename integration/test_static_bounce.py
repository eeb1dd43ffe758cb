"""Rolling bounces on a real broker: static members restart without revoking anyone's partitions.

A rolling bounce (with a dynamic control), restarting the group leader, and clean shutdowns that lose and
duplicate nothing (records consumed == committed position); Kafka's bounce_mode "all" (every member but
one stopped at once, all restarted within the session), on both protocols, with a dynamic control per
protocol.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from _faults import logged_rebalances
from _side_by_side import side_by_side

from static_consumer_lab.brokers import KafkaCluster, produce
from static_consumer_lab.children.group import Group

PARTITIONS = 8
MEMBERS = ("app-0", "app-1", "app-2")
ROUNDS = 2
# The rolling bounce of static members runs on the stock broker (what a user's rollout meets: KIP-848
# groups with Kafka's 45 s session and 5 s heartbeats); the dynamic controls and bounce_mode "all" on the
# lab one, where KIP-848 groups settle in seconds: their point is what moves, not how long it takes.
LAB = pytest.mark.lab_broker("KIP-848 groups settle with 500 ms heartbeats; what moves does not depend on it")


@pytest.mark.both_backends(container_protocols=("classic",))  # 2 rounds of 3 restarts: ~30 s a run
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_rolling_bounce_of_static_members_revokes_nothing_and_loses_nothing(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        static=True,
    )
    initial = group.form(MEMBERS)
    stable_since = time.time()
    produced = produce(kafka_bootstrap_servers, group.topic, 2000)

    for round_ in range(ROUNDS):
        for name in MEMBERS:  # MEMBERS[0] led the group: restarting it must not rebalance either (e)
            before = group.owned()[name]
            group.stop(name)
            restarted = group.start(name)
            restarted.wait_for_kind("assigned", timeout_s=60)
            group.wait_stable()
            assert restarted.assignment() == before, f"round {round_}: {name} came back with other partitions"
        produced += produce(kafka_bootstrap_servers, group.topic, 500, start=produced)

    # Members that stayed up while others restarted never lost or gave up a partition.
    assert group.revocations_since(stable_since) == 0
    assert group.owned() == initial

    group.wait_consumed(produced)
    group.stop_all_exactly_once(produced)


@LAB
def test_rolling_bounce_of_dynamic_members_revokes_partitions(
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    """The control: the same bounce with plain dynamic members makes the live members give up partitions."""
    group = kafka_group_factory(
        PARTITIONS,
        protocol="classic",
        static=False,
    )
    group.form(MEMBERS)
    stable_since = time.time()
    produced = produce(kafka_bootstrap_servers, group.topic, 2000)
    for name in MEMBERS:
        group.stop(name)
        group.start(name).wait_for_kind("assigned", timeout_s=60)
        group.wait_stable()
    assert group.revocations_since(stable_since) >= len(MEMBERS)
    consumed = group.wait_consumed(produced)
    assert len(consumed) == produced  # at-least-once still holds for dynamic members


# ------------------------------------------------------------------ bounce_mode "all"
BOUNCED = ("app-1", "app-2", "app-3")  # every member but app-0, as Kafka's system test keeps one alive
ALL_ROUNDS = 2


@LAB
@pytest.mark.both_backends
@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_bouncing_all_static_members_but_one_at_once_moves_nothing(
    protocol: str,
    kafka_cluster: KafkaCluster,
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    """Kafka's test_static_consumer_bounce with bounce_mode "all": every member but one stops at once
    and all come back within the session. No rebalance (the broker logs no new generation or group
    epoch), every member back on its own partitions, nothing revoked anywhere, nothing lost or doubled."""
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        static=True,
    )
    initial = group.form(("app-0", *BOUNCED))
    rebalances = logged_rebalances(kafka_cluster, group.group_id)
    assert rebalances != [], "the group formed, yet the broker log shows no rebalance: the check is void"
    formed = max(e["generation"] for proc in group.members.values() for e in proc.events("assigned"))
    stable_since = time.time()
    produced = produce(kafka_bootstrap_servers, group.topic, 2000)
    for round_ in range(ALL_ROUNDS):
        began = time.time()
        restarted = group.bounce_all(BOUNCED)
        for proc in restarted.values():
            proc.wait_for_kind("assigned", timeout_s=60)
        group.wait_stable()
        print(
            f"{protocol}: round {round_}: {len(BOUNCED)} members back and stable "
            f"{time.time() - began:.1f} s after SIGTERM"
        )
        produced += produce(kafka_bootstrap_servers, group.topic, 500, start=produced)

    assert group.owned() == initial, "a member came back with other partitions"
    assert group.revocations_since(stable_since) == 0
    assert group.moves_since(stable_since, initial) == 0
    if rebalances is not None:
        assert logged_rebalances(kafka_cluster, group.group_id) == rebalances, "the group rebalanced"
    # The client's view agrees: every restart was handed the generation (classic) or member epoch
    # (KIP-848) the group had settled on when it formed.
    rejoined = [
        e["generation"]
        for p in group.all_processes()
        for e in p.events("assigned")
        if e["ts"] >= stable_since
    ]
    assert len(rejoined) == ALL_ROUNDS * len(BOUNCED) and set(rejoined) == {formed}, (rejoined, formed)

    group.wait_consumed(produced)
    group.stop_all_exactly_once(produced)


@LAB
def test_bouncing_all_dynamic_members_but_one_at_once_moves_partitions(
    kafka_cluster: KafkaCluster,
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    """The control, judged over the whole group: with dynamic members the same bounce rebalances, and
    partitions move (to the member that stayed, then back), under either protocol: the classic and the
    KIP-848 group side by side."""
    side_by_side(
        lambda protocol: _dynamic_bounced(
            protocol, kafka_cluster, kafka_bootstrap_servers, kafka_group_factory
        )
    )


def _dynamic_bounced(
    protocol: str,
    kafka_cluster: KafkaCluster,
    kafka_bootstrap_servers: str,
    kafka_group_factory: Callable[..., Group],
) -> None:
    group = kafka_group_factory(
        PARTITIONS,
        protocol=protocol,
        static=False,
    )
    initial = group.form(("app-0", *BOUNCED))
    rebalances = logged_rebalances(kafka_cluster, group.group_id)
    stable_since = time.time()
    produced = produce(kafka_bootstrap_servers, group.topic, 2000)
    group.bounce_all(BOUNCED)
    group.wait_stable()
    revocations, moves = group.revocations_since(stable_since), group.moves_since(stable_since, initial)
    print(f"{protocol} dynamic: {revocations} revocations, {moves} partitions moved")
    assert revocations + moves > 0, "the dynamic bounce moved nothing"
    if rebalances is not None:
        assert logged_rebalances(kafka_cluster, group.group_id) != rebalances, (
            "no rebalance in the broker log"
        )
    assert len(group.wait_consumed(produced)) == produced  # at-least-once still holds
