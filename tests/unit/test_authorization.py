"""A principal without an ACL, and a session timeout the broker refuses, end the consumer with a typed
error naming what to change, at the first refusal, instead of a join (or fetch) refused forever.

The texts are librdkafka 2.16's against Kafka 4.3.1 with KRaft's StandardAuthorizer; integration/
test_acls.py runs the same refusals on a broker."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest
from fakes import MODERN, Assign, FakeFactory, OutOfBand, rec, tp

from static_consumer._base.codes import ErrorKind
from static_consumer._base.errors import (
    EXIT_CONFIG,
    AuthorizationError,
    CapabilityError,
    SessionTimeoutOutOfBoundsError,
)
from static_consumer._core.confluent import poll_error
from static_consumer._core.consumer import State, StaticConsumer
from static_consumer._core.events import FatalError, MembershipListener
from static_consumer._core.seam import PollError
from static_consumer._core.seams import Seams
from static_consumer._kafka.acls import NEEDS, Acl, acl_for, authorization_error, code_in, regex_prefix
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings import ConsumerSettings

FIND_COORDINATOR = PollError(
    30,
    "GROUP_AUTHORIZATION_FAILED",
    "FindCoordinator response error: Group authorization failed.",
    False,
    False,
)
JOIN_GROUP = PollError(
    30, "GROUP_AUTHORIZATION_FAILED", "JoinGroup failed: Broker: Group authorization failed", False, False
)
FETCH = PollError(
    29,
    "TOPIC_AUTHORIZATION_FAILED",
    "Fetch from broker 1 failed: Broker: Topic authorization failed",
    False,
    False,
    topic="orders-in",
)
SUBSCRIBED = PollError(
    29,
    "TOPIC_AUTHORIZATION_FAILED",
    "Subscribed topic not available: orders-in: Broker: Topic authorization failed",
    False,
    False,
)
HEARTBEAT_TOPIC = PollError(
    29,
    "TOPIC_AUTHORIZATION_FAILED",
    "ConsumerGroupHeartbeat failed: Broker: Topic authorization failed",
    False,
    False,
)
HEARTBEAT_GROUP_TEXT = (
    "Fatal error: Broker: Group authorization failed: ConsumerGroupHeartbeat fatal error: Broker: Group "
    "authorization failed"
)
INVALID_SESSION = PollError(
    26, "INVALID_SESSION_TIMEOUT", "JoinGroup failed: Broker: Invalid session timeout", False, False
)
UNKNOWN_BOUNDS = BrokerCapabilities(MODERN.api_versions, broker_version="4.3")


class Fatals(MembershipListener):
    def __init__(self) -> None:
        self.seen: list[FatalError] = []

    def on_fatal(self, event: FatalError) -> None:
        self.seen.append(event)


def settings(**overrides: Any) -> ConsumerSettings:
    values: dict[str, Any] = {
        "bootstrap_servers": "127.0.0.1:9092",
        "group_id": "orders",
        "topics": ("orders-in",),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "orders-consumer",
        "sasl_password": "s3cret-pw",
    }
    return ConsumerSettings(**{**values, **overrides})


def consumer(
    script: list[Any], caps: BrokerCapabilities = MODERN, **overrides: Any
) -> tuple[StaticConsumer, Fatals]:
    fatals = Fatals()
    c = StaticConsumer(
        settings(**overrides),
        listeners=[fatals],
        env={"POD_NAME": "orders-2"},
        seams=Seams(adapter_factory=FakeFactory(script), probe=lambda s, **_: caps),
    )
    return c, fatals


@pytest.mark.parametrize(
    ("refusal", "protocol", "grant"),
    [
        (FIND_COORDINATOR, "classic", Acl("READ", "Group", "orders")),
        (JOIN_GROUP, "classic", Acl("READ", "Group", "orders")),
        (OutOfBand(FETCH), "classic", Acl("READ", "Topic", "orders-in")),
        (SUBSCRIBED, "classic", Acl("READ", "Topic", "orders-in")),
        (OutOfBand(HEARTBEAT_TOPIC), "consumer", Acl("READ", "Topic", "orders-in")),
        (
            poll_error(confluent_kafka.KafkaError(-150, HEARTBEAT_GROUP_TEXT)),
            "consumer",
            Acl("READ", "Group", "orders"),
        ),
    ],
)
def test_a_missing_acl_ends_the_consumer_naming_the_acl(refusal: Any, protocol: str, grant: Acl) -> None:
    c, fatals = consumer([refusal, Assign((tp(0),)), rec(0, 1)], protocol=protocol)
    with c:
        with pytest.raises(AuthorizationError) as raised:
            for _ in range(3):  # an out-of-band error is taken after the client call that reported it
                c.poll(0.1)
        error = raised.value
        assert (error.operation, error.resource, error.name) == (grant.operation, grant.resource, grant.name)
        assert error.exit_code == EXIT_CONFIG and not error.retriable
        message = str(error)
        assert f"grant {grant}" in message and "User:orders-consumer" in message
        assert "kafka-acls --add --allow-principal User:orders-consumer --operation Read" in message
        assert "s3cret-pw" not in message
        assert c.state is State.FAILED and len(fatals.seen) == 1
        with pytest.raises(AuthorizationError):
            c.poll(0.1)  # nothing more is handed out: the same error


def test_the_adapter_reads_a_fatal_heartbeat_refusal_as_authorization() -> None:
    error = poll_error(confluent_kafka.KafkaError(-150, HEARTBEAT_GROUP_TEXT))
    assert (error.fatal, error.cause, error.kind) == (True, 30, ErrorKind.AUTHORIZATION)


def test_an_acl_revoked_while_running_ends_the_consumer_at_the_refused_commit() -> None:
    denied = PollError(
        30, "GROUP_AUTHORIZATION_FAILED", "Commit failed: Broker: Group authorization failed", False, False
    )
    c, fatals = consumer([Assign((tp(0),)), rec(0, 1)])
    with c:
        record = c.poll(0.1) or c.poll(0.1)
        assert record is not None
        factory_adapter = c._session.adapter
        assert factory_adapter is not None
        factory_adapter.commit_failures.append(denied)  # type: ignore[attr-defined]
        with pytest.raises(AuthorizationError, match="grant READ on Group 'orders'"):
            c.commit(record)
        assert c.state is State.FAILED and len(fatals.seen) == 1


@pytest.mark.parametrize(
    ("caps", "says"),
    [
        (MODERN, "[1000, 1800000]"),
        (
            UNKNOWN_BOUNDS,
            "unknown here, Kafka's defaults are [6000, 1800000]: grant DESCRIBE_CONFIGS on the Cluster",
        ),
    ],
)
def test_a_session_the_coordinator_refuses_is_a_configuration_error(
    caps: BrokerCapabilities, says: str
) -> None:
    # The gate passes 3000 ms when it could not read the bounds (UNKNOWN_BOUNDS); with MODERN's bounds
    # the broker's own minimum is higher than the probe said (a broker config changed since).
    c, fatals = consumer(
        [INVALID_SESSION, Assign((tp(0),))], caps=caps, session_timeout_ms=3000, heartbeat_interval_ms=1000
    )
    with c:
        with pytest.raises(SessionTimeoutOutOfBoundsError) as raised:
            c.poll(0.1)
    error = raised.value
    assert error.exit_code == EXIT_CONFIG and isinstance(error, CapabilityError) and not error.retriable
    message = str(error)
    assert "refused session_timeout_ms=3000" in message and says in message
    assert "STATIC_CONSUMER_SESSION_TIMEOUT_MS" in message and "INVALID_SESSION_TIMEOUT" in message
    assert len(fatals.seen) == 1


@pytest.mark.parametrize(
    ("code", "text", "consumer_side", "acl"),
    [
        (
            30,
            "[Error 30] GroupAuthorizationFailedError: FindCoordinatorResponse error for GROUP/g7: ",
            False,
            Acl("DESCRIBE", "Group", "g7"),
        ),
        (
            30,
            "[Error 30] GroupAuthorizationFailedError: LeaveGroupRequest failed with response",
            False,
            Acl("READ", "Group", "orders"),
        ),
        (
            29,
            "[Error 29] TopicAuthorizationFailedError: describe topic t9",
            False,
            Acl("DESCRIBE", "Topic", "t9"),
        ),
        (
            29,
            "ConsumerGroupDescribe: The group has described topic(s) that the client is not authorized to "
            "describe.",
            False,
            Acl("DESCRIBE", "Topic", "orders-in"),
        ),
        (
            30,
            "FindCoordinator response error: Group authorization failed.",
            True,
            Acl("READ", "Group", "orders"),
        ),
        (31, "Cluster authorization failed", False, Acl("DESCRIBE", "Cluster", "kafka-cluster")),
    ],
)
def test_which_acl_a_refusal_asks_for(code: int, text: str, consumer_side: bool, acl: Acl) -> None:
    assert code_in(text) == code
    assert acl_for(code, text, group="orders", topics=["orders-in", "^re.*"], consumer=consumer_side) == acl


def test_the_admin_words_name_the_acl_and_never_a_secret() -> None:
    s = settings()
    error = authorization_error(
        s,
        code_in("[Error 30] x LeaveGroupRequest s3cret-pw"),
        "[Error 30] x LeaveGroupRequest s3cret-pw",
        "remove members",
    )
    assert "s3cret-pw" not in str(error) and "grant READ on Group 'orders'" in str(error)
    unknown = authorization_error(s, None, "refused", "probe")
    assert unknown.operation is None and "docs/security.md" in str(unknown)


def test_the_table_says_why_and_what_happens_without_each_acl() -> None:
    for operation, needs in NEEDS.items():
        assert needs, operation
        for need in needs:
            assert need.why and need.without, (operation, need)
            assert need.acl.operation in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS", "WRITE")
            assert need.optional == ("AuthorizationError" not in need.without), (operation, need)


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        ("^orders-.*", "orders-"),
        (r"^orders\.(eu|us)-.*", "orders."),
        ("^orders-?x", "orders"),  # the "-" may be absent
        ("^ab+c", "ab"),
        (r"^a\d", "a"),
        ("^a|b", ""),  # a top-level alternative: no common prefix
        ("^(eu|us)-orders", ""),
        ("^.*-orders", ""),
        ("orders", ""),  # a name, not a regex
    ],
)
def test_the_prefix_every_topic_of_a_regex_starts_with(pattern: str, prefix: str) -> None:
    assert regex_prefix(pattern) == prefix


def test_a_topic_a_regex_matches_is_named_by_a_prefixed_acl_that_covers_the_regex() -> None:
    topics = ["audit", "^orders-.*"]
    fetch = "Fetch from broker 1 failed: Broker: Topic authorization failed"
    prefixed = Acl("READ", "Topic", "orders-", "PREFIXED")
    assert acl_for(29, fetch, group="g", topics=topics, topic="orders-eu", consumer=True) == prefixed
    assert acl_for(29, fetch, group="g", topics=topics, topic="audit", consumer=True) == Acl(
        "READ", "Topic", "audit"
    )
    assert acl_for(29, fetch, group="g", topics=["^orders-.*"], consumer=True) == prefixed  # no topic named
    error = authorization_error(
        settings(topics=topics), 29, fetch, "the consumer", topic="orders-eu", consumer=True
    )
    assert (error.operation, error.resource, error.name, error.pattern) == (
        "READ",
        "Topic",
        "orders-",
        "PREFIXED",
    )
    assert "grant READ on Topic prefix 'orders-' (PREFIXED), which covers 'orders-eu' and the other" in str(
        error
    )
    assert str(error).count("--topic orders- --resource-pattern-type prefixed") == 1


def test_the_removal_tools_are_told_read_on_the_group_when_find_coordinator_is_refused() -> None:
    refused = "[Error 30] GroupAuthorizationFailedError: FindCoordinatorResponse error for GROUP/g7: "
    error = authorization_error(settings(), 30, refused, "remove members from group g7", reads_group=True)
    assert (error.operation, error.resource, error.name) == ("READ", "Group", "g7")
    described = authorization_error(settings(), 30, refused, "describe group g7")
    assert described.operation == "DESCRIBE"  # describe needs DESCRIBE only
    topic = "[Error 29] TopicAuthorizationFailedError: describe topic t9"
    assert authorization_error(settings(), 29, topic, "remove", reads_group=True).operation == "DESCRIBE"
