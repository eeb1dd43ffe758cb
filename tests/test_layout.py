"""The test tree collects as one pytest session: tests/ and integration/ have no __init__.py, so pytest
imports each file by its basename, and two files with one name abort collection of the whole run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_test_file_basenames_are_unique_across_suites() -> None:
    names = Counter(p.name for folder in ("tests", "integration") for p in (ROOT / folder).glob("test_*.py"))
    assert len(names) > 10, "the test folders were not found"
    clashes = sorted(name for name, count in names.items() if count > 1)
    assert clashes == [], f"same basename in tests/ and integration/: {clashes}"
