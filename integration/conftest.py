"""Integration tests run against a real Apache Kafka broker from the static_consumer pytest plugin.

The plugin (``-p static_consumer_lab.plugin`` in pyproject.toml's addopts) provides the fixtures;
nothing here may skip: if the broker cannot start, every test errors and CI fails with the broker log
tail. Under CI=true a skipped test, or a module skipped while being collected, fails the run
(tests/architecture/test_integration_no_skips.py runs this file on a temporary suite to prove both).

Tests marked ``both_backends`` run twice: ``[default]`` on the session broker (the JVM harness in CI)
and ``[container]`` on the broker from the locally built image (``kafka_container_cluster``):
``pytest -k container`` runs that subset; ``both_backends(container_protocols=("classic",))`` keeps
one protocol of a slow scenario on the container. When the container can run, a scenario that runs
there (same test, same protocol) does not run again on the default broker: once per protocol, on the
container, and the rest of the suite on the default broker. Without a Docker engine and a compose
command the ``[container]`` variants skip, which fails a CI run like any other skip.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import pytest

from static_consumer_lab.brokers import KafkaCluster
from static_consumer_lab.brokers.containers import COMPOSE_COMMANDS, compose_command, docker_engine_reachable


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    """pytest-docker's compose command: whichever of ``docker compose`` and ``docker-compose`` answers."""
    return compose_command() or COMPOSE_COMMANDS[0]


@pytest.fixture
def lab_group_factory(
    kafka_lab_cluster: KafkaCluster,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., Any],
) -> Callable[..., Any]:
    """``kafka_group_factory`` on the lab broker, for a test whose other groups use the stock one (a
    classic group on the stock broker next to a KIP-848 group that needs the lab's short session)."""
    from static_consumer_lab.children.group import Group

    bootstrap = kafka_lab_cluster.bootstrap_servers
    topics = functools.partial(kafka_topic_factory, bootstrap=bootstrap)

    def new(partitions: int, **options: Any) -> Group:
        return Group.new(
            kafka_consumer_process_factory,
            bootstrap,
            topics,
            kafka_group_id_factory,
            partitions,
            lab=True,
            **options,
        )

    return new


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("both_backends") and "kafka_cluster" in metafunc.fixturenames:
        metafunc.parametrize("kafka_cluster", ["default", "container"], indirect=True)


def _on_container(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "container" in callspec.params.values()


def _container_unavailable() -> str | None:
    if not docker_engine_reachable():
        return "no Docker engine answers `docker info`"
    if compose_command() is None:
        return "neither `docker compose` nor `docker-compose` answers"
    return None


def _left_out(item: pytest.Item) -> bool:
    """A [container] variant of a protocol its marker leaves out (``container_protocols=(...)``): a slow
    scenario runs under both protocols on the default broker and once on the container."""
    marker = item.get_closest_marker("both_backends")
    only = marker.kwargs.get("container_protocols") if marker is not None else None
    callspec = getattr(item, "callspec", None)
    protocol = callspec.params.get("protocol") if callspec is not None else None
    return only is not None and _on_container(item) and protocol not in only


BACKEND_PARAMETERS = ("kafka_cluster", "lone_broker")  # the parameters that say where a scenario runs


def _scenario(item: pytest.Item) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The test and its parameters other than the backend: the same scenario on either backend."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    others = tuple(sorted((k, str(v)) for k, v in params.items() if k not in BACKEND_PARAMETERS))
    return item.nodeid.split("[", 1)[0], others


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    left_out = [item for item in items if _left_out(item)]
    # Asked once: `docker info` and the compose probe are subprocesses.
    missing = _container_unavailable() if any(_on_container(item) for item in items) else None
    if missing is None:
        scenarios = {_scenario(item) for item in items if _on_container(item) and item not in left_out}
        left_out += [
            item
            for item in items
            if getattr(item, "callspec", None) is not None
            and not _on_container(item)
            and any(k in item.callspec.params for k in BACKEND_PARAMETERS)
            and _scenario(item) in scenarios
        ]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.timeout(600))
    for item in [item for item in items if _on_container(item)] if missing else []:
        item.add_marker(pytest.mark.skip(reason=f"the container backend needs what is missing: {missing}"))


_skipped: list[str] = []
_outcomes: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A module that skips itself while being collected (a module-level pytest.importorskip, or
    # pytest.skip(allow_module_level=True)) reports no test at all: only its collection report says so.
    if report.skipped and "integration" in report.nodeid:
        _skipped.append(report.nodeid)
        _outcomes["skipped"] += 1


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "integration" not in report.nodeid:
        return
    if report.skipped:
        _skipped.append(report.nodeid)
        _outcomes["skipped"] += 1
    elif report.failed:
        _outcomes["failed"] += 1
    elif report.when == "call":
        _outcomes["passed"] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.section("integration suite (real Apache Kafka broker)")
    passed, failed, skipped = _outcomes["passed"], _outcomes["failed"], _outcomes["skipped"]
    terminalreporter.write_line(f"integration: {passed} passed, {failed} failed, {skipped} skipped")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # In CI the integration suite must run, not skip: a skipped real-broker test (or module) fails the run.
    if _skipped and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        print(f"\nCI: {len(_skipped)} integration test(s) skipped, which CI does not allow: {_skipped}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
