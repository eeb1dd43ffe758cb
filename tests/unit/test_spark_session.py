"""Session defaults, connector version choice and the public surface of static_consumer.spark (no JVM)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import static_consumer.spark as spark_pkg
from static_consumer.spark import connector
from static_consumer.spark.session import default_driver_memory, local_conf, log4j2_config

GIB = 1024**3


def test_public_names() -> None:
    assert sorted(spark_pkg.__all__) == sorted(
        [
            "KAFKA_SCHEMA",
            "KEY_COLUMNS",
            "BatchFn",
            "BatchInfo",
            "BatchKey",
            "BatchLimits",
            "BatchProgress",
            "CheckpointError",
            "DeltaJars",
            "FailurePolicy",
            "Handoff",
            "KafkaConnector",
            "MicroBatchRunner",
            "OffsetRange",
            "RunSummary",
            "SinkConflictError",
            "SparkSessionStoppedError",
            "delta_conf",
            "records_to_table",
            "resolve_delta",
            "resolve_kafka_connector",
            "spark_session",
            "write_delta",
            "write_parquet",
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


@pytest.mark.parametrize("master", ["spark://master:7077", "k8s://https://api:6443", "yarn"])
def test_a_cluster_driver_keeps_sparks_own_address_unless_told(master: str) -> None:
    # Executors on other hosts connect back to the driver: 127.0.0.1 would be unreachable for them.
    conf = local_conf(driver_memory="1g", master=master)
    assert "spark.driver.host" not in conf and "spark.driver.bindAddress" not in conf
    told = local_conf(driver_memory="1g", master=master, driver_host="orders-0.orders.ns.svc")
    assert told["spark.driver.host"] == "orders-0.orders.ns.svc"
    assert told["spark.driver.bindAddress"] == "0.0.0.0"  # listen on the pod's interfaces
    bound = local_conf(driver_memory="1g", master=master, driver_host="10.1.2.3", bind_address="10.1.2.3")
    assert bound["spark.driver.bindAddress"] == "10.1.2.3"


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_a_local_driver_listens_on_loopback_only(master: str) -> None:
    conf = local_conf(driver_memory="1g", master=master)
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "127.0.0.1"


@pytest.mark.parametrize(
    ("delta", "spark", "artifacts"),
    [
        ("4.4.1", "4.2.0", ["delta-spark_4.2_2.13", "delta-spark_2.13"]),
        ("4.0.1", "4.0.0", ["delta-spark_2.13"]),  # before Delta 4.1 one artifact served every Spark
    ],
)
def test_delta_jars_are_named_for_the_spark_they_were_built_for(
    delta: str, spark: str, artifacts: list[str]
) -> None:
    from static_consumer.spark import delta as delta_module

    assert delta_module.artifacts(delta, spark, "2.13") == artifacts
    assert delta_module.patch_candidates("4.4.1") == ["4.4.1", "4.4.0"]


def test_delta_falls_back_to_an_earlier_patch_and_remembers_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from static_consumer._base import maven
    from static_consumer.spark import delta as delta_module

    monkeypatch.setenv("STATIC_CONSUMER_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("STATIC_CONSUMER_DELTA_VERSION", raising=False)
    monkeypatch.setattr(delta_module, "installed_spark", lambda: ("4.2.0", "2.13"))
    asked: list[str] = []

    def fake(name: str, artifacts: list[maven.Artifact], keep: list[str]) -> maven.Resolved:
        (wanted,) = artifacts
        asked.append(f"{wanted.artifact}:{wanted.version}")
        if wanted.version != "4.4.0" or wanted.artifact != "delta-spark_4.2_2.13":
            raise maven.MavenError("not found")
        jars = tmp_path / name
        jars.mkdir(exist_ok=True)
        (jars / wanted.jar).touch()
        return maven.Resolved(jars, False, 0.0)

    monkeypatch.setattr(maven, "resolve", fake)
    found = delta_module.resolve_delta("4.4.1")
    assert (found.version, found.artifact) == ("4.4.0", "delta-spark_4.2_2.13")
    assert asked == ["delta-spark_4.2_2.13:4.4.1", "delta-spark_2.13:4.4.1", "delta-spark_4.2_2.13:4.4.0"]
    asked.clear()
    assert delta_module.resolve_delta("4.4.1").version == "4.4.0"
    assert asked == ["delta-spark_4.2_2.13:4.4.0"]  # Maven is not asked again for what it lacked
    assert delta_module.delta_conf()["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


@pytest.mark.parametrize(("cores", "partitions"), [(1, "1"), (2, "2"), (16, "16"), (50, "50"), (96, "50")])
def test_delta_rebuilds_a_tables_state_in_one_task_per_core_at_most_deltas_50(
    cores: int, partitions: str
) -> None:
    from static_consumer.spark.delta import delta_conf

    assert delta_conf(cores)["spark.databricks.delta.snapshotPartitions"] == partitions


def test_delta_conf_refuses_no_cores() -> None:
    from static_consumer.spark.delta import delta_conf

    with pytest.raises(ValueError, match="at least 1"):
        delta_conf(0)


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

    from static_consumer._base.errors import ConfigurationError
    from static_consumer.spark import spark_session

    def missing(self: object) -> None:
        raise ImportError("Pandas >= 2.2.0 must be installed")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", missing)
    with pytest.raises(ConfigurationError, match=r"static-consumer\[spark-connect\]"):
        spark_session("sc://spark-connect:15002")


def _options_of_the_built_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """getOrCreate() returns the builder's options instead of starting Spark."""
    from pyspark.sql.session import SparkSession

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", lambda self: dict(self._options))


