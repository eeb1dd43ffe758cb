"""Delta Lake for the bridge: jars from Maven Central matching the installed delta-spark and PySpark.

delta-spark's wheel holds only the Python API; the Delta engine is a jar built for one Spark
``major.minor`` (``io.delta:delta-spark_<spark major.minor>_<scala>``, before Delta 4.1
``delta-spark_<scala>``) and does not load on another Spark (Delta 4.4 built for Spark 4.2 fails on
Spark 4.3 with ``NoSuchMethodError``). :func:`resolve_delta` fetches the jar of the installed
delta-spark version for the installed Spark, or the newest earlier patch release of the same
``major.minor`` when that one is not on Maven Central (with a warning); ``STATIC_CONSUMER_DELTA_VERSION``
pins a version. Spark's own ``spark.jars.packages`` (Ivy) would do the same at every session start,
without the fallback.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from importlib import metadata

from static_consumer._base import maven
from static_consumer._base.maven import MavenError as ConnectorError
from static_consumer.spark.connector import installed_spark

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaJars:
    """Resolved Delta Lake jars; ``version`` differs from ``wanted`` after a fallback."""

    version: str
    wanted: str
    artifact: str
    jars: tuple[str, ...]
    cached: bool
    resolve_seconds: float


SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"  # tasks that rebuild a table's state
SNAPSHOT_PARTITIONS_DEFAULT = 50  # Delta's own value of it


def delta_conf(cores: int | None = None) -> dict[str, str]:
    """The session settings Delta needs besides its jars (its SQL extension and catalog), and the number
    of tasks that rebuild a table's state from its log before each write: Delta's 50 is sized for a
    cluster; on ``cores`` cores (this machine's by default) one task per core, at most Delta's 50. A
    bridge writes small batches often, so that rebuild is most of a small MERGE (docs/spark.md)."""
    available = cores if cores is not None else os.cpu_count() or 1
    if available < 1:
        raise ValueError(f"cores={cores!r}: at least 1")
    return {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        SNAPSHOT_PARTITIONS: str(min(available, SNAPSHOT_PARTITIONS_DEFAULT)),
    }


def artifacts(delta_version: str, spark_version: str, scala: str) -> list[str]:
    """Maven artifact ids to try for a Delta version: per-Spark names from Delta 4.1 on."""
    found = re.match(r"(\d+)\.(\d+)", delta_version)
    spark_minor = ".".join(spark_version.split(".")[:2])
    if found and (int(found.group(1)), int(found.group(2))) >= (4, 1):
        return [f"delta-spark_{spark_minor}_{scala}", f"delta-spark_{scala}"]
    return [f"delta-spark_{scala}"]


def patch_candidates(version: str) -> list[str]:
    """``x.y.z`` then every earlier patch release ``x.y.(z-1)`` down to ``x.y.0``."""
    found = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if not found:
        return [version]
    major, minor, patch = (int(g) for g in found.groups())
    return [f"{major}.{minor}.{p}" for p in range(patch, -1, -1)]


def resolve_delta(delta_version: str | None = None) -> DeltaJars:
    """Delta's jars (the engine and delta-storage) for the installed (or given) delta-spark version."""
    spark_version, scala = installed_spark()
    pinned = os.environ.get("STATIC_CONSUMER_DELTA_VERSION")
    if delta_version is None:
        try:
            delta_version = metadata.version("delta-spark")
        except metadata.PackageNotFoundError as exc:
            raise ConnectorError(
                "delta-spark is not installed: pip install 'static-consumer[spark-delta]'"
            ) from exc
    started = time.monotonic()
    failures: list[str] = []
    tries = [
        (a, v)
        for v in ([pinned] if pinned else patch_candidates(delta_version))
        for a in artifacts(v, spark_version, scala)
    ]
    # A fallback is remembered, so later processes do not ask Maven again for what it lacks; delete
    # the file (or pin a version) to try again.
    choice = maven.cache_root() / f"delta-for-spark-{spark_version}-delta-{delta_version}.txt"
    if not pinned and choice.exists():
        artifact, _, version = choice.read_text().strip().partition(":")
        tries.insert(0, (artifact, version))
    for artifact, version in tries:
        try:
            resolved = maven.resolve(
                f"{artifact}-{version}", [maven.Artifact("io.delta", artifact, version)], ["delta-storage"]
            )
            jars, cached = resolved.jars, resolved.cached
        except ConnectorError as exc:
            failures.append(f"{artifact}:{version}: {exc}")
            continue
        if version != delta_version:
            why = failures[0] if failures else "remembered fallback"
            log.warning("using Delta %s jars with delta-spark %s (%s)", version, delta_version, why)
            choice.write_text(f"{artifact}:{version}\n")
        return DeltaJars(version, delta_version, artifact, jars, cached, time.monotonic() - started)
    raise ConnectorError(f"no Delta jars for Spark {spark_version} on Maven Central:\n" + "\n".join(failures))


__all__ = ["DeltaJars", "artifacts", "delta_conf", "patch_candidates", "resolve_delta"]
