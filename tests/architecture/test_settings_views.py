"""The lower layers read the settings through narrow views: a Protocol naming the fields they need, which
``ConsumerSettings`` satisfies. None of them names the whole settings model in a signature, so a reader
sees at each signature which settings reach it (and mypy holds the code to it)."""

from __future__ import annotations

import ast
from pathlib import Path

import static_consumer
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._views import Cluster

LIBRARY = Path(static_consumer.__file__).parent
NARROW = ("_security", "_kafka", "_core/gate.py", "_core/policy.py", "_core/seam.py", "_core/seams.py")


def _annotations_naming_the_settings(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if "ConsumerSettings" in ast.unparse(node.annotation):
                found.append(f"{path.relative_to(LIBRARY)}:{node.lineno} {node.arg}")
    return found


def test_the_lower_layers_take_a_view_of_the_settings_never_the_whole_model() -> None:
    paths = [
        p
        for unit in NARROW
        for p in ([LIBRARY / unit] if unit.endswith(".py") else (LIBRARY / unit).rglob("*.py"))
    ]
    assert len(paths) > 15
    assert [f for p in paths for f in _annotations_naming_the_settings(p)] == []


def test_the_settings_are_a_cluster() -> None:
    settings: Cluster = ConsumerSettings(bootstrap_servers="k:9092", group_id="g", topics=("t",))
    assert settings.group_id == "g" and settings.connect_timeout_s > 0
