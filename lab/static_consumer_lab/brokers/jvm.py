"""A real Apache Kafka cluster (KRaft, combined broker+controller nodes) run on the JVM from Maven jars.

Used where no Docker engine is available. Every node listens on 127.0.0.1 only, every wait is bounded,
and every process is stopped (then killed) on exit, even when the Python process dies first.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from static_consumer_lab.brokers.classpath import Classpath, HarnessError, resolve_classpath
from static_consumer_lab.brokers.kafka_ops import metadata
from static_consumer_lab.brokers.rebalances import Rebalance, group_rebalances
from static_consumer_lab.secure.sasl import LISTENER as SASL_LISTENER
from static_consumer_lab.secure.sasl import SaslUsers

if TYPE_CHECKING:
    from static_consumer_lab.secure.listeners import SecureListeners

Profile = Literal["stock", "lab"]

# Apache Kafka 4.3.1's own defaults for group coordination (GroupCoordinatorConfig's *_DEFAULT constants,
# read from the broker jar), written out so that a broker's profile can be read in its config: a
# ``stock`` broker is what users run (hosted services do not let them lower these), and every number the
# docs give for the consumer protocol comes from one.
STOCK_GROUP_CONFIG: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
}
# The ``lab`` profile: group minimums lowered so that a test need not wait out 45 s sessions (KIP-848
# groups then take a per-group session of a few seconds) and a classic group forms without the 3 s
# initial delay. Only for tests whose point does not depend on the session length, and labelled so
# (``@pytest.mark.lab_broker``); a number measured on it is labelled "lab" wherever it is quoted.
LAB_GROUP_CONFIG: dict[str, str] = {
    **STOCK_GROUP_CONFIG,
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "500",
}
PROFILES: dict[str, dict[str, str]] = {"stock": STOCK_GROUP_CONFIG, "lab": LAB_GROUP_CONFIG}
# Either profile: small internal topics and no auto-created topics (nothing here changes how groups
# behave). Tests override any of these through ``extra_config``.
HARNESS_CONFIG: dict[str, str] = {
    "offsets.topic.num.partitions": "6",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "log.segment.bytes": str(64 * 1024 * 1024),
}


def profile_config(profile: str) -> dict[str, str]:
    """The broker settings of ``profile`` (``stock`` or ``lab``), on top of the harness's own."""
    if profile not in PROFILES:
        raise HarnessError(f"unknown broker profile {profile!r}: use one of {sorted(PROFILES)}")
    return {**PROFILES[profile], **HARNESS_CONFIG}


