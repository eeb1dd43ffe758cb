"""The container recipe without an engine: image tags, kafka-run's KAFKA_* translation, the compose file."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest
import yaml

from static_consumer_lab.brokers.containers import group_values
from static_consumer_lab.brokers.jvm import PROFILES, Profile
from static_consumer_lab.brokers.kafka_image import base_tag, image_tag, recipe_hash

HARNESS = Path(str(resources.files("static_consumer_lab")))
KAFKA_RUN = HARNESS / "container" / "kafka-run"


def _copy_harness(tmp_path: Path) -> Path:
    copy = tmp_path / "testing"
    shutil.copytree(HARNESS / "container", copy / "container")
    shutil.copy(HARNESS / "log4j2.yaml", copy / "log4j2.yaml")
    return copy


def test_the_tag_names_the_kafka_version_and_the_recipe_hash() -> None:
    assert re.fullmatch(r"static-consumer-kafka:4\.3\.1-[0-9a-f]{12}", image_tag("4.3.1"))
    assert image_tag("4.3.1") == image_tag("4.3.1")
    assert image_tag("4.4.0") == image_tag("4.3.1").replace("4.3.1", "4.4.0")


@pytest.mark.parametrize("edited", ["container/kafka-run", "container/Dockerfile", "log4j2.yaml"])
def test_editing_the_recipe_changes_the_broker_tag_but_not_the_base(tmp_path: Path, edited: str) -> None:
    copy = _copy_harness(tmp_path)
    assert (recipe_hash(copy), base_tag(copy)) == (recipe_hash(), base_tag())  # a copy is the same recipe
    with open(copy / edited, "a") as f:
        f.write("\n")
    assert recipe_hash(copy) != recipe_hash()
    assert base_tag(copy) == base_tag()


def test_editing_the_base_recipe_changes_both_tags(tmp_path: Path) -> None:
    copy = _copy_harness(tmp_path)
    script = copy / "container" / "build-base.sh"
    script.write_text(script.read_text().replace("openjdk-17-jre-headless", "openjdk-21-jre-headless"))
    assert base_tag(copy) != base_tag()
    assert recipe_hash(copy) != recipe_hash()


def _print_config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(KAFKA_RUN), "--print-config"],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def _properties(env: dict[str, str]) -> dict[str, str]:
    done = _print_config(env)
    assert done.returncode == 0, done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines())


def test_kafka_variables_become_properties_as_in_the_official_image() -> None:
    props = _properties(
        {
            "KAFKA_LISTENERS": "PLAINTEXT://127.0.0.1:1",
            "KAFKA_LOG_RETENTION_MS": "5",  # _ -> .
            "KAFKA_ABC__DEF": "2",  # __ -> _
            "KAFKA_ABC___DEF": "3",  # ___ -> -
            "KAFKA_HEAP_OPTS": "-Xmx1g",  # the launcher's own, not a property
            "KAFKA_OPTS": "-Dx=y",
            "KAFKA_VERSION": "4.3.1",
            "OTHER": "x",
        }
    )
    assert props == {
        "listeners": "PLAINTEXT://127.0.0.1:1",
        "log.retention.ms": "5",
        "abc_def": "2",
        "abc-def": "3",
        "log.dirs": "/var/lib/kafka/data",
    }


def test_without_kafka_variables_a_single_kraft_node_on_loopback() -> None:
    props = _properties({})
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["offsets.topic.replication.factor"] == "1"


def test_properties_without_listeners_are_refused_with_a_message() -> None:
    done = _print_config({"KAFKA_NODE_ID": "1"})
    assert done.returncode == 2 and "set KAFKA_LISTENERS" in done.stderr


@pytest.mark.parametrize("profile", ["stock", "lab"])
def test_the_compose_service_is_on_the_host_network_on_loopback_with_the_jvm_harness_settings(
    profile: Profile,
) -> None:
    compose = yaml.safe_load((HARNESS / "container" / "docker-compose.yml").read_text())
    service = compose["services"]["kafka"]
    assert service["network_mode"] == "host"
    assert "ports" not in service and "networks" not in service and "networks" not in compose
    values = {"HARNESS_KAFKA_PORT": "39092", "HARNESS_CONTROLLER_PORT": "39093", **group_values(profile)}

    def substituted(value: object) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), str(value))

    env = {k: substituted(v) for k, v in service["environment"].items() if k.startswith("KAFKA_")}
    props = _properties(env)
    assert {k: props[k] for k in PROFILES[profile]} == PROFILES[profile]
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:39092"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:39093"
