"""librdkafka's log lines through the adapter: a classic member's refused Heartbeat, which librdkafka only
logs (in its cgrp debug context), becomes an out-of-band error; debug lines the application did not ask
for are read, never logged. The line is librdkafka 2.16's against Kafka 4.3.1 with KRaft's
StandardAuthorizer (integration/test_acls.py revokes the ACL on a broker)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fakes import MODERN, Assign, FakeFactory, OutOfBand, tp

from static_consumer._base.codes import ErrorKind
from static_consumer._base.connections import LibrdkafkaLog
from static_consumer._base.errors import AuthorizationError
from static_consumer._core.confluent import LIBRDKAFKA_LOGGER, ConfluentAdapter, _ClientLog, _with_cgrp_debug
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer.settings import ConsumerSettings

REFUSED = (
    '[thrd:main]: Group "orders" heartbeat error response in state up (join-state steady, 3 partition(s) '
    "assigned): Broker: Group authorization failed"
)
SENT = '[thrd:main]: Group "orders" heartbeat error response in state up (join-state steady, 3 partition(s) '


def line(log: _ClientLog, text: str, facility: str = "HEARTBEAT", level: int = logging.DEBUG) -> None:
    log.log(level, "%s [%s] %s", facility, "rdkafka#consumer-1", text)  # as confluent-kafka calls it


@pytest.mark.parametrize(
    ("config", "debug", "quiet"),
    [
        ({"group.id": "g"}, "cgrp", True),
        ({"group.id": "g", "group.protocol": "classic"}, "cgrp", True),
        ({"group.id": "g", "debug": "broker, fetch"}, "broker,fetch,cgrp", False),
        ({"group.id": "g", "debug": "all"}, "all", False),
        ({"group.id": "g", "group.protocol": "consumer"}, None, False),  # a refusal there is _FATAL
        ({}, None, False),  # no group, no heartbeat
    ],
)
def test_a_classic_member_reads_the_cgrp_context(
    config: dict[str, Any], debug: str | None, quiet: bool
) -> None:
    assert _with_cgrp_debug(config) is quiet
    assert config.get("debug") == debug


def test_a_refused_heartbeat_is_an_authorization_error_and_other_lines_are_not() -> None:
    errors: list[PollError] = []
    log = _ClientLog(errors, LibrdkafkaLog(LIBRDKAFKA_LOGGER), quiet=True)
    line(log, '[thrd:main]: Heartbeat for group "orders" generation id 1')
    line(log, REFUSED.replace("Group authorization failed", "Specified group generation id is not valid"))
    line(log, REFUSED, facility="JOINGROUP")
    assert errors == []
    line(log, REFUSED)
    (error,) = errors
    assert (error.code, error.kind, error.fatal) == (30, ErrorKind.AUTHORIZATION, False)
    assert error.reason == "Heartbeat failed: Broker: Group authorization failed"


def test_debug_lines_nobody_asked_for_are_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, LIBRDKAFKA_LOGGER.name)
    line(_ClientLog([], LibrdkafkaLog(LIBRDKAFKA_LOGGER), quiet=True), REFUSED)
    line(
        _ClientLog([], LibrdkafkaLog(LIBRDKAFKA_LOGGER), quiet=True),
        "[thrd:main]: session timed out",
        "SESSTMOUT",
        logging.WARNING,
    )
    line(_ClientLog([], LibrdkafkaLog(LIBRDKAFKA_LOGGER), quiet=False), SENT)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "SESSTMOUT [rdkafka#consumer-1] [thrd:main]: session timed out"),
        (logging.DEBUG, f"HEARTBEAT [rdkafka#consumer-1] {SENT}"),
    ]


def test_the_adapter_reports_the_line_out_of_band() -> None:
    adapter = ConfluentAdapter({"bootstrap.servers": "127.0.0.1:9", "group.id": "orders"})
    try:
        line(adapter._log, REFUSED)
        (error,) = adapter.take_errors()
        assert error.kind is ErrorKind.AUTHORIZATION and adapter.take_errors() == []
    finally:
        adapter.close()


def test_a_refused_heartbeat_ends_a_classic_member_naming_read_on_the_group() -> None:
    errors: list[PollError] = []
    line(_ClientLog(errors, LibrdkafkaLog(LIBRDKAFKA_LOGGER), quiet=True), REFUSED)
    settings = ConsumerSettings(
        bootstrap_servers="127.0.0.1:9092",
        group_id="orders",
        topics=("orders-in",),
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="orders-consumer",
        sasl_password="s3cret-pw",
    )
    script = [Assign((tp(0),)), None, OutOfBand(errors[0])]
    seams = Seams(adapter_factory=FakeFactory(script), probe=lambda s, **_: MODERN)
    c = StaticConsumer(settings, env={"POD_NAME": "orders-2"}, seams=seams)
    with c:
        with pytest.raises(AuthorizationError) as raised:
            for _ in range(4):
                c.poll(0.1)
        assert (raised.value.operation, raised.value.resource, raised.value.name) == (
            "READ",
            "Group",
            "orders",
        )
        assert "Heartbeat failed" in str(raised.value) and c.state is State.FAILED
