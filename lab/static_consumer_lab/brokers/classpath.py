"""The Apache Kafka broker classpath from Maven Central, resolved once per version into a cache directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from static_consumer._base.maven import Artifact, MavenError, resolve

DEFAULT_KAFKA_VERSION = "4.3.1"
# The broker logs through slf4j 1.7; without a binding its log would be empty.
LOG4J_BINDING = Artifact("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.4")


class HarnessError(RuntimeError):
    """The broker harness could not provide a broker (Maven, Java or the broker itself failed)."""


@dataclass(frozen=True)
class Classpath:
    version: str
    directory: Path
    resolve_seconds: float
    cached: bool

    @property
    def java_classpath(self) -> str:
        return str(self.directory / "*")


def kafka_version() -> str:
    return os.environ.get("STATIC_CONSUMER_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)


def resolve_classpath(version: str | None = None) -> Classpath:
    """Copy ``org.apache.kafka:kafka_2.13:<version>`` and its runtime dependencies (and the log4j binding
    of the broker's slf4j, without which its log would be empty) into the cache, with the library's
    Maven resolver (``static_consumer._base.maven``): once, later calls are free."""
    version = version or kafka_version()
    artifacts = [Artifact("org.apache.kafka", "kafka_2.13", version), LOG4J_BINDING]
    try:
        resolved = resolve(f"kafka_2.13-{version}", artifacts)
    except MavenError as exc:
        raise HarnessError(f"Maven failed to resolve org.apache.kafka:kafka_2.13:{version}: {exc}") from exc
    return Classpath(version, resolved.directory, resolved.seconds, resolved.cached)
