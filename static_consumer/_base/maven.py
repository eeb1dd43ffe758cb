"""Jars from Maven Central, resolved once into a cache directory outside the repository: the one
resolver of the project (the Spark bridge's connector and Delta jars, the lab's Kafka broker).

``mvn dependency:copy-dependencies`` on a POM of the given dependencies, keeping only the artifacts named
in ``keep`` when given (Spark ships Scala, the Hadoop client, Parquet and the compression codecs itself),
else every runtime dependency. A lock file makes parallel processes resolve once; a marker file says a
resolution finished. Standard library only.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MAVEN_TIMEOUT_S = 900.0
_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.github.static-consumer</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""
_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>
    </dependency>"""


class MavenError(RuntimeError):
    """Jars could not be resolved (no Maven, no network, no such version)."""


@dataclass(frozen=True)
class Artifact:
    """A Maven coordinate."""

    group: str
    artifact: str
    version: str

    @property
    def jar(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


@dataclass(frozen=True)
class Resolved:
    """Where the jars are, whether they were in the cache already, and how long it took."""

    directory: Path
    cached: bool
    seconds: float

    @property
    def jars(self) -> tuple[str, ...]:
        return tuple(sorted(str(p) for p in self.directory.glob("*.jar")))


def cache_root() -> Path:
    """``$STATIC_CONSUMER_CACHE_DIR`` or ``~/.cache/static-consumer`` (``$XDG_CACHE_HOME`` honoured)."""
    configured = os.environ.get("STATIC_CONSUMER_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "static-consumer"


def resolve(name: str, artifacts: Sequence[Artifact], keep: Sequence[str] | None = None) -> Resolved:
    """The jars of ``artifacts`` and their runtime dependencies (only those whose artifact id is in
    ``keep``, when given), in ``<cache>/<name>/jars``. Raises MavenError when Maven cannot resolve them."""
    started = time.monotonic()
    base = cache_root() / name
    target = base / "jars"

    def complete() -> bool:  # the marker of a finished resolution, and the jars it names
        return (base / ".complete").exists() and all((target / a.jar).exists() for a in artifacts)

    if complete():
        return Resolved(target, True, time.monotonic() - started)
    base.mkdir(parents=True, exist_ok=True)
    with open(base / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if complete():
            return Resolved(target, True, time.monotonic() - started)
        _run_maven(name, artifacts, keep, base, target)
        (base / ".complete").write_text(" ".join(a.jar for a in artifacts) + "\n")
    return Resolved(target, False, time.monotonic() - started)


def _run_maven(
    name: str, artifacts: Sequence[Artifact], keep: Sequence[str] | None, base: Path, target: Path
) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError("Maven (mvn) is not on PATH: it is needed to fetch jars from Maven Central")
    dependencies = "\n".join(_DEPENDENCY.format(**vars(a)) for a in artifacts)
    (base / "pom.xml").write_text(_POM.format(name=name, dependencies=dependencies))
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
    ]
    if keep is not None:
        cmd.append(f"-DincludeArtifactIds={','.join([*(a.artifact for a in artifacts), *keep])}")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise MavenError(f"Maven did not resolve {name} within {MAVEN_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # Maven colours its errors
        errors = [line for line in output.splitlines() if "ERROR" in line]
        raise MavenError(errors[0] if errors else f"mvn exited with {done.returncode}")
    missing = [a.jar for a in artifacts if not (target / a.jar).exists()]
    if missing:
        raise MavenError(f"Maven finished but {target} holds no {', '.join(missing)}")


__all__ = ["MAVEN_TIMEOUT_S", "Artifact", "MavenError", "Resolved", "cache_root", "resolve"]
