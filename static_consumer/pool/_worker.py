"""One worker of a pool: a forked process that is one static member and runs the pod main's own loop.

The worker runs :func:`~static_consumer.run_until_sigterm` with its own instance id, exactly as a
single-process pod does: SIGTERM (sent by the supervisor) finishes the batch, commits it and closes
without LeaveGroup, and whatever ended the loop becomes the process's exit code (``exit_code_for``). It
reports its consumer's status to the supervisor through a pipe.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from traceback import format_exception
from types import FrameType
from typing import Any

from static_consumer._base.errors import EXIT_OK, StaticConsumerError, exit_code_for
from static_consumer._base.records import Record
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import (
    Assigned,
    Closed,
    FatalError,
    Fenced,
    Joining,
    Lost,
    MembershipEvent,
    MembershipListener,
    Revoked,
    StandingBy,
)
from static_consumer._core.shutdown import run_until_sigterm
from static_consumer._security.secrets import ISSUED_TOKENS, env_secrets, scrub
from static_consumer.pool._ids import WorkerInfo
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)

Handler = Callable[[list[Record]], object]
ConsumerFactory = Callable[[ConsumerSettings, Sequence[MembershipListener]], StaticConsumer]
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_REPORT_EVERY_S = 1.0  # while batches flow, at most one report a second
_MAX_ERROR_CHARS = 500


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process runs: handed over by ``fork``, never pickled."""

    info: WorkerInfo
    settings: ConsumerSettings  # the pod's; the worker's instance id replaces its identity
    handler: Handler
    setup: Callable[[WorkerInfo], object] | None
    listeners: Callable[[WorkerInfo], Sequence[MembershipListener]] | None
    max_records: int
    poll_timeout_s: float
    shutdown_timeout_s: float  # the worker's bound: a little below the pool's, so the pool can reap it
    supervisor_pid: int
    make_consumer: ConsumerFactory | None = None  # a seam for tests; default: StaticConsumer


class Reporter(MembershipListener):
    """Sends the consumer's status to the supervisor after every membership event, and the count of
    records handled at most once a second (from a thread of its own: the loop may sit in an idle poll).
    ``joined``: assigned (even nothing), and not lost since."""

    def __init__(self, send: Callable[[dict[str, Any]], None], clock: Callable[[], float] = time.time):
        self._send = send
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, Any] | None = None
        self._counted = threading.Event()
        self.consumer: StaticConsumer | None = None
        self.joined = False
        self.records = 0
        self.last_batch_at: float | None = None
        self.error: str | None = None

    def report(self) -> None:
        """Send the consumer's status now; on the consumer's thread (it asks the client)."""
        if self.consumer is None:
            return
        status = self.consumer.status()
        with self._lock:
            self._last = {
                "state": status.state.value,
                "ready": self.joined and status.ready,
                "member_id": status.member_id,
                "generation": status.generation,
                "assignment": [list(tp) for tp in status.assignment],
                "error": self.error or status.error,
            }
            self._send_locked()

    def _send_locked(self) -> None:
        if self._last is not None:
            self._counted.clear()
            self._send({**self._last, "records": self.records, "last_batch_at": self.last_batch_at})

    def counting(self, handler: Handler) -> Handler:
        """``handler``, counting the records it was handed (the counts go out with the next report)."""

        def handle(batch: list[Record]) -> object:
            result = handler(batch)
            self.records += len(batch)
            self.last_batch_at = self._clock()
            self._counted.set()
            return result

        return handle

    def send_counts(self, stop: threading.Event) -> None:
        """Until ``stop``: once a second, send the counts if they changed since the last report."""
        while not stop.wait(_REPORT_EVERY_S):
            if self._counted.is_set():
                with self._lock:
                    self._send_locked()

    def failed(self, exc: BaseException) -> None:
        self.error = _masked(f"{type(exc).__name__}: {exc}")[:_MAX_ERROR_CHARS]

    def on_event(self, event: MembershipEvent) -> None:
        # Joined once assigned (even nothing); not while joining again, standing by, or after a loss,
        # a fence, a fatal error or the close.
        if isinstance(event, Assigned):
            self.joined = True
        elif isinstance(event, Joining | Lost | StandingBy | Fenced | FatalError | Closed):
            self.joined = False
        elif not isinstance(event, Revoked):
            return  # nothing a status says changed
        self.report()


