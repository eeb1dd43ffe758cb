"""What users install: the runtime wheel holds the library only; the harness, its pytest plugin and the
demo come with the second distribution of this repository (static-consumer-lab, in lab/), which the
``[testing]`` and ``[demo]`` extras install. Both wheels are built here from their pyproject.toml."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest

import static_consumer

ROOT = Path(__file__).resolve().parents[2]
Wheels = dict[str, zipfile.ZipFile]  # distribution (as in the file name) -> its wheel


# What a checkout holds besides the sources: never part of a wheel built from a clean clone.
_NOT_SOURCES = shutil.ignore_patterns("__pycache__", "*.so", "build", "*.egg-info", ".*")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    """Both wheels, built from a copy of the sources (setuptools builds in the source tree)."""
    src, out = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("wheels")
    for name in (
        "pyproject.toml",
        "setup.py",
        "README.md",
        "LICENSE",
        "lab/pyproject.toml",
        "lab/README.md",
        "lab/LICENSE",
    ):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    for package in ("static_consumer", "assignors", "lab/static_consumer_lab"):
        shutil.copytree(ROOT / package, src / package, ignore=_NOT_SOURCES)
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out]
    subprocess.run([*pip_wheel, src, src / "lab"], check=True, timeout=600, capture_output=True)
    found = {path.name.split("-")[0]: zipfile.ZipFile(path) for path in out.glob("*.whl")}
    assert set(found) == {"static_consumer", "static_consumer_lab"}, found
    return found


def _files(wheel: zipfile.ZipFile) -> list[str]:
    return [name for name in wheel.namelist() if ".dist-info/" not in name]


def _requires(wheel: zipfile.ZipFile) -> list[str]:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return Parser().parsestr(wheel.read(name).decode()).get_all("Requires-Dist") or []


def test_the_runtime_wheel_holds_the_library_and_no_harness_or_demo(wheels: Wheels) -> None:
    files = _files(wheels["static_consumer"])
    assert "static_consumer/_core/consumer.py" in files and "assignors/__init__.py" in files
    assert {"static_consumer/py.typed", "static_consumer/_base/records/native.pyi"} <= set(files)
    assert "static_consumer/spark/log4j2.properties" in files
    top = {name.split("/")[0] for name in files}
    assert top == {"static_consumer", "assignors"}
    moved = [n for n in files if n.startswith(("static_consumer/testing/", "static_consumer/demo/"))]
    assert moved == []
    assert not [n for n in files if n.endswith((".xml", ".yaml", ".yml"))]  # the harness's broker files


def test_the_lab_wheel_holds_the_harness_its_broker_files_and_the_demo(wheels: Wheels) -> None:
    files = set(_files(wheels["static_consumer_lab"]))
    expected = {
        "static_consumer_lab/plugin.py",
        "static_consumer_lab/brokers/jvm.py",
        "static_consumer_lab/children/child.py",
        "static_consumer_lab/log4j2.yaml",
        "static_consumer_lab/container/docker-compose.yml",
        "static_consumer_lab/container/Dockerfile",
        "static_consumer_lab/container/kafka-run",
        "static_consumer_lab/container/build-base.sh",
        "static_consumer_lab/py.typed",
        "static_consumer_lab/demo/main.py",
    }
    assert expected <= files, sorted(expected - files)
    assert {name.split("/")[0] for name in files} == {"static_consumer_lab"}


def _metadata(wheel: zipfile.ZipFile) -> Message:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return Parser().parsestr(wheel.read(name).decode())


def test_the_testing_and_demo_extras_install_the_lab_of_the_same_version(wheels: Wheels) -> None:
    version = static_consumer.__version__
    requires = _requires(wheels["static_consumer"])
    assert f'static-consumer-lab=={version}; extra == "testing"' in requires
    assert f'static-consumer-lab[demo]=={version}; extra == "demo"' in requires
    lab = _requires(wheels["static_consumer_lab"])
    assert f"static-consumer=={version}" in lab and 'matplotlib>=3.8; extra == "demo"' in lab
    assert {_metadata(w)["Version"] for w in wheels.values()} == {version}


def test_both_wheels_carry_the_license_and_fitting_classifiers(wheels: Wheels) -> None:
    for wheel in wheels.values():
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel.namelist()), wheel.filename
        assert _metadata(wheel)["License-Expression"] == "Apache-2.0"
    runtime = _metadata(wheels["static_consumer"]).get_all("Classifier") or []
    lab = _metadata(wheels["static_consumer_lab"]).get_all("Classifier") or []
    assert "Framework :: Pytest" not in runtime and "Framework :: Pytest" in lab
