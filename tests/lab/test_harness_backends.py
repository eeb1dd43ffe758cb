"""Which broker backend the test harness picks (no broker needed)."""

from __future__ import annotations

import pytest

from static_consumer_lab.brokers import HarnessError, select_backend
from static_consumer_lab.brokers.backends import BackendChoice
from static_consumer_lab.brokers.containers import DockerStatus
from static_consumer_lab.brokers.jvm import new_cluster_id

TAG = "static-consumer-kafka:4.3.1-0123456789ab"
READY = DockerStatus(engine=True, compose="docker-compose", image=TAG, image_present=True)


def _never() -> DockerStatus:
    raise AssertionError("the Docker engine must not be probed when the environment decides")


def test_existing_cluster_wins_and_docker_is_not_probed() -> None:
    assert select_backend({"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:9092"}, _never) == BackendChoice("external")


def test_the_container_when_engine_compose_and_image_are_all_there() -> None:
    assert select_backend({}, lambda: READY) == BackendChoice("docker")


def test_no_engine_is_the_plain_jvm_default_without_a_warning() -> None:
    assert select_backend({}, lambda: DockerStatus(engine=False)) == BackendChoice("jvm")


def test_an_engine_without_compose_falls_back_to_the_jvm_with_one_warning_line() -> None:
    # An engine that answers without `docker compose` (no plugin): the harness must not run
    # `docker compose -f ...` anyway (it exits 125).
    choice = select_backend({}, lambda: DockerStatus(engine=True))
    assert choice.backend == "jvm"
    assert choice.warning is not None and "\n" not in choice.warning
    assert "no compose command answers" in choice.warning and "JVM harness" in choice.warning


def test_an_engine_and_compose_without_the_image_fall_back_to_the_jvm_naming_the_build() -> None:
    status = DockerStatus(engine=True, compose="docker compose", image=TAG, image_present=False)
    choice = select_backend({}, lambda: status)
    assert choice.backend == "jvm"
    assert choice.warning is not None and "\n" not in choice.warning
    build = "python -m static_consumer_lab.brokers.kafka_image build"
    assert TAG in choice.warning and build in choice.warning


def test_a_chosen_backend_is_not_second_guessed() -> None:
    env = {"STATIC_CONSUMER_BROKER": "jvm", "KAFKA_BOOTSTRAP_SERVERS": "x:1"}
    assert select_backend(env, _never) == BackendChoice("jvm")
    # Chosen, the container is started even when something is missing: container_cluster() then says
    # what (or builds the image), instead of the default's quiet fallback.
    assert select_backend({"STATIC_CONSUMER_BROKER": " Docker "}, _never) == BackendChoice("docker")


def test_forced_backend_is_validated() -> None:
    with pytest.raises(HarnessError, match="jvm, docker or external"):
        select_backend({"STATIC_CONSUMER_BROKER": "podman"}, _never)
    with pytest.raises(HarnessError, match="needs KAFKA_BOOTSTRAP_SERVERS"):
        select_backend({"STATIC_CONSUMER_BROKER": "external"}, _never)


def test_missing_names_the_first_thing_missing() -> None:
    assert DockerStatus(engine=False).missing() == "no Docker engine answers `docker info`"
    assert READY.missing() is None


def test_kraft_cluster_ids_never_start_with_a_dash() -> None:
    # kafka-storage's argument parser reads "-t -abc..." as a missing value; roughly 1 in 64
    # random ids started with '-' and failed formatting on CI.
    ids = [new_cluster_id() for _ in range(5000)]
    assert all(not i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)
    assert len(set(ids)) == len(ids)
