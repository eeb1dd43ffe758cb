"""Fetch Spark's own Kafka source (spark-sql-kafka-0-10) from Maven Central, for comparisons with the bridge.

The connector is not in the PySpark wheel. This resolves the version matching the installed PySpark
(and its Scala version) with ``mvn dependency:copy-dependencies`` into a cache directory outside the
repository, once; only the jars Spark itself lacks are kept (the connector, its token provider,
kafka-clients, commons-pool2). When that exact version is not on Maven Central yet, the newest earlier
``x.y.0`` release of the same major version is used, with a warning; ``STATIC_CONSUMER_SPARK_KAFKA_VERSION``
pins a version.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from static_consumer._base import maven
from static_consumer._base.maven import MavenError as ConnectorError
from static_consumer._base.maven import cache_root

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaConnector:
    """Resolved connector jars. ``version`` differs from ``spark_version`` after a fallback."""

    version: str
    spark_version: str
    scala_version: str
    jars: tuple[str, ...]
    cached: bool
    resolve_seconds: float

    @property
    def exact(self) -> bool:
        return self.version == self.spark_version


def installed_spark() -> tuple[str, str]:
    """(Spark version, Scala binary version) of the installed PySpark, from its bundled spark-core jar."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    for jar in jars.glob("spark-core_*.jar"):
        found = re.fullmatch(r"spark-core_(\d+\.\d+)-(.+)\.jar", jar.name)
        if found:
            return found.group(2), found.group(1)
    return pyspark.__version__, "2.13"  # every Spark 4 release is built for Scala 2.13 only


def candidate_versions(spark_version: str) -> list[str]:
    """The exact version first, then ``major.minor.0`` releases of the same major, newest first."""
    found = re.match(r"(\d+)\.(\d+)\.(\d+)", spark_version)
    if not found:
        return [spark_version]
    major, minor = int(found.group(1)), int(found.group(2))
    out = [spark_version]
    for m in range(minor, -1, -1):
        version = f"{major}.{m}.0"
        if version not in out:
            out.append(version)
    return out


def resolve_kafka_connector(spark_version: str | None = None) -> KafkaConnector:
    """The spark-sql-kafka-0-10 jars for the installed (or given) Spark version; see the module doc."""
    installed, scala = installed_spark()
    spark_version = spark_version or installed
    pinned = os.environ.get("STATIC_CONSUMER_SPARK_KAFKA_VERSION")
    candidates = [pinned] if pinned else candidate_versions(spark_version)
    started = time.monotonic()
    # A fallback is remembered, so later runs do not ask Maven again for versions it lacks; delete the
    # cache directory (or pin a version) to try again.
    choice = cache_root() / f"spark-sql-kafka-0-10_{scala}-for-spark-{spark_version}.txt"
    if not pinned and choice.exists():
        candidates = [choice.read_text().strip(), *candidates]
    failures: list[str] = []
    for version in candidates:
        try:
            jars, cached = _resolve(version, scala)
        except ConnectorError as exc:
            failures.append(f"{version}: {exc}")
            continue
        if version != spark_version:
            log.warning(
                "using spark-sql-kafka-0-10 %s with Spark %s (%s)",
                version,
                spark_version,
                failures[0] if failures else "remembered fallback",
            )
            choice.write_text(version + "\n")
        return KafkaConnector(version, spark_version, scala, jars, cached, time.monotonic() - started)
    raise ConnectorError("could not resolve spark-sql-kafka-0-10:\n" + "\n".join(failures))


def _resolve(version: str, scala: str) -> tuple[tuple[str, ...], bool]:
    # Spark already ships everything else the connector depends on (Scala, Hadoop client, compression).
    keep = [f"spark-token-provider-kafka-0-10_{scala}", "kafka-clients", "commons-pool2"]
    connector = maven.Artifact("org.apache.spark", f"spark-sql-kafka-0-10_{scala}", version)
    resolved = maven.resolve(f"{connector.artifact}-{version}", [connector], keep)
    return resolved.jars, resolved.cached


__all__ = [
    "ConnectorError",
    "KafkaConnector",
    "cache_root",
    "candidate_versions",
    "installed_spark",
    "resolve_kafka_connector",
]
