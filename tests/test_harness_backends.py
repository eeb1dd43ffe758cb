"""Which broker backend the test harness picks (no broker needed)."""

from __future__ import annotations

import pytest

from static_consumer_lab import HarnessError, select_backend
from static_consumer_lab.jvm import new_cluster_id


def _never() -> bool:
    raise AssertionError("the Docker engine must not be probed when an existing cluster is configured")


def test_existing_cluster_wins_and_docker_is_not_probed() -> None:
    assert select_backend({"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092"}, _never) == "external"


def test_docker_engine_is_next_then_the_jvm() -> None:
    assert select_backend({}, lambda: True) == "docker"
    assert select_backend({}, lambda: False) == "jvm"


def test_forced_backend_is_validated() -> None:
    assert (
        select_backend({"STATIC_CONSUMER_BROKER": "jvm", "KAFKA_BOOTSTRAP_SERVERS": "x:1"}, _never) == "jvm"
    )
    with pytest.raises(HarnessError, match="jvm, docker or external"):
        select_backend({"STATIC_CONSUMER_BROKER": "podman"}, _never)
    with pytest.raises(HarnessError, match="needs KAFKA_BOOTSTRAP_SERVERS"):
        select_backend({"STATIC_CONSUMER_BROKER": "external"}, _never)


def test_kraft_cluster_ids_never_start_with_a_dash() -> None:
    # kafka-storage's argument parser reads "-t -abc..." as a missing value; roughly 1 in 64
    # random ids started with '-' and failed formatting on CI.
    ids = [new_cluster_id() for _ in range(5000)]
    assert all(not i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)
    assert len(set(ids)) == len(ids)
