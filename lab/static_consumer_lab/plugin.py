"""pytest plugin (opt-in: ``-p static_consumer_lab.plugin``): real-Kafka fixtures for integration tests.

Fixtures:

- ``kafka_cluster``: the real Apache Kafka broker of the test, shared by the session's tests of one
  *profile* and backend. Profile: ``stock`` (Apache Kafka's own group settings: 45 s KIP-848 sessions,
  5 s heartbeats, a 3 s initial rebalance delay) unless the test is marked
  ``@pytest.mark.lab_broker("why")``, which gives it the ``lab`` broker (group minimums lowered: 1 s
  sessions, 500 ms heartbeats, no initial delay), for tests whose point does not depend on the session
  length. Backend: the default one (``kafka_stock_cluster``/``kafka_lab_cluster``) unless the test is
  parametrized onto the container (``@pytest.mark.parametrize("kafka_cluster", ["container"],
  indirect=True)``: ``kafka_container_cluster``/``kafka_container_lab_cluster``). Each broker is started
  at its first use and shared to the end of the session. Never skipped: if no broker can start, the test
  errors with the broker log.
- ``kafka_stock_cluster``, ``kafka_lab_cluster`` (session): the broker of each profile on the backend
  :func:`~static_consumer_lab.brokers.backends.select_backend` picks:
  ``STATIC_CONSUMER_BROKER=jvm|docker|external``, else ``KAFKA_BOOTSTRAP_SERVERS`` if set (both profiles: an
  existing cluster has the settings it has), else the container when a Docker engine, a compose command and
  the locally built image are all there, else a KRaft broker on the JVM from Maven Central jars (one warning
  line when an engine answered but the rest was missing).
- ``kafka_container_cluster``, ``kafka_container_lab_cluster`` (session): a KRaft broker of that profile
  from the harness's locally built image (:mod:`static_consumer_lab.brokers.kafka_image`, built here if its
  tag is missing) under Docker Compose, started through pytest-docker with its ``docker_compose_command``
  fixture (when that command does not answer, the first of ``docker compose`` and ``docker-compose`` that
  does, said in one line), on the host's network at 127.0.0.1; ``stop_node()``/``start_node()``/
  ``restart_node()`` stop and start its container.
- ``kafka_bootstrap_servers``: the bootstrap string of ``kafka_cluster``. ``kafka_profile``: ``"stock"``
  or ``"lab"``.
- ``kafka_topic_factory``: ``make_topic(partitions=1, prefix="t") -> name`` with a unique name.
- ``kafka_group_id_factory``: ``make_group(prefix="g") -> group id``, unique.
- ``kafka_consumer_process_factory``: ``start(spec, name=...) -> ConsumerProcess``; every child is killed
  at teardown.
- ``kafka_jvm_cluster_factory``: ``start(nodes=3, extra_config={...}, profile="stock") -> JvmKafkaCluster``
  for tests that restart brokers or need other broker settings (``profile="lab"``: the lowered group
  minimums); stopped at teardown. ``kafka_jvm_module_cluster_factory``
  is the same, its clusters stopped at the end of the module: one cluster for several tests (each must
  leave it as it found it).
- ``kafka_sasl_cluster`` (session): a one-node JVM cluster with a SASL_PLAINTEXT listener
  (``sasl_bootstrap_servers``; SCRAM-SHA-256 and PLAIN) next to its PLAINTEXT one; ``cluster.sasl``
  holds the users (``alice``, ``bob``) and their random, distinctive passwords.
- ``kafka_acl_cluster`` (module): a one-node JVM cluster with KRaft's ``StandardAuthorizer``
  (:mod:`static_consumer_lab.brokers.authorizer`): the harness's PLAINTEXT listener and the SASL user
  ``admin`` are super users, the SASL user ``app`` has only the ACLs a test sets with ``cluster.only([...])``;
  ``cluster.settings_fields()`` logs in as ``app``. Stopped at the end of the module.
- ``spark_connect_server`` (session): a Spark Connect server on 127.0.0.1 started from PySpark's own
  launch script, with Spark's Kafka connector and (with delta-spark installed) Delta Lake; ``.url``.
- ``spark_standalone_cluster`` (session): a standalone Spark master and one worker on 127.0.0.1;
  ``.master_url``. Both need ``static-consumer[spark]`` and Java; they error (never skip) when they
  cannot start within ``START_TIMEOUT_S``.
- ``kafka_secure_cluster`` (session): a one-node JVM cluster with the TLS listeners of
  :mod:`static_consumer_lab.secure.listeners` (SSL, MTLS, SASL_SSL with SCRAM-SHA-512 and PLAIN, OAUTH,
  OTHERHOST) next to PLAINTEXT; ``cluster.bootstrap_for("MTLS")``; ``cluster.tls.pki`` holds the throwaway CA
  and certificates (generated at start, deleted at the end), ``cluster.tls.users`` the SASL users;
  ``cluster.tls.settings_fields(listener, bootstrap)`` gives ConsumerSettings fields for a listener.
"""

