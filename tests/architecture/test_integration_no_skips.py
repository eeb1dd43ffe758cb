"""integration/conftest.py fails a CI run that skipped anything: a test skipped while it runs, and a
module skipped while it is collected (importorskip at module level reports no test at all). Proven on
a temporary suite with the real conftest, in a pytest subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[2] / "integration" / "conftest.py"

MODULES = {
    "test_runs.py": "def test_runs():\n    assert True\n",
    "test_importorskip.py": (
        "import pytest\n\npytest.importorskip('a_module_that_is_not_installed')\n\n"
        "def test_never_collected():\n    assert True\n"
    ),
    "test_module_skip.py": (
        "import pytest\n\npytest.skip('no broker here', allow_module_level=True)\n\n"
        "def test_never_collected():\n    assert True\n"
    ),
    "test_skips_at_run_time.py": ("import pytest\n\ndef test_skips():\n    pytest.skip('no broker here')\n"),
}


def _suite(tmp_path: Path, *modules: str) -> Path:
    suite = tmp_path / "integration"
    suite.mkdir()
    shutil.copy(CONFTEST, suite / "conftest.py")
    for name in ("test_runs.py", *modules):
        (suite / name).write_text(MODULES[name])
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    integration\n    timeout\n")
    return suite


def _pytest(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "integration", "-q", "-p", "no:cacheprovider", "-p", "no:timeout"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("module", ["test_importorskip.py", "test_module_skip.py"])
def test_a_module_skipped_at_collection_fails_the_ci_run(tmp_path: Path, module: str) -> None:
    _suite(tmp_path, module)
    run = _pytest(tmp_path, "true")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "CI: 1 integration test(s) skipped" in run.stdout and module in run.stdout
    assert "integration: 1 passed, 0 failed, 1 skipped" in run.stdout

    outside_ci = _pytest(tmp_path, None)  # a developer without the broker's prerequisites may skip
    assert outside_ci.returncode == pytest.ExitCode.OK, outside_ci.stdout + outside_ci.stderr


def test_a_test_skipped_at_run_time_fails_the_ci_run_and_a_clean_suite_passes(tmp_path: Path) -> None:
    _suite(tmp_path, "test_skips_at_run_time.py")
    run = _pytest(tmp_path, "true")
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    assert "test_skips_at_run_time.py::test_skips" in run.stdout

    (tmp_path / "integration" / "test_skips_at_run_time.py").unlink()
    clean = _pytest(tmp_path, "true")
    assert clean.returncode == pytest.ExitCode.OK, clean.stdout + clean.stderr
    assert "integration: 1 passed, 0 failed, 0 skipped" in clean.stdout
