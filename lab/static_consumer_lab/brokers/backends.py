"""Where the test broker comes from: an existing cluster, a container, or the JVM harness.

``STATIC_CONSUMER_BROKER`` picks one: ``jvm``, ``docker`` (the locally built image under Docker Compose,
:mod:`static_consumer_lab.brokers.containers`) or ``external`` (``KAFKA_BOOTSTRAP_SERVERS``). Unset, the
order is: ``KAFKA_BOOTSTRAP_SERVERS`` -> the container when a Docker engine answers *and* a compose
command answers *and* the image is built -> the JVM harness. When an engine answers but compose or the
image is missing, the JVM harness runs and one warning line says what was missing; a chosen ``docker``
with something missing is an error that says what (it builds a missing image first).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

from static_consumer_lab.brokers.classpath import HarnessError
from static_consumer_lab.brokers.containers import DockerStatus, container_cluster, docker_status
from static_consumer_lab.brokers.jvm import JvmKafkaCluster, Profile

Backend = Literal["external", "docker", "jvm"]
BACKENDS: tuple[Backend, ...] = ("jvm", "docker", "external")


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


@dataclass(frozen=True)
class BackendChoice:
    backend: Backend
    warning: str | None = None  # one line, set when a Docker engine answered but was not used


def select_backend(env: Mapping[str, str], docker: Callable[[], DockerStatus]) -> BackendChoice:
    """The backend for ``env``; ``docker()`` is asked (once) only when the choice depends on it."""
    forced = env.get("STATIC_CONSUMER_BROKER", "").strip().lower()
    if forced:
        if forced not in BACKENDS:
            raise HarnessError(f"STATIC_CONSUMER_BROKER={forced!r}: use jvm, docker or external")
        if forced == "external" and not env.get("KAFKA_BOOTSTRAP_SERVERS"):
            raise HarnessError("STATIC_CONSUMER_BROKER=external needs KAFKA_BOOTSTRAP_SERVERS")
        return BackendChoice(forced)
    if env.get("KAFKA_BOOTSTRAP_SERVERS"):
        return BackendChoice("external")
    status = docker()
    if not status.engine:
        return BackendChoice("jvm")  # no engine: the JVM harness is the plain default, nothing to say
    missing = status.missing()
    if missing is None:
        return BackendChoice("docker")
    return BackendChoice(
        "jvm",
        f"a Docker engine answers but {missing}: using the JVM harness "
        "(STATIC_CONSUMER_BROKER=jvm or docker makes the choice explicit)",
    )


def _warn_on_stderr(line: str) -> None:
    print(f"static_consumer_lab: warning: {line}", file=sys.stderr, flush=True)


def _say_on_stderr(line: str) -> None:
    print(f"static_consumer_lab: {line}", file=sys.stderr, flush=True)


@contextmanager
def local_cluster(
    env: Mapping[str, str],
    nodes: int = 1,
    profile: Profile = "stock",
    warn: Callable[[str], None] = _warn_on_stderr,
) -> Iterator[KafkaCluster]:
    """A cluster for tests, benchmarks and the demo, from the backend :func:`select_backend` picks.

    ``profile``: ``stock`` (Apache Kafka's group settings) or ``lab`` (lowered group minimums; see
    :mod:`static_consumer_lab.brokers.jvm`), on the JVM harness and the container alike; an existing cluster
    (``external``) is whatever it is. The container backend runs one node: ``nodes > 1`` always runs on
    the JVM harness.
    """
    choice = select_backend(env, docker_status)
    if choice.warning is not None:
        warn(choice.warning)
    if choice.backend == "external":
        yield ExternalCluster(env["KAFKA_BOOTSTRAP_SERVERS"])
    elif choice.backend == "docker" and nodes == 1:
        with container_cluster(profile=profile, progress=_say_on_stderr) as cluster:
            yield cluster
    else:
        with JvmKafkaCluster(nodes, profile=profile) as jvm:
            yield jvm
