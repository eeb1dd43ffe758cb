"""Where the test broker comes from: an existing cluster, Docker (pytest-docker), or the JVM harness.

Order: ``KAFKA_BOOTSTRAP_SERVERS`` (an existing cluster) -> a reachable Docker engine (pytest-docker with
the ``apache/kafka`` compose file) -> the JVM harness. ``STATIC_CONSUMER_BROKER=jvm|docker|external``
forces one.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal, Protocol

from static_consumer_lab._classpath import HarnessError, kafka_version
from static_consumer_lab.jvm import JvmKafkaCluster, Profile
from static_consumer_lab.kafka_ops import wait_for_metadata

Backend = Literal["external", "docker", "jvm"]
DOCKER_KAFKA_PORT = 39092


class KafkaCluster(Protocol):
    """What tests may rely on, whatever the backend."""

    backend: str

    @property
    def bootstrap_servers(self) -> str: ...

    @property
    def version(self) -> str: ...

    start_seconds: float | None

    def log_tail(self, lines: int = 40) -> str: ...


@dataclass
class ExternalCluster:
    bootstrap_servers: str
    backend: str = "external"
    version: str = "unknown (existing cluster)"
    start_seconds: float | None = None

    def log_tail(self, lines: int = 40) -> str:
        return "(existing cluster: its broker logs are not available here)"


@dataclass
class DockerCluster:
    bootstrap_servers: str
    compose_file: Path
    version: str
    start_seconds: float | None = None
    backend: str = "docker"

    def log_tail(self, lines: int = 40) -> str:
        done = subprocess.run(
            ["docker", "compose", "-f", str(self.compose_file), "logs", "--tail", str(lines)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout + done.stderr


def docker_engine_reachable(timeout_s: float = 5.0) -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except (subprocess.TimeoutExpired, OSError):
        return False
    return done.returncode == 0


def select_backend(env: Mapping[str, str], docker_reachable: Callable[[], bool]) -> Backend:
    forced = env.get("STATIC_CONSUMER_BROKER", "").strip().lower()
    if forced:
        if forced not in ("external", "docker", "jvm"):
            raise HarnessError(f"STATIC_CONSUMER_BROKER={forced!r}: use jvm, docker or external")
        if forced == "external" and not env.get("KAFKA_BOOTSTRAP_SERVERS"):
            raise HarnessError("STATIC_CONSUMER_BROKER=external needs KAFKA_BOOTSTRAP_SERVERS")
        return forced  # type: ignore[return-value]
    if env.get("KAFKA_BOOTSTRAP_SERVERS"):
        return "external"
    if docker_reachable():
        return "docker"
    return "jvm"


def compose_file() -> Path:
    return Path(str(resources.files("static_consumer_lab").joinpath("docker-compose.yml")))


@contextmanager
def docker_cluster(compose: Path | None = None) -> Iterator[DockerCluster]:
    """Start the ``apache/kafka`` compose service with pytest-docker and wait until it answers."""
    from pytest_docker.plugin import get_docker_services

    compose = compose or compose_file()
    begun = time.monotonic()
    with get_docker_services(
        "docker compose",
        str(compose),
        docker_compose_project_name=f"static-consumer-{int(time.time())}",
        docker_setup=["up -d"],
        docker_cleanup=["down -v"],
    ) as services:
        port = services.port_for("kafka", DOCKER_KAFKA_PORT)
        bootstrap = f"127.0.0.1:{port}"
        cluster = DockerCluster(bootstrap, compose, version=kafka_version())
        wait_for_metadata(bootstrap, timeout_s=120.0, describe=cluster.log_tail)
        cluster.start_seconds = time.monotonic() - begun
        yield cluster


@contextmanager
def local_cluster(
    env: Mapping[str, str], nodes: int = 1, profile: Profile = "stock"
) -> Iterator[KafkaCluster]:
    """A cluster for tests, benchmarks and the demo, from the first backend available.

    ``profile``: ``stock`` (Apache Kafka's group settings) or ``lab`` (lowered group minimums; see
    :mod:`static_consumer_lab.jvm`). The Docker image runs with stock settings, so a ``lab`` broker
    always comes from the JVM harness; an existing cluster (``external``) is whatever it is.
    """
    backend = select_backend(env, docker_engine_reachable)
    if backend == "external":
        yield ExternalCluster(env["KAFKA_BOOTSTRAP_SERVERS"])
    elif backend == "docker" and nodes == 1 and profile == "stock":
        with docker_cluster() as cluster:
            yield cluster
    else:
        with JvmKafkaCluster(nodes, profile=profile) as jvm:
            yield jvm
