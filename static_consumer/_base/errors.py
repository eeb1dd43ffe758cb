"""Errors raised by static_consumer, split by what the caller can do about them.

::

    StaticConsumerError                 base class; ``retriable`` and ``exit_code`` are data
    ├── ConfigurationError              the settings or identity are wrong: change them (exit 78)
    │   ├── InvalidInstanceIdError      group.instance.id breaks Kafka's rules or would not be stable
    │   ├── AuthenticationError         the brokers refused the credentials (SASL), or the OAUTHBEARER
    │   │                               provider gave no token: not retried
    │   ├── AuthorizationError          the principal lacks an ACL; the error names the one to grant
    │   ├── SessionTimeoutOutOfBoundsError   session.timeout.ms outside the broker's group bounds (also a
    │   │                               CapabilityError, for code that catches those)
    │   ├── MissingTopicError           a subscribed topic still did not exist after missing_topic_timeout_s
    │   ├── DeadLetterTopicError        failure_action='dead_letter' and the dead-letter topic does not exist
    │   └── UnknownInstanceIdError      an operator named an instance id that is not in the group
    ├── CapabilityError                 the broker cannot do what the settings require (exit 69)
    │   ├── StaticMembershipUnsupportedError   JoinGroup < v5 / no ConsumerGroupHeartbeat
    │   └── GroupProtocolMismatchError         the group refuses this member's group protocol
    ├── RetriableError                  transient: retry with a bounded policy (``retriable=True``, exit 75)
    │   ├── BrokerUnavailableError      bootstrap servers did not answer in time
    │   ├── UnreleasedInstanceIdError   KIP-848: the broker still holds this instance id (code 111)
    │   └── DeadLetterError             a failed record was not acknowledged by its dead-letter topic in time
    ├── FatalConsumerError              the consumer is dead; do not retry, exit the process (exit 70)
    │   └── FencedInstanceError         another process owns this group.instance.id (code 82, exit 82)
    ├── CommitFailedError               a commit was refused, e.g. the partition moved (exit 75)
    ├── RecordFailedError               raised by a batch handler: names the record it failed on (exit 70)
    └── ConsumerClosedError             the consumer was closed or fenced and cannot be used any more

Retriability is an attribute, not a naming convention: retry policies (see ``static_consumer._base.retry``)
are derived from ``error.retriable`` and never retry a fatal error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from static_consumer._base.codes import (
    FENCED_INSTANCE_ID,
    INVALID_SESSION_TIMEOUT,
    SASL_AUTHENTICATION_FAILED,
    UNRELEASED_INSTANCE_ID,
)

if TYPE_CHECKING:
    from static_consumer._base.records import Record

# Documented process exit codes (sysexits.h where one fits). The CLI and the pod helper exit with these.
EXIT_OK = 0
EXIT_UNAVAILABLE = 69
EXIT_FATAL = 70
EXIT_TEMPFAIL = 75
EXIT_CONFIG = 78
EXIT_FENCED = 82  # the same number as Kafka's FENCED_INSTANCE_ID error code
EXIT_INTERRUPTED = 130  # shells' convention for SIGINT


class StaticConsumerError(Exception):
    """Base class. ``retriable`` says whether trying again can succeed; ``exit_code`` is for processes."""

    retriable: ClassVar[bool] = False
    exit_code: ClassVar[int] = EXIT_FATAL
    kafka_error_code: ClassVar[int | None] = None


class ConfigurationError(StaticConsumerError, ValueError):
    """The settings are wrong. The message says what to change."""

    exit_code = EXIT_CONFIG


class InvalidInstanceIdError(ConfigurationError):
    """A group.instance.id that Kafka would reject, or that would change on every rollout."""


class AuthenticationError(ConfigurationError):
    """The client cannot authenticate: the brokers refused the credentials (wrong SASL password, user or
    mechanism, a token they reject), or the OAUTHBEARER ``sasl_oauth_token_provider`` gave no usable
    token (it raised, returned an expired token, or did not return within ``connect_timeout_s``; while
    running: the last token expired with the provider still failing).

    Not retriable: the same credentials are refused again, so the client gives up on the first refusal
    instead of waiting out ``connect_timeout_s`` (the Java client treats it the same way); the library
    cannot tell a provider that will never work from an identity provider that is briefly down, so it
    does not retry the provider either. The message names the user and mechanism or the provider's
    reason, never a password or token.
    """

    kafka_error_code = SASL_AUTHENTICATION_FAILED


class AuthorizationError(ConfigurationError):
    """The brokers refused an operation because the principal lacks an ACL (Kafka codes 29, 30, 31).

    ``operation``, ``resource`` (``Group``, ``Topic``, ``Cluster``), ``name`` and ``pattern`` (``LITERAL``,
    or ``PREFIXED`` for every name starting with ``name``) are the ACL to grant, ``kafka_code`` the
    broker's code (29, 30 or 31). Not retriable: the same principal is refused again
    until an operator grants the ACL, and a consumer would otherwise poll forever without consuming
    (librdkafka retries a refused FindCoordinator, JoinGroup or Fetch without end). docs/security.md
    lists what each operation needs.
    """

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        pattern: str = "LITERAL",
        kafka_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.operation, self.resource, self.name, self.pattern = operation, resource, name, pattern
        self.kafka_code = kafka_code


class MissingTopicError(ConfigurationError):
    """A named topic the consumer subscribed to did not exist, or a ``^regex`` matched no topic, for
    ``missing_topic_timeout_s`` after the consumer started. Raised by ``poll()``/``consume()``; the
    consumer is then unusable (``close()`` it). Most often a misspelled topic or the wrong cluster; a
    topic created later by another deployment step needs a longer ``missing_topic_timeout_s``."""


class DeadLetterTopicError(ConfigurationError):
    """``failure_action='dead_letter'`` and a dead-letter topic does not exist: found before the consumer
    joins (for a ``^regex`` subscription: when a topic's first record arrives), or when a dead-letter
    write finds it deleted. The library never creates it (a topic made by auto-creation gets the broker's
    defaults: one partition, its replication, its retention); the message names the topic to create.
    ``topic`` is its name."""

    def __init__(self, message: str, *, topic: str) -> None:
        super().__init__(message)
        self.topic = topic


class UnknownInstanceIdError(ConfigurationError):
    """An operator tool was asked to act on an instance id that is not a member of the group."""


class CapabilityError(StaticConsumerError):
    """The broker cannot do what the settings require."""

    exit_code = EXIT_UNAVAILABLE


class StaticMembershipUnsupportedError(CapabilityError):
    """The broker lacks the API versions static membership needs (policy ``require``)."""


class SessionTimeoutOutOfBoundsError(ConfigurationError, CapabilityError):
    """session.timeout.ms is outside the broker's group.min/max.session.timeout.ms: found by the
    capability gate before joining, or (when the principal may not read the broker's configs) by the
    JoinGroup the coordinator refuses with INVALID_SESSION_TIMEOUT, which librdkafka would send again
    forever.

    A configuration error (exit 78): the fix is ``session_timeout_ms`` (or the broker's bounds), and a
    restart with the same settings is refused again. Also a ``CapabilityError`` for code that catches
    those (it was one, with exit 69, before the JoinGroup refusal was typed).
    """

    exit_code = EXIT_CONFIG
    kafka_error_code = INVALID_SESSION_TIMEOUT


class GroupProtocolMismatchError(CapabilityError):
    """The group refuses this member's group protocol, so it can never join while the others are there.

    Under ``protocol='consumer'``: the group id is a classic group with live members and the brokers'
    ``group.consumer.migration.policy`` (``disabled`` or ``downgrade``) forbids converting it online.
    Under ``protocol='classic'``: the group is a KIP-848 group with live members and the policy is
    ``disabled``, or the members share no assignor (INCONSISTENT_GROUP_PROTOCOL). librdkafka would
    retry the refused join forever; the consumer raises this instead (docs/migration.md).
    """


class RetriableError(StaticConsumerError):
    """Transient: the same call may succeed later. Retry with a bounded policy."""

    retriable = True
    exit_code = EXIT_TEMPFAIL


class BrokerUnavailableError(RetriableError):
    """The bootstrap servers did not answer within the configured bound."""


class UnreleasedInstanceIdError(RetriableError):
    """KIP-848: the broker has not yet released this instance id from its previous member."""

    kafka_error_code = UNRELEASED_INSTANCE_ID


class DeadLetterError(RetriableError):
    """A record that failed was not acknowledged by its dead-letter topic within
    ``dead_letter_timeout_s`` (brokers unreachable, too few in-sync replicas, a record too large for the
    topic). The runner stops without committing past the record: it is read again after the restart,
    and dead-lettered then. ``topic`` is the dead-letter topic, ``record`` the source record as
    ``(topic, partition, offset)``."""

    def __init__(self, message: str, *, topic: str, record: tuple[str, int, int]) -> None:
        super().__init__(message)
        self.topic = topic
        self.record = record


class FatalConsumerError(StaticConsumerError):
    """librdkafka raised a fatal error: the consumer instance is unusable. Never retried."""

    exit_code = EXIT_FATAL


class FencedInstanceError(FatalConsumerError):
    """Another consumer with the same group.instance.id joined and fenced this one.

    This member must stop: rejoining would fence the other process in turn and the two would take the
    partitions from each other forever (KIP-345). No poll or commit is possible afterwards.
    """

    exit_code = EXIT_FENCED
    kafka_error_code = FENCED_INSTANCE_ID


class CommitFailedError(StaticConsumerError):
    """The broker refused a commit that retrying cannot fix, typically because a rebalance moved the
    partition (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, stale member epoch). The
    consumer still works; the uncommitted records will be delivered again (at-least-once)."""

    exit_code = EXIT_TEMPFAIL


class RecordFailedError(StaticConsumerError):
    """Raised by a batch handler to say which record of the batch it failed on (``raise
    RecordFailedError(record) from exc``). The runners then count the records before it in the batch as
    handled (they are not handed to the handler again), retry from ``record`` on, and dead-letter or skip
    only ``record`` once the retries are spent (docs/failures.md). The exception behind it
    (``__cause__``, else this one) is what the dead-letter headers and the events name. A handler that
    raises anything else fails its whole batch."""

    def __init__(self, record: Record, message: str = "") -> None:
        where = f"{record.topic}[{record.partition}]@{record.offset}"
        super().__init__(f"{where}: {message}" if message else f"handling {where} failed")
        self.record = record

    @property
    def cause(self) -> BaseException:
        """The handler's own exception (``raise ... from exc``), else this error."""
        return self.__cause__ if self.__cause__ is not None else self


class ConsumerClosedError(StaticConsumerError):
    """The consumer was closed (or fenced) and cannot poll or commit any more."""


def exit_code_for(exc: BaseException | None) -> int:
    """Process exit code for how the consumer ended: 0, the error's ``exit_code`` (82 when fenced, 75
    for retriable, 78 for configuration, 69 for capability, 70 for fatal), 130 for Ctrl-C, else 70. A pod's
    main ends with ``raise SystemExit(exit_code_for(exc))``."""
    if exc is None:
        return EXIT_OK
    if isinstance(exc, StaticConsumerError):
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    if isinstance(exc, SystemExit) and isinstance(exc.code, int):
        return exc.code
    return EXIT_FATAL


__all__ = [
    "EXIT_INTERRUPTED",
    "exit_code_for",
    "EXIT_CONFIG",
    "EXIT_FATAL",
    "EXIT_FENCED",
    "EXIT_OK",
    "EXIT_TEMPFAIL",
    "EXIT_UNAVAILABLE",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerUnavailableError",
    "CapabilityError",
    "CommitFailedError",
    "ConfigurationError",
    "ConsumerClosedError",
    "DeadLetterError",
    "DeadLetterTopicError",
    "FatalConsumerError",
    "FencedInstanceError",
    "GroupProtocolMismatchError",
    "InvalidInstanceIdError",
    "MissingTopicError",
    "RecordFailedError",
    "RetriableError",
    "SessionTimeoutOutOfBoundsError",
    "StaticConsumerError",
    "StaticMembershipUnsupportedError",
    "UnknownInstanceIdError",
    "UnreleasedInstanceIdError",
]
