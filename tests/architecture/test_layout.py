"""The test tree collects as one pytest session: tests/ (grouped in unit/, lab/, architecture/, docs/) and
integration/ have no __init__.py, so pytest imports each file by its basename, and two files with one name
abort collection of the whole run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_test_file_basenames_are_unique_across_suites() -> None:
    names = Counter(p.name for folder in ("tests", "integration") for p in (ROOT / folder).rglob("test_*.py"))
    assert len(names) > 10, "the test folders were not found"
    clashes = sorted(name for name, count in names.items() if count > 1)
    assert clashes == [], f"same basename in tests/ and integration/: {clashes}"


def test_the_unit_tests_are_grouped_by_what_they_check() -> None:
    groups = sorted(p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert groups == ["architecture", "docs", "lab", "unit"]
    assert not list((ROOT / "tests").glob("test_*.py")), "a test file outside its group"
