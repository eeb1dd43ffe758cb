"""What a worker's exit means for its pool, and the pool's own exit code. Pure: no clock, no processes.

A worker that ends while the pool runs is restarted in place, under the same instance id, after a
bounded back-off: a static member back within its session takes its partitions back without a
rebalance (classic protocol), so a crash costs one worker's partitions a moment, not the group a
rebalance. Three exits are never restarted, because a restart cannot help:

- 82, fenced: another live process holds the instance id; restarting would fence it in turn and the two
  would take the partitions from each other forever;
- 78, configuration: the settings, credentials or topics are wrong, for every worker alike;
- 69, capability: the brokers cannot do what the settings ask.

Each stops the whole pool, whose exit code is then that code. So does a worker that keeps failing:
after ``max_restarts`` restarts within ``window_s`` the pool gives up and exits with the worker's code, so
that the pod's own restart policy (and its crash-loop back-off, where someone sees it) takes over.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from static_consumer._base.errors import (
    EXIT_CONFIG,
    EXIT_FATAL,
    EXIT_FENCED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TEMPFAIL,
    EXIT_UNAVAILABLE,
    ConfigurationError,
)

# Exits that stop the pool instead of a restart, and why.
NOT_RESTARTED = {
    EXIT_FENCED: "fenced: another live process uses its instance id; restarting would fight it",
    EXIT_CONFIG: "bad configuration: every worker would fail the same way",
    EXIT_UNAVAILABLE: "the brokers cannot do what the settings require",
}
# Most serious first: the pool's code when several workers ended badly.
SEVERITY = (EXIT_FENCED, EXIT_CONFIG, EXIT_UNAVAILABLE, EXIT_FATAL, EXIT_TEMPFAIL)


def exit_status(exitcode: int) -> int:
    """A process exit status as a shell reports it: ``multiprocessing``'s ``-N`` (killed by signal N)
    becomes ``128 + N``."""
    return 128 - exitcode if exitcode < 0 else exitcode


def describe_exit(status: int) -> str:
    """``"exit 82"`` or ``"killed by SIGKILL"``, for logs."""
    if status > 128:
        try:
            return f"killed by {signal.Signals(status - 128).name}"
        except ValueError:
            pass
    return f"exit {status}"


@dataclass(frozen=True)
class RestartPolicy:
    """How a worker that ended is restarted: the first restart after ``first_delay_s`` (at once by default:
    a restart inside the session timeout costs no rebalance), each further one within ``window_s`` twice
    as late, from ``base_delay_s`` up to ``max_delay_s``. The restart after ``max_restarts`` restarts
    within ``window_s`` is not made: the pool stops with the worker's exit code. Keep ``max_delay_s`` well
    below the session timeout, or the late restarts cost a rebalance each."""

    first_delay_s: float = 0.0
    base_delay_s: float = 0.5
    max_delay_s: float = 10.0
    max_restarts: int = 5
    window_s: float = 300.0

    def __post_init__(self) -> None:
        delays = (self.first_delay_s, self.base_delay_s, self.max_delay_s)
        if min(delays) < 0 or self.base_delay_s > self.max_delay_s:
            raise ConfigurationError(
                f"RestartPolicy delays must be >= 0 with base_delay_s <= max_delay_s, not {delays}"
            )
        if self.max_restarts < 0 or self.window_s <= 0:
            raise ConfigurationError("RestartPolicy needs max_restarts >= 0 and window_s > 0")

    def delay(self, recent: int) -> float:
        """The wait before a restart that follows ``recent`` restarts within the window."""
        if recent == 0:
            return self.first_delay_s
        return min(self.max_delay_s, self.base_delay_s * 2.0 ** (recent - 1))


@dataclass(frozen=True)
class Restart:
    """Start the worker again, with the same instance id, ``after_s`` from now."""

    after_s: float


@dataclass(frozen=True)
class StopPool:
    """Stop every worker and end the pool with ``exit_code``."""

    exit_code: int
    reason: str


@dataclass(frozen=True)
class Ended:
    """The worker ended as asked (the pool is stopping): nothing to do."""


Verdict = Restart | StopPool | Ended


def after_exit(
    status: int, *, stopping: bool, restarts: Iterable[float], now: float, policy: RestartPolicy
) -> Verdict:
    """What to do when a worker ended with exit ``status``; ``restarts`` are the times (on the clock of
    ``now``) of this worker's earlier restarts."""
    if stopping:
        return Ended()
    if status in NOT_RESTARTED:
        return StopPool(status, NOT_RESTARTED[status])
    recent = sum(1 for at in restarts if now - at < policy.window_s)
    if recent >= policy.max_restarts:
        code = status if status in SEVERITY else EXIT_FATAL
        return StopPool(
            code, f"{describe_exit(status)} after {recent} restarts within {policy.window_s:g} s: giving up"
        )
    return Restart(policy.delay(recent))


def pool_exit_code(cause: int | None, finals: Sequence[int], *, interrupted: bool = False) -> int:
    """The pool's exit code: ``cause`` when a worker's exit stopped it; else 0 when every worker ended
    cleanly (130 when the stop was Ctrl-C), else the most serious of their codes (a worker killed by a
    signal, or with a code of its own, counts as 70)."""
    if cause is not None:
        return cause
    bad = {code if code in SEVERITY else EXIT_FATAL for code in finals if code != EXIT_OK}
    if not bad:
        return EXIT_INTERRUPTED if interrupted else EXIT_OK
    return min(bad, key=SEVERITY.index)


__all__ = [
    "NOT_RESTARTED",
    "SEVERITY",
    "Ended",
    "Restart",
    "RestartPolicy",
    "StopPool",
    "Verdict",
    "after_exit",
    "describe_exit",
    "exit_status",
    "pool_exit_code",
]
