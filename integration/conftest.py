"""Integration tests run against a real Apache Kafka broker from the static_consumer pytest plugin.

The plugin (``-p static_consumer_lab.plugin`` in pyproject.toml's addopts) provides the fixtures;
nothing here may skip: if the broker cannot start, every test errors and CI fails with the broker log
tail. Under CI=true a skipped test, or a module skipped while being collected, fails the run
(tests/test_integration_no_skips.py runs this file on a temporary suite to prove both).
"""

from __future__ import annotations

import os

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.timeout(600))


_skipped: list[str] = []
_outcomes: dict[str, int] = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A module that skips itself while being collected (a module-level pytest.importorskip, or
    # pytest.skip(allow_module_level=True)) reports no test at all: only its collection report says so.
    if report.skipped and "integration" in report.nodeid:
        _skipped.append(report.nodeid)
        _outcomes["skipped"] += 1


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "integration" not in report.nodeid:
        return
    if report.skipped:
        _skipped.append(report.nodeid)
        _outcomes["skipped"] += 1
    elif report.failed:
        _outcomes["failed"] += 1
    elif report.when == "call":
        _outcomes["passed"] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.section("integration suite (real Apache Kafka broker)")
    passed, failed, skipped = _outcomes["passed"], _outcomes["failed"], _outcomes["skipped"]
    terminalreporter.write_line(f"integration: {passed} passed, {failed} failed, {skipped} skipped")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # In CI the integration suite must run, not skip: a skipped real-broker test (or module) fails the run.
    if _skipped and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        print(f"\nCI: {len(_skipped)} integration test(s) skipped, which CI does not allow: {_skipped}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
