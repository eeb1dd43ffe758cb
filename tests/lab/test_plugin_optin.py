"""The pytest plugin is opt-in: installing the library registers nothing with other projects' pytest."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

PROBE_TEST = """
import sys

def test_static_consumer_not_loaded():
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("static_consumer", "static_consumer_lab"))
    assert loaded == [], loaded
"""

# Enabled, the plugin loads its package (whose names load lazily) and itself: not the library, no Kafka
# client, none of the harness, until a fixture that needs them runs.
FIXTURE_TEST = """
import sys

def test_fixture_is_there(kafka_group_id_factory):
    assert kafka_group_id_factory("g").startswith("g-")
    ours = ("static_consumer", "static_consumer_lab", "confluent_kafka", "kafka", "pydantic")
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ours)
    assert loaded == ["static_consumer_lab", "static_consumer_lab.plugin"], loaded
"""


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_probe.py").write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # rootdir here: none of this project's addopts
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_neither_distribution_registers_a_pytest11_entry_point() -> None:
    for name in ("static-consumer", "static-consumer-lab"):
        entry_points = metadata.distribution(name).entry_points
        assert [ep for ep in entry_points if ep.group == "pytest11"] == [], name


def test_a_pytest_session_that_does_not_ask_for_it_never_imports_the_library(tmp_path: Path) -> None:
    result = _pytest(tmp_path, PROBE_TEST)
    assert result.returncode == 0, result.stdout + result.stderr


def test_enabling_it_gives_the_fixtures_without_importing_the_library_or_the_harness(tmp_path: Path) -> None:
    result = _pytest(tmp_path, FIXTURE_TEST, "-p", "static_consumer_lab.plugin")
    assert result.returncode == 0, result.stdout + result.stderr
    # Loading the plugin starts and registers nothing.
    assert "static_consumer: Kafka brokers" not in result.stdout
