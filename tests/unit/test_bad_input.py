"""Bad input: each mistake a new user made ends in a ConfigurationError (exit 78)
when the settings are built, before any network I/O, instead of a raw exception (exit 70) later.

The rules tested here need no broker; a missing topic and a wrong SASL password do, and are tested on a
real one in integration/test_bad_input_broker.py.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest

import static_consumer
from static_consumer import ConfigurationError, exit_code_for
from static_consumer._security.secrets import REDACTED
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import kafka_python_config
from static_consumer.settings._rules import OTHER_ENV_VARS, env_var

QUIET = logging.getLogger("test_bad_input.librdkafka")
QUIET.propagate = False
BASE: dict[str, Any] = {"bootstrap_servers": "kafka-0:9092", "group_id": "orders", "topics": ("t",)}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STATIC_CONSUMER_"):
            monkeypatch.delenv(name)


def refused(**overrides: Any) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(**(BASE | overrides))
    assert exit_code_for(info.value) == 78
    return info.value


# -- the librdkafka passthrough, checked by librdkafka's own configuration parser ---------------------

# (passthrough, the key the message must name, librdkafka's reason)
LIBRDKAFKA_REFUSES = [
    ({"fetch.min.byte": 1024}, "fetch.min.byte", "No such configuration property"),
    ({"fetch.wait.max.ms": -1}, "fetch.wait.max.ms", "outside allowed range"),
    ({"isolation.level": "sometimes"}, "isolation.level", "Invalid value"),
    ({"check.crcs": "maybe"}, "check.crcs", "Expected bool value"),  # confluent-kafka's own check
    ({"fetch.max.bytes": 1000}, "fetch.max.bytes", "must be >= `message.max.bytes`"),  # a cross-check
    ({"queued.min.messages": 2**32 + 5}, "queued.min.messages", "32-bit"),  # librdkafka would read 5
]


@pytest.mark.parametrize(("passthrough", "key", "reason"), LIBRDKAFKA_REFUSES)
def test_a_passthrough_librdkafka_refuses_is_a_configuration_error_naming_the_key(
    passthrough: dict[str, Any], key: str, reason: str
) -> None:
    message = str(refused(librdkafka=passthrough))
    assert f"librdkafka[{key!r}]" in message and reason in message, message


@pytest.mark.parametrize(("passthrough", "key", "reason"), LIBRDKAFKA_REFUSES[:3])
def test_the_same_from_the_environment(
    passthrough: dict[str, Any], key: str, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_LIBRDKAFKA", json.dumps(passthrough))
    message = str(refused())
    assert f"librdkafka[{key!r}]" in message and reason in message and "STATIC_CONSUMER_LIBRDKAFKA" in message


def test_every_refused_key_is_named_at_once_and_good_keys_are_not() -> None:
    message = str(refused(librdkafka={"fetch.min.byte": 1, "fetch.wait.max.ms": -1, "client.rack": "a"}))
    assert "'fetch.min.byte'" in message and "'fetch.wait.max.ms'" in message
    assert "'client.rack'" not in message


def test_a_confluent_kafka_callback_key_is_refused_not_crashed_on() -> None:
    # confluent-kafka itself (not librdkafka) raises TypeError for these when the client is created.
    assert "librdkafka['error_cb']" in str(refused(librdkafka={"error_cb": "print"}))


def test_valid_passthroughs_are_accepted_unchanged() -> None:
    passthrough = {
        "fetch.min.bytes": 1024,
        "check.crcs": True,
        "client.rack": "é",
        "statistics.interval.ms": 0,
    }
    assert dict(ConsumerSettings(**BASE, librdkafka=passthrough).librdkafka) == passthrough


def sockets() -> set[str]:
    """This process's open sockets (Linux /proc)."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def new_sockets_when_asked_for_metadata(client: Any, before: set[str]) -> set[str]:
    with contextlib.suppress(confluent_kafka.KafkaException):
        client.list_topics(timeout=0.5)  # makes librdkafka connect, if it has anywhere to connect to
    return sockets() - before


