"""The exported names are the public contract: adding or removing one is a deliberate change."""

from __future__ import annotations

import static_consumer

EXPECTED = {
    "Assigned",
    "AuthenticationError",
    "BrokerCapabilities",
    "BrokerUnavailableError",
    "CapabilityError",
    "Closed",
    "CommitFailedError",
    "ConfigurationError",
    "ConsumerClosedError",
    "ConsumerSettings",
    "EXIT_CONFIG",
    "EXIT_FATAL",
    "EXIT_FENCED",
    "EXIT_OK",
    "EXIT_TEMPFAIL",
    "EXIT_UNAVAILABLE",
    "FatalConsumerError",
    "FatalError",
    "Fenced",
    "FencedInstanceError",
    "HeldAssignment",
    "Identity",
    "InvalidInstanceIdError",
    "Joining",
    "Lost",
    "MembershipEvent",
    "MembershipListener",
    "Record",
    "RecordBatch",
    "RetriableError",
    "Revoked",
    "SessionTimeoutOutOfBoundsError",
    "State",
    "StaticConsumer",
    "StaticConsumerError",
    "StaticDecision",
    "StaticMembershipUnsupportedError",
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
}


def test_exported_names_are_exactly_the_public_surface() -> None:
    assert set(static_consumer.__all__) == EXPECTED
    for name in static_consumer.__all__:
        assert hasattr(static_consumer, name), name
