"""Crash restarts with ``restart_state_dir`` on the stock broker (45 s KIP-848 session, 5 s heartbeats).

A static member killed with ``kill -9`` and started again a second later in its pod (the same directory:
an ``emptyDir`` survives a container restart) is back on its own partitions at once under both protocols:
under the consumer protocol it sends its dead predecessor's static leave (``_core/predecessor.py``,
``_kafka/release.py``) instead of waiting out the session (integration/test_static_restart.py keeps the
wait without the directory). No other member notices, and only the dead member's uncommitted tail is
handled twice.

The safety side, consumer protocol: a live holder that the newcomer's record does not name, and a frozen
(SIGSTOP) predecessor that still holds its lock, are never released: the newcomer waits as without the
directory and ends with exit 82 once the holder commits. A predecessor that was released while frozen
(possible only when its lock is not the newcomer's: another directory) wakes to FencedInstanceError
(exit 82), and the broker takes no commit of its after the release.

``pytest integration -k "crash_restart or predecessor"`` runs them.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from static_consumer._base.errors import EXIT_FENCED
from static_consumer._kafka.release import release_static_member
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers import describe_consumer_group, produce
from static_consumer_lab.children.group import STOCK_CONSUMER_PROTOCOL_SESSION_MS, Group
from static_consumer_lab.children.pods import PoolPod
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.producer import SteadyProducer

PARTITIONS = 6
MEMBERS = ("app-0", "app-1", "app-2")
SESSION_S = STOCK_CONSUMER_PROTOCOL_SESSION_MS / 1000
# A restart that waited for the broker to release its id would take about a session; half of it
# tells the two apart on a loaded machine (measured: 0.4-1.5 s with the release, 40-48 s without).
FAST_S = SESSION_S / 2
EXIT_S = 60.0  # a newcomer's verdict on a live holder that commits: seconds (PROOF_S apart readings)


def _member_ids(group: Group) -> dict[str, str]:
    return {
        m.group_instance_id: m.member_id
        for m in describe_consumer_group(group.bootstrap, group.group_id).members
        if m.group_instance_id
    }


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_crash_restart_takes_back_its_own_partitions_at_once(
    protocol: str, kafka_group_factory: Callable[..., Group], tmp_path: Path
) -> None:
    # One directory for the three pods: the files are per group and instance id, as in each pod's own.
    group = kafka_group_factory(PARTITIONS, protocol=protocol, settings={"restart_state_dir": str(tmp_path)})
    group.form(MEMBERS)
    produced = produce(group.bootstrap, group.topic, 1500)
    group.wait_consumed(produced)
    before = group.wait_stable()
    group.kill("app-1")
    killed_at = time.time()
    committed = group.committed()  # nothing commits app-1's partitions until its restart
    time.sleep(1.0)  # the kubelet restarts the container
    restart_at = time.time()
    restarted = group.start("app-1")
    assigned = restarted.wait_for(
        lambda e: e["kind"] == "assigned" and bool(e["partitions"]), SESSION_S + 30, "its partitions"
    )
    took = assigned["ts"] - restart_at
    print(f"{protocol}: restart -> its partitions in {took:.2f} s")
    assert took < FAST_S, restarted.stderr_tail()
    assert restarted.assignment() == before["app-1"], "the same partitions"
    assert group.wait_stable() == before
    assert group.revocations_since(killed_at) == 0, "another member noticed the crash"
    assert group.moves_since(killed_at, before) == 0
    produced += produce(group.bootstrap, group.topic, 600, start=produced)
    consumed = group.wait_consumed(produced)
    twice = sorted(r for r, n in consumed.items() if n > 1)
    tail = [(t, p, o) for t, p, o in twice if (t, p) in before["app-1"] and o >= committed.get(p, 0)]
    assert twice == tail, "only the dead member's uncommitted tail is handled twice"
    assert restarted.events("stalled") == [] and restarted.returncode is None, restarted.stderr_tail()


def _frozen_group(kafka_group_factory: Callable[..., Group], directory: Path) -> Group:
    """One consumer-protocol member, app-0, owning two partitions, its record in ``directory``."""
    group = kafka_group_factory(
        2, protocol="consumer", settings={"restart_state_dir": str(directory), "max_poll_interval_ms": 120000}
    )
    group.form(["app-0"])
    return group


def _newcomer(group: Group, directory: Path, **spec: Any) -> ConsumerProcess:
    """A second process for app-0 (the holder's instance id) with its record in ``directory``."""
    settings = {**group.spec("app-0"), **spec}
    settings["settings"] = {**settings["settings"], "restart_state_dir": str(directory)}
    return group.start_process(settings, name=f"app-0#{len(group.retired) + 2}")


def _record(directory: Path, group: Group, member_ids: list[str]) -> None:
    path = directory / f"{group.group_id}.app-0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"member_ids": member_ids}))


def test_predecessor_that_is_alive_or_frozen_is_never_released(
    kafka_group_factory: Callable[..., Group], tmp_path: Path
) -> None:
    group = _frozen_group(kafka_group_factory, tmp_path / "pod")
    holder = group.members["app-0"]
    owned = holder.assignment()
    with SteadyProducer(group.bootstrap, group.topic, 50, max_s=300.0):
        holder.wait_for_kind("committed", timeout_s=30)
        member = _member_ids(group)["app-0"]

        # A live holder that the newcomer's record does not name (another pod's process): the
        # coordinator refuses the leave, the newcomer waits, sees the holder commit, and exits 82.
        other = tmp_path / "other-pod"
        _record(other, group, ["a-member-of-another-pod"])
        twin = _newcomer(group, other)
        assert twin.wait(timeout_s=EXIT_S) == EXIT_FENCED, twin.stderr_tail()
        assert "could not release" not in twin.stderr_tail(200), "the release must have been answered"

        # The holder frozen (SIGSTOP) in its pod: it keeps its lock, so a restart in the same directory
        # releases nothing, and once the holder runs again and commits, the restart exits 82.
        holder.freeze()
        try:
            restart = _newcomer(group, tmp_path / "pod")
            restart.wait_for_kind("ready", timeout_s=30)
            time.sleep(3.0)  # refused (UNRELEASED_INSTANCE_ID) and waiting
            assert _member_ids(group)["app-0"] == member, "the frozen holder was released"
            assert "another process of this pod holds" in restart.stderr_tail(200)
        finally:
            holder.thaw()
        assert restart.wait(timeout_s=EXIT_S) == EXIT_FENCED, restart.stderr_tail()

        began = time.time()
        holder.wait_for_kind("committed", timeout_s=30, after=began)
    assert _member_ids(group)["app-0"] == member, "the holder kept its instance id"
    assert holder.assignment() == owned and holder.events("lost") == [] and holder.events("revoked") == []
    assert holder.returncode is None, holder.stderr_tail()


def test_predecessor_released_while_frozen_wakes_fenced_and_commits_nothing(
    kafka_group_factory: Callable[..., Group], tmp_path: Path
) -> None:
    group = _frozen_group(kafka_group_factory, tmp_path / "pod")
    old = group.members["app-0"]
    owned = old.assignment()
    block = tmp_path / "block"
    with SteadyProducer(group.bootstrap, group.topic, 50, max_s=300.0):
        old.wait_for_kind("committed", timeout_s=30)
        old.freeze()
        try:
            # The record copied to a directory whose lock the frozen process does not hold: the newcomer
            # can prove nothing about it and releases it all the same (what the lock prevents in a pod).
            shutil.copytree(tmp_path / "pod", tmp_path / "elsewhere", ignore=shutil.ignore_patterns("*.lock"))
            block.write_text("1 120")  # the newcomer's first batch waits for <block>.release to commit
            new = _newcomer(group, tmp_path / "elsewhere", block=str(block))
            assigned = new.wait_for(lambda e: e["kind"] == "assigned" and bool(e["partitions"]), FAST_S)
            assert {tuple(p) for p in assigned["partitions"]} == owned, "it took over the same partitions"
            new.wait_for_kind("blocking", timeout_s=30)
            before = group.committed()  # nobody commits while the newcomer is blocked...
        finally:
            began = old.thaw()
        # ...the woken predecessor least of all: its commits and heartbeats carry the released member id.
        assert old.wait(timeout_s=EXIT_S) == EXIT_FENCED, old.stderr_tail()
        assert group.committed() == before, "the released predecessor committed after the release"
        woke = [e["kind"] for e in old.events() if e["ts"] >= began]
        print(f"the released predecessor after its wake-up: {woke}")
        assert old.events("error")[-1]["kind_of"] == "FencedInstanceError"
        Path(f"{block}.release").write_text("")
        new.wait_for_kind("committed", timeout_s=30)
    assert new.returncode is None and new.events("lost") == [], new.stderr_tail()


def test_predecessor_release_answers_for_an_unknown_group_or_instance(
    kafka_bootstrap_servers: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    # kafka-python's private admin parts the release rests on, against the broker: an instance id that
    # nobody holds, and a group the coordinator does not know, release nothing.
    settings = ConsumerSettings(
        bootstrap_servers=kafka_bootstrap_servers, group_id=kafka_group_id_factory(), protocol="consumer"
    )
    assert release_static_member(settings, "app-0", ["m-1", "m-2"]) is None


def test_crash_restart_of_a_pool_worker_takes_back_its_partitions_at_once(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    tmp_path: Path,
) -> None:
    # `static-consumer run --processes 2`: the supervisor restarts a killed worker in place under its
    # instance id `{pod}-{k}`; each worker has its own lock and record in the pod's directory.
    topic = kafka_topic_factory(4)
    settings = {
        "bootstrap_servers": kafka_bootstrap_servers,
        "group_id": kafka_group_id_factory(),
        "topics": topic,
        "protocol": "consumer",
        "connect_timeout_s": 10.0,
        "shutdown_timeout_s": 10.0,
        "restart_state_dir": str(tmp_path / "app-0" / "restart"),
    }
    pod = PoolPod("app-0", processes=2, settings=settings, workdir=tmp_path)
    try:
        pod.start().wait_ready()
        wait_until(lambda: sum(map(len, pod.owned().values())) == 4, 60, lambda: pod.describe())
        produce(kafka_bootstrap_servers, topic, 400)
        owned, since = pod.owned(), time.time()
        pod.kill_worker(1)
        killed = time.monotonic()
        wait_until(
            lambda: pod.workers()[1].get("restarts") == 1 and bool(pod.workers()[1].get("assignment")),
            SESSION_S + 30,
            lambda: f"app-0-1 restarted with its partitions; {pod.describe()}",
        )
        back_s = time.monotonic() - killed
        print(f"pool worker: back on its partitions {back_s:.2f} s after the kill")
        assert back_s < FAST_S, pod.describe()
        assert pod.owned() == owned, "the restarted worker has its own partitions, the other kept its"
        assert pod.revocations(since) == [], "a worker saw its partitions move"
        assert sorted(p.name for p in (tmp_path / "app-0" / "restart").glob("*.lock")) == [
            f"{settings['group_id']}.app-0-0.lock",
            f"{settings['group_id']}.app-0-1.lock",
        ]
        assert pod.stop(timeout_s=40) == 0, pod.describe()
    finally:
        pod.kill()
