"""The examples of README.md and docs/ that talk to a broker, run as written against the real one.

The convention is in ``tests/docs/doc_blocks.py``: each block is a complete program, started in a
process of its own with a pod's environment; ``"orders"`` (the group and topic of the examples) becomes a
fresh name whose topic exists, and ``localhost:9092`` the broker's address. A block marked
``until-sigterm`` gets SIGTERM once its group has a member and must exit 0, as a pod's main does on a
rolling deploy; any other block must end by itself with exit 0.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from static_consumer_lab.brokers import KafkaCluster
from static_consumer_lab.brokers.containers import docker_engine_reachable
from static_consumer_lab.brokers.kafka_ops import create_topic, describe_consumer_group, produce

_HELPERS = Path(__file__).resolve().parents[1] / "tests" / "docs" / "doc_blocks.py"
_spec = importlib.util.spec_from_file_location("doc_blocks", _HELPERS)
assert _spec is not None and _spec.loader is not None
doc_blocks: Any = importlib.util.module_from_spec(_spec)
sys.modules["doc_blocks"] = doc_blocks
_spec.loader.exec_module(doc_blocks)

BROKER_BLOCKS = [b for b in doc_blocks.blocks() if "broker" in b.flags and "spark" not in b.flags]
SPARK_BLOCKS = [b for b in doc_blocks.blocks() if "spark" in b.flags]
PYTEST_BLOCKS = [b for b in doc_blocks.blocks() if "pytest" in b.flags and "container" not in b.flags]
CONTAINER_BLOCKS = [b for b in doc_blocks.blocks() if "pytest" in b.flags and "container" in b.flags]

pytestmark = pytest.mark.integration


def _has_member(bootstrap: str, group: str) -> bool:
    try:
        return bool(describe_consumer_group(bootstrap, group, ready_within_s=5.0).members)
    except Exception:  # noqa: BLE001 - not there yet: the group appears with its first join
        return False


def _run(block: Any, cwd: Path, cluster: KafkaCluster, name: str) -> tuple[int, str]:
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, name, 2)
    produce(bootstrap, name, 20)
    env = doc_blocks.environment(bootstrap, name, name)
    block = doc_blocks.Block(block.page, block.line, block.code.replace('"orders"', f'"{name}"'), block.flags)
    if "until-sigterm" not in block.flags:
        result: tuple[int, str] = doc_blocks.run(block, cwd, bootstrap, env, timeout_s=240)
        return result
    process = doc_blocks.start(block, cwd, bootstrap, env)
    deadline = time.monotonic() + 120
    while process.poll() is None and not _has_member(bootstrap, name) and time.monotonic() < deadline:
        time.sleep(0.5)
    if process.poll() is not None:
        out = process.communicate()[0]
        return process.returncode, out + "\n[ended before SIGTERM]"
    process.send_signal(signal.SIGTERM)
    try:
        out = process.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        return -9, process.communicate()[0] + "\n[no exit within 120 s of SIGTERM]"
    return process.returncode, out


@pytest.mark.parametrize("block", BROKER_BLOCKS, ids=lambda b: b.name)
def test_the_example_runs_against_the_broker(
    block: Any, kafka_cluster: KafkaCluster, kafka_group_id_factory: Any, tmp_path: Path
) -> None:
    code, out = _run(block, tmp_path, kafka_cluster, kafka_group_id_factory("orders"))
    assert code == 0, f"{block.name} exited {code}:\n{out[-4000:]}"


@pytest.mark.parametrize("block", SPARK_BLOCKS, ids=lambda b: b.name)
def test_the_spark_example_runs(
    block: Any, kafka_cluster: KafkaCluster, kafka_group_id_factory: Any, tmp_path: Path
) -> None:
    (tmp_path / "membership.jsonl").write_text("")  # what the observability page's event log wrote
    code, out = _run(block, tmp_path, kafka_cluster, kafka_group_id_factory("orders"))
    assert code == 0, f"{block.name} exited {code}:\n{out[-4000:]}"


def _pytest_example(block: Any, kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    """Run ``block`` as a test module of its own with the lab's plugin, on this run's broker."""
    script = tmp_path / f"test_example_{block.line}.py"
    script.write_text(block.code, encoding="utf-8")
    env = doc_blocks.environment(kafka_cluster.bootstrap_servers, "orders", "orders")
    env["KAFKA_BOOTSTRAP_SERVERS"] = kafka_cluster.bootstrap_servers
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "static_consumer_lab.plugin",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rs",
            script.name,
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"{block.name}:\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    assert " passed" in result.stdout or " skipped" in result.stdout, result.stdout[-2000:]


@pytest.mark.parametrize("block", PYTEST_BLOCKS, ids=lambda b: b.name)
def test_the_pytest_example_passes_with_the_plugin(
    block: Any, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    _pytest_example(block, kafka_cluster, tmp_path)


@pytest.mark.parametrize("block", CONTAINER_BLOCKS, ids=lambda b: f"{b.name}-container")
def test_the_container_example_passes_with_the_plugin(
    block: Any, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """Part of ``pytest -k container``: like the container variants of the suite, it needs an engine."""
    if not docker_engine_reachable():
        pytest.skip("no container engine answers")
    _pytest_example(block, kafka_cluster, tmp_path)
