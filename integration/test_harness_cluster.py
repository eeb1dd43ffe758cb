"""The harness's first run: Maven resolves the broker's classpath into an empty cache and a broker starts.

That the harness runs a 3-node KRaft cluster and restarts its brokers (clean and kill -9) without losing
an acknowledged record is what test_broker_faults.py does on its 3-node cluster (a roll of every broker,
a coordinator killed), with consumers reading every acknowledged record back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from static_consumer_lab.brokers import JvmKafkaCluster, resolve_classpath
from static_consumer_lab.brokers.kafka_ops import metadata


def test_broker_classpath_resolves_with_maven_into_an_empty_cache_and_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first-run path: `mvn dependency:copy-dependencies` into an empty cache, then a broker from it."""
    monkeypatch.setenv("STATIC_CONSUMER_CACHE_DIR", str(tmp_path / "cache"))
    cold = resolve_classpath()
    warm = resolve_classpath()
    assert not cold.cached and warm.cached
    assert (cold.directory / f"kafka_2.13-{cold.version}.jar").exists()
    with JvmKafkaCluster(1) as cluster:
        assert set(metadata(cluster.bootstrap_servers, timeout_s=10).brokers) == {1}
        started = cluster.start_seconds
    with capsys.disabled():
        print(
            f"\n[static_consumer] first run: Kafka {cold.version} classpath resolved by Maven in "
            f"{cold.resolve_seconds:.1f} s into an empty cache, broker start-up {started:.1f} s; "
            f"cached resolution {warm.resolve_seconds:.3f} s"
        )
