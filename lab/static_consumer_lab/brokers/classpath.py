"""Resolve the Apache Kafka broker classpath from Maven Central, once per version, into a cache directory."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

DEFAULT_KAFKA_VERSION = "4.3.1"
_MAVEN_TIMEOUT_S = 900.0


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


def cache_root() -> Path:
    """``$STATIC_CONSUMER_CACHE_DIR`` or ``~/.cache/static-consumer``: outside the repository."""
    configured = os.environ.get("STATIC_CONSUMER_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "static-consumer"


def resolve_classpath(version: str | None = None) -> Classpath:
    """Copy ``org.apache.kafka:kafka_2.13:<version>`` and its runtime dependencies into the cache.

    Done once: a ``.complete`` marker makes later calls free. A file lock keeps parallel test
    processes from resolving twice.
    """
    version = version or kafka_version()
    target = cache_root() / f"kafka_2.13-{version}" / "libs"
    marker = target.parent / ".complete"
    started = time.monotonic()
    if marker.exists():
        return Classpath(version, target, time.monotonic() - started, cached=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return Classpath(version, target, time.monotonic() - started, cached=True)
        _run_maven(version, target)
        marker.write_text(version + "\n")
    return Classpath(version, target, time.monotonic() - started, cached=False)


def _run_maven(version: str, target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise HarnessError("Maven (mvn) is not on PATH: it is needed to fetch the Kafka broker jars")
    pom_template = resources.files("static_consumer_lab").joinpath("pom.xml").read_text()
    work = target.parent / "maven"
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(pom_template.replace("@KAFKA_VERSION@", version))
    if target.exists():
        shutil.rmtree(target)
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(work / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={target}",
        "-DincludeScope=runtime",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=_MAVEN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"Maven did not resolve Kafka {version} within {_MAVEN_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise HarnessError(f"Maven failed to resolve org.apache.kafka:kafka_2.13:{version}:\n{tail}")
    if not any(target.glob(f"kafka_2.13-{version}.jar")):
        raise HarnessError(f"Maven finished but {target} holds no kafka_2.13-{version}.jar")
