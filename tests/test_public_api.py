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
    "OAuthBearerToken",
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


def test_only_the_adapter_imports_confluent_kafka_on_the_consumer_path() -> None:
    import pathlib

    package = pathlib.Path(static_consumer.__file__).parent
    importers = sorted(
        str(p.relative_to(package))
        for p in package.glob("*.py")
        if "import confluent_kafka" in p.read_text() or "from confluent_kafka" in p.read_text()
    )
    # Operator tools (admin, describe, remove members) use the AdminClient; they are not the consumer path.
    assert set(importers) - {"_admin_io.py", "admin.py", "audit.py"} == {"_adapter.py"}
