"""Run consumers in child processes (so tests can SIGTERM or SIGKILL them) and collect their events."""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Event = dict[str, Any]


@functools.cache
def _stderr_dir() -> Path:
    """One directory per test/demo process for its children's stderr files, removed when it exits."""
    path = Path(tempfile.mkdtemp(prefix="static-consumer-children-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


class ConsumerProcess:
    """One child consumer (see ``static_consumer_lab.children.child`` for the spec and the events).

    ``log_path``: also append every event, as received, to this JSONL file, together with what this side
    saw: ``spawn`` (before the process starts), ``start`` (when its consumer may start: at once, or
    at :meth:`release` for a spec with ``hold``), ``signal`` (``TERM`` or ``KILL``, when sent) and
    ``reaped`` (its exit observed, with the exit ``code``), each marked ``"by": "runner"``. Without a
    ``log_path`` nothing is written and these events are not recorded.
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        name: str = "consumer",
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ):
        self.spec = dict(spec)
        self.name = name
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._log = open(log_path, "a", encoding="utf-8") if log_path is not None else None
        self._reaped = False
        self.note("spawn")
        fd, stderr_path = tempfile.mkstemp(prefix=f"{name}-", suffix=".stderr", dir=_stderr_dir())
        os.close(fd)
        self._stderr = Path(stderr_path)
        child_env = {**os.environ, **(env or {})}
        with open(self._stderr, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "static_consumer_lab.children.child", json.dumps(self.spec)],
                stdin=subprocess.PIPE if self.spec.get("hold") else None,
                stdout=subprocess.PIPE,
                stderr=err,
                env=child_env,
            )
        if not self.spec.get("hold"):
            self.note("start")
        self._reader = threading.Thread(target=self._read, name=f"{name}-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self._events.append(event)
                if self._log is not None:
                    self._log.write(line.decode() if isinstance(line, bytes) else line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def note(self, kind: str, **fields: Any) -> None:
        """Record something this side saw about the process (only with a ``log_path``)."""
        if self._log is None:
            return
        event = {"kind": kind, "ts": time.time(), "by": "runner", **fields}
        with self._cond:
            self._events.append(event)
            self._log.write(json.dumps(event) + "\n")
            self._log.flush()
            self._cond.notify_all()

    def _note_reaped(self, code: int) -> None:
        with self._cond:
            if self._reaped:
                return
            self._reaped = True
        self.note("reaped", code=code)

    def release(self) -> None:
        """Let a process spawned with ``hold`` in its spec start its consumer."""
        assert self.proc.stdin is not None, "release() needs a spec with hold"
        self.note("start")
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def close_log(self) -> None:
        """Flush and close the ``log_path`` file once the process and its reader are done."""
        self._reader.join(timeout=5)
        with self._cond:
            if self._log is not None:
                self._log.close()
                self._log = None

    # ----------------------------------------------------------------------------------- observing
    def events(self, kind: str | None = None) -> list[Event]:
        with self._cond:
            return [e for e in self._events if kind is None or e["kind"] == kind]

    def events_since(self, index: int) -> list[Event]:
        """The events from position ``index`` on: a poller that keeps count reads only what is new."""
        with self._cond:
            return self._events[index:]

    def wait_for(self, predicate: Callable[[Event], bool], timeout_s: float, what: str = "event") -> Event:
        """The first event (old or new) that satisfies ``predicate``; AssertionError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for event in self._events:
                    if predicate(event):
                        return event
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if self.proc.poll() is not None and not self._reader.is_alive():
                    break
                self._cond.wait(min(remaining, 0.5))
        raise AssertionError(
            f"{self.name}: no {what} within {timeout_s} s (exit code {self.proc.poll()}); "
            f"last events {self.events()[-5:]}\nstderr tail:\n{self.stderr_tail()}"
        )

    def wait_for_kind(self, kind: str, timeout_s: float, after: float = 0.0) -> Event:
        return self.wait_for(lambda e: e["kind"] == kind and e["ts"] >= after, timeout_s, what=kind)

    def records(self, since: float | None = None) -> list[tuple[str, int, int]]:
        """(topic, partition, offset) of every record handed out (after ``since``, a ``ts``, if given)."""
        return [
            (t, p, o)
            for e in self.events("records")
            if since is None or e["ts"] > since
            for t, p, o in e["records"]
        ]

    def assignment(self) -> set[tuple[str, int]]:
        """Partitions owned now, from the assigned/revoked/lost events seen so far.

        Additive, so it holds for both protocols: the eager classic protocol revokes everything before
        each assignment, while the incremental KIP-848 protocol reports only what is added or removed.
        """
        owned: set[tuple[str, int]] = set()
        for event in self.events():
            if event["kind"] == "assigned":
                owned |= {(t, p) for t, p in event["partitions"]}
            elif event["kind"] in ("revoked", "lost"):
                owned -= {(t, p) for t, p in event["partitions"]}
        return owned

    def stderr_tail(self, lines: int = 30) -> str:
        return "\n".join(self._stderr.read_text(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------------------------------ stopping
    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def terminate(self) -> None:
        """SIGTERM: the child finishes its batch, commits and closes."""
        if self.proc.poll() is None:
            self.note("signal", signal="TERM")
            self.proc.send_signal(signal.SIGTERM)

    def freeze(self) -> float:
        """SIGSTOP: every thread of the child stops, as in a GC pause or a frozen node; the time it did."""
        self.proc.send_signal(signal.SIGSTOP)
        return time.time()

    def thaw(self) -> float:
        """SIGCONT after :meth:`freeze`; the time just before it. The child may run (and stream events)
        before this side reads the clock again: a classic member reported its loss within a millisecond
        of the wake-up, before a time read after the signal. Every event it streams after the wake-up
        is later than this one."""
        woken = time.time()
        self.proc.send_signal(signal.SIGCONT)
        return woken

    def kill(self) -> None:
        """SIGKILL: no commit, no close, nothing sent to the broker."""
        if self.proc.poll() is None:
            self.note("signal", signal="KILL")
            self.proc.kill()
        self._note_reaped(self.proc.wait(timeout=10))

    def wait(self, timeout_s: float = 30.0) -> int:
        try:
            code = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            self.kill()
            raise AssertionError(
                f"{self.name} did not exit within {timeout_s} s\n{self.stderr_tail()}"
            ) from exc
        self._note_reaped(code)
        self._reader.join(timeout=5)
        return code

    def stop(self, timeout_s: float = 30.0) -> int:
        self.terminate()
        return self.wait(timeout_s)


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str | Callable[[], str],
    poll_s: float = 0.1,
) -> None:
    """Poll ``condition`` until it holds; AssertionError naming ``what`` after ``timeout_s``. A callable
    ``what`` is asked at the timeout, so the message can say the state the wait ended in."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout_s} s waiting for {described}")
        time.sleep(poll_s)
