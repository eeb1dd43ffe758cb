"""The pool's supervisor with real forked workers, each a StaticConsumer on the scripted fake adapter (no
broker: what a real group does with the restarts is integration/test_pool.py's). SIGTERM reaches every
worker, which commits and closes without leaving; a crashed worker comes back with its id; a fenced one
stops the pool; bad settings fail before any fork; readiness and per-worker health; the shutdown bound."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from fakes import FENCED, MODERN, Assign, FakeFactory, Step, rec, tp

from static_consumer import Closed, ConsumerSettings, MembershipListener, Record, State, StaticConsumer
from static_consumer._base.errors import InvalidInstanceIdError
from static_consumer._core.seams import Seams
from static_consumer.pool import PoolStatus, ProcessPool, RestartPolicy, StatusFiles, WorkerInfo

POD = {"POD_NAME": "orders-2"}
WAIT_S = 30.0  # generous: forks on a loaded machine


def settings(**overrides: Any) -> ConsumerSettings:
    fields = {"bootstrap_servers": "127.0.0.1:9092", "group_id": "orders", "topics": ("t",), **overrides}
    return ConsumerSettings(**fields)


def script(k: int) -> list[Step]:
    return [Assign((tp(k),)), rec(k, 0), rec(k, 1)]


class Journal:
    """What the workers did, appended to a file (they are other processes): one JSON object a line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, **entry: Any) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(entry) + "\n")

    def entries(self, kind: str) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [e for e in map(json.loads, self.path.read_text().splitlines()) if e["kind"] == kind]


def fakes(journal: Journal, scripts: Callable[[int], list[Step]] = script) -> Any:
    """A consumer factory: worker k's StaticConsumer on a fake adapter playing ``scripts(k)``; commits
    are journaled."""

    def make(s: ConsumerSettings, listeners: Sequence[MembershipListener]) -> StaticConsumer:
        assert s.instance_id is not None
        k = int(s.instance_id.rsplit("-", 1)[1])
        factory = FakeFactory(scripts(k))

        def adapter(config: dict[str, Any]) -> Any:
            fake = factory(config)
            commit = fake.commit

            def journaled(offsets: Any) -> None:  # both kinds of commit end here (end_commit)
                commit(offsets)
                done = {str(p): o for p, o in (offsets or {}).items()}
                journal.write(kind="commit", instance_id=s.instance_id, offsets=done)

            fake.commit = journaled  # type: ignore[method-assign]
            return fake

        return StaticConsumer(
            s,
            listeners=listeners,
            env=POD,
            seams=Seams(adapter_factory=adapter, probe=lambda _, **__: MODERN),
        )

    return make


class ClosedJournal(MembershipListener):
    def __init__(self, journal: Journal, info: WorkerInfo) -> None:
        self.journal, self.info = journal, info

    def on_closed(self, event: Closed) -> None:
        self.journal.write(kind="closed", instance_id=self.info.instance_id, left_group=event.left_group)