from __future__ import annotations

import os
import secrets
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the harness is imported by the fixtures that use it, never at plugin load
    from static_consumer_lab.brokers.authorizer import AclCluster
    from static_consumer_lab.brokers.backends import KafkaCluster
    from static_consumer_lab.brokers.containers import ContainerKafkaCluster
    from static_consumer_lab.brokers.jvm import JvmKafkaCluster, Profile
    from static_consumer_lab.children.group import Group
    from static_consumer_lab.children.processes import ConsumerProcess
    from static_consumer_lab.spark_servers import SparkConnectServer, StandaloneCluster

# Loading this plugin (pytest does it in every session where the package is installed) imports only
# pytest and the standard library, defines fixtures and registers no hook. The hooks that attach broker
# logs to failed tests and print the broker summary are registered by the first fixture that starts a
# broker or a consumer process, so sessions that never use them see nothing of this plugin.
_clusters: list[Any] = []
_summary: list[str] = []
_REPORTER_NAME = "static_consumer-broker-reports"
# The marker that gives a test the lab broker. Declare it in your pytest configuration (this repository's
# pyproject.toml does) or run with warnings about an unknown marker: the plugin registers no hook.
LAB_MARKER = "lab_broker"


class _BrokerReports:
    """Hooks registered on first use: broker log tails on failed tests, the broker summary at the end."""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
        outcome: Any = yield
        report = outcome.get_result()
        if report.failed:
            item._static_consumer_failed = True  # type: ignore[attr-defined]
            for cluster in list(_clusters):
                report.sections.append((f"kafka broker log ({cluster.backend})", cluster.log_tail(60)))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if _summary:
            terminalreporter.section("static_consumer: Kafka brokers")
            for line in _summary:
                terminalreporter.write_line(line)


def _use_reports(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(_REPORTER_NAME):
        config.pluginmanager.register(_BrokerReports(), _REPORTER_NAME)


def _announce(config: pytest.Config, line: str) -> None:
    _use_reports(config)
    _summary.append(line)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"[static_consumer] {line}")


def _describe_start(cluster: Any) -> str:
    classpath = getattr(cluster, "classpath", None)
    resolve = ""
    if classpath is not None:
        how = "cached" if classpath.cached else "resolved from Maven Central"
        resolve = f"; classpath {how} in {classpath.resolve_seconds:.1f} s"
    started = f"{cluster.start_seconds:.1f} s" if cluster.start_seconds is not None else "n/a"
    return (
        f"Apache Kafka {cluster.version} via {cluster.backend} at {cluster.bootstrap_servers}: "
        f"broker start-up {started}{resolve}"
    )


def _shared_cluster(pytestconfig: pytest.Config, profile: Profile) -> Iterator[KafkaCluster]:
    from static_consumer_lab.brokers.backends import local_cluster

    warn = lambda line: _announce(pytestconfig, f"warning: {line}")  # noqa: E731
    with local_cluster(os.environ, profile=profile, warn=warn) as cluster:
        _clusters.append(cluster)
        _announce(pytestconfig, f"{profile} broker: " + _describe_start(cluster))
        try:
            yield cluster
        finally:
            _clusters.remove(cluster)


def _container(
    pytestconfig: pytest.Config, compose: str, project: str, profile: Profile
) -> Iterator[ContainerKafkaCluster]:
    from static_consumer_lab.brokers.containers import container_cluster

    progress = lambda line: _announce(pytestconfig, line)  # noqa: E731
    cluster = container_cluster(
        compose, project=f"{project}-kafka-{profile}", profile=profile, progress=progress
    )
    with cluster:
        _clusters.append(cluster)
        start = _describe_start(cluster)
        _announce(pytestconfig, f"{profile} broker: {start}; image {cluster.image}, `{cluster.compose}`")
        try:
            yield cluster
        finally:
            _clusters.remove(cluster)


@pytest.fixture(scope="session")
def kafka_stock_cluster(pytestconfig: pytest.Config) -> Iterator[KafkaCluster]:
    """The shared broker with Apache Kafka's own group settings."""
    yield from _shared_cluster(pytestconfig, "stock")


