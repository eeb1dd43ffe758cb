"""Broker faults on a real cluster: static members ride out broker restarts and outages.

The two 3-node scenarios cover both group protocols, classic and consumer (KIP-848), on one 3-node
cluster shared by the module (each test leaves every node running and every replica in sync):

- In a classic and a KIP-848 group side by side (one roll for both), a static member restarts (new
  member id, same instance id), then every broker of a 3-node cluster is restarted in turn, so each
  group's coordinator moves: the new coordinator still knows the member by its
  new member id (Apache Kafka's system tests check the same), nobody is fenced, nothing rebalances (no
  new classic generation, no KIP-848 group epoch bump: ``JvmKafkaCluster.group_rebalances``).
- The coordinator's broker is killed (-9) and restarted, under a classic and a KIP-848 group whose
  coordinator it is (one kill for both): no rebalance, nothing lost, and after a clean shutdown nothing
  was delivered twice.

And on their own:

- Bootstrap servers unreachable at start: the capability probe keeps trying for ``connect_timeout_s``,
  then raises BrokerUnavailableError naming the servers; the consumer never joins.
- The only broker is down for a few seconds mid-consumption: the member resumes with the same instance
  id, member id and partitions. On a one-node JVM cluster of its own, and as ``[container]`` on the
  session's container (its container stopped and started: ``pytest -k container``).

Topics use replication 3 with min.insync.replicas 2, the usual production durability: with one broker
down two replicas stay in sync, so acks=all writes go on; each restart waits until every replica is back
in sync before the next broker goes down, as a rolling restart should (otherwise the second restart can
leave a partition with one in-sync replica, and acks=all writes stall until the first broker catches up).

The members use a 30 s session timeout (a common production value; Kafka's default is 45 s) so that a
slow fail-over cannot expire them: the classic members ask for it, KIP-848 groups get it as a group
config. After a kill -9 the KRaft controller fences the dead broker after broker.session.timeout.ms (9 s
by default) unless it re-registers first, then the new coordinator loads the group. (A trial with a 10 s
classic session and the killed broker restarted at once also passed: consumption paused for 8 s. Too
close to rely on.)

Commits fail for a moment while the coordinator moves (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR);
the child consumer, like run_until_sigterm, defers them to the next commit (BatchCommitter). Each test
prints how many were deferred.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from _faults import (
    SteadyProducer,
    assigned_member_ids,
    coordinator,
    deferred_commits,
    member_ids,
    trouble,
    wait_all_consumed,
    wait_in_sync,
)

from static_consumer import BrokerUnavailableError, ConsumerSettings, State, StaticConsumer
from static_consumer._base.errors import EXIT_TEMPFAIL
from static_consumer._core.confluent import ConfluentAdapter
from static_consumer._core.seam import ConsumerAdapter
from static_consumer._core.seams import Seams
from static_consumer.settings._config import ConfigValue
from static_consumer_lab.brokers import JvmKafkaCluster, create_topic
from static_consumer_lab.brokers.containers import ContainerKafkaCluster
from static_consumer_lab.brokers.jvm import free_ports
from static_consumer_lab.brokers.rebalances import Rebalance
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess
from static_consumer_lab.children.specs import static_spec

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
SESSION_MS = 30000
REPLICATED = {"min.insync.replicas": "2"}

GroupFactory = Callable[..., str]
Start = Callable[..., ConsumerProcess]
Restartable = JvmKafkaCluster | ContainerKafkaCluster  # stops and starts nodes, keeps the broker log


def _form(
    bootstrap: str,
    topic: str,
    partitions: int,
    group_id: str,
    start: Start,
    members: tuple[str, ...] = MEMBERS,
    protocol: str = "classic",
) -> Group:
    def spec(name: str) -> dict[str, object]:
        spec = static_spec(
            bootstrap,
            group_id,
            [topic],
            name,
            protocol=protocol,
            session_timeout_ms=SESSION_MS,  # classic only: a group config under KIP-848 (Group sets it)
            max_poll_interval_ms=60000,
        )
        return {**spec, "max_runtime_s": 600}  # outlive the slowest broker restarts on a loaded machine

    group = Group(
        start,
        bootstrap,
        group_id,
        topic,
        partitions,
        protocol,
        session_ms=SESSION_MS,
        spec_factory=spec,
        lab=True,
    )
    group.start(members[0]).wait_for_kind("assigned", timeout_s=60)  # the first one leads
    for name in members[1:]:
        group.start(name)
    group.wait_stable()
    return group


def _topic(bootstrap: str, partitions: int, **options: Any) -> str:
    # Straight on the test's own cluster: the plugin's topic factory would start the session broker too.
    return create_topic(bootstrap, f"faults-{uuid.uuid4().hex[:8]}", partitions, **options)


@pytest.fixture(scope="module")
def three_nodes(kafka_jvm_module_cluster_factory: Callable[..., JvmKafkaCluster]) -> JvmKafkaCluster:
    # lab: KIP-848 groups take a 30 s session (below the stock 45 s minimum); riding out broker faults does
    # not depend on the session length, only on it outlasting a fail-over.
    return kafka_jvm_module_cluster_factory(3, profile="lab")


@pytest.fixture
def cluster(three_nodes: JvmKafkaCluster) -> Iterator[JvmKafkaCluster]:
    """The shared 3-node cluster, every node up and every replica in sync, before and after the test."""
    for node in three_nodes.nodes:
        three_nodes.start_node(node.node_id, wait=False)  # a no-op for a running node
    three_nodes.wait_ready()
    wait_in_sync(three_nodes.bootstrap_servers)
    yield three_nodes
    for node in three_nodes.nodes:  # a failed test may have left one down
        three_nodes.start_node(node.node_id, wait=False)


def _three_node_group(cluster: JvmKafkaCluster, groups: GroupFactory, start: Start, protocol: str) -> Group:
    bootstrap = cluster.bootstrap_servers
    topic = _topic(bootstrap, PARTITIONS, replication=3, config=REPLICATED)
    return _form(bootstrap, topic, PARTITIONS, groups(), start, protocol=protocol)


def _assert_undisturbed(
    group: Group, cluster: Restartable, rebalances: list[Rebalance], since: float
) -> None:
    """No fencing, errors or lost partitions; no new generation or group epoch, no revocation or
    assignment since ``since``."""
    print(f"{deferred_commits(group)} commit(s) failed transiently and went out with the next one")
    assert trouble(group) == []
    assert cluster.group_rebalances(group.group_id) == rebalances, "the group rebalanced"
    assert group.revocations_since(since) == 0
    rejoined = [p.name for p in group.members.values() if any(e["ts"] >= since for e in p.events("assigned"))]
    assert rejoined == [], "members were assigned partitions again"
    # The coordinator (wherever it is now) knows every instance id by the member id its process holds.
    assert member_ids(group.bootstrap, group.group_id) == assigned_member_ids(group)


def _rebalances_so_far(cluster: Restartable, group: Group) -> list[Rebalance]:
    found = cluster.group_rebalances(group.group_id)
    # The group formed, so the broker logged at least one: an empty list would make the check vacuous.
    assert found, f"no generation or group epoch of {group.group_id} in the broker logs"
    assert {r.kind for r in found} == {"generation" if group.protocol == "classic" else "epoch"}
    return found


def test_restarted_static_members_are_recognised_while_every_broker_restarts(
    cluster: JvmKafkaCluster,
    kafka_group_id_factory: GroupFactory,
    kafka_consumer_process_factory: Start,
) -> None:
    """A classic and a KIP-848 group side by side through one roll of every broker (one roll for both:
    the roll is the slow part, and neither group's coordinator cares about the other group)."""
    bootstrap = cluster.bootstrap_servers
    groups = [
        _three_node_group(cluster, kafka_group_id_factory, kafka_consumer_process_factory, protocol)
        for protocol in ("classic", "consumer")
    ]
    with contextlib.ExitStack() as stack:
        producers = [stack.enter_context(SteadyProducer(bootstrap, g.topic)) for g in groups]
        new_member_ids = {}
        for group in groups:
            old_member_id = assigned_member_ids(group)["app-1"]
            before = group.owned()["app-1"]
            group.stop("app-1")  # closes without LeaveGroup (KIP-848: a static leave, epoch -2)
            restarted = group.start("app-1")
            restarted.wait_for_kind("assigned", timeout_s=60)
            group.wait_stable()
            new_member_ids[group.group_id] = assigned_member_ids(group)["app-1"]
            assert new_member_ids[group.group_id] != old_member_id, "a restarted member gets a new member id"
            assert restarted.assignment() == before

        rebalances = [_rebalances_so_far(cluster, group) for group in groups]
        since = time.time()
        coordinators = [[coordinator(bootstrap, group.group_id)] for group in groups]
        for node in (1, 2, 3):
            cluster.stop_node(node)  # clean: controlled shutdown moves its leaderships first
            for seen, group in zip(coordinators, groups, strict=True):
                seen.append(coordinator(bootstrap, group.group_id))
            cluster.start_node(node)
            wait_in_sync(bootstrap)
        for group, seen, found in zip(groups, coordinators, rebalances, strict=True):
            print(f"{group.protocol}: coordinator during the roll: {seen}; rebalances {found}")
            assert len(set(seen)) >= 2, f"the {group.protocol} group's coordinator never moved"
        acked = [producer.stop() for producer in producers]

    for group, count, found in zip(groups, acked, rebalances, strict=True):
        assert len(wait_all_consumed(group)) == count, group.protocol
        _assert_undisturbed(group, cluster, found, since)
        assert member_ids(bootstrap, group.group_id)["app-1"] == new_member_ids[group.group_id]


def _one_coordinator(group_ids: GroupFactory) -> tuple[str, str]:
    """Two new group ids with the same coordinator: the coordinator of a group (under either protocol) is
    the leader of the __consumer_offsets partition that Java's ``String.hashCode()`` of its id picks, and
    "Aa" and "BB" hash alike (31 * 65 + 97 == 31 * 66 + 66), so ids that differ only in those endings do."""
    base = group_ids()
    return f"{base}-Aa", f"{base}-BB"


@contextlib.contextmanager
def _named(protocol: str) -> Iterator[None]:
    """A failure inside names the group's protocol."""
    try:
        yield
    except AssertionError as error:
        error.add_note(f"in the {protocol} group")
        raise


def test_coordinator_killed_and_restarted_loses_and_duplicates_nothing(
    cluster: JvmKafkaCluster,
    kafka_group_id_factory: GroupFactory,
    kafka_consumer_process_factory: Start,
) -> None:
    """A classic and a KIP-848 group with the same coordinator, side by side through one kill -9 of that
    broker (one restart for both: the restart is the slow part)."""
    bootstrap = cluster.bootstrap_servers
    start = kafka_consumer_process_factory
    ids = iter(_one_coordinator(kafka_group_id_factory))
    groups = [_three_node_group(cluster, lambda: next(ids), start, p) for p in ("classic", "consumer")]
    with contextlib.ExitStack() as stack:
        producers = [stack.enter_context(SteadyProducer(bootstrap, g.topic)) for g in groups]
        for group in groups:
            group.wait_consumed(300)
        rebalances = [_rebalances_so_far(cluster, group) for group in groups]
        member_ids_before = [member_ids(bootstrap, group.group_id) for group in groups]
        since = time.time()
        killed = coordinator(bootstrap, groups[0].group_id)
        assert coordinator(bootstrap, groups[1].group_id) == killed, "the groups' coordinators differ"
        cluster.restart_node(killed, hard=True)  # kill -9, then start it again
        wait_in_sync(bootstrap)
        for group, found in zip(groups, rebalances, strict=True):
            now = coordinator(bootstrap, group.group_id)
            print(f"{group.protocol}: coordinator {killed} killed; coordinator now {now}; rebalances {found}")
        for group in groups:
            with _named(group.protocol):
                consumed = len(group.consumed())
                group.wait_consumed(consumed + 300)  # consumption goes on after the fail-over
        acked = [producer.stop() for producer in producers]

    for group, count, found, before in zip(groups, acked, rebalances, member_ids_before, strict=True):
        with _named(group.protocol):
            everything = wait_all_consumed(group)
            assert len(everything) == count
            _assert_undisturbed(group, cluster, found, since)
            assert member_ids(bootstrap, group.group_id) == before  # instance ids and member ids kept

            assert set(group.stop_all_exactly_once(count)) == everything


def test_unreachable_bootstrap_servers_fail_start_with_a_retriable_error_after_the_bound() -> None:
    bootstrap = ",".join(f"127.0.0.1:{port}" for port in free_ports(2))  # nothing listens there
    bound_s = 3.0
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        group_id="faults",
        topics=("t",),
        instance_id="app-0",
        connect_timeout_s=bound_s,
    )

    # The client is built while the capability gate asks the broker (a restart reaches its first
    # record sooner), so one may exist here; what must hold is that it never subscribes or is
    # assigned anything (nothing joins before the gate passed) and is closed when the gate fails.
    built: list[_Watched] = []

    def watched(config: dict[str, ConfigValue]) -> ConsumerAdapter:
        built.append(_Watched(ConfluentAdapter(config)))
        return cast(ConsumerAdapter, built[-1])

    consumer = StaticConsumer(settings, seams=Seams(adapter_factory=watched))
    began = time.monotonic()
    with pytest.raises(BrokerUnavailableError) as raised:
        consumer.start()
    elapsed = time.monotonic() - began
    assert len(built) <= 1
    for client in built:
        assert not {"subscribe", "assign", "incremental_assign"} & set(client.calls), client.calls
        assert "close" in client.calls, "the client built during the gate was left open"

    assert elapsed >= bound_s * 0.9, "gave up before connect_timeout_s instead of retrying"
    assert elapsed < bound_s + 30, "did not give up"
    error = raised.value
    assert error.retriable and error.exit_code == EXIT_TEMPFAIL
    message = str(error)
    assert bootstrap in message and f"within {bound_s:g}s" in message and "connect_timeout_s" in message
    assert consumer.state is State.NEW, "nothing joined"

    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "static_consumer.admin.cli",
            "probe",
            "-b",
            bootstrap,
            "--connect-timeout-s",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == EXIT_TEMPFAIL
    assert "BrokerUnavailableError" in cli.stderr and bootstrap in cli.stderr


