"""SIGTERM handling for pods: finish the batch, commit, close without leaving, exit with a code.

Kubernetes sends SIGTERM and kills the pod after ``terminationGracePeriodSeconds``. A static member
should then close *without* LeaveGroup, so its replacement (same StatefulSet ordinal, same instance id)
takes the partitions back without a rebalance. Typical pod main::

    try:
        run_until_sigterm(StaticConsumer(ConsumerSettings.load()), handle_batch)
    except Exception as exc:
        raise SystemExit(exit_code_for(exc)) from exc
"""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from types import FrameType

from static_consumer._base.errors import (
    CommitFailedError,
    RetriableError,
)
from static_consumer._base.records import Record, RecordBatch, TopicPartition
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.recovery.policy import OnFailure
from static_consumer._core.recovery.runner import FailureHandling

log = logging.getLogger(__name__)

_MIN_CLOSE_S = 1.0  # close() gets at least this long even when the batch used up the shutdown bound


class StopRequest:
    """When a stop was asked for, and what is left of the shutdown bound since. Calling it asks the
    consumer to stop (no I/O: safe in a signal handler). Both runners use it: this module's, from a
    ``signal.signal`` handler, and ``static_consumer.aio``'s, from the event loop's signal handler."""

    def __init__(self, stop: Callable[[], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.received_at: float | None = None
        self.signum: int | None = None
        self._stop = stop
        self._clock = clock

    def __call__(self, signum: int) -> None:
        if self.received_at is None:
            self.received_at, self.signum = self._clock(), signum
        self._stop()

    def remaining(self, bound_s: float) -> float:
        """Seconds left of ``bound_s`` since the request (the whole bound if none arrived)."""
        if self.received_at is None:
            return bound_s
        return bound_s - (self._clock() - self.received_at)

    def close_timeout(self, bound_s: float) -> float:
        """What close() gets: the rest of ``bound_s``, but at least ``_MIN_CLOSE_S`` even when the last
        batch used up the bound (a close cut to nothing would abandon librdkafka's close at once)."""
        remaining = self.remaining(bound_s)
        if remaining < _MIN_CLOSE_S:
            log.warning("the last batch used %.1fs of the %.1fs shutdown bound", bound_s - remaining, bound_s)
        return max(remaining, _MIN_CLOSE_S)


class ShutdownSignal(StopRequest):
    """Installed signal handlers that ask a consumer to stop; they do no I/O (signal-safe)."""

    def __init__(
        self,
        consumer: StaticConsumer,
        signals: Iterable[signal.Signals] = (signal.SIGTERM,),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(consumer.stop, clock)
        self._previous = {sig: signal.signal(sig, self._handle) for sig in signals}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self(signum)

    def restore(self) -> None:
        """Put the previous handlers back."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


class BatchCommitter:
    """Commits each processed batch, riding out what a running consumer meets; the one commit path of
    every batch loop the library offers (``run_until_sigterm``, the asyncio runner).

    - A transient failure (:class:`RetriableError`): a broker restart moves the group coordinator, and
      commits fail for a few seconds (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) although the
      member keeps its partitions. The offsets stay pending: the next commit (or close()) sends them.
      Commits failing for longer than ``bound_s`` (default: the session timeout, which the membership
      itself would not survive) re-raise.
    - A refused commit (:class:`CommitFailedError`): the partitions moved, or the member's session
      ended while the batch ran (a long GC pause, a handler blocked past ``max_poll_interval_ms``). The
      consumer already said so (a ``CommitRefused`` event, the ``static_consumer.commits.refused``
      metric); the next poll reports the partitions lost (their offsets are forgotten, never committed)
      and the client rejoins by itself; the records come again to whoever owns their partitions then
      (at-least-once). So the loop goes on.

    Ending the loop on either would turn every broker restart or slow batch into a pod restart (a
    second rebalance, and a crash-looping pod where the first had cost one batch). A fence or another
    fatal error is never ridden out: it propagates (exit 82 / 70 through :func:`exit_code_for`).
    """

    def __init__(
        self,
        consumer: StaticConsumer,
        bound_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._consumer = consumer
        self._bound_s = consumer.settings.session_timeout_ms / 1000 if bound_s is None else bound_s
        self._clock = clock
        self._failing_since: float | None = None

    def commit(self, batch: Sequence[Record] | RecordBatch) -> dict[TopicPartition, int] | None:
        """The offsets committed, or None when nothing was: deferred to the next commit (a transient
        failure) or refused (the records come again)."""
        try:
            sent = self._consumer.commit(batch)
        except CommitFailedError as exc:
            log.warning("%s; consuming on", exc)
            return None
        except RetriableError as exc:
            now = self._clock()
            if self._failing_since is None:
                self._failing_since = now
                log.warning("%s; keeping the offsets for the next commit", exc)
            elif now - self._failing_since > self._bound_s:
                raise
            return None
        if self._failing_since is not None:
            log.info("commits succeed again after %.1fs", self._clock() - self._failing_since)
            self._failing_since = None
        return sent


def install_sigterm_handler(
    consumer: StaticConsumer, *, signals: Iterable[signal.Signals] = (signal.SIGTERM,)
) -> ShutdownSignal:
    """Make SIGTERM (or ``signals``) call ``consumer.stop()``. Main thread only (a Python rule)."""
    return ShutdownSignal(consumer, signals)


def consume_until_stopped(
    consumer: StaticConsumer,
    handle_batch: Callable[[list[Record]], object],
    *,
    max_records: int = 500,
    poll_timeout_s: float = 1.0,
    on_failure: OnFailure | None = None,
) -> None:
    """The loop of :func:`run_until_sigterm`, without its signal handler and its close: start
    ``consumer``, hand each non-empty batch to ``handle_batch`` (under the settings' failure policy:
    retries, then stop, dead-letter or skip; docs/failures.md) and commit it through a
    :class:`BatchCommitter`, until :meth:`StaticConsumer.stop`. For a pod main that ends another way
    (``leave_group()`` on a scale-down, its own signal handling); the caller closes the consumer."""
    committer = BatchCommitter(consumer)
    failures = FailureHandling(consumer, handle_batch, policy=on_failure)
    failures.prepare()  # failure_action='dead_letter': its topics checked before joining
    try:
        consumer.start()
        while not consumer.stopping:
            batch = consumer.consume(max_records, poll_timeout_s)
            if batch:
                failures.handle(batch, committer.commit)
    finally:
        failures.close()


def run_until_sigterm(
    consumer: StaticConsumer,
    handle_batch: Callable[[list[Record]], object],
    *,
    max_records: int = 500,
    poll_timeout_s: float = 1.0,
    timeout_s: float | None = None,
    signals: Iterable[signal.Signals] = (signal.SIGTERM,),
    on_failure: OnFailure | None = None,
) -> None:
    """Start ``consumer`` and feed batches to ``handle_batch`` (committing each through a
    :class:`BatchCommitter`) until SIGTERM or :meth:`StaticConsumer.stop`; then finish the current
    batch, commit and close without leaving the group. Returns None after such a stop.

    ``timeout_s`` (default ``settings.shutdown_timeout_s``) bounds the time from the signal to the end
    of close(); a batch still running at the signal is finished first, and only close() can be cut short.
    A commit refused because the partitions moved or the session ended meanwhile (``CommitRefused``
    event) and a transient commit failure do not end the loop (see :class:`BatchCommitter`). An
    exception of ``handle_batch`` goes through the settings' failure policy (``failure_retries``, then
    ``failure_action``, or ``on_failure``; docs/failures.md): with ``stop`` (the default) it propagates
    once the retries are spent, nothing from the failing record on committed. Everything else
    propagates after the consumer was closed: FencedInstanceError, other fatal errors; see
    :func:`exit_code_for`.
    """
    bound = consumer.settings.shutdown_timeout_s if timeout_s is None else timeout_s
    handler = install_sigterm_handler(consumer, signals=signals)
    try:
        consume_until_stopped(
            consumer,
            handle_batch,
            max_records=max_records,
            poll_timeout_s=poll_timeout_s,
            on_failure=on_failure,
        )
    finally:
        try:
            consumer.close(timeout_s=handler.close_timeout(bound))
        finally:
            handler.restore()


__all__ = [
    "BatchCommitter",
    "ShutdownSignal",
    "StopRequest",
    "consume_until_stopped",
    "install_sigterm_handler",
    "run_until_sigterm",
]
