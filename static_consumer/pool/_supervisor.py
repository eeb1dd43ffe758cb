"""The pool's supervisor: forks the workers, forwards SIGTERM, restarts crashed workers, reports health.

One process per pod supervises N workers (``_worker``), each one static member. The supervisor holds no
Kafka client and starts no thread: it waits on the workers' exit sentinels, their status pipes and a
self-pipe that its signal handler writes to, so a signal, a report or an exit wakes it at once.

Workers are forked, not spawned: a restart is a fork of a process that has everything imported (the
handler included), which keeps a crashed worker's restart well inside a session timeout, and the
handler needs no pickling. The supervisor must therefore not hold a librdkafka client or threads when it
forks; it holds neither (settings validation creates and destroys a client-less librdkafka handle).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

from static_consumer._core.events import MembershipListener
from static_consumer.pool._exits import (
    Ended,
    Restart,
    RestartPolicy,
    StopPool,
    after_exit,
    describe_exit,
    exit_status,
    pool_exit_code,
)
from static_consumer.pool._ids import WorkerInfo, plan_workers
from static_consumer.pool._status import PoolStatus, StatusFiles, WorkerStatus
from static_consumer.pool._worker import ConsumerFactory, Handler, WorkerSpec
from static_consumer.pool._worker import main as worker_main
from static_consumer.settings import ConsumerSettings

log = logging.getLogger(__name__)

StatusCallback = Callable[[PoolStatus], object]
_REAP_MARGIN_S = 1.0  # a worker's shutdown bound is this much below the pool's, so the pool can reap it
_NUDGE_S = 1.0  # while stopping, SIGTERM again every so often (a worker forked during the stop missed it)
_IDLE_WAKE_S = 5.0


class ProcessPool:
    """``processes`` static members in one pod, each in a forked worker process running the pod main's
    loop (:func:`~static_consumer.run_until_sigterm`) with instance id ``{pod id}-{k}``.

    Everything a worker would check before connecting (settings, topics, identity, TLS files) is checked
    here, in the constructor: a ConfigurationError (exit 78) before anything is forked. :meth:`run`
    supervises until SIGTERM/SIGINT or :meth:`stop`, and returns the pool's exit code (docs/pool.md).

    ``setup(info)`` runs in each worker before it consumes (open per-worker connections there: what the
    supervisor opened is shared by every fork); ``listeners(info)`` gives each worker's extra membership
    listeners. ``on_status`` callbacks get every new :class:`PoolStatus`, in the supervisor.
    ``clock`` and ``consumer_factory`` (how a worker builds its consumer) are seams for tests.
    """

    def __init__(
        self,
        settings: ConsumerSettings,
        handler: Handler,
        *,
        processes: int,
        env: Mapping[str, str] | None = None,
        restart: RestartPolicy | None = None,
        setup: Callable[[WorkerInfo], object] | None = None,
        listeners: Callable[[WorkerInfo], Sequence[MembershipListener]] | None = None,
        max_records: int = 500,
        poll_timeout_s: float = 1.0,
        on_status: Iterable[StatusCallback] = (),
        clock: Callable[[], float] = time.monotonic,
        consumer_factory: ConsumerFactory | None = None,
    ) -> None:
        self.settings = settings
        self.workers = plan_workers(settings, os.environ if env is None else env, processes)
        self.policy = restart or RestartPolicy()
        self._handler, self._setup, self._listeners = handler, setup, listeners
        self._max_records, self._poll_timeout_s = max_records, poll_timeout_s
        self._callbacks = list(on_status)
        self._clock = clock
        self._make_consumer = consumer_factory
        self._ctx = multiprocessing.get_context("fork")
        self._procs: dict[int, BaseProcess] = {}
        self._conns: dict[int, Connection] = {}
        self._status = [WorkerStatus(w.index, w.instance_id) for w in self.workers]
        self._published: PoolStatus | None = None
        self._restarts: dict[int, list[float]] = {w.index: [] for w in self.workers}
        self._due: dict[int, float] = {}
        self._finals: dict[int, int] = {}
        self._requested: int | None = None  # the signal (or SIGTERM for stop()) that asked to stop
        self._stop_at: float | None = None
        self._nudge_at = 0.0
        self._cause: int | None = None
        self._exit_code: int | None = None
        self._wake: tuple[int, int] | None = None

    @property
    def instance_ids(self) -> tuple[str | None, ...]:
        return tuple(w.instance_id for w in self.workers)

    def status(self) -> PoolStatus:
        """Every worker's status now (safe from any thread)."""
        return PoolStatus(tuple(self._status), self._stop_at is not None, self._exit_code)

    def stop(self) -> None:
        """Ask the pool to stop as on SIGTERM. Safe from signal handlers and other threads (no I/O but
        one byte on the supervisor's own pipe)."""
        self._on_signal(signal.SIGTERM, None)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._requested is None:
            self._requested = signum
        if self._wake is not None:
            try:
                os.write(self._wake[1], b"\0")
            except OSError:  # the pipe is full (it is only a wake-up) or already closed
                pass

    # -- running -------------------------------------------------------------------------------------

    def run(self, *, signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT)) -> int:
        """Fork the workers and supervise them until the pool stops; the pool's exit code. Installs
        handlers for ``signals`` (main thread only, a Python rule; pass ``()`` elsewhere and call
        :meth:`stop`)."""
        if self._wake is not None or self._exit_code is not None:
            raise RuntimeError("a ProcessPool runs once")
        self._wake = os.pipe()
        for fd in self._wake:
            os.set_blocking(fd, False)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in signals}
        log.info(
            "pool of %d workers for group %r: %s",
            len(self.workers),
            self.settings.group_id,
            ", ".join(str(i) for i in self.instance_ids),
        )
        try:
            for worker in self.workers:
                if self._requested is None:
                    self._spawn(worker.index)
            self._supervise()
        finally:
            self._end_remaining()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for fd in self._wake:
                os.close(fd)
            self._exit_code = pool_exit_code(
                self._cause, list(self._finals.values()), interrupted=self._requested == signal.SIGINT
            )
            self._publish(force=True)
        return self._exit_code

    def _supervise(self) -> None:
        bound = self.settings.shutdown_timeout_s
        while True:
            now = self._clock()
            if self._requested is not None and self._stop_at is None:
                self._begin_stop(f"{signal.Signals(self._requested).name} received")
            if self._stop_at is not None:
                if not self._procs:
                    return
                if now >= self._stop_at + bound:
                    self._kill_remaining(bound)
                    return
                if now >= self._nudge_at:
                    self._signal_all(signal.SIGTERM)
                    self._nudge_at = now + _NUDGE_S
                wake_at = min(self._stop_at + bound, self._nudge_at)
            else:
                for index, due in sorted(self._due.items()):
                    if now >= due:
                        del self._due[index]
                        self._restarts[index].append(now)
                        self._spawn(index)
                wake_at = min([now + _IDLE_WAKE_S, *self._due.values()])
            self._wait(max(0.0, wake_at - self._clock()))
            self._publish()

    def _wait(self, timeout_s: float) -> None:
        assert self._wake is not None
        sentinels = {p.sentinel: index for index, p in self._procs.items()}
        ready = wait([self._wake[0], *self._conns.values(), *sentinels], timeout_s)
        if self._wake[0] in ready:
            try:
                while os.read(self._wake[0], 512):
                    pass
            except BlockingIOError:  # drained
                pass
        for index, conn in list(self._conns.items()):
            if conn in ready:
                self._read(index)
        for sentinel, index in sentinels.items():
            if sentinel in ready:
                self._ended(index)

    def _read(self, index: int) -> None:
        """Take every report waiting in worker ``index``'s pipe; closes it at EOF."""
        conn = self._conns[index]
        try:
            while conn.poll():
                self._status[index] = self._status[index].reported(conn.recv())
        except (EOFError, OSError):
            conn.close()
            del self._conns[index]

    # -- workers -------------------------------------------------------------------------------------

    def _spawn(self, index: int) -> None:
        info = self.workers[index]
        bound = self.settings.shutdown_timeout_s
        spec = WorkerSpec(
            info=info,
            settings=self.settings,
            handler=self._handler,
            setup=self._setup,
            listeners=self._listeners,
            max_records=self._max_records,
            poll_timeout_s=self._poll_timeout_s,
            shutdown_timeout_s=max(bound - _REAP_MARGIN_S, bound / 2),
            supervisor_pid=os.getpid(),
            make_consumer=self._make_consumer,
        )
        receive, send = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(target=worker_main, args=(spec, send), name=f"worker-{index}")
        proc.start()
        send.close()  # the worker holds the only sending end: its exit is the pipe's EOF
        self._procs[index], self._conns[index] = proc, receive
        restarts = len(self._restarts[index])
        old = self._status[index]
        self._status[index] = WorkerStatus(
            index, info.instance_id, pid=proc.pid, restarts=restarts, last_exit=old.last_exit, error=old.error
        )
        if restarts:
            log.info(
                "worker %d (%s) restarted as pid %s (restart %d)", index, info.instance_id, proc.pid, restarts
            )

    def _ended(self, index: int) -> None:
        proc = self._procs.pop(index)
        proc.join()
        status = exit_status(proc.exitcode if proc.exitcode is not None else -signal.SIGKILL)
        proc.close()
        if index in self._conns:
            self._read(index)  # its last reports (the pipe is at EOF now)
        if index in self._conns:
            self._conns.pop(index).close()
        worker = self.workers[index]
        self._status[index] = replace(self._status[index], pid=None, ready=False, last_exit=status)
        now = self._clock()
        verdict = after_exit(
            status,
            stopping=self._stop_at is not None,
            restarts=self._restarts[index],
            now=now,
            policy=self.policy,
        )
        if isinstance(verdict, Ended):
            self._finals[index] = status
            log.info("worker %d (%s) ended: %s", index, worker.instance_id, describe_exit(status))
        elif isinstance(verdict, Restart):
            self._due[index] = now + verdict.after_s
            at = time.time() + verdict.after_s
            self._status[index] = replace(self._status[index], restart_at=at)
            log.warning(
                "worker %d (%s) ended (%s); restarting it with the same instance id in %.1f s",
                index,
                worker.instance_id,
                describe_exit(status),
                verdict.after_s,
            )
        elif isinstance(verdict, StopPool):
            self._finals[index] = status
            self._cause = verdict.exit_code
            log.error(
                "worker %d (%s) ended (%s): %s; stopping the pool",
                index,
                worker.instance_id,
                describe_exit(status),
                verdict.reason,
            )
            self._begin_stop(f"worker {index} {describe_exit(status)}")

    def _begin_stop(self, why: str) -> None:
        if self._stop_at is not None:
            return
        self._stop_at = self._clock()
        self._due.clear()  # pending restarts are cancelled
        self._status = [replace(w, restart_at=None) for w in self._status]
        log.info(
            "stopping %d workers (%s); bound %.1f s", len(self._procs), why, self.settings.shutdown_timeout_s
        )
        self._nudge_at = 0.0  # SIGTERM everyone at the next turn of the loop

    def _signal_all(self, signum: int) -> None:
        for proc in self._procs.values():
            if proc.pid is not None and proc.exitcode is None:
                try:
                    os.kill(proc.pid, signum)
                except ProcessLookupError:
                    pass

    def _kill_remaining(self, bound: float) -> None:
        for index in list(self._procs):
            log.warning(
                "worker %d (%s) did not close within the %.1f s shutdown bound: killed; its batch in hand "
                "was not committed and will be consumed again",
                index,
                self.workers[index].instance_id,
                bound,
            )
        self._signal_all(signal.SIGKILL)
        for index in list(self._procs):
            self._ended(index)

    def _end_remaining(self) -> None:
        """After an error in the supervisor itself: stop what still runs, orderly, then by force."""
        if not self._procs:
            return
        self._begin_stop("the supervisor is ending")
        self._signal_all(signal.SIGTERM)
        deadline = self._clock() + self.settings.shutdown_timeout_s
        while self._procs and self._clock() < deadline:
            index, proc = next(iter(self._procs.items()))
            proc.join(max(0.0, deadline - self._clock()))
            if proc.exitcode is not None:
                self._ended(index)
        self._kill_remaining(self.settings.shutdown_timeout_s)

    # -- status --------------------------------------------------------------------------------------

    def _publish(self, *, force: bool = False) -> None:
        status = self.status()
        last = self._published
        if not force and last is not None and replace(last, at=status.at) == status:
            return
        self._published = status
        for callback in self._callbacks:
            callback(status)