@pytest.fixture(scope="session")
def kafka_lab_cluster(pytestconfig: pytest.Config) -> Iterator[KafkaCluster]:
    """The shared broker with lowered group minimums (tests marked ``lab_broker``)."""
    yield from _shared_cluster(pytestconfig, "lab")


@pytest.fixture(scope="session")
def kafka_container_cluster(
    pytestconfig: pytest.Config, docker_compose_command: str, docker_compose_project_name: str
) -> Iterator[ContainerKafkaCluster]:
    """The stock broker from the locally built image."""
    yield from _container(pytestconfig, docker_compose_command, docker_compose_project_name, "stock")


@pytest.fixture(scope="session")
def kafka_container_lab_cluster(
    pytestconfig: pytest.Config, docker_compose_command: str, docker_compose_project_name: str
) -> Iterator[ContainerKafkaCluster]:
    """The lab broker from the locally built image (tests marked ``lab_broker`` on the container)."""
    yield from _container(pytestconfig, docker_compose_command, docker_compose_project_name, "lab")


@pytest.fixture
def kafka_profile(request: pytest.FixtureRequest) -> str:
    """``lab`` for a test marked ``lab_broker``, else ``stock``."""
    return "lab" if request.node.get_closest_marker(LAB_MARKER) is not None else "stock"


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, kafka_profile: str) -> KafkaCluster:
    # The brokers themselves are the session fixtures asked for here: this one costs nothing per test.
    backend = getattr(request, "param", "default")
    if backend not in ("default", "container"):
        raise ValueError(f"kafka_cluster parameter {backend!r}: use 'default' or 'container'")
    lab = "_lab" if kafka_profile == "lab" else ""
    name = f"kafka_container{lab}_cluster" if backend == "container" else f"kafka_{kafka_profile}_cluster"
    cluster: KafkaCluster = request.getfixturevalue(name)
    return cluster


@pytest.fixture
def kafka_bootstrap_servers(kafka_cluster: KafkaCluster) -> str:
    return kafka_cluster.bootstrap_servers


