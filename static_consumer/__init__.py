"""static_consumer: Kafka consumers that restart without rebalance storms (KIP-345 static membership).

The public surface is listed in ``__all__``: import from here (``from static_consumer import
StaticConsumer``). The subpackages ``settings``, ``aio``, ``pool``, ``spark``, ``telemetry`` and ``admin``
are public too; modules and packages starting with an underscore are private.
"""

from static_consumer._base.errors import (
    EXIT_CONFIG,
    EXIT_FATAL,
    EXIT_FENCED,
    EXIT_OK,
    EXIT_TEMPFAIL,
    EXIT_UNAVAILABLE,
    AuthenticationError,
    AuthorizationError,
    BrokerUnavailableError,
    CapabilityError,
    CommitFailedError,
    ConfigurationError,
    ConsumerClosedError,
    FatalConsumerError,
    FencedInstanceError,
    GroupProtocolMismatchError,
    InvalidInstanceIdError,
    MissingTopicError,
    RetriableError,
    SessionTimeoutOutOfBoundsError,
    StaticConsumerError,
    StaticMembershipUnsupportedError,
    UnknownInstanceIdError,
    UnreleasedInstanceIdError,
    exit_code_for,
)
from static_consumer._base.records import Record, RecordBatch, TopicPartition
from static_consumer._core.consumer import State, StaticConsumer, Status
from static_consumer._core.events import (
    Assigned,
    Closed,
    CommitRefused,
    FatalError,
    Fenced,
    HeldAssignment,
    Joining,
    Lost,
    MembershipEvent,
    MembershipListener,
    Revoked,
    Stalled,
    StandingBy,
)
from static_consumer._core.gate import StaticDecision
from static_consumer._core.identity import Identity, resolve_identity, validate_instance_id
from static_consumer._core.modes import decide
from static_consumer._core.shutdown import install_sigterm_handler, run_until_sigterm
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer.settings import ConsumerSettings, OAuthBearerToken

__version__ = "0.1.0"

__all__ = [
    "EXIT_CONFIG",
    "EXIT_FATAL",
    "EXIT_FENCED",
    "EXIT_OK",
    "EXIT_TEMPFAIL",
    "EXIT_UNAVAILABLE",
    "Assigned",
    "AuthenticationError",
    "AuthorizationError",
    "BrokerCapabilities",
    "BrokerUnavailableError",
    "CapabilityError",
    "Closed",
    "CommitFailedError",
    "CommitRefused",
    "ConfigurationError",
    "ConsumerClosedError",
    "ConsumerSettings",
    "FatalConsumerError",
    "FatalError",
    "Fenced",
    "FencedInstanceError",
    "GroupProtocolMismatchError",
    "HeldAssignment",
    "Identity",
    "InvalidInstanceIdError",
    "MissingTopicError",
    "Joining",
    "Lost",
    "MembershipEvent",
    "MembershipListener",
    "OAuthBearerToken",
    "Record",
    "RecordBatch",
    "RetriableError",
    "Revoked",
    "SessionTimeoutOutOfBoundsError",
    "Stalled",
    "StandingBy",
    "State",
    "StaticConsumer",
    "StaticConsumerError",
    "StaticDecision",
    "StaticMembershipUnsupportedError",
    "Status",
    "TopicPartition",
    "UnknownInstanceIdError",
    "UnreleasedInstanceIdError",
    "__version__",
    "decide",
    "exit_code_for",
    "install_sigterm_handler",
    "resolve_identity",
    "run_until_sigterm",
    "validate_instance_id",
]
