"""Rolling bounces on a real broker: static members restart without revoking anyone's partitions.

Issue 3, scenarios a) rolling bounce (with a dynamic control), e) restarting the group leader, and
f) clean shutdowns lose and duplicate nothing (records consumed == committed position).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from static_consumer.testing import produce
from static_consumer.testing.group import Group
from static_consumer.testing.processes import ConsumerProcess

PARTITIONS = 8
MEMBERS = ("app-0", "app-1", "app-2")
ROUNDS = 3


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_rolling_bounce_of_static_members_revokes_nothing_and_loses_nothing(
    protocol: str,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    group = Group.new(
        kafka_consumer_process_factory,
        kafka_bootstrap_servers,
        kafka_topic_factory,
        kafka_group_id_factory,
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

    consumed = group.wait_consumed(produced)
    for name in list(group.members):
        group.stop(name)
    consumed = group.consumed()
    assert len(consumed) == produced
    assert max(consumed.values()) == 1, "a clean static restart delivered a record twice"
    committed = group.committed()
    per_partition = {p: 1 + max(o for (_t, pp, o) in consumed if pp == p) for p in range(PARTITIONS)}
    assert committed == per_partition, "committed position differs from what was consumed"


def test_rolling_bounce_of_dynamic_members_revokes_partitions(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    """The control: the same bounce with plain dynamic members makes the live members give up partitions."""
    group = Group.new(
        kafka_consumer_process_factory,
        kafka_bootstrap_servers,
        kafka_topic_factory,
        kafka_group_id_factory,
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