def _unique(prefix: str, request: pytest.FixtureRequest) -> str:
    test = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-")
    return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic_factory(kafka_bootstrap_servers: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    def make_topic(
        partitions: int = 1,
        prefix: str = "t",
        *,
        bootstrap: str | None = None,
        replication: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> str:
        from static_consumer_lab.brokers.kafka_ops import create_topic

        return create_topic(
            bootstrap or kafka_bootstrap_servers,
            _unique(prefix, request),
            partitions,
            replication=replication,
            config=config,
        )

    return make_topic


@pytest.fixture
def kafka_group_id_factory(request: pytest.FixtureRequest) -> Callable[..., str]:
    def make_group(prefix: str = "g") -> str:
        return _unique(prefix, request)

    return make_group


@pytest.fixture
def kafka_consumer_process_factory(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., ConsumerProcess]]:
    from static_consumer_lab.children.processes import ConsumerProcess

    _use_reports(request.config)
    started: list[ConsumerProcess] = []

    def start(
        spec: Mapping[str, Any], name: str | None = None, env: Mapping[str, str] | None = None
    ) -> ConsumerProcess:
        proc = ConsumerProcess(spec, name=name or f"consumer-{len(started) + 1}", env=env)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
    failed = getattr(request.node, "_static_consumer_failed", False)
    if failed:
        for proc in started:
            print(f"--- {proc.name} stderr tail ---\n{proc.stderr_tail()}")


@pytest.fixture
def kafka_group_factory(
    kafka_bootstrap_servers: str,
    kafka_profile: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> Callable[..., Group]:
    """``new(partitions, **options) -> Group``: members in child processes on a new topic with a new group
    id, on the test's shared broker (``options`` are :class:`~static_consumer_lab.children.group.Group`'s
    fields; ``lab`` follows the broker's profile)."""
    from static_consumer_lab.children.group import Group

    def new(partitions: int, **options: Any) -> Group:
        options.setdefault("lab", kafka_profile == "lab")
        return Group.new(
            kafka_consumer_process_factory,
            kafka_bootstrap_servers,
            kafka_topic_factory,
            kafka_group_id_factory,
            partitions,
            **options,
        )

    return new


def _jvm_clusters(pytestconfig: pytest.Config) -> Iterator[Callable[..., JvmKafkaCluster]]:
    from static_consumer_lab.brokers.jvm import JvmKafkaCluster

    started: list[JvmKafkaCluster] = []

    def start(
        nodes: int = 3, extra_config: Mapping[str, str] | None = None, profile: Profile = "stock"
    ) -> JvmKafkaCluster:
        cluster = JvmKafkaCluster(nodes, extra_config=extra_config, profile=profile)
        started.append(cluster)
        _clusters.append(cluster)
        cluster.start()
        _announce(pytestconfig, f"{nodes}-node {profile} " + _describe_start(cluster))
        return cluster

    yield start
    for cluster in started:
        cluster.stop()
        _clusters.remove(cluster)


@pytest.fixture
def kafka_jvm_cluster_factory(pytestconfig: pytest.Config) -> Iterator[Callable[..., JvmKafkaCluster]]:
    yield from _jvm_clusters(pytestconfig)


@pytest.fixture(scope="module")
def kafka_jvm_module_cluster_factory(
    pytestconfig: pytest.Config,
) -> Iterator[Callable[..., JvmKafkaCluster]]:
    yield from _jvm_clusters(pytestconfig)


@pytest.fixture(scope="session")
def kafka_sasl_cluster(pytestconfig: pytest.Config) -> Iterator[JvmKafkaCluster]:
    from static_consumer_lab.brokers.jvm import JvmKafkaCluster
    from static_consumer_lab.secure.sasl import SaslUsers

    # Random per session, and long enough that finding one in a log can only mean a leak.
    users = SaslUsers({name: f"{name}-pw-{secrets.token_hex(12)}" for name in ("alice", "bob")})
    cluster = JvmKafkaCluster(1, sasl=users)
    _clusters.append(cluster)
    try:
        cluster.start()
        _announce(
            pytestconfig, "SASL " + _describe_start(cluster) + f"; SASL at {cluster.sasl_bootstrap_servers}"
        )
        yield cluster
    finally:
        cluster.stop()
        _clusters.remove(cluster)


@pytest.fixture(scope="module")
def kafka_acl_cluster(pytestconfig: pytest.Config) -> Iterator[AclCluster]:
    from static_consumer_lab.brokers.authorizer import start_acl_cluster

    acl = start_acl_cluster()
    _clusters.append(acl.cluster)
    try:
        _announce(pytestconfig, "ACL " + _describe_start(acl.cluster))
        yield acl
    finally:
        acl.cluster.stop()
        _clusters.remove(acl.cluster)


@pytest.fixture(scope="session")
def spark_connect_server(pytestconfig: pytest.Config) -> Iterator[SparkConnectServer]:
    from static_consumer_lab.spark_servers import SparkConnectServer, server_jars

    jars, conf = server_jars()
    with SparkConnectServer(jars=jars, conf=conf) as server:
        _announce(
            pytestconfig, f"Spark Connect server at {server.url}: start-up {server.start_seconds:.1f} s"
        )
        yield server


@pytest.fixture(scope="session")
def spark_standalone_cluster(pytestconfig: pytest.Config) -> Iterator[StandaloneCluster]:
    from static_consumer_lab.spark_servers import StandaloneCluster

    with StandaloneCluster() as cluster:
        _announce(
            pytestconfig,
            f"Spark standalone master + worker at {cluster.master_url}: "
            f"start-up {cluster.start_seconds:.1f} s",
        )
        yield cluster


@pytest.fixture(scope="session")
def kafka_secure_cluster(pytestconfig: pytest.Config) -> Iterator[JvmKafkaCluster]:
    import shutil
    import tempfile
    from pathlib import Path

    from static_consumer_lab.brokers.jvm import JvmKafkaCluster
    from static_consumer_lab.secure.certs import generate_pki
    from static_consumer_lab.secure.listeners import SASL_MECHANISMS, SecureListeners
    from static_consumer_lab.secure.sasl import SaslUsers

    pki_dir = Path(tempfile.mkdtemp(prefix="static-consumer-pki-"))
    pki = generate_pki(pki_dir)
    users = SaslUsers(
        {name: f"{name}-pw-{secrets.token_hex(12)}" for name in ("alice", "bob")}, SASL_MECHANISMS
    )
    cluster = JvmKafkaCluster(1, tls=SecureListeners(pki, users))
    _clusters.append(cluster)
    try:
        cluster.start()
        listeners = ", ".join(f"{name} {cluster.bootstrap_for(name)}" for name in cluster.listeners)
        _announce(pytestconfig, "TLS " + _describe_start(cluster) + f"; {listeners}")
        yield cluster
    finally:
        cluster.stop()
        _clusters.remove(cluster)
        shutil.rmtree(pki_dir, ignore_errors=True)
