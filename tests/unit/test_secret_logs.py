"""Client-library logs and the join plan never show a configured secret (no broker needed).

kafka-python logs its whole configuration and, for SASL PLAIN, the authentication bytes at DEBUG;
the end-to-end check against a SASL listener is integration/test_security.py.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import Any

import kafka.errors as kafka_errors
import pytest
from fakes import FakeFactory

from static_consumer._base.errors import AuthenticationError, ConfigurationError
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.seams import Seams
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.kafka_python import translate
from static_consumer._security.secrets import scrub, scrubbed_logs
from static_consumer.settings import REDACTED, ConsumerSettings

PASSWORD = "pw-Qx71-\u00e9t\u00e9"  # non-ASCII: a bytes repr escapes it
SASL: dict[str, Any] = {
    "bootstrap_servers": "k:9092",
    "group_id": "g",
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "SCRAM-SHA-256",
    "sasl_username": "alice",
    "sasl_password": PASSWORD,
}


@pytest.fixture
def kafka_debug() -> Iterator[io.StringIO]:
    """A handler on a kafka-python logger, as an application logging at DEBUG would have."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(name)s %(message)s"))
    logger = logging.getLogger("kafka.net.connection")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_secrets_are_masked_in_kafka_logs_while_a_client_lives(kafka_debug: io.StringIO) -> None:
    log = logging.getLogger("kafka.net.connection")
    auth_bytes = f"alice\0alice\0{PASSWORD}".encode()
    with scrubbed_logs([PASSWORD]):
        log.debug("configuration: %s", {"sasl_plain_password": PASSWORD})
        log.debug("Request 3: SaslAuthenticateRequest(auth_bytes=%r)", auth_bytes)
        try:
            raise kafka_errors.KafkaConnectionError(f"lost with {PASSWORD}")
        except kafka_errors.KafkaConnectionError:
            log.exception("connection failed")
    log.debug("after: %s", PASSWORD)  # the filter is removed with the client

    lines = kafka_debug.getvalue()
    before, after = lines.split("after: ")
    assert PASSWORD not in before and repr(PASSWORD.encode())[2:-1] not in before
    assert before.count(REDACTED) == 3  # the config, the auth bytes and the traceback
    assert after.strip() == PASSWORD


def test_scrub_masks_plain_and_bytes_repr_forms() -> None:
    escaped = repr(PASSWORD.encode())[2:-1]
    assert scrub(f"a {PASSWORD} b {escaped}", [PASSWORD]) == f"a {REDACTED} b {REDACTED}"


def test_a_sasl_refusal_is_an_authentication_error_which_is_a_configuration_error() -> None:
    settings = ConsumerSettings(**SASL)
    refusal = kafka_errors.SaslAuthenticationFailedError(f"invalid credentials {PASSWORD}")
    error = translate(refusal, settings, "describe group g")
    assert isinstance(error, AuthenticationError) and isinstance(error, ConfigurationError)
    assert not error.retriable and error.exit_code == 78
    assert "'alice'" in str(error) and PASSWORD not in str(error)


def test_the_join_plan_repr_leaves_out_the_client_config() -> None:
    settings = ConsumerSettings(**SASL, topics=("t",), instance_id="app-0")
    caps = BrokerCapabilities(api_versions={11: (0, 9), 13: (0, 5), 68: (0, 1)}, broker_version="4.3")
    consumer = StaticConsumer(
        settings, env={}, seams=Seams(adapter_factory=FakeFactory([]), probe=lambda s, **_: caps)
    )
    with consumer:
        plan = consumer.plan
    assert plan is not None
    assert plan.config["sasl.password"] == PASSWORD  # librdkafka still gets it
    assert PASSWORD not in repr(plan) and "app-0" in repr(plan)
