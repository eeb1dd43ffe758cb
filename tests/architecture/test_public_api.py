"""The exported names are the public contract: adding or removing one is a deliberate change."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import static_consumer

EXPECTED = {
    "Assigned",
    "AuthenticationError",
    "AuthorizationError",  # a missing ACL, named
    "BrokerCapabilities",
    "BrokerUnavailableError",
    "CapabilityError",
    "Closed",
    "CommitFailedError",
    "CommitRefused",  # a refused commit, which the loops ride out
    "ConfigurationError",
    "ConsumerClosedError",
    "ConsumerSettings",
    "DeadLetterError",  # a failed record the dead-letter topic did not acknowledge in time
    "DeadLetterTopicError",  # failure_action='dead_letter' and its topic does not exist
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
    "OnFailure",  # the handler-failure policy: tenacity's stop and wait, then stop, dead-letter or skip
    "Record",
    "RecordBatch",
    "RecordDeadLettered",
    "RecordFailedError",  # a batch handler names the record it failed on
    "RecordSkipped",
    "RecordsRetried",
    "RetriableError",
    "Revoked",
    "SessionTimeoutOutOfBoundsError",
    "Stalled",  # the stall guard's event
    "StandingBy",  # a member whose instance id a live process holds (duplicate_policy='wait')
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


def test_no_import_hook_is_installed() -> None:
    """Importing the library changes nothing in how other imports are found."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; before = list(sys.meta_path); import static_consumer; "
            "assert sys.meta_path == before, sys.meta_path",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_private_modules_are_not_reached_through_the_old_public_module_paths() -> None:
    """The public names live in ``static_consumer``; the module paths of the unreleased 0.1.0 layout are
    gone, and no hook serves them."""
    for old in (
        "static_consumer.errors",
        "static_consumer.types",
        "static_consumer.consumer",
        "static_consumer.testing",
        "static_consumer.cli",
    ):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_the_operator_tools_keep_their_import_path() -> None:
    from static_consumer.admin import audit_group, describe_group, remove_members, scale_down

    assert all(callable(f) for f in (audit_group, describe_group, remove_members, scale_down))


def test_the_process_pool_exports_exactly_its_surface() -> None:
    from static_consumer import pool

    assert set(pool.__all__) == {
        "PoolStatus",
        "ProcessPool",
        "RestartPolicy",
        "StatusFiles",
        "WorkerInfo",
        "WorkerStatus",
        "plan_workers",
        "run_pool",
        "worker_id",
    }
    assert all(hasattr(pool, name) for name in pool.__all__)