def until(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def in_background(p: ProcessPool, action: Callable[[], None]) -> threading.Thread:
    """Run ``action`` beside the pool; the pool is stopped when it ends, whatever happened."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:
            failures.append(exc)
        finally:
            p.stop()

    thread = threading.Thread(target=run, daemon=True)
    thread.failures = failures  # type: ignore[attr-defined]
    thread.start()
    return thread


def joined(thread: threading.Thread) -> None:
    """The background action finished, and did not fail."""
    thread.join(WAIT_S)
    assert not thread.is_alive()
    for failure in thread.failures:  # type: ignore[attr-defined]
        raise failure


def pool(tmp_path: Path, processes: int = 2, **options: Any) -> tuple[ProcessPool, Journal, list[PoolStatus]]:
    journal = Journal(tmp_path / "journal.jsonl")
    seen: list[PoolStatus] = []
    options.setdefault("consumer_factory", fakes(journal))
    p = ProcessPool(
        options.pop("settings", settings(shutdown_timeout_s=5)),
        options.pop("handler", lambda batch: None),
        processes=processes,
        env=POD,
        on_status=[seen.append, *options.pop("on_status", [])],
        listeners=lambda info: [ClosedJournal(journal, info)],
        **options,
    )
    return p, journal, seen


def test_sigterm_reaches_every_worker_each_commits_and_closes_without_leaving(tmp_path: Path) -> None:
    files = StatusFiles(tmp_path / "ready", tmp_path / "status.json")
    p, journal, seen = pool(tmp_path, on_status=[files])
    assert p.instance_ids == ("orders-2-0", "orders-2-1")

    def sigterm_when_ready() -> None:
        until(lambda: p.status().ready and all(w.records == 2 for w in p.status().workers), "ready")
        assert (tmp_path / "ready").exists()
        os.kill(os.getpid(), signal.SIGTERM)  # what the kubelet sends the pod's main

    thread = in_background(p, sigterm_when_ready)
    assert p.run(signals=(signal.SIGTERM,)) == 0
    joined(thread)

    commits = {(c["instance_id"], json.dumps(c["offsets"])) for c in journal.entries("commit")}
    assert ("orders-2-0", '{"t[0]": 2}') in commits and ("orders-2-1", '{"t[1]": 2}') in commits
    closed = journal.entries("closed")
    assert sorted(c["instance_id"] for c in closed) == ["orders-2-0", "orders-2-1"]
    assert not any(c["left_group"] for c in closed)
    final = p.status()
    ended = [(w.state, w.last_exit, w.restarts, w.pid) for w in final.workers]
    assert ended == [(State.CLOSED, 0, 0, None)] * 2
    assert any(s.ready for s in seen) and not final.ready and final.exit_code == 0
    assert not (tmp_path / "ready").exists()
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["exit_code"] == 0 and tuple(w["instance_id"] for w in status["workers"]) == p.instance_ids
    assert multiprocessing.active_children() == []


def test_a_crashed_worker_is_restarted_in_place_with_the_same_id(tmp_path: Path) -> None:
    p, journal, _ = pool(tmp_path)

    def crash_then_stop() -> None:
        until(lambda: p.status().ready, "ready")
        before = p.status().workers
        os.kill(before[1].pid or 0, signal.SIGKILL)  # an OOM kill
        until(lambda: p.status().workers[1].restarts == 1 and p.status().ready, "the restart")
        after = p.status().workers
        assert after[1].instance_id == "orders-2-1" and after[1].pid not in (None, before[1].pid)
        assert after[1].last_exit == 137 and after[1].assignment == (tp(1),)
        assert after[0].pid == before[0].pid and after[0].restarts == 0  # the other worker ran on

    thread = in_background(p, crash_then_stop)
    assert p.run(signals=()) == 0
    joined(thread)


def test_a_fenced_worker_stops_the_pool_instead_of_fighting(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    fenced = fakes(journal, lambda k: [Assign((tp(k),)), rec(k, 0), FENCED] if k == 1 else script(k))
    p, _, _ = pool(tmp_path, consumer_factory=fenced)
    assert p.run(signals=()) == 82
    workers = p.status().workers
    assert [(w.last_exit, w.restarts) for w in workers] == [(0, 0), (82, 0)]
    assert (workers[1].error or "").startswith("FencedInstanceError: ")  # closed, not restarted


def test_bad_settings_fail_before_any_worker_is_forked() -> None:
    with pytest.raises(InvalidInstanceIdError):
        ProcessPool(settings(), print, processes=2, env={"POD_NAME": "orders-7d9f8c6b5-x2x4q"})
    assert multiprocessing.active_children() == []


def test_a_worker_still_in_its_batch_at_the_bound_is_killed_and_the_pool_ends(tmp_path: Path) -> None:
    started = tmp_path / "blocked"

    def handler(batch: list[Record]) -> None:
        if batch[0].partition == 1:
            started.touch()
            time.sleep(120)  # a batch that never finishes

    p, _, _ = pool(tmp_path, settings=settings(shutdown_timeout_s=2), handler=handler)

    thread = in_background(p, lambda: until(started.exists, "the blocked batch"))
    began = time.monotonic()
    code = p.run(signals=())
    joined(thread)
    assert code == 70
    assert [w.last_exit for w in p.status().workers] == [0, 137]
    # the bound is 2 s from the stop; generous slack for a loaded machine, but far below the 120 s batch
    assert time.monotonic() - began < 30


def test_a_worker_that_keeps_failing_makes_the_pool_give_up(tmp_path: Path) -> None:
    def handler(batch: list[Record]) -> None:
        raise ValueError("a bug in the handler")

    policy = RestartPolicy(base_delay_s=0.05, max_delay_s=0.1, max_restarts=2)
    p, _, _ = pool(tmp_path, processes=1, handler=handler, restart=policy)
    assert p.run(signals=()) == 70
    (worker,) = p.status().workers
    assert worker.restarts == 2 and worker.last_exit == 70
    assert worker.error == "ValueError: a bug in the handler"
