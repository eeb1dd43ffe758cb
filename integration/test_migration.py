"""Migrations of a running group, one pod at a time (docs/migration.md).

Dynamic to static membership: during the rollout every replacement is a rebalance (the dynamic member
leaves, the static one is a new member) and the audit reports the group as mixed; nothing is lost. Once
every member is static, restarts are no rebalance at all: no new generation on the broker and no
revocation in the members that stayed.

Classic to consumer protocol (KIP-848) and back, for a static group: the brokers'
``group.consumer.migration.policy`` converts the group online when the first member comes back under the
consumer protocol and back when the last one returns to classic. Each member keeps its instance id and
joins in seconds (no fencing, no UNRELEASED_INSTANCE_ID wait), nothing is lost, and the broker reports
the group's type. Under the policy ``disabled`` the member that cannot join stops with
GroupProtocolMismatchError (exit 69) instead of being refused forever.

The first two run on one one-node cluster with the policy ``bidirectional`` (Kafka's default, set
explicitly); the policy ``disabled`` needs a cluster of its own (the setting is static).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from _faults import trouble, wait_all_consumed

from static_consumer._base.errors import EXIT_UNAVAILABLE
from static_consumer.admin.audit import audit_group
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers import JvmKafkaCluster, create_topic, describe_consumer_group
from static_consumer_lab.brokers.kafka_ops import high_watermarks
from static_consumer_lab.children.group import Group, shorten_consumer_session
from static_consumer_lab.children.processes import ConsumerProcess
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
POLICY = "group.consumer.migration.policy"
Start = Callable[..., ConsumerProcess]


@pytest.fixture(scope="module")
def broker(kafka_jvm_module_cluster_factory: Callable[..., JvmKafkaCluster]) -> JvmKafkaCluster:
    # lab: KIP-848 groups take 10 s sessions and 500 ms heartbeats (group configs below the stock minimums),
    # so a migration step settles in seconds; what a migration keeps does not depend on the session.
    return kafka_jvm_module_cluster_factory(1, extra_config={POLICY: "bidirectional"}, profile="lab")


def test_rolling_a_dynamic_group_to_static_members(
    broker: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Start,
) -> None:
    cluster = broker
    bootstrap, group_id = cluster.bootstrap_servers, kafka_group_id_factory()
    topic = create_topic(bootstrap, f"t-{group_id}", PARTITIONS)
    static_now: set[str] = set()

    def spec(name: str) -> dict[str, Any]:
        # The same app before and after: only the static settings change (instance id and policy).
        if name in static_now:
            return static_spec(bootstrap, group_id, [topic], name)
        return static_spec(bootstrap, group_id, [topic], None, static_policy="dynamic")

    group = Group(
        kafka_consumer_process_factory, bootstrap, group_id, topic, PARTITIONS, spec_factory=spec, lab=True
    )
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group_id, topics=(topic,))
    group.start(MEMBERS[0]).wait_for_kind("assigned", timeout_s=60)
    for name in MEMBERS[1:]:
        group.start(name)
    group.wait_stable()
    assert audit_group(settings).description.static_members == ()

    with SteadyProducer(bootstrap, topic) as producer:
        # --- the rollout: replace each dynamic member by a static one ----------------------------
        before_rollout = max(cluster.group_generations(group_id))
        rollout_began = time.time()
        for step, name in enumerate(MEMBERS, start=1):
            group.stop(name)  # a dynamic member sends LeaveGroup on close: rebalance
            static_now.add(name)
            group.start(name).wait_for_kind("assigned", timeout_s=60)  # a new member: rebalance
            group.wait_stable()
            audit = audit_group(settings)
            assert audit.verdict in ("ok", "problems"), audit.to_dict()  # settled, maybe mismatched
            assert len(audit.description.static_members) == step
            if step < len(MEMBERS):  # mid-rollout the audit says the group is mixed, and why
                assert audit.report.mixed_membership and audit.description.mixed
                (warning,) = [w for w in audit.warnings if w.startswith("mixed group")]
                assert "migration" in warning
                assert f"{step} static and {len(MEMBERS) - step} dynamic" in warning
            if step == 1:
                mixed_rebalances = _restart(group, cluster, [name])
        after_rollout = max(cluster.group_generations(group_id))
        revocations = group.revocations_since(rollout_began)
        print(
            f"rollout of {len(MEMBERS)} pods: generations {before_rollout} -> {after_rollout}, "
            f"{revocations} revocations in members that stayed up"
        )
        assert after_rollout - before_rollout >= len(MEMBERS), "each replacement should rebalance"
        assert revocations >= len(MEMBERS)
        # Even in the mixed group, the static member's own restart was no rebalance.
        assert mixed_rebalances == (0, 0)

        # --- all static: the audit is clean and restarts are no rebalance -------------------------
        done = audit_group(settings)
        assert done.verdict == "ok" and not done.report.mixed_membership, done.problems()
        assert [m.instance_id for m in done.description.members] == list(MEMBERS)
        assert _restart(group, cluster, MEMBERS) == (0, 0)
        produced = producer.stop()

    consumed = group.wait_consumed(produced)
    for name in MEMBERS:
        group.stop(name)
    print(f"produced {produced} records during the migration; consumed {len(group.consumed())} distinct")
    assert set(group.consumed()) == {
        (topic, p, o) for p, end in high_watermarks(bootstrap, topic, PARTITIONS).items() for o in range(end)
    }, "a record produced during the migration was never consumed"
    assert len(consumed) == produced
    assert group.committed() == high_watermarks(bootstrap, topic, PARTITIONS), (
        "the final commits do not cover everything"
    )


def _restart(group: Group, cluster: JvmKafkaCluster, names: Sequence[str]) -> tuple[int, int]:
    """Restart ``names`` one by one; returns (new generations, revocations in the others). Each must
    come back with the partitions it had."""
    before, generation, began = group.owned(), max(cluster.group_generations(group.group_id)), time.time()
    for name in names:
        group.stop(name)
        group.start(name).wait_for_kind("assigned", timeout_s=60)
        group.wait_stable()
    assert group.owned() == before, "a static member came back with other partitions"
    new_generations = max(cluster.group_generations(group.group_id)) - generation
    return new_generations, group.revocations_since(began)


# ------------------------------------------------------------------ classic <-> consumer protocol
def _mixed_protocol_group(
    cluster: JvmKafkaCluster, group_id: str, start: Start, protocol: str, session_ms: int = 10_000
) -> tuple[Group, dict[str, str]]:
    """A static group of MEMBERS on a new topic, each member's protocol in the returned (mutable) map;
    ``session_ms`` is the classic members' session and the KIP-848 group's (a group config)."""
    bootstrap = cluster.bootstrap_servers
    topic = create_topic(bootstrap, f"t-{group_id}", PARTITIONS)
    shorten_consumer_session(bootstrap, group_id, session_ms)
    protocols = dict.fromkeys(MEMBERS, protocol)

    def spec(name: str) -> dict[str, Any]:
        return static_spec(
            bootstrap, group_id, [topic], name, protocol=protocols[name], session_timeout_ms=session_ms
        )

    group = Group(start, bootstrap, group_id, topic, PARTITIONS, spec_factory=spec, lab=True)
    group.form(MEMBERS)
    assert _group_type(group) == protocol
    return group, protocols


def _group_type(group: Group) -> str:
    """The group's type as the broker reports it (ConsumerGroupDescribe): classic or consumer."""
    return str(describe_consumer_group(group.bootstrap, group.group_id).type.name).lower()


