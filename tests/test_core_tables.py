"""The core's tables say what the code does: State's documented transitions, the error table's codes."""

from __future__ import annotations

import re

import confluent_kafka
import kafka.errors as kafka_errors
import pytest

from static_consumer._core.session import TRANSITIONS, Session, State
from static_consumer._kafka.codes import CODES, ErrorKind, classify


def _documented_transitions() -> dict[State, frozenset[State]]:
    doc = State.__doc__ or ""
    rows = re.findall(r"^\s+([A-Z]+)\s+->(.*)$", doc, flags=re.M)
    return {State[name]: frozenset(State[t.strip()] for t in to.split(",") if t.strip()) for name, to in rows}


def test_the_state_docstring_table_is_the_transition_table() -> None:
    assert _documented_transitions() == dict(TRANSITIONS)
    assert set(TRANSITIONS) == set(State)


def test_the_session_refuses_a_transition_the_table_does_not_have() -> None:
    session = Session.__new__(Session)
    session.state = State.CLOSED
    with pytest.raises(RuntimeError, match="no transition CLOSED -> RUNNING"):
        session.move(State.RUNNING)


LIBRDKAFKA_SPELLING = {"UNKNOWN_TOPIC_OR_PARTITION": "UNKNOWN_TOPIC_OR_PART"}


def test_every_code_in_the_table_has_librdkafkas_number_and_name() -> None:
    for code, entry in CODES.items():
        attribute = LIBRDKAFKA_SPELLING.get(entry.name, entry.name)
        assert getattr(confluent_kafka.KafkaError, attribute) == code, entry


def test_broker_codes_have_kafka_pythons_errno_and_retriability() -> None:
    for code, entry in CODES.items():
        if code < 0:
            continue  # librdkafka's own
        error = kafka_errors.for_code(code)
        assert error.errno == code, entry
        assert bool(error.retriable) == entry.retriable, entry


def test_a_fatal_error_is_fenced_or_unreleased_by_its_cause_else_fatal() -> None:
    assert classify(-150, fatal=False, cause=82) is ErrorKind.FENCED
    assert classify(-150, cause=111) is ErrorKind.UNRELEASED
    assert classify(-150, cause=69) is ErrorKind.PROTOCOL_REFUSED  # KIP-848: a classic group it cannot join
    assert classify(-150) is ErrorKind.FATAL
    assert classify(82) is ErrorKind.FENCED  # a commit refused after the fence
    assert classify(-195, fatal=True) is ErrorKind.FATAL  # librdkafka's fatal flag wins over the code
    assert classify(-195) is ErrorKind.TRANSIENT
    assert classify(12345) is ErrorKind.OTHER
