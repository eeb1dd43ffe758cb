"""The exported names are the public contract: adding or removing one is a deliberate change."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import static_consumer

EXPECTED = {
    "Assigned",
    "AuthenticationError",
    "AuthorizationError",  # issue 27: a missing ACL, named
    "BrokerCapabilities",
    "BrokerUnavailableError",
    "CapabilityError",
    "Closed",
    "CommitFailedError",
    "CommitRefused",  # issue 27: a refused commit, which the loops ride out
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
    "StandingBy",  # issue 27: a member whose instance id a live process holds (duplicate_policy='wait')
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


# Old path -> (new path, a name both give): every path that moved, the harness and the demo included.
MOVED = {
    "static_consumer.audit": ("static_consumer.admin.audit", "audit_group"),
    "static_consumer.cli": ("static_consumer.admin.cli", "main"),
    "static_consumer.bounce.metrics": ("static_consumer_lab.demo.metrics", "differences"),
    "static_consumer.bounce.runner": ("static_consumer_lab.demo.runner", "run_demo"),
    "static_consumer.bounce.report": ("static_consumer_lab.demo.report", "table"),
    "static_consumer.demo": ("static_consumer_lab.demo", "main"),
    "static_consumer.demo.tally": ("static_consumer_lab.demo.tally", "tally"),
    "static_consumer.testing": ("static_consumer_lab", "JvmKafkaCluster"),
    "static_consumer.testing.plugin": ("static_consumer_lab.plugin", "kafka_cluster"),
    "static_consumer.testing.specs": ("static_consumer_lab.specs", "static_spec"),
    "static_consumer.testing.jvm": ("static_consumer_lab.jvm", "JvmKafkaCluster"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_modules_that_moved_still_import_with_a_deprecation_warning(old: str) -> None:
    new, name = MOVED[old]
    for loaded in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        sys.modules.pop(loaded)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(new in m and "0.3.0" in m for m in messages), (old, messages)
    assert getattr(module, name) is getattr(importlib.import_module(new), name)


def test_a_harness_function_that_was_renamed_keeps_its_old_name_at_the_old_path() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from static_consumer.testing import describe_group
        from static_consumer.testing.kafka_ops import describe_group as from_module
    from static_consumer_lab import describe_consumer_group

    assert describe_group is from_module is describe_consumer_group


def test_the_old_pytest_plugin_path_still_serves_the_fixtures_with_the_warning(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(
        "def test_fixture(kafka_group_id_factory):\n    assert kafka_group_id_factory('g').startswith('g-')\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    old_plugin = ["-p", "no:cacheprovider", "-p", "static_consumer.testing.plugin"]
    result = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-m", "pytest", *old_plugin, str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    warned = "static_consumer.testing.plugin moved to static_consumer_lab.plugin"
    assert warned in result.stdout + result.stderr  # pytest reports it in its summary


def test_python_dash_m_at_an_old_path_runs_the_new_module() -> None:
    result = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-m", "static_consumer.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "remove-members" in result.stdout
    assert "static_consumer.cli moved to static_consumer.admin.cli" in result.stderr


def test_an_old_path_that_never_existed_is_not_served() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("static_consumer.testing_not_a_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("static_consumer.testing.not_a_module")


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