def _masked(text: str) -> str:
    # The library masks secrets where it raises; a handler's own error is masked here, as the CLI does.
    return ISSUED_TOKENS.scrub(scrub(text, env_secrets(os.environ)))


class _EarlyStop:
    """The worker's SIGTERM handler until its loop installs its own: a stop asked for before the
    consumer started means do not start."""

    def __init__(self) -> None:
        self.received = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.received = True


def _die_with_supervisor(supervisor_pid: int) -> None:
    """Ask Linux for SIGTERM when the supervisor dies (a worker must not outlive its pod's main: it would
    hold its instance id against the pod's next incarnation); elsewhere, only check it is still there."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the check below still catches a dead supervisor
            log.debug("prctl(PR_SET_PDEATHSIG) unavailable")
    if os.getppid() != supervisor_pid:  # it died before prctl took effect
        os.kill(os.getpid(), signal.SIGTERM)


def main(spec: WorkerSpec, conn: Connection) -> None:
    """The worker process (the target of a forked ``multiprocessing.Process``): exits with the code its
    loop ended with."""
    early = _EarlyStop()
    signal.signal(signal.SIGTERM, early)
    # Ctrl-C reaches the whole foreground process group; the supervisor turns it into one orderly stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_supervisor(spec.supervisor_pid)

    def send(report: dict[str, Any]) -> None:
        try:
            conn.send(report)
        except OSError:  # the supervisor is gone; PR_SET_PDEATHSIG stops this worker
            pass

    reporter = Reporter(send)
    done = threading.Event()
    counts = threading.Thread(target=reporter.send_counts, args=(done,), name="report-counts", daemon=True)
    counts.start()
    try:
        code = _run(spec, reporter, early)
    finally:
        done.set()
        counts.join()
        reporter.report()
        conn.close()
    raise SystemExit(code)


def _static_consumer(settings: ConsumerSettings, listeners: Sequence[MembershipListener]) -> StaticConsumer:
    return StaticConsumer(settings, listeners=listeners)


def _run(spec: WorkerSpec, reporter: Reporter, early: _EarlyStop) -> int:
    info = spec.info
    settings = spec.settings
    if info.instance_id is not None:
        settings = settings.model_copy(update={"instance_id": info.instance_id})
    try:
        extra = list(spec.listeners(info)) if spec.listeners is not None else []
        make = spec.make_consumer or _static_consumer
        consumer = make(settings, [reporter, *extra])
        reporter.consumer = consumer
        if spec.setup is not None:
            spec.setup(info)
        if early.received:
            return EXIT_OK
        run_until_sigterm(
            consumer,
            reporter.counting(spec.handler),
            max_records=spec.max_records,
            poll_timeout_s=spec.poll_timeout_s,
            timeout_s=spec.shutdown_timeout_s,
        )
        return EXIT_OK
    except BaseException as exc:  # noqa: BLE001 - every ending is an exit code for the supervisor
        reporter.failed(exc)
        code = exit_code_for(exc)
        # The library's errors say what to do; anything else is a bug to find, with its traceback.
        detail = (
            "" if isinstance(exc, StaticConsumerError) else "\n" + _masked("".join(format_exception(exc)))
        )
        log.error(
            "worker %d (%s) stopped, exit %d: %s%s",
            info.index,
            info.instance_id,
            code,
            reporter.error,
            detail,
        )
        return code


__all__ = ["ConsumerFactory", "Handler", "Reporter", "WorkerSpec", "main"]
