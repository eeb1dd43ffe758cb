"""Property: whatever a user puts into a settings field, through the constructor or the environment, the
result is valid settings or a ConfigurationError that names the field, never another exception.

"Valid" is checked independently of the validators: the librdkafka configuration derived from the
settings is accepted by librdkafka itself (created without bootstrap servers, so it connects nowhere), the
kafka-python configuration builds, and the checks that run when a consumer starts (identity, gate; the
probe replaced) raise nothing but ConfigurationError. Values are generated per field: anything at all
(types, huge numbers, infinities, unicode, empty strings) and values near the field's valid range.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka
import pytest
from fakes import FakeFactory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from static_consumer._base.errors import ConfigurationError
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.modes import client_config
from static_consumer._core.seams import Seams
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings import ConsumerSettings
from static_consumer.settings._config import kafka_python_config
from static_consumer.settings._rules import env_var

FIELDS = sorted(ConsumerSettings.model_fields)
BASE: dict[str, Any] = {"bootstrap_servers": "kafka-0:9092", "group_id": "orders", "topics": ("t",)}
# The other settings under which a field means something, so that a refusal is about the field itself
# (the combination rules have their own tests in test_settings.py).
CONTEXT: dict[str, dict[str, Any]] = {
    "heartbeat_interval_ms": {"session_timeout_ms": 3_600_000, "max_poll_interval_ms": 86_400_000},
    "session_timeout_ms": {"max_poll_interval_ms": 86_400_000},
    "remote_assignor": {"protocol": "consumer"},
    "replicas": {"assignment_mode": "ordinal"},
    "assignment_mode": {"replicas": 3},
    "sasl_mechanism": {"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "p"},
    "sasl_username": {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_password": "p"},
    "sasl_password": {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u"},
    "ssl_ca_location": {"security_protocol": "SSL"},
    "ssl_certificate_location": {"security_protocol": "SSL", "ssl_key_location": "/k.pem"},
    "ssl_key_location": {"security_protocol": "SSL", "ssl_certificate_location": "/c.pem"},
    "ssl_key_password": {
        "security_protocol": "SSL",
        "ssl_certificate_location": "/c.pem",
        "ssl_key_location": "/k.pem",
    },
    "instance_id": {"static_policy": "require"},
}
# Anything: wrong types, huge and non-finite numbers, unicode, empty strings, containers.
anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(),
    st.text(),
    st.sampled_from(["", " ", "0", "-1", "inf", "nan", "1e309", "true", "null", "é", "\u202e", "a,b"]),
    st.lists(st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2),
)
LIBRDKAFKA_KEYS = ["fetch.min.bytes", "fetch.wait.max.ms", "check.crcs", "client.rack", "queued.min.messages"]
librdkafka_values = st.one_of(st.integers(), st.booleans(), st.floats(), st.text(max_size=12))
near_valid: dict[str, st.SearchStrategy[Any]] = {
    "int": st.one_of(st.integers(min_value=-2, max_value=100_000_000), st.integers(min_value=2**31 - 2)),
    "float": st.one_of(st.floats(min_value=-1, max_value=1e6), st.floats(min_value=1e6)),
    "librdkafka": st.dictionaries(
        st.one_of(st.sampled_from(LIBRDKAFKA_KEYS), st.text(max_size=15)), librdkafka_values, max_size=3
    ),
    "topics": st.one_of(
        st.lists(st.text(alphabet="ab.-_^*(", max_size=6), max_size=3),
        st.text(alphabet="ab,^(* ", max_size=8),
    ),
}
OPEN_BROKER = BrokerCapabilities(api_versions={11: (0, 9), 13: (0, 5), 68: (0, 1)})  # no session bounds
_QUIET = logging.getLogger("test_settings_props.librdkafka")
_QUIET.propagate = False
_QUIET.addHandler(logging.NullHandler())


def values_for(field: str) -> st.SearchStrategy[Any]:
    annotation = str(ConsumerSettings.model_fields[field].annotation)
    kind = "int" if "int" in annotation else "float" if "float" in annotation else field
    return st.one_of(anything, near_valid.get(kind, anything))


def as_env(value: Any) -> str | None:
    """What a user would write in the environment for ``value``; None when no environment can hold it."""
    text = json.dumps(value) if isinstance(value, dict | list) else str(value)
    if "\x00" in text:
        return None
    try:
        text.encode()
    except UnicodeEncodeError:  # lone surrogates cannot be put into the environment
        return None
    return text


@contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    # Not monkeypatch: a function-scoped fixture is not reset between Hypothesis examples.
    os.environ[name] = value
    try:
        yield
    finally:
        del os.environ[name]


def build(field: str, value: Any, *, via_env: bool) -> ConsumerSettings | ConfigurationError:
    values = {**BASE, **CONTEXT.get(field, {})}
    values.pop(field, None)
    try:
        if not via_env:
            return ConsumerSettings(**values, **{field: value})
        with environment(env_var(field), value):
            return ConsumerSettings(**values)
    except ConfigurationError as exc:
        return exc


def assert_usable(result: ConsumerSettings) -> None:
    """Settings that built must also make client configurations their clients accept."""
    kafka_python_config(result)
    config: dict[str, Any] = {
        k: v
        for k, v in client_config(result, "orders-0").items()
        # Connection and security keys are left out: without them librdkafka connects nowhere and does
        # not open certificate files (checked when the client is made, see the TLS settings).
        if k != "bootstrap.servers" and not k.startswith(("ssl.", "sasl.", "security."))
    }
    try:
        confluent_kafka.Consumer({**config, "logger": _QUIET}).close()
    except Exception as exc:  # noqa: BLE001 - any refusal fails the property
        pytest.fail(f"settings were accepted but librdkafka refuses them: {exc!r}")
    try:
        seams = Seams(adapter_factory=FakeFactory([]), probe=lambda s, **_: OPEN_BROKER)
        with StaticConsumer(result, env={"POD_NAME": "orders-0"}, seams=seams):
            pass
    except ConfigurationError:
        pass  # the identity checks of start(): typed, before any network I/O


def check(field: str, value: Any, *, via_env: bool) -> None:
    result = build(field, value, via_env=via_env)
    if isinstance(result, ConfigurationError):
        assert field in str(result), f"{field}={value!r}: the message does not name the field: {result}"
    else:
        assert_usable(result)


PROPERTY = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@pytest.mark.parametrize("field", FIELDS)
@PROPERTY
@given(data=st.data())
def test_any_constructor_value_gives_valid_settings_or_a_configuration_error_naming_the_field(
    field: str, data: st.DataObject
) -> None:
    check(field, data.draw(values_for(field)), via_env=False)


@pytest.mark.parametrize("field", FIELDS)
@PROPERTY
@given(data=st.data())
def test_any_environment_value_gives_valid_settings_or_a_configuration_error_naming_the_field(
    field: str, data: st.DataObject
) -> None:
    text = as_env(data.draw(values_for(field)))
    if text is not None:
        check(field, text, via_env=True)
