"""Session defaults, connector version choice and the public surface of static_consumer.spark (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

import static_consumer.spark as spark_pkg
from static_consumer.spark import connector
from static_consumer.spark.session import default_driver_memory, local_conf, log4j2_config

GIB = 1024**3


def test_public_names() -> None:
    assert sorted(spark_pkg.__all__) == sorted(
        [
            "KAFKA_SCHEMA",
            "BatchFn",
            "BatchInfo",
            "BatchLimits",
            "FailurePolicy",
            "Handoff",
            "KafkaConnector",
            "MicroBatchRunner",
            "OffsetRange",
            "RunSummary",
            "records_to_table",
            "resolve_kafka_connector",
            "spark_session",
        ]
    )
    for name in spark_pkg.__all__:
        assert getattr(spark_pkg, name) is not None


@pytest.mark.parametrize(
    ("available", "expected"),
    [(64 * GIB, "8g"), (8 * GIB, "4g"), (3 * GIB, "1536m"), (1 * GIB, "1g"), (None, "2g")],
)
def test_driver_memory_is_half_the_available_memory_within_1_and_8_gib(
    available: int | None, expected: str
) -> None:
    assert default_driver_memory(available) == expected


def test_local_sessions_get_memory_quiet_logs_and_jars() -> None:
    conf = local_conf(driver_memory="3g", jars=["/a.jar", "/b.jar"])
    assert conf["spark.driver.memory"] == "3g"
    assert conf["spark.jars"] == "/a.jar,/b.jar"
    assert conf["spark.ui.showConsoleProgress"] == "false"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.sql.execution.arrow.localRelationThreshold"] == "0"  # tables go to executors
    assert conf["spark.driver.extraJavaOptions"] == f"-Dlog4j2.configurationFile={log4j2_config().as_uri()}"
    assert "rootLogger.level = warn" in log4j2_config().read_text()  # shipped with the package


def test_loud_sessions_keep_sparks_own_logging() -> None:
    conf = local_conf(driver_memory="1g", quiet=False)
    assert "spark.driver.extraJavaOptions" not in conf and "spark.ui.showConsoleProgress" not in conf


@pytest.mark.parametrize(
    ("spark", "candidates"),
    [
        ("4.3.0", ["4.3.0", "4.2.0", "4.1.0", "4.0.0"]),
        ("4.0.2", ["4.0.2", "4.0.0"]),
        ("4.1.0", ["4.1.0", "4.0.0"]),
        ("5.0.0-preview1", ["5.0.0-preview1", "5.0.0"]),
    ],
)
def test_connector_versions_try_the_exact_release_first(spark: str, candidates: list[str]) -> None:
    assert connector.candidate_versions(spark) == candidates


def test_installed_spark_version_and_scala_come_from_the_wheel() -> None:
    import pyspark

    version, scala = connector.installed_spark()
    assert version == pyspark.__version__
    assert scala == "2.13"


def test_connector_falls_back_and_remembers_the_choice(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STATIC_CONSUMER_SPARK_KAFKA_VERSION", raising=False)
    asked: list[str] = []

    def fake_resolve(version: str, scala: str) -> tuple[tuple[str, ...], bool]:
        asked.append(version)
        if version != "4.1.0":
            raise connector.ConnectorError(f"{version} not found")
        return (f"/jars/spark-sql-kafka-0-10_{scala}-{version}.jar",), False

    monkeypatch.setattr(connector, "_resolve", fake_resolve)
    first = connector.resolve_kafka_connector("4.3.0")
    assert (first.version, first.exact, asked) == ("4.1.0", False, ["4.3.0", "4.2.0", "4.1.0"])
    asked.clear()
    assert connector.resolve_kafka_connector("4.3.0").version == "4.1.0"
    assert asked == ["4.1.0"]  # Maven is not asked again for versions it lacked


def test_a_pinned_connector_version_is_the_only_one_tried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("STATIC_CONSUMER_SPARK_KAFKA_VERSION", "4.0.0")

    def missing(version: str, scala: str) -> tuple[tuple[str, ...], bool]:
        raise connector.ConnectorError(f"{version} not found")

    monkeypatch.setattr(connector, "_resolve", missing)
    with pytest.raises(connector.ConnectorError, match="4.0.0: 4.0.0 not found"):
        connector.resolve_kafka_connector("4.3.0")


def test_spark_connect_without_its_packages_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql.session import SparkSession

    from static_consumer.errors import ConfigurationError
    from static_consumer.spark import spark_session

    def missing(self: object) -> None:
        raise ImportError("Pandas >= 2.2.0 must be installed")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", missing)
    with pytest.raises(ConfigurationError, match=r"static-consumer\[spark-connect\]"):
        spark_session("sc://spark-connect:15002")