def test_the_check_opens_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    real = confluent_kafka.Consumer
    opened: list[set[str]] = []

    def watched(config: dict[str, Any]) -> Any:
        assert "bootstrap.servers" not in config and "metadata.broker.list" not in config
        before = sockets()
        client = real(config)
        opened.append(new_sockets_when_asked_for_metadata(client, before))
        return client

    monkeypatch.setattr(confluent_kafka, "Consumer", watched)
    refused(librdkafka={"client.rack": uuid.uuid4().hex, "fetch.min.byte": 1})  # unique: not cached
    assert opened and all(not new for new in opened), opened

    # The control: the same measurement sees the connection of a handle that has a broker address.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        before = sockets() | {f"socket:[{os.fstat(listener.fileno()).st_ino}]"}
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        client = real({"group.id": "control", "bootstrap.servers": address, "logger": QUIET})
        try:
            assert new_sockets_when_asked_for_metadata(client, before)
        finally:
            client.close()


def test_librdkafka_reasons_never_show_a_secret_value(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"

    def echoing(config: dict[str, Any]) -> Any:  # as if librdkafka quoted the value it refused
        raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(-186, f"bad value {secret!r}"))

    monkeypatch.setattr(confluent_kafka, "Consumer", echoing)
    message = str(refused(librdkafka={"sasl.oauthbearer.client.secret": secret}))
    assert secret not in message and REDACTED in message, message


# -- durations that no client can wait for -----------------------------------------------------------


@pytest.mark.parametrize("field", ["connect_timeout_s", "shutdown_timeout_s"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), "inf", "Infinity", "1e309", 10**9])
def test_durations_must_be_finite_and_sane(field: str, value: object) -> None:
    message = str(refused(**{field: value}))
    assert f"{field} (STATIC_CONSUMER_{field.upper()})" in message, message


@pytest.mark.parametrize("value", ["inf", "nan", "-inf", "1e400"])
def test_an_infinite_connect_timeout_from_the_environment(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_CONNECT_TIMEOUT_S", value)
    assert "connect_timeout_s (STATIC_CONSUMER_CONNECT_TIMEOUT_S)" in str(refused())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("session_timeout_ms", 3_600_001),  # librdkafka: 1..3600000
        ("heartbeat_interval_ms", 3_600_001),
        ("max_poll_interval_ms", 86_400_001),  # librdkafka: 1..86400000
        ("replicas", 2**31),  # a StatefulSet's replicas is an int32
    ],
)
def test_numbers_beyond_what_librdkafka_and_kubernetes_accept_are_refused(field: str, value: int) -> None:
    extra = {"assignment_mode": "ordinal"} if field == "replicas" else {}
    extra |= {"max_poll_interval_ms": 86_400_000} if field.endswith("timeout_ms") else {}
    assert f"{field} (STATIC_CONSUMER_{field.upper()})" in str(refused(**{field: value}, **extra))


def test_the_largest_accepted_timeouts_still_make_client_configs() -> None:
    settings = ConsumerSettings(**BASE, connect_timeout_s=3600, shutdown_timeout_s=3600)
    assert kafka_python_config(settings)["request_timeout_ms"] == 3_600_000


# -- misspelled environment variables ---------------------------------------------------------------


