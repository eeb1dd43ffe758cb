"""Build the harness's Apache Kafka image locally, from Debian's packages and the pinned broker jars.

No registry image is pulled (none can be on the machines this repository's CI runs on). Two layers, each
tagged with a hash of what decides its content, so a build is done once and redone only when that changes:

- the base, ``static-consumer-kafka-base:<hash of build-base.sh>``: a minimal Debian root file system by
  debootstrap with Debian's Java 17 runtime, imported with ``docker import`` (``container/build-base.sh``);
- the broker, ``static-consumer-kafka:<kafka version>-<hash of the recipe>``: the jars the JVM harness
  resolves from Maven Central (:mod:`static_consumer_lab.brokers.classpath`, cached in
  ``~/.cache/static-consumer``) and ``container/kafka-run``, which turns ``KAFKA_*`` variables into
  ``server.properties`` as the official ``apache/kafka`` image does (``container/Dockerfile``).

The recipe hash covers every file of ``container/`` that goes into the image, the harness's
``log4j2.yaml`` and the jars besides Kafka's (``classpath.LOG4J_BINDING``); the version is
``STATIC_CONSUMER_KAFKA_VERSION`` or the pinned default. ``python -m static_consumer_lab.brokers.kafka_image
build`` builds (or finds) the image and prints its tag and how long that took; ``tag`` prints the tag without
building.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from static_consumer._base.maven import cache_root
from static_consumer_lab.brokers.classpath import (
    LOG4J_BINDING,
    HarnessError,
    kafka_version,
    resolve_classpath,
)

IMAGE = "static-consumer-kafka"
BASE_IMAGE = "static-consumer-kafka-base"
_BUILD_TIMEOUT_S = 1200.0  # debootstrap downloads ~100 MB of packages; a slow mirror takes minutes
_HASH_CHARS = 12


def _harness(source: Traversable | None = None) -> Traversable:
    """The harness's package directory (``source`` in tests: a copy to edit)."""
    return source or resources.files("static_consumer_lab")


def _recipe_file(name: str, source: Traversable | None = None) -> Traversable:
    return _harness(source).joinpath("container", name)


def _digest(parts: Sequence[tuple[str, bytes]]) -> str:
    digest = hashlib.sha256()
    for name, data in parts:  # the names too: moving content between files is a change
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:_HASH_CHARS]


def base_tag(source: Traversable | None = None) -> str:
    """The base image's tag: a hash of build-base.sh, the only input of that layer."""
    script = _recipe_file("build-base.sh", source).read_bytes()
    return f"{BASE_IMAGE}:{_digest([('build-base.sh', script)])}"


def recipe_hash(source: Traversable | None = None) -> str:
    """Hash of everything that decides the broker image but the Kafka version (which the tag names)."""
    harness = _harness(source)
    parts = [
        ("base", base_tag(source).encode()),
        ("Dockerfile", _recipe_file("Dockerfile", source).read_bytes()),
        ("kafka-run", _recipe_file("kafka-run", source).read_bytes()),
        ("log4j2.yaml", harness.joinpath("log4j2.yaml").read_bytes()),
        ("jars", f"{LOG4J_BINDING}".encode()),  # besides the Kafka version: the broker's log binding
    ]
    return _digest(parts)


def image_tag(version: str | None = None, source: Traversable | None = None) -> str:
    return f"{IMAGE}:{version or kafka_version()}-{recipe_hash(source)}"


def image_present(tag: str, timeout_s: float = 30.0) -> bool:
    try:
        done = subprocess.run(
            ["docker", "image", "inspect", "--format", "{{.Id}}", tag],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    seconds: float
    built_base: bool
    built_broker: bool

    def describe(self) -> str:
        if not (self.built_base or self.built_broker):
            return f"{self.tag}: already built (found in {self.seconds:.1f} s)"
        layers = " and ".join(
            name for name, built in (("base", self.built_base), ("broker", self.built_broker)) if built
        )
        return f"{self.tag}: built ({layers}) in {self.seconds:.1f} s"


def _run(cmd: Sequence[str], what: str, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=_BUILD_TIMEOUT_S, check=False, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"{what} did not finish within {_BUILD_TIMEOUT_S:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise HarnessError(f"{what} failed (exit {done.returncode}):\n{tail}")


def _build_base(tag: str) -> None:
    with resources.as_file(_recipe_file("build-base.sh")) as script:
        _run(["bash", str(script), tag], f"building the base image {tag} (debootstrap)")


def _build_broker(tag: str, version: str) -> None:
    libs = resolve_classpath(version).directory
    with tempfile.TemporaryDirectory(prefix="static-consumer-image-") as tmp:
        context = Path(tmp)
        shutil.copytree(libs, context / "libs")
        for name in ("Dockerfile", "kafka-run"):
            (context / name).write_bytes(_recipe_file(name).read_bytes())
        (context / "kafka-run").chmod(0o755)  # package data may have lost its mode bits
        (context / "log4j2.yaml").write_bytes(_harness().joinpath("log4j2.yaml").read_bytes())
        # The classic builder: the Dockerfile has no RUN step, and it needs no buildx plugin.
        env = {**os.environ, "DOCKER_BUILDKIT": "0"}
        cmd = ["docker", "build", "--quiet", "--build-arg", f"BASE={base_tag()}"]
        cmd += ["--build-arg", f"KAFKA_VERSION={version}", "-t", tag, str(context)]
        _run(cmd, f"building the broker image {tag}", env=env)


def build_image(version: str | None = None, progress: Callable[[str], None] | None = None) -> BuiltImage:
    """The broker image for ``version`` (default: the pinned one), built unless its tag exists.

    A file lock in the cache directory keeps parallel sessions from building it twice.
    """
    say = progress or (lambda _line: None)
    version = version or kafka_version()
    tag, base = image_tag(version), base_tag()
    began = time.monotonic()
    built_base = built_broker = False
    if not image_present(tag):
        cache_root().mkdir(parents=True, exist_ok=True)
        with open(cache_root() / ".image.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not image_present(tag):
                if not image_present(base):
                    say(f"building {base} from Debian's packages (debootstrap)")
                    _build_base(base)
                    built_base = True
                say(f"building {tag} on {base}")
                _build_broker(tag, version)
                built_broker = True
    return BuiltImage(tag, time.monotonic() - began, built_base, built_broker)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m static_consumer_lab.brokers.kafka_image", description=__doc__
    )
    parser.add_argument("command", choices=("build", "tag"))
    parser.add_argument(
        "--kafka-version", default=None, help="default: STATIC_CONSUMER_KAFKA_VERSION or pinned"
    )
    args = parser.parse_args(argv)
    if args.command == "tag":
        print(image_tag(args.kafka_version))
        return 0
    try:
        built = build_image(args.kafka_version, progress=lambda line: print(line, flush=True))
    except HarnessError as exc:
        print(f"kafka_image: {exc}", file=sys.stderr)
        return 1
    print(built.describe())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
