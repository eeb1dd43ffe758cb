"""Spark servers for tests and benchmarks, started from PySpark's own launch scripts on 127.0.0.1.

- :class:`SparkConnectServer`: ``bin/spark-submit --class ...SparkConnectServer`` (what
  ``sbin/start-connect-server.sh`` runs; the PySpark wheel ships ``bin/`` but not every ``sbin``
  wrapper), with a local master of its own, listening for gRPC on 127.0.0.1.
- :class:`StandaloneCluster`: a standalone master and one worker (``bin/spark-class
  org.apache.spark.deploy.master.Master`` / ``...worker.Worker``, what ``sbin/start-master.sh`` and
  ``start-worker.sh`` run), both bound to 127.0.0.1.

Each runs in the foreground as a child of this process (the scripts ``exec`` the JVM), dies with it
(``PR_SET_PDEATHSIG``), and is stopped (SIGTERM, then SIGKILL) on exit; start-up is bounded and a
failure raises :class:`HarnessError` with the log tail. Jars (Spark's Kafka connector, Delta) are
passed in by the caller.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from static_consumer_lab.brokers.classpath import HarnessError
from static_consumer_lab.brokers.jvm import _die_with_parent, free_ports

START_TIMEOUT_S = 180.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _quiet_log4j() -> str:
    from static_consumer.spark.session import log4j2_config

    return f"-Dlog4j2.configurationFile={log4j2_config().as_uri()}"


def server_jars() -> tuple[list[str], dict[str, str]]:
    """Jars and settings a test server needs: Spark's Kafka connector (the native source, to compare
    with) and, when delta-spark is installed, Delta Lake with its extension and catalog."""
    from importlib import metadata

    from static_consumer.spark import delta_conf, resolve_delta, resolve_kafka_connector

    jars: list[str] = list(resolve_kafka_connector().jars)
    conf: dict[str, str] = {}
    try:
        metadata.version("delta-spark")
    except metadata.PackageNotFoundError:
        return jars, conf
    return [*jars, *resolve_delta().jars], delta_conf()


class _Daemon:
    """One Spark JVM started from a PySpark script, its output in a log file."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], workdir: Path) -> None:
        self.name = name
        self.log_path = workdir / f"{name}.log"
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            list(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            cwd=workdir,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - kept across exec: the JVM dies with us
        )

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_for(self, ready: Any, what: str, deadline: float) -> None:
        while not ready():
            if self.proc.poll() is not None:
                raise HarnessError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"{self.name}: no {what} within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.5)

    def stop(self, timeout_s: float = 20.0) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _spark_env(workdir: Path) -> dict[str, str]:
    return {
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(workdir / "local"),
        "SPARK_LOG_DIR": str(workdir),
        "SPARK_CONF_DIR": str(workdir / "conf"),  # empty: nothing from a machine-wide configuration
    }


class SparkConnectServer:
    """A Spark Connect server on 127.0.0.1 (``url`` is ``sc://127.0.0.1:<port>``)."""

    def __init__(
        self,
        *,
        jars: Sequence[str] = (),
        conf: Mapping[str, str] | None = None,
        master: str = "local[2]",
        driver_memory: str = "2g",
    ) -> None:
        self._jars, self._conf, self._master, self._memory = (
            tuple(jars),
            dict(conf or {}),
            master,
            driver_memory,
        )
        self._workdir = Path(tempfile.mkdtemp(prefix="static-consumer-spark-connect-"))
        self.port = 0
        self.start_seconds: float | None = None
        self._daemon: _Daemon | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The server JVM's process id (the launch script ``exec``s the JVM)."""
        assert self._daemon is not None, "not started"
        return self._daemon.proc.pid

    def start(self) -> SparkConnectServer:
        (self._workdir / "conf").mkdir(exist_ok=True)
        self.port = free_ports(1)[0]
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": _quiet_log4j(),
            **self._conf,
        }
        argv = [
            str(spark_home() / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--name",
            "Spark Connect server",
            "--master",
            self._master,
            "--driver-memory",
            self._memory,
        ]
        if self._jars:
            argv += ["--jars", ",".join(self._jars)]
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        started = time.monotonic()
        self._daemon = _Daemon("spark-connect", argv, _spark_env(self._workdir), self._workdir)
        self._daemon.wait_for(lambda: _listening(self.port), "gRPC port", started + START_TIMEOUT_S)
        self.start_seconds = time.monotonic() - started
        return self

    def log_tail(self, lines: int = 40) -> str:
        return self._daemon.log_tail(lines) if self._daemon is not None else ""

    def stop(self) -> None:
        if self._daemon is not None:
            self._daemon.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class StandaloneCluster:
    """A standalone master and one worker on 127.0.0.1 (``master_url`` is ``spark://127.0.0.1:<port>``).

    A driver for it binds to 127.0.0.1 too: ``spark_session(master=cluster.master_url,
    driver_host="127.0.0.1")``."""

    def __init__(self, *, cores: int = 1, memory: str = "1g") -> None:
        self._cores, self._memory = cores, memory
        self._workdir = Path(tempfile.mkdtemp(prefix="static-consumer-spark-standalone-"))
        self.port = 0
        self.start_seconds: float | None = None
        self._daemons: list[_Daemon] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> StandaloneCluster:
        (self._workdir / "conf").mkdir(exist_ok=True)
        self.port, master_ui, worker_port, worker_ui = free_ports(4)
        env = {**_spark_env(self._workdir), "SPARK_DAEMON_JAVA_OPTS": "-Dspark.ui.showConsoleProgress=false"}
        spark_class = str(spark_home() / "bin" / "spark-class")
        started = time.monotonic()
        deadline = started + START_TIMEOUT_S
        master = _Daemon(
            "spark-master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--webui-port",
                str(master_ui),
            ],
            env,
            self._workdir,
        )
        self._daemons.append(master)
        master.wait_for(lambda: _listening(self.port), "master port", deadline)
        worker = _Daemon(
            "spark-worker",
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                "127.0.0.1",
                "--port",
                str(worker_port),
                "--webui-port",
                str(worker_ui),
                "--cores",
                str(self._cores),
                "--memory",
                self._memory,
                "--work-dir",
                str(self._workdir / "work"),
            ],
            env,
            self._workdir,
        )
        self._daemons.append(worker)
        worker.wait_for(
            lambda: "Successfully registered with master" in worker.log_path.read_text(errors="replace"),
            "registration with the master",
            deadline,
        )
        self.start_seconds = time.monotonic() - started
        return self

    def log_tail(self, lines: int = 40) -> str:
        return "\n\n".join(f"{d.name}:\n{d.log_tail(lines)}" for d in self._daemons)

    def stop(self) -> None:
        for daemon in reversed(self._daemons):
            daemon.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["START_TIMEOUT_S", "SparkConnectServer", "StandaloneCluster", "server_jars", "spark_home"]
