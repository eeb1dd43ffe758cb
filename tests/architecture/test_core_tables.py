"""The core's tables say what the code does: State's documented transitions, the error table's codes, and
the one place that chooses the mode."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import confluent_kafka
import kafka.errors as kafka_errors
import pytest

import static_consumer
from static_consumer._base.codes import CODES, ErrorKind, classify
from static_consumer._core.membership import ClassicMode, ConsumerMode
from static_consumer._core.modes import mode_for
from static_consumer._core.ordinal import OrdinalMode
from static_consumer._core.session import TRANSITIONS, Session, State
from static_consumer.settings import ConsumerSettings


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


LIBRARY = Path(static_consumer.__file__).parent
# What is decided where: the settings that choose a mode are read by the mode choice only, the policies
# by the policy object only (the settings package defines and validates them all).
DECIDED_IN = {
    "protocol": "_core/modes.py",
    "assignment_mode": "_core/modes.py",
    "group_protocol": "_core/modes.py",
    "static_policy": "_core/policy.py",
    "duplicate_policy": "_core/policy.py",
}


def _decisions(path: Path) -> list[tuple[str, str]]:
    """Comparisons (but with None) and look-ups on an attribute named like a deciding setting
    (``settings.protocol == ...``, ``table[settings.static_policy]``): (setting, "file:line")."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value is None for o in operands):
                continue  # whether something is known, not what it is
        elif isinstance(node, ast.Subscript):
            operands = [node.slice]
        else:
            continue
        names = {o.attr for o in operands if isinstance(o, ast.Attribute)}
        for name in DECIDED_IN.keys() & names:
            found.append((name, f"{path.relative_to(LIBRARY)}:{node.lineno}"))
    return found


def test_every_protocol_and_policy_decision_is_made_by_the_mode_choice_or_the_policy() -> None:
    """Every decision that depends on the group protocol or the assignment mode lives in the Mode objects
    (membership.ClassicMode, membership.ConsumerMode, ordinal.OrdinalMode), picked once by
    modes.mode_for; every one on static_policy or duplicate_policy in policy.MembershipPolicy."""
    elsewhere = [
        f"{name} at {where}"
        for path in sorted(LIBRARY.rglob("*.py"))
        if "settings" not in path.relative_to(LIBRARY).parts
        for name, where in _decisions(path)
        if not where.startswith(DECIDED_IN[name] + ":")
    ]
    assert elsewhere == []
    seen = {name for path in LIBRARY.rglob("*.py") for name, _ in _decisions(path)}
    assert {"protocol", "assignment_mode", "static_policy", "duplicate_policy"} <= seen  # the test sees them


def test_the_mode_follows_the_assignment_mode_and_the_group_protocol() -> None:
    base = {"bootstrap_servers": "k:9092", "group_id": "g", "topics": ("t",)}
    assert type(mode_for(ConsumerSettings(**base))) is ClassicMode
    assert type(mode_for(ConsumerSettings(**base, protocol="consumer"))) is ConsumerMode
    ordinal = ConsumerSettings(**base, assignment_mode="ordinal", replicas=3)
    assert type(mode_for(ordinal)) is OrdinalMode
    assert type(mode_for(ordinal.model_copy(update={"protocol": "consumer"}))) is OrdinalMode
