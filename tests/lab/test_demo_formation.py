"""The demo's formation step without a broker: a member that says ``ready`` lets the next step start, and
a member that exits first (a static member whose capability probe timed out exits 75) ends the run with
its exit code and its stderr instead of a group that never settles."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from static_consumer_lab.demo.runner import _wait_ready


class _Proc:
    """The two things ``_wait_ready`` reads of a ConsumerProcess: its events and its stderr."""

    name = "demo-3#1"

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float, what: str) -> Any:
        found = [e for e in self.events if predicate(e)]
        if not found:
            raise AssertionError(f"{self.name}: no {what} within {timeout_s} s")
        return found[0]

    def stderr_tail(self) -> str:
        return "BrokerUnavailableError: could not read broker capabilities within 10s"


def test_a_member_that_said_ready_passes() -> None:
    _wait_ready(_Proc([{"kind": "ready"}, {"kind": "exit", "code": 0}]))


def test_a_member_that_exited_before_ready_fails_the_run_with_its_code_and_stderr() -> None:
    with pytest.raises(RuntimeError, match=r"demo-3#1 exited 75 while forming\n.*capabilities"):
        _wait_ready(_Proc([{"kind": "error"}, {"kind": "exit", "code": 75}]))


def test_a_member_that_never_said_either_times_out() -> None:
    with pytest.raises(AssertionError, match="no ready"):
        _wait_ready(_Proc([{"kind": "held"}]))
