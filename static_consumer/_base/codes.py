"""Everything the project knows about Kafka error codes, in one table. Pure: no client library here.

Each entry names a code, says whether retrying can help, and what it means for a static member. Broker
codes are Kafka's protocol error numbers (positive); librdkafka's local codes are negative (a test checks
the numbers against ``confluent_kafka.KafkaError``). Every client error is classified through
:func:`classify` into an :class:`ErrorKind`, which is all the consumer core, the capability probe and the
operator tools ever branch on: the librdkafka adapter for poll/commit errors, kafka-python errors (their
``errno``) for the probe and the admin tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType


class ErrorKind(Enum):
    """What a client error means for the caller, independent of which client reported it."""

    FENCED = "fenced"  # another process joined with this group.instance.id: stop, never rejoin
    UNRELEASED = "unreleased"  # KIP-848: the broker still holds this instance id for an earlier member
    # The group refuses this member's group protocol: a group of the other protocol that the brokers'
    # group.consumer.migration.policy does not let it convert, or (classic) no assignor in common.
    PROTOCOL_REFUSED = "protocol_refused"
    FATAL = "fatal"  # the client instance is dead for another reason
    MAX_POLL_EXCEEDED = "max_poll_exceeded"  # processing took longer than max.poll.interval.ms
    PARTITION_EOF = "partition_eof"  # informational: the end of a partition was reached
    TRANSIENT = "transient"  # the coordinator moved or the network blinked: the same call can succeed
    UNREACHABLE = "unreachable"  # no broker answered (within the bound)
    MEMBERSHIP_CHANGED = "membership_changed"  # the partitions changed hands: a commit for them is refused
    MEMBER_GONE = "member_gone"  # the session or generation is over: the partitions may be another's now
    AUTHENTICATION = "authentication"  # the credentials were refused: the same settings fail again
    AUTHORIZATION = "authorization"  # the principal lacks an ACL: refused again until one is granted
    # The coordinator refused the member's session timeout (outside the broker's group bounds): librdkafka
    # sends the same JoinGroup again forever, and the same settings are refused again.
    SESSION_REFUSED = "session_refused"
    TLS = "tls"  # the TLS handshake failed (a certificate either side refuses): the same settings fail
    CONFIGURATION = "configuration"  # the client refused its own configuration: the same settings fail
    UNKNOWN_TOPIC = "unknown_topic"  # the topic (or partition) does not exist (yet)
    UNSUPPORTED = "unsupported"  # the broker lacks the API (version) the call needs
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class KafkaCode:
    """One error code: its name as Kafka (or librdkafka) spells it, its kind, and what it means here."""

    code: int
    name: str
    kind: ErrorKind
    retriable: bool
    meaning: str


_K = ErrorKind
_ENTRIES = (
    # -- broker codes (Kafka's protocol error numbers) -----------------------------------------------
    KafkaCode(3, "UNKNOWN_TOPIC_OR_PARTITION", _K.UNKNOWN_TOPIC, True, "the topic does not exist (yet)"),
    KafkaCode(7, "REQUEST_TIMED_OUT", _K.TRANSIENT, True, "the broker did not answer in time"),
    KafkaCode(13, "NETWORK_EXCEPTION", _K.TRANSIENT, True, "the broker disconnected before answering"),
    KafkaCode(
        14, "COORDINATOR_LOAD_IN_PROGRESS", _K.TRANSIENT, True, "the group coordinator is loading the group"
    ),
    KafkaCode(15, "COORDINATOR_NOT_AVAILABLE", _K.TRANSIENT, True, "the group coordinator is moving"),
    KafkaCode(16, "NOT_COORDINATOR", _K.TRANSIENT, True, "the group coordinator moved to another broker"),
    KafkaCode(
        22,
        "ILLEGAL_GENERATION",
        _K.MEMBER_GONE,
        False,
        "a rebalance ended the generation: the commit's partitions may belong to another member",
    ),
    KafkaCode(
        25,
        "UNKNOWN_MEMBER_ID",
        _K.MEMBER_GONE,
        False,
        "the coordinator no longer knows this member (session expired, removed, or an ordinal consumer "
        "committing while the group has members)",
    ),
    KafkaCode(
        23,
        "INCONSISTENT_GROUP_PROTOCOL",
        _K.PROTOCOL_REFUSED,
        False,
        "classic JoinGroup refused: the members share no assignor, or the group is a KIP-848 group and "
        "the brokers' group.consumer.migration.policy=disabled refuses classic members",
    ),
    KafkaCode(
        26, "INVALID_SESSION_TIMEOUT", _K.SESSION_REFUSED, False, "outside group.min/max.session.timeout.ms"
    ),
    KafkaCode(
        27, "REBALANCE_IN_PROGRESS", _K.MEMBERSHIP_CHANGED, False, "the group is rebalancing: commit refused"
    ),
    KafkaCode(29, "TOPIC_AUTHORIZATION_FAILED", _K.AUTHORIZATION, False, "no READ/DESCRIBE on the topic"),
    KafkaCode(30, "GROUP_AUTHORIZATION_FAILED", _K.AUTHORIZATION, False, "no READ/DESCRIBE on the group"),
    KafkaCode(31, "CLUSTER_AUTHORIZATION_FAILED", _K.AUTHORIZATION, False, "no DESCRIBE on the cluster"),
    KafkaCode(33, "UNSUPPORTED_SASL_MECHANISM", _K.AUTHENTICATION, False, "the broker lacks the mechanism"),
    KafkaCode(35, "UNSUPPORTED_VERSION", _K.UNSUPPORTED, False, "the broker lacks this API version"),
    KafkaCode(
        58, "SASL_AUTHENTICATION_FAILED", _K.AUTHENTICATION, False, "the SASL credentials were refused"
    ),
    KafkaCode(
        69,
        "GROUP_ID_NOT_FOUND",
        _K.PROTOCOL_REFUSED,
        False,
        "no such group, or one of another type: a KIP-848 group answers so to the classic DescribeGroups, "
        "and a classic group with members to a ConsumerGroupHeartbeat when the brokers' "
        "group.consumer.migration.policy forbids converting it (librdkafka makes that fatal)",
    ),
    KafkaCode(
        82,
        "FENCED_INSTANCE_ID",
        _K.FENCED,
        False,
        "another consumer joined with the same group.instance.id; this one must exit without rejoining",
    ),
    KafkaCode(
        110,
        "FENCED_MEMBER_EPOCH",
        _K.MEMBER_GONE,
        False,
        "KIP-848: the member epoch was fenced; the member rejoins and its commits are refused meanwhile",
    ),
    KafkaCode(
        111,
        "UNRELEASED_INSTANCE_ID",
        _K.UNRELEASED,
        False,
        "KIP-848: the instance id is still held by another member: an earlier incarnation until its "
        "session expires, or a duplicate process",
    ),
    KafkaCode(113, "STALE_MEMBER_EPOCH", _K.MEMBERSHIP_CHANGED, False, "KIP-848: a commit with an old epoch"),
    # -- librdkafka local codes ----------------------------------------------------------------------
    KafkaCode(-195, "_TRANSPORT", _K.TRANSIENT, True, "a broker connection failed"),
    KafkaCode(-191, "_PARTITION_EOF", _K.PARTITION_EOF, False, "end of partition reached"),
    KafkaCode(-188, "_UNKNOWN_TOPIC", _K.UNKNOWN_TOPIC, False, "the topic is not in the cluster metadata"),
    KafkaCode(-193, "_RESOLVE", _K.UNREACHABLE, True, "a broker host name did not resolve"),
    KafkaCode(-187, "_ALL_BROKERS_DOWN", _K.UNREACHABLE, True, "no broker is reachable"),
    KafkaCode(
        -186,
        "_INVALID_ARG",
        _K.CONFIGURATION,
        False,
        "a client refused its configuration when built (e.g. a TLS key it cannot load)",
    ),
    KafkaCode(-185, "_TIMED_OUT", _K.TRANSIENT, True, "the operation timed out"),
    KafkaCode(
        -181,
        "_SSL",
        _K.TLS,
        False,
        "the TLS handshake or certificate check failed (unknown CA, or a certificate for another host)",
    ),
    KafkaCode(-180, "_WAIT_COORD", _K.TRANSIENT, True, "waiting for the group coordinator"),
    KafkaCode(-169, "_AUTHENTICATION", _K.AUTHENTICATION, False, "the brokers refused the credentials"),
    KafkaCode(
        -150,
        "_FATAL",
        _K.FATAL,
        False,
        "the client instance is dead; the broker cause (e.g. FENCED_INSTANCE_ID) is only in the text",
    ),
    KafkaCode(
        -147,
        "_MAX_POLL_EXCEEDED",
        _K.MAX_POLL_EXCEEDED,
        False,
        "processing between polls took longer than max.poll.interval.ms; the member left the group",
    ),
)

CODES: Mapping[int, KafkaCode] = MappingProxyType({entry.code: entry for entry in _ENTRIES})
BY_NAME: Mapping[str, KafkaCode] = MappingProxyType({entry.name: entry for entry in _ENTRIES})

# The codes code elsewhere names (read from the table, so a number lives in one place only).
FENCED_INSTANCE_ID = BY_NAME["FENCED_INSTANCE_ID"].code
TOPIC_AUTHORIZATION_FAILED = BY_NAME["TOPIC_AUTHORIZATION_FAILED"].code
GROUP_AUTHORIZATION_FAILED = BY_NAME["GROUP_AUTHORIZATION_FAILED"].code
CLUSTER_AUTHORIZATION_FAILED = BY_NAME["CLUSTER_AUTHORIZATION_FAILED"].code
UNRELEASED_INSTANCE_ID = BY_NAME["UNRELEASED_INSTANCE_ID"].code
GROUP_ID_NOT_FOUND = BY_NAME["GROUP_ID_NOT_FOUND"].code
SASL_AUTHENTICATION_FAILED = BY_NAME["SASL_AUTHENTICATION_FAILED"].code
INVALID_SESSION_TIMEOUT = BY_NAME["INVALID_SESSION_TIMEOUT"].code
FATAL = BY_NAME["_FATAL"].code
MAX_POLL_EXCEEDED = BY_NAME["_MAX_POLL_EXCEEDED"].code
PARTITION_EOF = BY_NAME["_PARTITION_EOF"].code
TRANSPORT = BY_NAME["_TRANSPORT"].code


# The kinds a fatal error takes from its cause (a broker code behind librdkafka's _FATAL): under the
# consumer protocol a refused ConsumerGroupHeartbeat (no READ on the group) is fatal in librdkafka.
_KINDS_OF_A_CAUSE = (
    ErrorKind.FENCED,
    ErrorKind.UNRELEASED,
    ErrorKind.PROTOCOL_REFUSED,
    ErrorKind.AUTHORIZATION,
)


def classify(code: int, *, fatal: bool = False, cause: int | None = None) -> ErrorKind:
    """The kind of an error ``code``; ``fatal`` is the client's own fatal flag, ``cause`` the broker code
    behind a librdkafka ``_FATAL`` (which is how fencing arrives).

    A fatal error is FENCED, UNRELEASED, PROTOCOL_REFUSED or AUTHORIZATION when its code or cause says
    so, else FATAL:
    whatever the code, the client instance that reported it is dead.
    """
    for candidate in (cause, code):
        entry = CODES.get(candidate) if candidate is not None else None
        if entry is not None and entry.kind in _KINDS_OF_A_CAUSE:
            return entry.kind
    if fatal or code == FATAL:
        return ErrorKind.FATAL
    entry = CODES.get(code)
    return entry.kind if entry is not None else ErrorKind.OTHER


def is_retriable(code: int) -> bool:
    """Whether retrying the same call can succeed, per the table (unknown codes: no)."""
    entry = CODES.get(code)
    return entry is not None and entry.retriable


def name_of(code: int) -> str:
    """Kafka's name for ``code`` (``"FENCED_INSTANCE_ID"``), or ``"error <code>"`` if not in the table."""
    entry = CODES.get(code)
    return entry.name if entry is not None else f"error {code}"


__all__ = [
    "BY_NAME",
    "CLUSTER_AUTHORIZATION_FAILED",
    "CODES",
    "FATAL",
    "FENCED_INSTANCE_ID",
    "GROUP_AUTHORIZATION_FAILED",
    "GROUP_ID_NOT_FOUND",
    "INVALID_SESSION_TIMEOUT",
    "MAX_POLL_EXCEEDED",
    "PARTITION_EOF",
    "SASL_AUTHENTICATION_FAILED",
    "TOPIC_AUTHORIZATION_FAILED",
    "TRANSPORT",
    "UNRELEASED_INSTANCE_ID",
    "ErrorKind",
    "KafkaCode",
    "classify",
    "is_retriable",
    "name_of",
]
