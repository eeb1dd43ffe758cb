"""Group formation under group.initial.rebalance.delay.ms (KIP-134) on a real broker.

The coordinator holds the first rebalance of an empty group for the delay, and starts the wait again at
every join (up to the rebalance timeout, max_poll_interval_ms here). Static members that all start
within the delay of one another, as the pods of a StatefulSet with ``podManagementPolicy: Parallel`` do,
form the group in one generation, each assigned once. The control, the same start-up on a broker with
delay 0, forms it in several generations: every newcomer makes the members already in give their
partitions back (eager protocol). ``static-consumer probe`` reports the delay.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable

from static_consumer import ConsumerSettings
from static_consumer._kafka.probe import probe
from static_consumer_lab.brokers import JvmKafkaCluster, create_topic
from static_consumer_lab.children.group import Group
from static_consumer_lab.children.processes import ConsumerProcess

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
DELAY_MS = 3000
STAGGER_S = 0.5  # between process starts: well inside the delay, far beyond a join's round trip


def _form_staggered(
    cluster: JvmKafkaCluster, group_id: str, start: Callable[..., ConsumerProcess]
) -> tuple[Group, float]:
    """Start the members STAGGER_S apart without waiting for any; the group and seconds to form it."""
    bootstrap = cluster.bootstrap_servers
    topic = create_topic(bootstrap, f"formation-{uuid.uuid4().hex[:8]}", PARTITIONS)
    group = Group(start, bootstrap, group_id, topic, PARTITIONS)
    began = time.monotonic()
    for name in MEMBERS:
        group.start(name)
        time.sleep(STAGGER_S)
    group.wait_stable(settle_s=2.0)
    return group, time.monotonic() - began


def _probe_cli(bootstrap: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "static_consumer.admin.cli", "probe", "-b", bootstrap, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_members_started_within_the_delay_form_the_group_in_one_generation(
    kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    cluster = kafka_jvm_cluster_factory(1)  # stock: Kafka's default delay, DELAY_MS
    bootstrap = cluster.bootstrap_servers
    report = _probe_cli(bootstrap, "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["group_initial_rebalance_delay_ms"] == DELAY_MS
    assert f"initial rebalance delay {DELAY_MS} ms" in _probe_cli(bootstrap).stdout

    group, seconds = _form_staggered(cluster, kafka_group_id_factory(), kafka_consumer_process_factory)
    generations = cluster.group_generations(group.group_id)
    print(f"delay {DELAY_MS} ms: formed in {seconds:.1f} s, generations {generations}")
    assert generations == [1]
    assigned = {name: len(proc.events("assigned")) for name, proc in group.members.items()}
    assert assigned == dict.fromkeys(MEMBERS, 1)
    assert group.revocations_since(0) == 0


def test_control_without_delay_forms_the_group_in_several_generations(
    kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    cluster = kafka_jvm_cluster_factory(1, profile="lab")  # the lab profile: delay 0
    bootstrap = cluster.bootstrap_servers
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id="probe", connect_timeout_s=10)
    assert probe(settings).group_initial_rebalance_delay_ms == 0

    group, seconds = _form_staggered(cluster, kafka_group_id_factory(), kafka_consumer_process_factory)
    generations = cluster.group_generations(group.group_id)
    revoked = {n: len([e for e in p.events("revoked") if e["partitions"]]) for n, p in group.members.items()}
    print(f"delay 0 ms: formed in {seconds:.1f} s, generations {generations}, revocations {revoked}")
    assert len(generations) > 1
    assert group.revocations_since(0) > 0, "members already in the group gave nothing back"