def run_pool(
    settings: ConsumerSettings,
    handler: Handler,
    *,
    processes: int,
    ready_file: str | os.PathLike[str] | None = None,
    status_file: str | os.PathLike[str] | None = None,
    on_status: StatusCallback | None = None,
    env: Mapping[str, str] | None = None,
    restart: RestartPolicy | None = None,
    setup: Callable[[WorkerInfo], object] | None = None,
    listeners: Callable[[WorkerInfo], Sequence[MembershipListener]] | None = None,
    max_records: int = 500,
    poll_timeout_s: float = 1.0,
) -> int:
    """A pod's main with ``processes`` static members: run the pool until SIGTERM and return its exit
    code. ``ready_file`` exists while every worker has joined (for an ``exec: test -f`` readiness probe);
    ``status_file`` holds every worker's status as JSON. See :class:`ProcessPool` and docs/pool.md::

        try:
            code = run_pool(ConsumerSettings.load(), handle_batch, processes=2)
        except Exception as exc:           # bad settings or identity, found before forking: 78
            code = exit_code_for(exc)
        raise SystemExit(code)
    """
    files = StatusFiles(ready_file, status_file)
    pool = ProcessPool(
        settings,
        handler,
        processes=processes,
        env=env,
        restart=restart,
        setup=setup,
        listeners=listeners,
        max_records=max_records,
        poll_timeout_s=poll_timeout_s,
        on_status=[files] if on_status is None else [files, on_status],
    )
    try:
        return pool.run()
    finally:
        files.clear()


__all__ = ["ProcessPool", "StatusCallback", "run_pool"]