def free_ports(count: int) -> list[int]:
    """Ports the OS reports free on 127.0.0.1 (held open together so they are distinct)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _die_with_parent() -> None:
    # Linux only: the JVM gets SIGKILL if the Python process that started it dies, so a killed test
    # run never leaves brokers behind.
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class JvmNode:
    node_id: int
    broker_port: int
    controller_port: int
    directory: Path
    # Listener name -> port of the listeners next to PLAINTEXT (SASL_PLAINTEXT, the TLS ones).
    listener_ports: dict[str, int] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def sasl_port(self) -> int | None:
        return self.listener_ports.get(SASL_LISTENER)

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


def new_cluster_id() -> str:
    """A random KRaft cluster id, like Kafka's ``Uuid.randomUuid()``.

    URL-safe base64 of 16 random bytes; ids starting with ``-`` are redrawn, as Kafka
    does, because ``kafka-storage format -t -abc`` reads the id as an option.
    """
    for _ in range(1000):
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate
    raise HarnessError("could not draw a KRaft cluster id that does not start with '-'")


class JvmKafkaCluster:
    """``nodes`` combined KRaft nodes on 127.0.0.1. Use as a context manager or call start()/stop().

    ``profile`` is ``stock`` (Apache Kafka's group settings, the default) or ``lab`` (lowered group
    minimums, see :data:`LAB_GROUP_CONFIG`).

    ``sasl`` adds a SASL_PLAINTEXT listener on every node (see :attr:`sasl_bootstrap_servers`) next to
    the PLAINTEXT one the harness itself uses; ``tls`` adds the TLS listeners of
    :mod:`static_consumer_lab.secure.listeners` (see :meth:`bootstrap_for`).
    """

    backend = "jvm"

    def __init__(
        self,
        nodes: int = 1,
        *,
        profile: Profile = "stock",
        extra_config: Mapping[str, str] | None = None,
        workdir: Path | None = None,
        start_timeout_s: float = 120.0,
        heap: str = "512m",
        sasl: SaslUsers | None = None,
        tls: SecureListeners | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError("a cluster needs at least one node")
        self.profile = profile
        self._group_config = profile_config(profile)
        self._extra = dict(extra_config or {})
        self._owns_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="static-consumer-kafka-"))
        self.start_timeout_s = start_timeout_s
        self.heap = heap
        self.classpath: Classpath | None = None
        self.start_seconds: float | None = None
        self.sasl = sasl
        self.tls = tls
        self.listeners = {**(sasl.listeners() if sasl else {}), **(tls.listeners() if tls else {})}
        per_node = 2 + len(self.listeners)
        ports = free_ports(per_node * nodes)
        self.nodes = []
        for i in range(nodes):
            mine = ports[per_node * i : per_node * (i + 1)]
            extra = dict(zip(self.listeners, mine[2:], strict=True))
            self.nodes.append(JvmNode(i + 1, mine[0], mine[1], self.workdir / f"node-{i + 1}", extra))
        self._java = shutil.which("java") or "java"
        atexit.register(self._kill_all)

    # ----------------------------------------------------------------------------------- lifecycle
    def __enter__(self) -> JvmKafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def version(self) -> str:
        return self.classpath.version if self.classpath else "unknown"

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{n.broker_port}" for n in self.nodes)

    @property
    def sasl_bootstrap_servers(self) -> str:
        """The SASL_PLAINTEXT listeners (only with ``sasl``)."""
        if self.sasl is None:
            raise HarnessError("this cluster has no SASL listener: pass sasl=SaslUsers({...})")
        return self.bootstrap_for(SASL_LISTENER)

    def bootstrap_for(self, listener: str) -> str:
        """The bootstrap servers of listener ``listener`` (e.g. ``"MTLS"``), every node."""
        if listener not in self.listeners:
            raise HarnessError(f"this cluster has no {listener} listener; it has {sorted(self.listeners)}")
        return ",".join(f"127.0.0.1:{n.listener_ports[listener]}" for n in self.nodes)

    def start(self) -> JvmKafkaCluster:
        self.classpath = resolve_classpath()
        begun = time.monotonic()
        cluster_id = new_cluster_id()
        log4j = self.workdir / "log4j2.yaml"
        self.workdir.mkdir(parents=True, exist_ok=True)
        log4j.write_text(resources.files("static_consumer_lab").joinpath("log4j2.yaml").read_text())
        try:
            for node in self.nodes:
                self._write_config(node)
                self._format(node, cluster_id)
            for node in self.nodes:
                self.start_node(node.node_id, wait=False)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - begun
        return self

    def stop(self) -> None:
        for node in self.nodes:  # signal all first: stopping one by one takes a controller timeout each
            if node.running and node.process is not None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            self.stop_node(node.node_id)
        # Broker data can be large; the logs stay behind for post-mortems.
        if self._owns_workdir and os.environ.get("STATIC_CONSUMER_KEEP_BROKER_DATA") != "1":
            for node in self.nodes:
                shutil.rmtree(node.directory / "data", ignore_errors=True)

    def node(self, node_id: int) -> JvmNode:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id}; nodes are {[n.node_id for n in self.nodes]}")

    def start_node(self, node_id: int, *, wait: bool = True) -> None:
        node = self.node(node_id)
        if node.running:
            return
        assert self.classpath is not None, "start() the cluster first"
        node._log = open(node.log_path, "ab")  # noqa: SIM115 - closed in stop_node
        cmd = [
            self._java,
            f"-Xms{self.heap}",
            f"-Xmx{self.heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
            "-cp",
            self.classpath.java_classpath,
            "kafka.Kafka",
            str(node.config_path),
        ]
        node.process = subprocess.Popen(
            cmd,
            stdout=node._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        if wait:
            self.wait_ready()

    def stop_node(self, node_id: int, *, hard: bool = False, timeout_s: float = 30.0) -> None:
        """Clean shutdown (SIGTERM, then SIGKILL after ``timeout_s``) or, with ``hard``, kill -9."""
        node = self.node(node_id)
        proc = node.process
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if node._log is not None:
            node._log.close()
            node._log = None

    def restart_node(self, node_id: int, *, hard: bool = False) -> None:
        self.stop_node(node_id, hard=hard)
        self.start_node(node_id, wait=True)

    def _kill_all(self) -> None:
        for node in self.nodes:
            if node.running and node.process is not None:
                node.process.kill()

    # ------------------------------------------------------------------------------------ readiness
    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until every running node answers metadata itself and the cluster sees all of them."""
        deadline = time.monotonic() + (timeout_s or self.start_timeout_s)
        running = [n for n in self.nodes if n.running]
        expected = {n.node_id for n in running}
        pending = list(running)
        last_error = "no answer yet"
        while pending and time.monotonic() < deadline:
            node = pending[0]
            if not node.running:
                raise HarnessError(f"Kafka node {node.node_id} exited during start-up:\n{self.log_tail()}")
            try:
                meta = metadata(f"127.0.0.1:{node.broker_port}", timeout_s=2.0)
                if meta.orig_broker_id == node.node_id and set(meta.brokers) >= expected:
                    pending.pop(0)
                    continue
                last_error = f"node {node.node_id}: brokers {sorted(meta.brokers)} of {sorted(expected)}"
            except Exception as exc:  # noqa: BLE001 - any failure here means "not ready yet"
                last_error = f"node {node.node_id}: {exc}"
            time.sleep(0.25)
        if pending:
            raise HarnessError(
                f"Kafka did not answer metadata within the bound ({last_error}):\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for node in self.nodes:
            if node.log_path.exists():
                text = node.log_path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- broker node {node.node_id} log tail ({node.log_path}) ---")
                parts.extend(text)
        return "\n".join(parts)

    def group_generations(self, group_id: str) -> list[int]:
        """Generations the classic group coordinator logged as stable for ``group_id`` (every node)."""
        return sorted(r.value for r in self.group_rebalances(group_id) if r.kind == "generation")

    def group_rebalances(self, group_id: str) -> list[Rebalance]:
        """Classic generations and KIP-848 group epochs of ``group_id`` so far, from every node's log
        (see :mod:`static_consumer_lab.brokers.rebalances`): equal before and after means no rebalance."""
        return group_rebalances(self.log_paths(), group_id)

    def log_paths(self) -> Iterator[Path]:
        return (n.log_path for n in self.nodes)

    # --------------------------------------------------------------------------------- configuration
    def _write_config(self, node: JvmNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        replication = str(min(3, len(self.nodes)))
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in self.nodes)
        advertised = f"PLAINTEXT://127.0.0.1:{node.broker_port}"
        protocols = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
        for name, protocol in self.listeners.items():
            advertised += f",{name}://127.0.0.1:{node.listener_ports[name]}"
            protocols += f",{name}:{protocol}"
        config = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"{advertised},CONTROLLER://127.0.0.1:{node.controller_port}",
            "advertised.listeners": advertised,
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": protocols,
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(node.directory / "data"),
            "offsets.topic.replication.factor": replication,
            "transaction.state.log.replication.factor": replication,
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": replication,
            "share.coordinator.state.topic.min.isr": "1",
            "default.replication.factor": replication,
            **self._group_config,
            **(self.sasl.broker_config() if self.sasl is not None else {}),
            **(self.tls.broker_config() if self.tls is not None else {}),
            **self._extra,
        }
        node.config_path.write_text("".join(f"{k}={v}\n" for k, v in config.items()))

    def _format_args(self) -> list[str]:
        """SCRAM credentials of every SASL listener, each once (kafka-storage refuses duplicates)."""
        args = [
            *(self.sasl.format_args() if self.sasl else []),
            *(self.tls.format_args() if self.tls else []),
        ]
        pairs = list(dict.fromkeys(zip(args[::2], args[1::2], strict=True)))
        return [part for pair in pairs for part in pair]

    def _format(self, node: JvmNode, cluster_id: str) -> None:
        assert self.classpath is not None
        cmd = [
            self._java,
            "-cp",
            self.classpath.java_classpath,
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.yaml'}",
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(node.config_path),
            *self._format_args(),
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise HarnessError(
                f"formatting KRaft storage for node {node.node_id} failed:\n{done.stdout}{done.stderr}"
            )
