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
    "GroupProtocolMismatchError",
    "HeldAssignment",
    "Identity",
    "InvalidInstanceIdError",
    "Joining",
    "Lost",
    "MembershipEvent",
    "MissingTopicError",
    "MembershipListener",
    "OAuthBearerToken",
    "Record",
    "RecordBatch",
    "RetriableError",
    "Revoked",
    "SessionTimeoutOutOfBoundsError",
    "Stalled",  # issue 22: the stall guard's event
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
}


def test_exported_names_are_exactly_the_public_surface() -> None:
    assert set(static_consumer.__all__) == EXPECTED
    for name in static_consumer.__all__:
        assert hasattr(static_consumer, name), name


def test_modules_that_moved_still_import_with_a_deprecation_warning() -> None:
    import importlib
    import sys
    import warnings

    moved = {
        "static_consumer.audit": ("static_consumer.admin.audit", "audit_group"),
        "static_consumer.cli": ("static_consumer.admin.cli", "main"),
        "static_consumer.bounce.metrics": ("static_consumer.demo.metrics", "differences"),
        "static_consumer.bounce.runner": ("static_consumer.demo.runner", "run_demo"),
        "static_consumer.bounce.report": ("static_consumer.demo.report", "table"),
    }
    for old, (new, name) in moved.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught), old
        assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_the_operator_tools_keep_their_import_path() -> None:
    from static_consumer.admin import audit_group, describe_group, remove_members, scale_down

    assert all(callable(f) for f in (audit_group, describe_group, remove_members, scale_down))