class _Watched:
    """A real client whose method calls are recorded by name."""

    def __init__(self, inner: ConfluentAdapter) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return attr(*args, **kwargs)

        return call


OUTAGE_S = 6.0  # plus the broker's own start-up: well below SESSION_MS either way


@pytest.fixture(params=["jvm", "container"])
def lone_broker(
    request: pytest.FixtureRequest, kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster]
) -> Iterator[Restartable]:
    """A one-node stock cluster of the test's own on the JVM (classic members with a 30 s session: the
    stock bounds hold it); on the container, the session's stock container (stopped and started by the
    test, started again here if the test failed with it down)."""
    if request.param == "jvm":
        yield kafka_jvm_cluster_factory(1)
        return
    cluster: ContainerKafkaCluster = request.getfixturevalue("kafka_container_cluster")
    yield cluster
    cluster.start_node(1)


def test_member_rides_out_an_outage_of_the_only_broker(
    lone_broker: Restartable,
    kafka_group_id_factory: GroupFactory,
    kafka_consumer_process_factory: Start,
) -> None:
    cluster = lone_broker
    bootstrap = cluster.bootstrap_servers
    partitions = 4
    topic = _topic(bootstrap, partitions)
    group = _form(
        bootstrap, topic, partitions, kafka_group_id_factory(), kafka_consumer_process_factory, MEMBERS[:2]
    )
    owned = group.owned()
    with SteadyProducer(bootstrap, topic) as producer:  # keeps its records queued while the broker is away
        group.wait_consumed(300)
        rebalances = _rebalances_so_far(cluster, group)
        since = time.time()
        cluster.stop_node(1)
        down_at = time.monotonic()
        time.sleep(OUTAGE_S)
        cluster.start_node(1)
        print(f"broker away for {time.monotonic() - down_at:.1f} s; rebalances {rebalances}")
        group.wait_consumed(len(group.consumed()) + 300, also=producer.describe)
        acked = producer.stop()

    assert len(wait_all_consumed(group)) == acked
    _assert_undisturbed(group, cluster, rebalances, since)
    assert group.owned() == owned
    ready = {name: proc.events("ready")[0]["instance_id"] for name, proc in group.members.items()}
    assert ready == {name: name for name in group.members}
