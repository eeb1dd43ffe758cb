"""static_consumer: Kafka consumers that restart without rebalance storms (KIP-345 static membership).

The public surface is listed in ``__all__``; modules starting with an underscore are private. Import
paths that moved keep working until their removal release, with a DeprecationWarning (``_compat``).
"""

from static_consumer import _compat
from static_consumer.capabilities import BrokerCapabilities, StaticDecision, decide
from static_consumer.consumer import State, StaticConsumer, Status
from static_consumer.errors import (
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
)
from static_consumer.events import (
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
from static_consumer.identity import Identity, resolve_identity, validate_instance_id
from static_consumer.settings import ConsumerSettings, OAuthBearerToken
from static_consumer.shutdown import exit_code_for, install_sigterm_handler, run_until_sigterm
from static_consumer.types import Record, RecordBatch, TopicPartition

__version__ = "0.1.0"

_compat.install()

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