def test_spark_remote_in_the_environment_gives_a_connect_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The StatefulSet of docs/spark.md sets only SPARK_REMOTE: spark_session() connects there, as
    PySpark's own builder does, instead of setting a master next to it (PySpark refuses that pair)."""
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql.session import SparkSession

    from static_consumer.spark import spark_session

    _options_of_the_built_session(monkeypatch)
    monkeypatch.setenv("SPARK_REMOTE", "sc://spark-connect:15002")
    with pytest.raises(PySparkRuntimeError, match="CANNOT_CONFIGURE_SPARK_CONNECT_MASTER"):
        SparkSession.builder.master("local[*]")  # what spark_session() used to do
    options: Any = spark_session()
    assert options["spark.remote"] == "sc://spark-connect:15002" and "spark.master" not in options
    options = spark_session("sc://other:15002")  # an explicit remote wins
    assert options["spark.remote"] == "sc://other:15002"


def test_spark_remote_next_to_an_explicit_master_is_a_configuration_error_without_the_token(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from static_consumer._base.errors import ConfigurationError
    from static_consumer.spark import spark_session

    _options_of_the_built_session(monkeypatch)
    env = {"SPARK_REMOTE": "sc://spark-connect:15002/;token=s3cr3t-bearer;user_id=bridge"}
    with caplog.at_level(logging.DEBUG, logger="static_consumer"):
        options: Any = spark_session(env=env)
    assert options["spark.remote"] == env["SPARK_REMOTE"]  # the token goes to Spark, not to the log
    assert "sc://spark-connect:15002/" in caplog.text and "s3cr3t" not in caplog.text
    with pytest.raises(ConfigurationError, match="Unset SPARK_REMOTE or leave master out") as raised:
        spark_session(master="spark://m:7077", env=env)
    assert "s3cr3t-bearer" not in str(raised.value) and "sc://spark-connect:15002/" in str(raised.value)


def test_without_spark_remote_the_session_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    from static_consumer.spark import spark_session

    _options_of_the_built_session(monkeypatch)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    options: Any = spark_session(driver_memory="1g", env={"SPARK_REMOTE": ""})
    assert options["spark.master"] == "local[*]" and "spark.remote" not in options
    assert options["spark.driver.host"] == "127.0.0.1"
    options = spark_session(master="spark://m:7077", driver_memory="1g", env={})
    assert options["spark.master"] == "spark://m:7077"