def _refusals(cluster: JvmKafkaCluster, group_id: str) -> list[str]:
    """Broker log lines where the coordinator refused or fenced a member of ``group_id`` by instance id."""
    pattern = re.compile(r"cannot join the group because the instance id|is fenced by existing member")
    return [
        line
        for path in cluster.log_paths()
        if path.exists()
        for line in path.read_text(errors="replace").splitlines()
        if group_id in line and pattern.search(line)
    ]


def test_a_static_group_rolls_to_the_consumer_protocol_and_back_online(
    broker: JvmKafkaCluster, kafka_group_id_factory: Callable[..., str], kafka_consumer_process_factory: Start
) -> None:
    cluster, group_id = broker, kafka_group_id_factory()
    group, protocols = _mixed_protocol_group(cluster, group_id, kafka_consumer_process_factory, "classic")
    rebalances, began = cluster.group_rebalances(group_id), time.time()
    joins: dict[str, list[float]] = {"consumer": [], "classic": []}
    types: list[str] = []
    with SteadyProducer(group.bootstrap, group.topic) as producer:
        # Up: the group becomes a consumer group with the first member; down: classic with the last.
        for target in ("consumer", "classic"):
            for name in MEMBERS:
                owned = group.owned()[name]
                stopped = time.monotonic()
                group.stop(name)  # a clean close: no LeaveGroup (classic), a static leave (KIP-848)
                protocols[name] = target
                proc = group.start(name)
                proc.wait_for_kind("assigned", timeout_s=60)
                joins[target].append(time.monotonic() - stopped)
                group.wait_stable()
                types.append(_group_type(group))
                assert proc.assignment() == owned, f"{name} came back under {target} with other partitions"
                members = describe_consumer_group(group.bootstrap, group_id).members
                assert sorted(m.group_instance_id for m in members) == list(MEMBERS)
        acked = producer.stop()

    everything = wait_all_consumed(group)
    new = [(r.kind, r.value) for r in cluster.group_rebalances(group_id) if r not in rebalances]
    print(
        f"classic -> consumer -> classic, {len(MEMBERS)} static members: stop-to-assigned "
        f"{', '.join(f'{s:.1f}' for s in joins['consumer'])} s up, "
        f"{', '.join(f'{s:.1f}' for s in joins['classic'])} s down; group type after each step {types}; "
        f"new generations/epochs {new}; revocations {group.revocations_since(began)}; "
        f"{acked} records, {sum(1 for n in group.consumed().values() if n > 1)} delivered twice"
    )
    assert types == ["consumer", "consumer", "consumer", "consumer", "consumer", "classic"]
    assert trouble(group) == [], "a member was fenced, lost partitions or failed"
    assert _refusals(cluster, group_id) == [], "an instance id was refused or fenced"
    assert len(everything) == acked, "a record produced during the migration was never consumed"
    # Each static member replaced itself with the same subscription: nothing for the group to rebalance.
    assert new == [] and group.revocations_since(began) == 0


