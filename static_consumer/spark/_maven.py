"""Jars from Maven Central, resolved once into a cache directory outside the repository.

``mvn dependency:copy-dependencies`` on a one-dependency POM, keeping only the artifacts Spark itself
lacks (it ships Scala, the Hadoop client, Parquet and the compression codecs). A lock file makes
parallel test processes resolve once; a marker file says a resolution finished.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

MAVEN_TIMEOUT_S = 600.0
_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.static-consumer</groupId>
  <artifactId>{artifact}-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""


class ConnectorError(RuntimeError):
    """Jars could not be resolved (no Maven, no network, no such version)."""


def cache_root() -> Path:
    """``$STATIC_CONSUMER_CACHE_DIR`` or ``~/.cache/static-consumer`` (shared with the broker harness)."""
    configured = os.environ.get("STATIC_CONSUMER_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "static-consumer"


def resolve(group: str, artifact: str, version: str, keep: Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """The jars of ``group:artifact:version`` and of its dependencies named in ``keep``, and whether
    they were cached already."""
    base = cache_root() / f"{artifact}-{version}"
    target, marker = base / "jars", base / ".complete"
    if not marker.exists():
        base.mkdir(parents=True, exist_ok=True)
        with open(base / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not marker.exists():
                _run_maven(group, artifact, version, keep, base, target)
                marker.write_text(version + "\n")
                return _jars(target), False
    return _jars(target), True


def _jars(target: Path) -> tuple[str, ...]:
    return tuple(sorted(str(p) for p in target.glob("*.jar")))


def _run_maven(
    group: str, artifact: str, version: str, keep: Sequence[str], base: Path, target: Path
) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorError("Maven (mvn) is not on PATH: it is needed to fetch jars from Maven Central")
    (base / "pom.xml").write_text(_POM.format(group=group, artifact=artifact, version=version))
    if target.exists():
        shutil.rmtree(target)
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(base / "pom.xml"),
        "dependency:copy-dependencies",
        f"-DoutputDirectory={target}",
        "-DincludeScope=runtime",
        f"-DincludeArtifactIds={','.join([artifact, *keep])}",
    ]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise ConnectorError(f"Maven did not finish within {MAVEN_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # Maven colours its errors
        errors = [line for line in output.splitlines() if "ERROR" in line]
        raise ConnectorError(errors[0] if errors else f"mvn exited with {done.returncode}")
    if not any(target.glob(f"{artifact}-{version}.jar")):
        raise ConnectorError(f"Maven finished but {target} holds no {artifact}-{version}.jar")


__all__ = ["MAVEN_TIMEOUT_S", "ConnectorError", "cache_root", "resolve"]