def test_a_misspelled_variable_is_warned_about_naming_the_closest_field(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_SESION_TIMEOUT_MS", "60000")
    caplog.set_level(logging.WARNING, logger="static_consumer")
    settings = ConsumerSettings(**BASE)
    assert settings.session_timeout_ms == 45000  # ignored, as before: but no longer silently
    warnings = [
        r.getMessage() for r in caplog.records if "STATIC_CONSUMER_SESION_TIMEOUT_MS" in r.getMessage()
    ]
    assert len(warnings) == 1, caplog.text
    assert "STATIC_CONSUMER_SESSION_TIMEOUT_MS" in warnings[0] and "session_timeout_ms" in warnings[0]
    assert "60000" not in warnings[0]  # values are never echoed: the variable could hold a secret


def test_the_warning_comes_once_per_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_TOPIC", "orders")
    caplog.set_level(logging.WARNING, logger="static_consumer")
    for _ in range(3):
        ConsumerSettings(**BASE)
    assert sum("STATIC_CONSUMER_TOPIC " in r.getMessage() + " " for r in caplog.records) == 1, caplog.text
    assert "STATIC_CONSUMER_TOPICS" in caplog.text


def test_a_variable_far_from_every_field_is_named_without_a_guess(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_ZZZ", "1")
    caplog.set_level(logging.WARNING, logger="static_consumer")
    ConsumerSettings(**BASE)
    assert "STATIC_CONSUMER_ZZZ" in caplog.text and "docs/configuration.md" in caplog.text


@pytest.mark.parametrize(
    "name",
    [
        "STATIC_CONSUMER_SESSION_TIMEOUT_MS",  # a field; lower case works too, as in pydantic-settings
        "static_consumer_group_id",
        "STATIC_CONSUMER_KAFKA_VERSION",  # read by the test harness, not a setting
        "STATIC_CONSUMER_CACHE_DIR",
    ],
)
def test_known_variables_are_not_warned_about(
    name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(name, "60000" if "TIMEOUT" in name else "x")
    caplog.set_level(logging.WARNING, logger="static_consumer")
    ConsumerSettings(**BASE)
    assert "not a setting" not in caplog.text, caplog.text


def test_every_other_variable_the_package_reads_is_known() -> None:
    # A variable read elsewhere in the package (harness, Spark bridge) must not be warned about.
    package = Path(static_consumer.__file__).parent
    read = {
        name
        for path in package.rglob("*.py")
        for name in re.findall(r"STATIC_CONSUMER_[A-Z_]*[A-Z]", path.read_text())
    }
    fields = {env_var(name) for name in ConsumerSettings.model_fields}
    assert read - fields - {"STATIC_CONSUMER_"} <= OTHER_ENV_VARS, read - fields - OTHER_ENV_VARS


def test_misspelled_keyword_arguments_are_still_refused() -> None:
    assert "unknown setting 'sesion_timeout_ms'" in str(refused(sesion_timeout_ms=60000))


def test_building_settings_stays_cheap() -> None:
    # The passthrough check creates (and at once destroys) a librdkafka handle; measured under load.
    began = time.perf_counter()
    for _ in range(50):
        ConsumerSettings(**BASE, librdkafka={"fetch.min.bytes": 1024, "client.rack": "a"})
    per_build = (time.perf_counter() - began) / 50
    assert per_build < 0.25, per_build  # a generous bound for a loaded machine; typically ~1 ms


# -- found by the property test -----------------------------------------------------------------------


@pytest.mark.parametrize("group_id", [" ", "\t", " \n "])
def test_a_blank_group_id_is_refused(group_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # librdkafka trims ASCII whitespace from the value, and a consumer without a group id makes
    # confluent-kafka 2.16 abort the whole process (an assertion in Consumer_init), after the probe.
    assert "group_id (STATIC_CONSUMER_GROUP_ID)" in str(refused(group_id=group_id))
    monkeypatch.setenv("STATIC_CONSUMER_GROUP_ID", group_id)
    with pytest.raises(ConfigurationError, match=r"group_id \(STATIC_CONSUMER_GROUP_ID\)"):
        ConsumerSettings(bootstrap_servers="kafka-0:9092")


def test_a_group_id_is_used_as_librdkafka_reads_it() -> None:
    assert ConsumerSettings(**(BASE | {"group_id": " orders "})).group_id == "orders"


def test_a_refusal_repeats_the_hint_for_a_misspelled_required_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_BOOTSTRAP_SERVER", "kafka-0:9092")
    with pytest.raises(ConfigurationError) as info:
        ConsumerSettings(group_id="orders")
    message = str(info.value)
    assert "bootstrap_servers is required" in message
    assert "did you mean STATIC_CONSUMER_BOOTSTRAP_SERVERS" in message and "kafka-0" not in message
