"""A broker that cannot be reached is told in a few lines: the first failed attempt per address and error
at WARNING on ``static_consumer.connections``, then at most one summary per address every interval;
every attempt stays on the client's own logger at DEBUG (no broker needed: a closed port refuses)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import kafka.errors as kafka_errors
import pytest

from static_consumer._base.connections import (
    LOGGER,
    ConnectionLog,
    LibrdkafkaLog,
    librdkafka_failure,
    reason_of,
)
from static_consumer._kafka.admin_client import LIBRDKAFKA_LOG, librdkafka_admin
from static_consumer._kafka.kafka_python import CLIENT_ID, admin_client
from static_consumer.settings import ConsumerSettings

# librdkafka 2.16's line for a refused connection, as confluent-kafka hands it to a ``logger``.
REFUSED = (
    "FAIL [rdkafka#consumer-1] [thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to "
    "ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
)


@pytest.fixture(autouse=True)
def loggers_as_configured() -> Iterator[None]:
    """The client loggers at their default level: a command-line test may have quietened them."""
    names = ("kafka", "static_consumer", LIBRDKAFKA_LOG.name)
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.NOTSET)
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def told_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER.name]


def test_the_first_failure_is_a_warning_then_one_summary_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    log = ConnectionLog(interval_s=10, clock=clock)
    log.failed("127.0.0.1:1", "Connection refused", "lib.client")
    for _ in range(40):  # 5 s of attempts
        clock.now += 0.125
        log.failed("127.0.0.1:1", "Connection refused", "lib.client")
    assert told_lines(caplog) == [
        "cannot connect to 127.0.0.1:1 (Connection refused); retrying, each attempt logged at DEBUG by "
        "lib.client"
    ]
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    clock.now += 5.0  # 10 s after the first line
    log.failed("127.0.0.1:1", "Connection refused", "lib.client")
    assert told_lines(caplog)[1:] == [
        "still cannot connect to 127.0.0.1:1 (Connection refused): 41 failed attempts in the last 10.0s"
    ]
    clock.now += 9.9
    log.failed("127.0.0.1:1", "Connection refused", "lib.client")
    assert len(told_lines(caplog)) == 2  # the next summary waits for its interval


def test_a_new_error_is_told_at_once_and_a_summary_counts_each_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    log = ConnectionLog(interval_s=10, clock=clock)
    log.failed("k:9092", "Connection refused", "a")
    clock.now += 1
    log.failed("k:9092", "Connection setup timed out in state CONNECT", "a")
    log.failed("k:9092", "Connection refused", "a")
    log.failed("k:9092", "Connection refused", "a")
    clock.now += 10
    log.failed("k:9092", "Connection setup timed out in state CONNECT", "a")
    assert told_lines(caplog)[1:] == [
        "cannot connect to k:9092 (Connection setup timed out in state CONNECT); retrying, each attempt "
        "logged at DEBUG by a",
        "still cannot connect to k:9092 (Connection refused: 2, Connection setup timed out in state CONNECT: "
        "1): 3 failed attempts in the last 10.0s",
    ]


def test_addresses_are_told_apart_and_forgotten_after_a_quiet_spell(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    log = ConnectionLog(interval_s=10, quiet_s=60, clock=clock)
    log.failed("a:9092", "Connection refused", "x")
    log.failed("b:9092", "Connection refused", "x")
    clock.now += 59
    log.failed("a:9092", "Connection refused", "x")  # a's story goes on: a summary
    clock.now += 61
    log.failed("a:9092", "Connection refused", "x")  # 61 s after a's last failure: a first again
    log.failed("b:9092", "Connection refused", "x")  # 120 s after b's: a first again
    assert [line.split(" (")[0] for line in told_lines(caplog)] == [
        "cannot connect to a:9092",
        "cannot connect to b:9092",
        "still cannot connect to a:9092",
        "cannot connect to a:9092",
        "cannot connect to b:9092",
    ]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (REFUSED, ("127.0.0.1:1", "Connection refused")),
        (
            REFUSED.replace("CONNECT)", "CONNECT, 3 identical error(s) suppressed)"),
            ("127.0.0.1:1", "Connection refused"),
        ),
        (
            "FAIL [rdkafka#producer-2] [thrd:sasl_ssl://k1.example:9093/bootstrap]: sasl_ssl://k1.example:9093"
            "/bootstrap: SSL handshake failed: ssl/tls alert certificate unknown (after 3ms in state "
            "SSL_HANDSHAKE)",
            ("k1.example:9093", "SSL handshake failed: ssl/tls alert certificate unknown"),
        ),
        (
            "FAIL [rdkafka#consumer-1] [thrd:nohost:9092/bootstrap]: nohost:9092/bootstrap: Failed to "
            "resolve 'nohost:9092': Name or service not known (after 2ms in state CONNECT)",
            ("nohost:9092", "Failed to resolve 'nohost:9092': Name or service not known"),
        ),
        (
            "FAIL [rdkafka#consumer-1] [thrd:[::1]:9092/1]: [::1]:9092/1: Connect to ipv6#[::1]:9092 failed: "
            "Connection refused (after 0ms in state CONNECT)",
            ("[::1]:9092", "Connection refused"),
        ),
        (
            "FAIL [rdkafka#consumer-4] [thrd:GroupCoordinator]: GroupCoordinator: 127.0.0.1:41113: Connect "
            "to ipv4#127.0.0.1:41113 failed: Connection refused (after 0ms in state CONNECT)",
            ("127.0.0.1:41113", "Connection refused"),
        ),
        ("MAXPOLL [rdkafka#consumer-1] [thrd:main]: Application maximum poll interval exceeded", None),
        ("SESSTMOUT [rdkafka#consumer-1] [thrd:main]: Consumer group session timed out", None),
    ],
)
def test_librdkafka_lines_about_failed_connections(line: str, expected: tuple[str, str] | None) -> None:
    assert librdkafka_failure(line) == expected


def test_both_clients_name_a_refused_connection_alike() -> None:
    assert reason_of(str(kafka_errors.KafkaConnectionError("111 ECONNREFUSED"))) == "Connection refused"
    assert reason_of("Connect to ipv4#127.0.0.1:1 failed: Connection refused") == "Connection refused"
    assert (
        reason_of("KafkaConnectionError: DNS Resolution failure")
        == "KafkaConnectionError: DNS Resolution failure"
    )


def test_a_librdkafka_failure_goes_to_debug_other_lines_keep_their_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client = logging.getLogger("test_connection_log.client")
    sink = LibrdkafkaLog(client, lambda text: text.replace("s3cret", "*****"), ConnectionLog(clock=Clock()))
    fac, name, rest = REFUSED.split(" ", 2)
    sink.log(logging.ERROR, "%s [%s] %s", fac, name.strip("[]"), rest.replace("refused", "refused s3cret"))
    sink.log(
        logging.INFO, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", "[thrd:k:9092/1]: k:9092/1: Disconnected"
    )
    sink.log(logging.WARNING, "%s [%s] %s", "MAXPOLL", "rdkafka#consumer-1", "[thrd:main]: exceeded")
    shown = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert [(n, level) for n, level, _ in shown] == [
        ("test_connection_log.client", "DEBUG"),
        (LOGGER.name, "WARNING"),
        ("test_connection_log.client", "INFO"),  # an idle connection the broker closed: not a failure
        ("test_connection_log.client", "WARNING"),
    ]
    assert "s3cret" not in "".join(m for _, _, m in shown) and "*****" in shown[1][2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_librdkafka_admin_client_tells_a_refused_connection_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    address = f"127.0.0.1:{closed_port()}"
    client = librdkafka_admin(ConsumerSettings(bootstrap_servers=address, group_id="g"), "test")
    deadline = time.monotonic() + 10
    while (
        len([r for r in caplog.records if r.name == LIBRDKAFKA_LOG.name]) < 5 and time.monotonic() < deadline
    ):
        client.poll(0.1)  # serves the log
    raw = [r for r in caplog.records if r.name == LIBRDKAFKA_LOG.name]
    assert len(raw) >= 5 and {r.levelname for r in raw} == {"DEBUG"}
    mine = [r.getMessage() for r in caplog.records if r.name == LOGGER.name and address in r.getMessage()]
    assert mine == [
        f"cannot connect to {address} (Connection refused); retrying, each attempt logged at DEBUG by "
        f"{LIBRDKAFKA_LOG.name}"
    ]


def test_the_library_kafka_python_clients_log_at_debug_and_tell_refused_connections(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """kafka-python's own records of a library client are at DEBUG (hidden at INFO); an application's
    kafka-python records, on its own threads, are left as they are while the library's client lives."""
    caplog.set_level(logging.INFO)
    address = f"127.0.0.1:{closed_port()}"
    settings = ConsumerSettings(bootstrap_servers=address, group_id="g", connect_timeout_s=1.5)
    application = threading.Timer(
        0.5, lambda: logging.getLogger("kafka.net.manager").info("the application's own line")
    )
    application.start()
    with pytest.raises(kafka_errors.KafkaError), admin_client(settings, CLIENT_ID):
        pass
    application.join(5)
    kafka_lines = [r.getMessage() for r in caplog.records if r.name.startswith("kafka.")]
    assert kafka_lines == ["the application's own line"]
    mine = [r.getMessage() for r in caplog.records if r.name == LOGGER.name and address in r.getMessage()]
    assert mine[:1] == [
        f"cannot connect to {address} (Connection refused); retrying, each attempt logged at DEBUG by "
        "kafka.net.connection"
    ]
