"""A member's look-ups at its own group survive the group coordinator going away (3-node cluster).

librdkafka 2.16's admin client aborts (an assertion ``eonce->refcnt > 0``) or crashes (a NULL
dereference on NOT_COORDINATOR) the process whose ConsumerGroupDescribe or OffsetFetch is under way when
the coordinator goes away; a consumer process therefore looks at its group through kafka-python
(``static_consumer._kafka.watch``). The look-ups that run longest are the wait of a KIP-848 static member
whose crashed predecessor still holds its instance id: this test kills the group coordinator while a
restarted member waits, with ``connect_timeout_s`` 10 s so that the outage outlasts a request (the case
that took the member down when the wait asked librdkafka's admin client: 6 of 8 rounds in one run). The
member must live through it and join once the id is released.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from static_consumer import ConsumerSettings
from static_consumer._kafka import kafka_python
from static_consumer._kafka.describe import ask_group
from static_consumer_lab.brokers import JvmKafkaCluster, create_topic
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import static_spec
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 3
OUTAGE_S = 15.0  # longer than a request's bound (connect_timeout_s 10 s): a request outlives its coordinator


@pytest.fixture(scope="module")
def cluster(kafka_jvm_module_cluster_factory: Callable[..., JvmKafkaCluster]) -> Iterator[JvmKafkaCluster]:
    yield kafka_jvm_module_cluster_factory(3)  # stock group settings: the 45 s KIP-848 session


def _coordinator(bootstrap: str, group: str) -> int:
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group, connect_timeout_s=10)
    found: list[int] = []

    def ask() -> bool:
        try:
            with kafka_python.admin_client(settings, "test-coordinator") as admin:
                coordinator = ask_group(admin, group).coordinator
        except Exception:  # noqa: BLE001 - a coordinator moving or loading
            return False
        if coordinator is None:
            return False
        found.append(coordinator)
        return True

    wait_until(ask, 60, f"the coordinator of {group}", poll_s=1.0)
    return found[-1]


def test_a_member_waiting_for_its_instance_id_survives_the_coordinator_going_away(
    cluster: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap, group = cluster.bootstrap_servers, kafka_group_id_factory("lookups")
    topic = f"{group}-in"
    create_topic(bootstrap, topic, PARTITIONS, replication=3, config={"min.insync.replicas": "2"})
    spec = static_spec(bootstrap, group, [topic], "app-0", protocol="consumer", connect_timeout_s=10.0)
    with SteadyProducer(bootstrap, topic, rate_per_s=50):
        first = kafka_consumer_process_factory(spec, name="first")
        first.wait_for_kind("assigned", 90)
        first.kill()  # a crash: no static leave, the broker holds the instance id for its session
        restarted = kafka_consumer_process_factory(spec, name="restarted")
        coordinator = _coordinator(bootstrap, group)
        time.sleep(8)  # the restart is refused and watches the group now
        assert restarted.returncode is None, restarted.stderr_tail()
        cluster.stop_node(coordinator, hard=True)
        time.sleep(OUTAGE_S)
        assert restarted.returncode is None, restarted.stderr_tail()  # still waiting, alive
        cluster.start_node(coordinator)
        # Released once the dead member's session ends (each coordinator load restarts that clock).
        restarted.wait_for(lambda e: e["kind"] == "assigned" and bool(e.get("partitions")), 180, "assigned")
        assert restarted.returncode is None, restarted.stderr_tail()
        assert restarted.events("error") == [], restarted.events("error")
