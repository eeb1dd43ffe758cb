"""pytest plugin (opt-in: ``-p static_consumer_lab.plugin``): real-Kafka fixtures for integration tests.

Fixtures:

- ``kafka_cluster`` (session): a real Apache Kafka broker: ``KAFKA_BOOTSTRAP_SERVERS`` if set, else the
  ``apache/kafka`` image through pytest-docker when a Docker engine answers, else a KRaft broker on the
  JVM from Maven Central jars. Never skipped: if no broker can start, the test errors with the broker log.
- ``kafka_bootstrap_servers`` (session): its bootstrap string.
- ``kafka_topic_factory``: ``make_topic(partitions=1, prefix="t") -> name`` with a unique name.
- ``kafka_group_id_factory``: ``make_group(prefix="g") -> group id``, unique.
- ``kafka_consumer_process_factory``: ``start(spec, name=...) -> ConsumerProcess``; every child is killed
  at teardown.
- ``kafka_jvm_cluster_factory``: ``start(nodes=3, extra_config={...}) -> JvmKafkaCluster`` for tests that
  restart brokers or need other broker settings; stopped at teardown. ``kafka_jvm_module_cluster_factory``
  is the same, its clusters stopped at the end of the module: one cluster for several tests (each must
  leave it as it found it).
- ``kafka_sasl_cluster`` (session): a one-node JVM cluster with a SASL_PLAINTEXT listener
  (``sasl_bootstrap_servers``; SCRAM-SHA-256 and PLAIN) next to its PLAINTEXT one; ``cluster.sasl``
  holds the users (``alice``, ``bob``) and their random, distinctive passwords.
- ``kafka_acl_cluster`` (module): a one-node JVM cluster with KRaft's ``StandardAuthorizer``
  (:mod:`static_consumer_lab.acls`): the harness's PLAINTEXT listener and the SASL user ``admin`` are super
  users, the SASL user ``app`` has only the ACLs a test sets with ``cluster.only([...])``;
  ``cluster.settings_fields()`` logs in as ``app``. Stopped at the end of the module.
- ``spark_connect_server`` (session): a Spark Connect server on 127.0.0.1 started from PySpark's own
  launch script, with Spark's Kafka connector and (with delta-spark installed) Delta Lake; ``.url``.
- ``spark_standalone_cluster`` (session): a standalone Spark master and one worker on 127.0.0.1;
  ``.master_url``. Both need ``static-consumer[spark]`` and Java; they error (never skip) when they
  cannot start within ``START_TIMEOUT_S``.
- ``kafka_secure_cluster`` (session): a one-node JVM cluster with the TLS listeners of
  :mod:`static_consumer_lab.tls` (SSL, MTLS, SASL_SSL with SCRAM-SHA-512 and PLAIN, OAUTH, OTHERHOST)
  next to PLAINTEXT; ``cluster.bootstrap_for("MTLS")``; ``cluster.tls.pki`` holds the throwaway CA and
  certificates (generated at start, deleted at the end), ``cluster.tls.users`` the SASL users;
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
    from static_consumer_lab.acls import AclCluster
    from static_consumer_lab.backends import KafkaCluster
    from static_consumer_lab.group import Group
    from static_consumer_lab.jvm import JvmKafkaCluster
    from static_consumer_lab.processes import ConsumerProcess
    from static_consumer_lab.spark import SparkConnectServer, StandaloneCluster

# Loading this plugin (pytest does it in every session where the package is installed) imports only
# pytest and the standard library, defines fixtures and registers no hook. The hooks that attach broker
# logs to failed tests and print the broker summary are registered by the first fixture that starts a
# broker or a consumer process, so sessions that never use them see nothing of this plugin.
_clusters: list[Any] = []
_summary: list[str] = []
_REPORTER_NAME = "static_consumer-broker-reports"


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


@pytest.fixture(scope="session")
def kafka_cluster(pytestconfig: pytest.Config) -> Iterator[KafkaCluster]:
    from static_consumer_lab.backends import local_cluster

    with local_cluster(os.environ) as cluster:
        _clusters.append(cluster)
        _announce(pytestconfig, _describe_start(cluster))
        try:
            yield cluster
        finally:
            _clusters.remove(cluster)


@pytest.fixture(scope="session")
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
        from static_consumer_lab.kafka_ops import create_topic

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
    from static_consumer_lab.processes import ConsumerProcess

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
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> Callable[..., Group]:
    """``new(partitions, **options) -> Group``: members in child processes on a new topic with a new group
    id, on the shared broker (``options`` are :class:`~static_consumer_lab.group.Group`'s fields)."""
    from static_consumer_lab.group import Group

    def new(partitions: int, **options: Any) -> Group:
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
    from static_consumer_lab.jvm import JvmKafkaCluster

    started: list[JvmKafkaCluster] = []

    def start(nodes: int = 3, extra_config: Mapping[str, str] | None = None) -> JvmKafkaCluster:
        cluster = JvmKafkaCluster(nodes, extra_config=extra_config)
        started.append(cluster)
        _clusters.append(cluster)
        cluster.start()
        _announce(pytestconfig, f"{nodes}-node " + _describe_start(cluster))
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
    from static_consumer_lab.jvm import JvmKafkaCluster
    from static_consumer_lab.sasl import SaslUsers

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
    from static_consumer_lab.acls import start_acl_cluster

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
    from static_consumer_lab.spark import SparkConnectServer, server_jars

    jars, conf = server_jars()
    with SparkConnectServer(jars=jars, conf=conf) as server:
        _announce(
            pytestconfig, f"Spark Connect server at {server.url}: start-up {server.start_seconds:.1f} s"
        )
        yield server


@pytest.fixture(scope="session")
def spark_standalone_cluster(pytestconfig: pytest.Config) -> Iterator[StandaloneCluster]:
    from static_consumer_lab.spark import StandaloneCluster

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

    from static_consumer_lab.certs import generate_pki
    from static_consumer_lab.jvm import JvmKafkaCluster
    from static_consumer_lab.sasl import SaslUsers
    from static_consumer_lab.tls import SASL_MECHANISMS, SecureListeners

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
