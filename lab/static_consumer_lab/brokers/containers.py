"""The container backend: the harness's locally built Kafka image under Docker Compose, via pytest-docker.

:func:`docker_status` says what the machine has (an engine that answers, a compose command, the image);
:class:`ContainerKafkaCluster` starts one KRaft node from ``container/docker-compose.yml`` with
pytest-docker's :func:`~pytest_docker.plugin.get_docker_services`. The service uses the host's network
and listens on 127.0.0.1 only, at ports picked free here; the broker's log is the container's output
(``docker logs``), read for the log tail and for :meth:`ContainerKafkaCluster.group_rebalances`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from static_consumer_lab.brokers.classpath import HarnessError, kafka_version
from static_consumer_lab.brokers.jvm import PROFILES, Profile, free_ports, new_cluster_id
from static_consumer_lab.brokers.kafka_ops import wait_for_metadata
from static_consumer_lab.brokers.rebalances import Rebalance, parse

# Compose v2 (the docker CLI plugin) first, then the standalone v1 (Debian's docker-compose package).
COMPOSE_COMMANDS = ("docker compose", "docker-compose")
SERVICE = "kafka"
_PROBE_TIMEOUT_S = 10.0


def _answers(cmd: list[str], timeout_s: float = _PROBE_TIMEOUT_S) -> bool:
    if shutil.which(cmd[0]) is None:
        return False
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def docker_engine_reachable() -> bool:
    return _answers(["docker", "info", "--format", "{{.ServerVersion}}"])


def compose_command(preferred: str | None = None) -> str | None:
    """``preferred`` if it answers ``version``, else the first of ``docker compose`` and
    ``docker-compose`` that does; None when none does."""
    for command in (preferred, *COMPOSE_COMMANDS) if preferred else COMPOSE_COMMANDS:
        if _answers([*command.split(), "version"]):
            return command
    return None


@dataclass(frozen=True)
class DockerStatus:
    """What the container backend needs, as found: each check runs only if the one before passed."""

    engine: bool
    compose: str | None = None
    image: str | None = None  # the tag the harness would use
    image_present: bool = False

    def missing(self) -> str | None:
        """What is missing for the container backend, in words, or None when nothing is."""
        if not self.engine:
            return "no Docker engine answers `docker info`"
        if self.compose is None:
            return "no compose command answers (`docker compose` plugin or `docker-compose`)"
        if not self.image_present:
            build = "python -m static_consumer_lab.brokers.kafka_image build"
            return f"the image {self.image} is not built ({build})"
        return None


def docker_status() -> DockerStatus:
    from static_consumer_lab.brokers.kafka_image import image_present, image_tag

    if not docker_engine_reachable():
        return DockerStatus(engine=False)
    compose = compose_command()
    if compose is None:
        return DockerStatus(engine=True)
    tag = image_tag()
    return DockerStatus(engine=True, compose=compose, image=tag, image_present=image_present(tag))


class ContainerKafkaCluster:
    """One KRaft node (broker and controller) in a container on the host's network, at 127.0.0.1.

    Use as a context manager or call start()/stop(). ``stop_node``/``start_node``/``restart_node`` (node
    1, the only one) stop and start the same container, which keeps its data, like the JVM harness's.
    """

    backend = "docker"

    def __init__(
        self,
        compose: str,
        image: str,
        *,
        project: str | None = None,
        profile: Profile = "stock",
        start_timeout_s: float = 120.0,
    ) -> None:
        self.compose = compose
        self.image = image
        self.profile = profile
        self.version = kafka_version()
        self.project = project or f"static-consumer-kafka-{os.getpid()}-{time.monotonic_ns() % 10**6}"
        self.start_timeout_s = start_timeout_s
        self.start_seconds: float | None = None
        self.port, self.controller_port = free_ports(2)
        self.workdir = Path(tempfile.mkdtemp(prefix="static-consumer-compose-"))
        self.compose_file = self.workdir / "docker-compose.yml"
        self._stack = ExitStack()
        self._container: str | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    # ----------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> ContainerKafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _write_project(self) -> None:
        template = resources.files("static_consumer_lab").joinpath("container", "docker-compose.yml")
        self.compose_file.write_bytes(template.read_bytes())
        values = {
            "HARNESS_KAFKA_IMAGE": self.image,
            "HARNESS_KAFKA_PORT": self.port,
            "HARNESS_CONTROLLER_PORT": self.controller_port,
            "HARNESS_CLUSTER_ID": new_cluster_id(),
            **group_values(self.profile),
        }
        # Both compose versions read .env from the project directory: the compose file's own.
        (self.workdir / ".env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))

    def start(self) -> ContainerKafkaCluster:
        from pytest_docker.plugin import get_docker_services

        self._write_project()
        begun = time.monotonic()
        try:
            self._stack.enter_context(
                get_docker_services(
                    self.compose,
                    str(self.compose_file),
                    self.project,
                    docker_setup=["up -d"],
                    docker_cleanup=["down -v"],
                )
            )
            self._container = self._compose("ps -q " + SERVICE).strip() or None
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - begun
        return self

    def stop(self) -> None:
        try:
            self._stack.close()  # pytest-docker's cleanup: down -v
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _compose(self, subcommand: str, timeout_s: float = 90.0) -> str:
        cmd = [*self.compose.split(), "-f", str(self.compose_file), "-p", self.project, *subcommand.split()]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"`{' '.join(cmd)}` did not finish within {timeout_s:.0f} s") from exc
        if done.returncode != 0:
            raise HarnessError(
                f"`{' '.join(cmd)}` failed (exit {done.returncode}):\n{done.stdout}{done.stderr}"
            )
        return done.stdout

    def stop_node(self, node_id: int = 1, *, hard: bool = False, timeout_s: float = 30.0) -> None:
        """Clean shutdown (SIGTERM, then SIGKILL after ``timeout_s``) or, with ``hard``, kill -9."""
        self._only(node_id)
        if hard:
            self._compose(f"kill -s SIGKILL {SERVICE}")
        else:
            self._compose(f"stop -t {int(timeout_s)} {SERVICE}", timeout_s=timeout_s + 60)

    def start_node(self, node_id: int = 1, *, wait: bool = True) -> None:
        self._only(node_id)
        self._compose(f"start {SERVICE}")  # a no-op for a running container
        if wait:
            self.wait_ready()

    def restart_node(self, node_id: int = 1, *, hard: bool = False) -> None:
        self.stop_node(node_id, hard=hard)
        self.start_node(node_id, wait=True)

    def wait_ready(self, timeout_s: float | None = None) -> None:
        wait_for_metadata(
            self.bootstrap_servers, timeout_s=timeout_s or self.start_timeout_s, describe=self.log_tail
        )

    @staticmethod
    def _only(node_id: int) -> None:
        if node_id != 1:
            raise KeyError(f"no node {node_id}; the container backend runs node 1 only")

    # ---------------------------------------------------------------------------------------- logs
    def log(self) -> str:
        """Everything the broker logged, over every start of its container."""
        if self._container is None:
            return ""
        done = subprocess.run(
            ["docker", "logs", self._container], capture_output=True, text=True, timeout=60, check=False
        )
        return done.stdout + done.stderr

    def log_tail(self, lines: int = 40) -> str:
        tail = self.log().splitlines()[-lines:]
        return "\n".join([f"--- broker container {self._container} ({self.image}) log tail ---", *tail])

    def group_rebalances(self, group_id: str) -> list[Rebalance]:
        """Classic generations and KIP-848 group epochs of ``group_id`` so far, from the broker's log
        (:mod:`static_consumer_lab.brokers.rebalances`): equal before and after means no rebalance."""
        return parse(self.log(), [group_id])

    def log_paths(self) -> Iterator[Path]:
        """The broker's log so far as a file, for readers of the JVM harness's log files (the demo)."""
        path = self.workdir / "broker.log"
        path.write_text(self.log())
        yield path


def group_values(profile: Profile) -> dict[str, str]:
    """The compose file's ``HARNESS_GROUP_*`` values: the group settings of the broker ``profile``
    (:data:`static_consumer_lab.brokers.jvm.PROFILES`), so a container broker matches the JVM harness's."""
    return {"HARNESS_" + key.upper().replace(".", "_"): value for key, value in PROFILES[profile].items()}


def container_cluster(
    compose: str | None = None,
    *,
    project: str | None = None,
    profile: Profile = "stock",
    progress: Callable[[str], None] | None = None,
) -> ContainerKafkaCluster:
    """A :class:`ContainerKafkaCluster` (not started) on the image built by
    :func:`~static_consumer_lab.brokers.kafka_image.build_image` (built here unless its tag exists).

    Raises :class:`HarnessError` saying what is missing when no engine or compose command answers.
    """
    from static_consumer_lab.brokers.kafka_image import build_image

    if not docker_engine_reachable():
        raise HarnessError("the container backend needs a Docker engine: none answers `docker info`")
    found = compose_command(compose)
    if found is None:
        tried = ", ".join(f"`{c}`" for c in dict.fromkeys([c for c in (compose, *COMPOSE_COMMANDS) if c]))
        raise HarnessError(f"the container backend needs Docker Compose: none of {tried} answers")
    if compose is not None and found != compose and progress is not None:
        progress(f"`{compose}` does not answer: using `{found}`")
    compose = found
    built = build_image(progress=progress)
    if progress is not None:
        progress(built.describe())
    return ContainerKafkaCluster(compose, built.tag, project=project, profile=profile)
