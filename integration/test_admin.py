"""Operator tools on a real broker: remove-members and scale-down move a dead static member's partitions at
once (instead of after the session timeout), under both group protocols; unknown ids are refused, probe
and describe read the cluster."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from static_consumer.admin import describe_group
from static_consumer.admin.cli import main
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.children.group import shorten_consumer_session
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import confluent_spec

pytestmark = pytest.mark.lab_broker(
    "KIP-848 groups take a 500 ms heartbeat override (below the stock 5 s minimum) so that they settle in "
    "seconds; what is tested is removal by instance id, which no session setting changes"
)

# Long enough that a test passing within seconds proves the removal, not the expiry, moved the partitions.
SESSION_TIMEOUT_MS = 60_000
StartFn = Callable[..., ConsumerProcess]


def cli(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main([*argv, "--json"], stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


def start_static(
    start: StartFn, bootstrap: str, group: str, topics: list[str], instance_id: str, **config: Any
) -> ConsumerProcess:
    spec = confluent_spec(
        bootstrap,
        group,
        topics,
        **{"group.instance.id": instance_id, "session.timeout.ms": SESSION_TIMEOUT_MS, **config},
    )
    return start(spec, name=instance_id)


def owned(members: list[ConsumerProcess]) -> int:
    return sum(len(m.assignment()) for m in members)


def removed_at_once(
    settings: ConsumerSettings, dead: ConsumerProcess, survivors: list[ConsumerProcess], *argv: str
) -> tuple[list[str], float]:
    """Kill ``dead`` (no goodbye: the broker keeps it, and its partitions, until its session times
    out), run the CLI removal ``argv``; the ids removed and the seconds until ``survivors`` own every
    partition the group had."""
    partitions = owned([dead, *survivors])
    dead.kill()
    assert dead.name in describe_group(settings).instance_ids
    began = time.monotonic()
    code, result = cli(*argv, "-b", settings.bootstrap_servers)
    assert (code, result["failed"]) == (0, []), result
    wait_until(
        lambda: owned(survivors) == partitions, 30, f"the survivors to own all {partitions} partitions"
    )
    owners = [m.assignment() for m in survivors]
    assert sum(map(len, owners)) == len(set().union(*owners)), "a partition with two owners"
    return sorted(result["removed"]), time.monotonic() - began


def test_remove_members_gives_a_killed_members_partitions_to_the_others_at_once(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(6), kafka_group_id_factory()
    members = [
        start_static(kafka_consumer_process_factory, bootstrap, group, [topic], f"pod-{i}") for i in range(3)
    ]
    wait_until(lambda: [len(m.assignment()) for m in members] == [2, 2, 2], 60, "a 2+2+2 split")

    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)
    removed, elapsed = removed_at_once(
        settings, members[2], members[:2], "remove-members", group, "--instance-id", "pod-2"
    )
    assert removed == ["pod-2"]
    print(
        f"remove-members -> re-owned in {elapsed:.2f} s (session timeout {SESSION_TIMEOUT_MS / 1000:.0f} s)"
    )
    assert elapsed < SESSION_TIMEOUT_MS / 1000 / 4

    code, described = cli("describe", group, "-b", bootstrap, "--check")
    assert code == 0, described["audit"]
    assert [m["instance_id"] for m in described["group"]["members"]] == ["pod-0", "pod-1"]


def test_remove_members_refuses_unknown_ids_and_removes_nothing(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(2), kafka_group_id_factory()
    members = [
        start_static(kafka_consumer_process_factory, bootstrap, group, [topic], f"pod-{i}") for i in range(2)
    ]
    wait_until(lambda: [len(m.assignment()) for m in members] == [1, 1], 60, "a 1+1 split")
    revokes_before = sum(len(m.events("revoked")) for m in members)

    code, result = cli(
        "remove-members", group, "--instance-id", "pod-1", "--instance-id", "pod-7", "-b", bootstrap
    )

    assert code == 78
    assert result["error"]["type"] == "UnknownInstanceIdError"
    assert "pod-7" in result["error"]["message"] and "Nothing was removed" in result["error"]["message"]
    time.sleep(2)  # a removal would have made the broker rebalance within a heartbeat or two
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)
    assert describe_group(settings).instance_ids == {"pod-0", "pod-1"}
    assert sum(len(m.events("revoked")) for m in members) == revokes_before


def test_scale_down_removes_the_ordinals_a_statefulset_dropped_and_is_idempotent(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(3), kafka_group_id_factory()
    pods = [
        start_static(kafka_consumer_process_factory, bootstrap, group, [topic], f"orders-{i}")
        for i in range(3)
    ]
    wait_until(lambda: owned(pods) == 3 and all(p.assignment() for p in pods), 60, "one partition each")
    for pod in pods[1:]:  # the StatefulSet went from 3 to 1 replica; its pods are gone
        pod.kill()

    code, result = cli("scale-down", group, "--statefulset", "orders", "--replicas", "1", "-b", bootstrap)
    assert (code, sorted(result["removed"])) == (0, ["orders-1", "orders-2"])
    wait_until(lambda: len(pods[0].assignment()) == 3, 30, "orders-0 to own all 3 partitions")

    code, again = cli("scale-down", group, "--statefulset", "orders", "--replicas", "1", "-b", bootstrap)
    assert (code, again["removed"], again["failed"]) == (0, [], [])


def test_remove_members_works_for_a_kip848_consumer_protocol_group(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(4), kafka_group_id_factory()
    for i in range(2):
        config = {"group.instance.id": f"pod-{i}", "group.protocol": "consumer"}
        kafka_consumer_process_factory(confluent_spec(bootstrap, group, [topic], **config), name=f"pod-{i}")
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)

    def split() -> list[int]:
        return [len(m.assignment) for m in describe_group(settings).members]

    wait_until(lambda: split() == [2, 2], 60, "a 2+2 split")
    description = describe_group(settings)
    assert description.group_type == "consumer" and description.instance_ids == {"pod-0", "pod-1"}

    code, result = cli("remove-members", group, "--instance-id", "pod-1", "-b", bootstrap)
    # pod-1 is alive, so it rejoins as a new member: the point here is that the broker accepted the removal
    # of a KIP-848 member by instance id and the group settles again.
    assert (code, result["removed"]) == (0, ["pod-1"])
    wait_until(lambda: sorted(split()) == [2, 2], 60, "the group to settle again")


def test_kip848_remove_members_and_scale_down_move_a_killed_members_partitions_at_once(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: StartFn,
) -> None:
    bootstrap, topic, group = kafka_bootstrap_servers, kafka_topic_factory(6), kafka_group_id_factory()
    # Under KIP-848 the session is the group's (the broker's allowed maximum is 60 s by default).
    shorten_consumer_session(bootstrap, group, SESSION_TIMEOUT_MS)
    pods = []
    for i in range(3):
        config = {"group.instance.id": f"orders-{i}", "group.protocol": "consumer"}
        spec = confluent_spec(bootstrap, group, [topic], **config)
        pods.append(kafka_consumer_process_factory(spec, name=f"orders-{i}"))
    wait_until(lambda: [len(p.assignment()) for p in pods] == [2, 2, 2], 60, "a 2+2+2 split")
    settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group)
    session_s = SESSION_TIMEOUT_MS / 1000

    removed, removed_s = removed_at_once(
        settings, pods[2], pods[:2], "remove-members", group, "--instance-id", "orders-2"
    )
    assert removed == ["orders-2"]
    # The StatefulSet went from 2 to 1 replica: orders-1 is gone.
    scaled, scaled_s = removed_at_once(
        settings, pods[1], pods[:1], "scale-down", group, "--statefulset", "orders", "--replicas", "1"
    )
    assert scaled == ["orders-1"]
    print(
        f"KIP-848, killed members: remove-members -> re-owned in {removed_s:.2f} s, scale-down in "
        f"{scaled_s:.2f} s (group session {session_s:.0f} s)"
    )
    assert max(removed_s, scaled_s) < session_s / 4  # the removal moved them, not the session's expiry
    description = describe_group(settings)
    assert description.group_type == "consumer" and description.instance_ids == {"orders-0"}


def test_probe_reports_static_support_and_the_session_bounds(kafka_bootstrap_servers: str) -> None:
    code, report = cli("probe", "-b", kafka_bootstrap_servers)
    assert code == 0
    assert report["supports"] == {
        "classic_static": True,
        "consumer_protocol": True,
        "leave_group_batch": True,
    }
    bounds = report["group_session_timeout_ms"]
    assert 500 < bounds["min"] <= bounds["max"]  # the harness broker allows 1000 ms, Kafka's default 6000
    assert report["configured"]["static"] is True

    code, refused = cli("probe", "-b", kafka_bootstrap_servers, "--session-timeout-ms", "500")
    assert code == 78  # a configuration error: change session_timeout_ms
    assert refused["configured"]["error"]["type"] == "SessionTimeoutOutOfBoundsError"


def test_console_script_is_installed_and_reads_the_environment(kafka_bootstrap_servers: str) -> None:
    script = Path(sys.executable).with_name("static-consumer")
    env = {"STATIC_CONSUMER_BOOTSTRAP_SERVERS": kafka_bootstrap_servers, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(script), "probe", "--json"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bootstrap_servers"] == kafka_bootstrap_servers
