"""The default backend choice on the real machine, part of ``pytest -k container``.

Before: with a Docker engine answering and no compose plugin, the harness ran ``docker compose -f ...``
anyway and every broker fixture (and ``static-consumer demo``) crashed with ``returned 125: unknown
shorthand flag: 'f'``. Now the default falls back to the JVM harness with one warning line, and picks
the container only when the engine, a compose command and the image are all there. These ask the real
engine; only compose is hidden, by a ``docker`` first on PATH that refuses ``compose`` and hands
everything else to the real client, and a ``docker-compose`` that is not found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from static_consumer_lab.brokers.backends import BackendChoice, select_backend
from static_consumer_lab.brokers.containers import docker_engine_reachable, docker_status
from static_consumer_lab.brokers.kafka_image import build_image, image_tag

SESSION_TEST = """
def test_the_default_broker_answers(kafka_cluster):
    assert kafka_cluster.backend == "jvm"
"""


@pytest.fixture(autouse=True)
def _engine() -> None:
    if not docker_engine_reachable():
        pytest.skip("no Docker engine answers `docker info`")


def _without_compose(tmp_path: Path) -> dict[str, str]:
    """The environment of a machine whose docker client has no compose plugin and no docker-compose:
    first on PATH, a ``docker`` that refuses ``compose`` and a ``docker-compose`` that is not found."""
    real = shutil.which("docker")
    assert real is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    refusals = {
        "docker": 'if [ "$1" = compose ]; then echo "docker: unknown command: compose" >&2; exit 1; fi\n'
        f'exec {real} "$@"\n',
        "docker-compose": 'echo "docker-compose: command not found" >&2; exit 127\n',
    }
    for name, body in refusals.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    env = {
        k: v for k, v in os.environ.items() if k not in ("STATIC_CONSUMER_BROKER", "KAFKA_BOOTSTRAP_SERVERS")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    return env


def test_container_missing_compose_falls_back_to_the_jvm_with_one_warning_line(tmp_path: Path) -> None:
    env = _without_compose(tmp_path)
    session = tmp_path / "session"
    session.mkdir()
    (session / "test_probe.py").write_text(SESSION_TEST)
    (session / "pytest.ini").write_text("[pytest]\n")  # rootdir here: none of this project's addopts
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "static_consumer_lab.plugin",
        ],
        cwd=session,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "returned 125" not in out
    warnings = [line for line in out.splitlines() if "warning:" in line]
    # Printed as it happens and again in the summary: one line each time, the same line.
    assert len(set(warnings)) == 1, warnings
    assert "a Docker engine answers but no compose command answers" in warnings[0]
    assert "using the JVM harness" in warnings[0]
    assert "via jvm" in out


def test_container_image_missing_falls_back_to_the_jvm_naming_the_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STATIC_CONSUMER_BROKER", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setenv("STATIC_CONSUMER_KAFKA_VERSION", "0.0.1-never-built")  # a tag no build made
    choice = select_backend(os.environ, docker_status)
    assert choice.backend == "jvm"
    assert choice.warning is not None
    assert image_tag() in choice.warning and "kafka_image build" in choice.warning


def test_container_engine_compose_and_image_make_the_container_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STATIC_CONSUMER_BROKER", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    build_image()  # CI built it before the tests; found in well under a second then
    assert select_backend(os.environ, docker_status) == BackendChoice("docker")
