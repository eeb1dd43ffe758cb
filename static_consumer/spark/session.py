"""SparkSessions for the bridge: embedded local Spark by default, or a Spark Connect server.

Defaults that matter for micro-batches: local Spark's driver memory (the JVM default of 1 GB runs out
on batches of a million rows) is sized from the memory this process may use, logs are quiet (Spark's
INFO/WARN start-up chatter and console progress bars bury the application's own log), and a local
driver binds to 127.0.0.1. A driver with a cluster master (``spark://``, ``k8s://``, ``yarn``) must be
reachable by executors on other hosts, so it keeps Spark's own address choice (``SPARK_LOCAL_IP``, the
host name) unless ``driver_host``/``bind_address`` or ``conf`` say otherwise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from static_consumer._base.errors import ConfigurationError
from static_consumer._security.secrets import redact_url_params

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

GIB = 1024**3
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def default_driver_memory(available_bytes: int | None) -> str:
    """Half of the memory available, between 1 and 8 GiB, in Spark's notation (e.g. ``"4g"``).

    Half, because the Python process holding the batch (records, then the Arrow table) needs about as
    much as the driver; unknown memory gives 2 GiB.
    """
    if available_bytes is None or available_bytes <= 0:
        return "2g"
    mib = max(1024, min(8 * 1024, available_bytes // 2 // 1024**2))
    return f"{mib // 1024}g" if mib % 1024 == 0 else f"{mib}m"


def available_memory_bytes() -> int | None:
    """The container's memory limit (cgroup v2 or v1) if there is one, else the machine's memory."""
    physical: int | None = None
    try:
        physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        physical = None
    for path in _CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (physical is None or int(text) < physical):
            return int(text)
    return physical


def log4j2_config() -> Path:
    """The quiet log4j2 configuration shipped with the package (WARN and up, start-up notes silenced)."""
    return Path(str(resources.files("static_consumer.spark").joinpath("log4j2.properties")))


def is_local_master(master: str) -> bool:
    """True for ``local``, ``local[4]``, ``local[*]``, ``local-cluster[...]``: executors on this host."""
    return master == "local" or master.startswith(("local[", "local-cluster["))


def local_conf(
    *,
    driver_memory: str | None = None,
    jars: Sequence[str] = (),
    quiet: bool = True,
    master: str = "local[*]",
    driver_host: str | None = None,
    bind_address: str | None = None,
) -> dict[str, str]:
    """Spark conf for a session this process drives (what :func:`spark_session` sets unless overridden).

    The driver's address: ``driver_host`` is what executors connect back to (``spark.driver.host``),
    ``bind_address`` the interface it listens on (``spark.driver.bindAddress``, default all interfaces
    once ``driver_host`` is given, so a pod can advertise its IP or service name). Without either, a
    local master binds to 127.0.0.1 and a cluster master keeps Spark's defaults.
    """
    conf = {
        "spark.driver.memory": driver_memory or default_driver_memory(available_memory_bytes()),
        "spark.ui.enabled": "false",
        # Arrow is how batches cross from Python to the JVM; keep it on even if a cluster default is off.
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # createDataFrame(arrow table) turns tables under this size (default 48 MiB, i.e. every bridge
        # batch) into rows on the driver, in one thread, and ships the rows in the tasks. At 0 the Arrow
        # batches go to the executors as they are and are read there in parallel: a 100,000-record
        # batch (createDataFrame plus a noop write) took 0.33 s at the default and 0.18 s at 0 in the
        # median (bench/measure_spark_handoff.py, docs/spark.md).
        "spark.sql.execution.arrow.localRelationThreshold": "0",
    }
    if driver_host is not None:
        conf["spark.driver.host"] = driver_host
        conf["spark.driver.bindAddress"] = bind_address or "0.0.0.0"
    elif bind_address is not None:
        conf["spark.driver.bindAddress"] = bind_address
    elif is_local_master(master):
        # Nothing outside this host needs the driver; never listen on the pod's network.
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    if quiet:
        conf["spark.ui.showConsoleProgress"] = "false"
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile={log4j2_config().as_uri()}"
    if jars:
        conf["spark.jars"] = ",".join(jars)
    return conf


def spark_session(
    remote: str | None = None,
    *,
    master: str | None = None,
    app_name: str = "static-consumer",
    driver_memory: str | None = None,
    jars: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    quiet: bool = True,
    driver_host: str | None = None,
    bind_address: str | None = None,
    delta: bool = False,
    env: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession: a driver in this process (``master``, default ``local[*]``; or a cluster master
    such as ``spark://master:7077``), or the Spark Connect server at ``remote`` (e.g.
    ``"sc://spark-connect:15002"``; needs ``static-consumer[spark-connect]``).

    Without ``remote`` and ``master``, ``SPARK_REMOTE`` in the environment (``env``, default
    ``os.environ``) names the Connect server, as it does for PySpark's own builder: a pod spec that sets
    it gets a Connect session. ``SPARK_REMOTE`` next to an explicit ``master`` is a
    :class:`~static_consumer._base.errors.ConfigurationError` (PySpark would refuse the pair too).

    ``driver_host``/``bind_address``: see :func:`local_conf`. ``delta=True`` adds Delta Lake's jars
    (resolved from Maven Central, see :func:`~static_consumer.spark.resolve_delta`) and its SQL
    extension and catalog; a Spark Connect server needs them at its own start instead. ``conf`` wins
    over the defaults. Driver memory, JVM options and jars only take effect when this call starts the
    JVM; if a session already exists it is returned with a warning.
    """
    from pyspark.sql import SparkSession

    from_env = (os.environ if env is None else env).get("SPARK_REMOTE") or None
    if remote is None and from_env is not None:
        if master is not None:
            raise ConfigurationError(
                f"spark_session(master={master!r}) with SPARK_REMOTE={redact_url_params(from_env)!r} in "
                "the environment: a session is either a driver with a master or a Spark Connect client. "
                "Unset SPARK_REMOTE or leave master out"
            )
        remote = from_env
        log.info("Spark Connect at %s (SPARK_REMOTE)", redact_url_params(remote))
    master = master or "local[*]"
    builder = SparkSession.builder.appName(app_name)
    if remote is not None:
        builder = builder.remote(remote)
        settings: dict[str, str] = dict(conf or {})
    else:
        if SparkSession.getActiveSession() is not None:
            log.warning(
                "a SparkSession is already running: driver memory, jars and log settings stay as they are"
            )
        builder = builder.master(master)
        extra: dict[str, str] = {}
        if delta:
            from static_consumer.spark.delta import delta_conf, resolve_delta

            jars = [*jars, *resolve_delta().jars]
            extra = delta_conf()
        own = local_conf(
            driver_memory=driver_memory,
            jars=jars,
            quiet=quiet,
            master=master,
            driver_host=driver_host,
            bind_address=bind_address,
        )
        settings = {**own, **extra, **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except ImportError as exc:
        raise ConfigurationError(
            f"Spark Connect needs extra packages ({exc}): pip install 'static-consumer[spark-connect]'"
        ) from exc
    return session


__all__ = [
    "available_memory_bytes",
    "default_driver_memory",
    "is_local_master",
    "local_conf",
    "log4j2_config",
    "spark_session",
]