def test_a_migration_policy_that_forbids_it_ends_the_member_with_a_typed_error(
    kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Start,
) -> None:
    cluster = kafka_jvm_cluster_factory(1, extra_config={POLICY: "disabled"}, profile="lab")  # as above
    for protocol, other in (("classic", "consumer"), ("consumer", "classic")):
        # A 30 s session: the stopped member's expiry (a rebalance) comes long after the checks below.
        group, protocols = _mixed_protocol_group(
            cluster, kafka_group_id_factory(), kafka_consumer_process_factory, protocol, 30_000
        )
        owned, began = group.owned(), time.time()
        group.stop(MEMBERS[0])
        protocols[MEMBERS[0]] = other
        refused = group.start(MEMBERS[0])
        code = refused.wait(timeout_s=60)
        error = refused.wait_for_kind("error", timeout_s=1)
        exited_in = refused.wait_for_kind("exit", timeout_s=1)["ts"] - began
        print(f"{other} member of a {protocol} group, policy disabled: exit {code} after {exited_in:.1f} s")
        assert (code, error["kind_of"]) == (EXIT_UNAVAILABLE, "GroupProtocolMismatchError"), error
        assert POLICY in error["reason"] and f"protocol='{other}'" in error["reason"]
        assert refused.events("assigned") == []
        # The members that stayed never noticed, and the group kept its type.
        assert _group_type(group) == protocol
        stayed = MEMBERS[1:]
        assert {n: group.members[n].assignment() for n in stayed} == {n: owned[n] for n in stayed}
        assert group.revocations_since(began) == 0
