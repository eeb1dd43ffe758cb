"""Broker connections that fail, told in a few lines: the first failure per address and error at WARNING,
then at most one summary per address every :data:`SUMMARY_INTERVAL_S` while it lasts.

Both Kafka clients retry a connection that fails, and each retry is a log line: librdkafka logs one for
every attempt (dozens a second with the library's ``reconnect.backoff.ms``), kafka-python three or more.
Every client the library builds reports its failed attempts to one :class:`ConnectionLog` per process
(:data:`CONNECTIONS`), which speaks for them on the ``static_consumer.connections`` logger; the clients'
own lines stay on their loggers at DEBUG (docs/observability.md, "The loggers").

librdkafka's log lines are text (facility, level, message), so telling a failed connection apart is text
matching; it is all here (:func:`librdkafka_failure`, :func:`reason_of`), checked against the real
clients by ``tests/unit/test_connection_log.py``. Pure apart from logging: the clock is injected.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

SUMMARY_INTERVAL_S = 10.0
# A failure that comes after this long without one starts a new story, told again from its first line:
# longer than either client's longest wait between attempts (librdkafka's reconnect.backoff.max.ms of 10 s,
# kafka-python's reconnect_backoff_max_ms of 30 s).
QUIET_S = 60.0
LOGGER = logging.getLogger("static_consumer.connections")

# A librdkafka broker failure line, as confluent-kafka hands it to a ``logger``: the facility FAIL, then
# "[rdkafka#consumer-1] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: <reason> (after 0ms in state
# CONNECT)" (rd_kafka_broker_fail, rdkafka_broker.c). The broker name is the address, with the listener's
# scheme before it when it is not plaintext ("sasl_ssl://host:9093/1"), and "/bootstrap" or "/<node id>";
# the coordinator's connection is named "GroupCoordinator: 127.0.0.1:9092".
_FAIL = re.compile(
    r"^FAIL \[[^\]]*\] \[thrd:\S*?\]: (?:[A-Za-z]+: )?(?:\w+://)?(?P<address>[^\s/]+:\d+)(?:/[^\s:]+)?: "
    r"(?P<reason>.*)$"
)
# What librdkafka adds after the reason: how long the connection lived, in which state, and how many
# identical errors it did not log.
_AFTER = re.compile(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)\s*$")
# librdkafka's "Connect to ipv4#127.0.0.1:1 failed: Connection refused": the address is named already.
_CONNECT = re.compile(r"^Connect to \S+ failed: ")
# kafka-python's "KafkaConnectionError: 111 ECONNREFUSED": the errno, as the operating system words it.
_ERRNO = re.compile(r"^(?:\w+: )?(\d+) E[A-Z0-9]+$")


def reason_of(text: str) -> str:
    """The error of a failed connection, worded the same for both clients (``Connection refused``)."""
    text = _CONNECT.sub("", _AFTER.sub("", text.strip()))
    errno = _ERRNO.match(text)
    return os.strerror(int(errno.group(1))) if errno else text


def librdkafka_failure(line: str) -> tuple[str, str] | None:
    """The address and error of a librdkafka line about a failed broker connection; None for any other
    line. ``line`` as confluent-kafka formats it: ``"FAIL [rdkafka#consumer-1] [thrd:...]: ..."``."""
    match = _FAIL.match(line)
    return None if match is None else (match.group("address"), reason_of(match.group("reason")))


@dataclass
class _Address:
    """One address while its connections fail: when it was last told, and what failed since."""

    told_at: float
    last_failure: float
    told: set[str] = field(default_factory=set)  # the errors already named at WARNING
    since: Counter[str] = field(default_factory=Counter)  # failures not yet in a summary, by error


class ConnectionLog:
    """Failed connection attempts per broker address, told on ``logger`` in a few lines.

    - the first failure of an address, and each new error of it, at WARNING at once, naming the address,
      the error and the logger (``source``) that holds every attempt at DEBUG;
    - later failures counted, and told in one summary line per address at most every ``interval_s``:
      ``still cannot connect to 127.0.0.1:1 (Connection refused): 57 failed attempts in the last 10.0s``;
    - after ``quiet_s`` without a failure the address is forgotten: its next failure is a first again.

    Thread-safe: librdkafka's lines come on the threads that poll its clients, kafka-python's on its
    network threads.
    """

    def __init__(
        self,
        logger: logging.Logger = LOGGER,
        interval_s: float = SUMMARY_INTERVAL_S,
        quiet_s: float = QUIET_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._interval = interval_s
        self._quiet = quiet_s
        self._clock = clock
        self._lock = threading.Lock()
        self._addresses: dict[str, _Address] = {}

    def failed(self, address: str, reason: str, source: str) -> None:
        """One failed attempt to connect to ``address``, for ``reason``, logged in full on ``source``."""
        now = self._clock()
        with self._lock:
            state = self._addresses.get(address)
            if state is None or now - state.last_failure >= self._quiet:
                state = self._addresses[address] = _Address(told_at=now, last_failure=now)
            state.last_failure = now
            if reason not in state.told:
                state.told.add(reason)
                line = (
                    f"cannot connect to {address} ({reason}); retrying, each attempt logged at DEBUG by "
                    f"{source}"
                )
            else:
                state.since[reason] += 1
                if now - state.told_at < self._interval:
                    return
                line = self._summary(address, state, now)
            state.told_at = now
        self._logger.warning("%s", line)

    @staticmethod
    def _summary(address: str, state: _Address, now: float) -> str:
        total = sum(state.since.values())
        if len(state.since) == 1:
            errors = next(iter(state.since))
        else:
            errors = ", ".join(f"{reason}: {n}" for reason, n in state.since.most_common())
        attempts = "failed attempt" if total == 1 else "failed attempts"
        state.since.clear()
        last = now - state.told_at
        return f"still cannot connect to {address} ({errors}): {total} {attempts} in the last {last:.1f}s"


# The process's one connection log: every client the library builds reports to it.
CONNECTIONS = ConnectionLog()


class LibrdkafkaLog:
    """What a librdkafka client's ``logger`` config gets (confluent-kafka calls ``log(level, fmt, *args)``
    on it): librdkafka's lines go to ``logger``, a failed broker connection at DEBUG and told by
    ``connections``; ``scrub`` masks the configured secrets in every line first."""

    def __init__(
        self,
        logger: logging.Logger,
        scrub: Callable[[str], str] | None = None,
        connections: ConnectionLog = CONNECTIONS,
    ) -> None:
        self.logger = logger
        self._scrub = scrub
        self._connections = connections

    def log(self, level: int, fmt: str, *args: object) -> None:
        if level < logging.WARNING and not self.logger.isEnabledFor(level):
            return  # librdkafka's debug lines, when nobody reads them
        line = fmt % args if args else fmt
        if self._scrub is not None:
            line = self._scrub(line)
        failure = librdkafka_failure(line) if level >= logging.WARNING else None
        if failure is None:
            self.logger.log(level, "%s", line)
            return
        self.logger.debug("%s", line)
        self._connections.failed(*failure, source=self.logger.name)


__all__ = [
    "CONNECTIONS",
    "LOGGER",
    "QUIET_S",
    "SUMMARY_INTERVAL_S",
    "ConnectionLog",
    "LibrdkafkaLog",
    "librdkafka_failure",
    "reason_of",
]
