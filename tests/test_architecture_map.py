"""docs/architecture.md maps the code: every module of the two packages is named there, by its path."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAP = (ROOT / "docs" / "architecture.md").read_text()


def _modules() -> list[str]:
    names = [f"assignors/{p.name}" for p in (ROOT / "assignors").glob("*.py")]
    package = ROOT / "static_consumer"
    names += [str(p.relative_to(package)) for p in package.rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(names)


def test_every_module_is_on_the_architecture_map() -> None:
    missing = [name for name in _modules() if f"`{name}`" not in MAP]
    assert missing == [], f"docs/architecture.md does not mention {missing}"


def test_the_map_names_no_module_that_does_not_exist() -> None:
    import re

    named = {n for n in re.findall(r"`((?:[a-z_]+/)*[a-z_]+\.py)`", MAP) if not n.startswith("tests/")}
    existing = set(_modules())
    assert named - existing == set()
