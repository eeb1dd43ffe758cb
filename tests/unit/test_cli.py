"""The static-consumer command without a broker: parsing, settings from the environment and flags, the
JSON documents scripts parse, and the documented exit codes (Operations is the I/O seam)."""

from __future__ import annotations

import importlib.abc
import io
import json
import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from static_consumer._base.errors import BrokerUnavailableError, DeadLetterTopicError, UnknownInstanceIdError
from static_consumer._base.records import TopicPartition
from static_consumer._kafka.capabilities import BrokerCapabilities
from static_consumer._kafka.groups import GroupDescription, GroupMember, RemovalFailure, RemovalResult
from static_consumer.admin.audit import GroupAudit, audit_description
from static_consumer.admin.cli import Operations, main
from static_consumer.admin.redrive import RedriveResult
from static_consumer.settings import ConsumerSettings

DATA = Path(__file__).parent / "data"


def caps(name: str) -> BrokerCapabilities:
    return BrokerCapabilities.from_dict(json.loads((DATA / name).read_text()))


KAFKA_431 = caps("apiversions_kafka_4_3_1.json")
KAFKA_22 = caps("apiversions_kafka_2_2_synthetic.json")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("STATIC_CONSUMER_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("STATIC_CONSUMER_BOOTSTRAP_SERVERS", "kafka-0:9092")


class Recorder:
    """Fake operations that remember the settings and arguments they were called with."""

    def __init__(self, **results: Any) -> None:
        self.results = results
        self.calls: list[tuple[str, ConsumerSettings, tuple[Any, ...], dict[str, Any]]] = []

    def op(self, name: str) -> Any:
        def call(settings: ConsumerSettings, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, settings, args, kwargs))
            result = self.results[name]
            if isinstance(result, BaseException):
                raise result
            return result

        return call

    def ops(self) -> Operations:
        return Operations(
            **{
                name: self.op(name)
                for name in ("probe", "audit_group", "remove_members", "scale_down", "redrive")
            }
        )


def run(argv: list[str], recorder: Recorder) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, ops=recorder.ops(), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def run_json(argv: list[str], recorder: Recorder) -> tuple[int, dict[str, Any]]:
    code, out, _ = run([*argv, "--json"], recorder)
    return code, json.loads(out)


def healthy_audit() -> GroupAudit:
    members = (
        GroupMember("pod-0-a", "pod-0", "rdkafka", "10.0.0.1", ("t",), (TopicPartition("t", 0),)),
        GroupMember("pod-1-b", "pod-1", "rdkafka", "10.0.0.2", ("t",), (TopicPartition("t", 1),)),
    )
    return audit_description(GroupDescription("orders", "Stable", "classic", "range", members), {"t": 2})


# ------------------------------------------------------------------------------------------ parsing
def test_usage_errors_exit_2_and_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["remove-members", "orders"]) == 2  # --instance-id is required
    assert main(["no-such-command"]) == 2
    assert main(["describe", "--help"]) == 0
    assert "--check" in capsys.readouterr().out


def test_settings_come_from_the_environment_and_flags_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_GROUP_ID", "from-env")
    monkeypatch.setenv("STATIC_CONSUMER_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("STATIC_CONSUMER_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("STATIC_CONSUMER_SASL_USERNAME", "ops")
    monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", "s3cret")
    rec = Recorder(audit_group=healthy_audit())

    assert run(["describe", "-b", "kafka-9:9093", "--connect-timeout-s", "3"], rec)[0] == 0
    assert run(["describe", "orders"], rec)[0] == 0

    (_, first, _, _), (_, second, args, _) = rec.calls
    assert (first.group_id, first.bootstrap_servers, first.connect_timeout_s) == (
        "from-env",
        "kafka-9:9093",
        3.0,
    )
    assert (second.group_id, second.bootstrap_servers, args) == ("orders", "kafka-0:9092", ("orders",))
    assert (second.security_protocol, second.sasl_mechanism, second.sasl_username) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "ops",
    )
    assert second.sasl_password is not None and second.sasl_password.get_secret_value() == "s3cret"


def test_tls_flags_reach_the_settings_hostname_checks_included(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv("STATIC_CONSUMER_SSL_ENDPOINT_IDENTIFICATION", "false")
    rec = Recorder(audit_group=healthy_audit())
    tls = [
        "--ssl-ca-location",
        "/ca.pem",
        "--ssl-certificate-location",
        "/c.pem",
        "--ssl-key-location",
        "/k.pem",
    ]
    assert run(["describe", "orders", *tls], rec)[0] == 0
    assert run(["describe", "orders", "--ssl-endpoint-identification"], rec)[0] == 0
    monkeypatch.setenv("STATIC_CONSUMER_SSL_ENDPOINT_IDENTIFICATION", "true")
    assert run(["describe", "orders", "--no-ssl-endpoint-identification"], rec)[0] == 0
    first, second, third = (settings for _, settings, _, _ in rec.calls)
    assert (first.ssl_ca_location, first.ssl_certificate_location, first.ssl_key_location) == (
        "/ca.pem",
        "/c.pem",
        "/k.pem",
    )
    assert [s.ssl_endpoint_identification for s in (first, second, third)] == [False, True, False]


def test_an_unexpected_error_never_shows_a_password_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("STATIC_CONSUMER_SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("STATIC_CONSUMER_SASL_USERNAME", "api-key")
    monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", "api-secret-Qw19")
    failing = Recorder(audit_group=RuntimeError("login as api-key:api-secret-Qw19 failed"))
    code, out, err = run(["describe", "orders"], failing)
    assert code == 70 and "login as api-key:**********" in err
    code, doc = run_json(["describe", "orders"], failing)
    assert "api-secret-Qw19" not in json.dumps(doc)


def test_no_group_anywhere_is_a_configuration_error() -> None:
    code, doc = run_json(["describe"], Recorder())
    assert code == 78 and "STATIC_CONSUMER_GROUP_ID" in doc["error"]["message"]


def test_invalid_environment_is_a_configuration_error_naming_the_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STATIC_CONSUMER_BOOTSTRAP_SERVERS", "no-port")
    code, _, err = run(["describe", "orders"], Recorder())
    assert code == 78 and "STATIC_CONSUMER_BOOTSTRAP_SERVERS" in err and "--bootstrap-servers" in err


# -------------------------------------------------------------------------------------------- probe
def test_probe_needs_no_group_and_reports_every_policy() -> None:
    rec = Recorder(probe=KAFKA_431)
    code, doc = run_json(["probe"], rec)
    assert code == 0
    assert {a["api"]: a["max"] for a in doc["api_versions"]}["JoinGroup"] == 9
    assert doc["supports"] == {"classic_static": True, "consumer_protocol": True, "leave_group_batch": True}
    assert set(doc["verdicts"]) == {"classic", "consumer"}
    assert set(doc["verdicts"]["classic"]) == {"require", "warn", "dynamic"}
    assert doc["configured"] == doc["verdicts"]["classic"]["require"] and doc["configured"]["static"] is True
    assert doc["exit_code"] == 0


def test_probe_exit_code_follows_the_configured_policy_on_an_old_broker() -> None:
    code, doc = run_json(["probe"], Recorder(probe=KAFKA_22))
    assert code == 69
    assert doc["configured"]["error"]["type"] == "StaticMembershipUnsupportedError"
    assert doc["verdicts"]["classic"]["warn"]["static"] is False  # warn falls back to dynamic
    assert doc["verdicts"]["consumer"]["require"]["error"]["type"] == "CapabilityError"

    code, _ = run_json(["probe", "--static-policy", "warn"], Recorder(probe=KAFKA_22))
    assert code == 0


def test_probe_refuses_a_session_timeout_outside_the_broker_bounds() -> None:
    code, out, _ = run(["probe", "--session-timeout-ms", "500"], Recorder(probe=KAFKA_431))
    assert code == 78
    assert "* classic  require  refused (SessionTimeoutOutOfBoundsError" in out


# ----------------------------------------------------------------------------------------- describe
def test_describe_json_shape() -> None:
    code, doc = run_json(["describe", "orders"], Recorder(audit_group=healthy_audit()))
    assert code == 0 and set(doc) == {"group", "audit", "exit_code"}
    assert doc["group"]["members"][0] == {
        "member_id": "pod-0-a",
        "instance_id": "pod-0",
        "client_id": "rdkafka",
        "host": "10.0.0.1",
        "subscription": ["t"],
        "assignment": {"t": [0]},
        "target_assignment": None,
    }
    assert doc["audit"]["verdict"] == "ok" and doc["audit"]["expected"] == {
        "pod-0": {"t": [0]},
        "pod-1": {"t": [1]},
    }


def test_describe_check_exits_1_only_when_the_audit_finds_problems() -> None:
    audit = healthy_audit()
    grown = audit_description(audit.description, {"t": 3})
    assert run(["describe", "orders", "--check"], Recorder(audit_group=audit))[0] == 0
    assert run(["describe", "orders"], Recorder(audit_group=grown))[0] == 0
    code, out, _ = run(["describe", "orders", "--check"], Recorder(audit_group=grown))
    assert code == 1 and "audit: PROBLEMS" in out and "t[2]" in out


def test_describe_passes_extra_topics_to_the_audit() -> None:
    rec = Recorder(audit_group=healthy_audit())
    run(["describe", "orders", "--topic", "a", "--topic", "b"], rec)
    assert rec.calls[0][3] == {"topics": ["a", "b"]}


# ------------------------------------------------------------------------------ remove-members, scale
def test_remove_members_json_and_exit_codes() -> None:
    ok = RemovalResult("orders", removed=("pod-2",))
    rec = Recorder(remove_members=ok)
    code, doc = run_json(
        ["remove-members", "orders", "--instance-id", "pod-2", "--instance-id", "pod-3"], rec
    )
    assert code == 0
    assert doc == {
        "group_id": "orders",
        "ok": True,
        "removed": ["pod-2"],
        "absent": [],
        "failed": [],
        "exit_code": 0,
    }
    assert rec.calls[0][2] == (["pod-2", "pod-3"],)

    retriable = replace(ok, failed=(RemovalFailure("pod-3", "CoordinatorNotAvailableError", True),))
    assert (
        run(["remove-members", "orders", "--instance-id", "pod-3"], Recorder(remove_members=retriable))[0]
        == 75
    )
    fatal = replace(ok, failed=(RemovalFailure("pod-3", "GroupAuthorizationFailedError", False),))
    assert (
        run(["remove-members", "orders", "--instance-id", "pod-3"], Recorder(remove_members=fatal))[0] == 70
    )


def test_unknown_instance_id_is_exit_78_with_the_message() -> None:
    rec = Recorder(remove_members=UnknownInstanceIdError("not static members of group 'orders': pod-9"))
    code, out, err = run(["remove-members", "orders", "--instance-id", "pod-9"], rec)
    assert (code, out) == (78, "")
    assert err.startswith("static-consumer remove-members: UnknownInstanceIdError: not static members")
    code, doc = run_json(["remove-members", "orders", "--instance-id", "pod-9"], rec)
    assert doc["error"]["type"] == "UnknownInstanceIdError" and doc["exit_code"] == 78


def test_scale_down_passes_the_selection_and_template() -> None:
    rec = Recorder(scale_down=RemovalResult("orders", removed=("orders-1",)))
    argv = ["scale-down", "orders", "--statefulset", "web", "--replicas", "1", "--ordinal", "4"]
    assert run([*argv, "--instance-id-template", "{statefulset}-{ordinal}"], rec)[0] == 0
    _, settings, args, kwargs = rec.calls[0]
    assert settings.instance_id_template == "{statefulset}-{ordinal}" and args == ("orders",)
    assert kwargs == {"replicas": 1, "ordinals": [4], "statefulset": "web", "processes": None}
    assert run([*argv, "--processes", "2"], rec)[0] == 0
    assert rec.calls[1][3]["processes"] == 2


# ---------------------------------------------------------------------------------------- redrive
def test_redrive_parses_the_topic_group_dry_run_and_timeout() -> None:
    rec = Recorder(redrive=RedriveResult("orders-dlt", "orders.redrive"))
    argv = ["redrive", "orders-dlt", "--group", "orders", "--dry-run", "--timeout-s", "5"]
    assert run([*argv, "-b", "kafka-7:9092"], rec)[0] == 0
    _, settings, args, kwargs = rec.calls[0]
    assert (settings.group_id, settings.bootstrap_servers) == ("orders", "kafka-7:9092")
    assert args == ("orders-dlt",) and kwargs == {"dry_run": True, "timeout_s": 5.0}
    assert run(["redrive", "orders-dlt", "--group", "orders"], rec)[0] == 0
    assert rec.calls[1][3] == {"dry_run": False, "timeout_s": 300.0}  # the defaults
    assert run(["redrive", "--group", "orders"], rec)[0] == 2  # DEAD_LETTER_TOPIC is required
    code, doc = run_json(["redrive", "orders-dlt"], rec)  # no --group, no STATIC_CONSUMER_GROUP_ID
    assert code == 78 and "STATIC_CONSUMER_GROUP_ID" in doc["error"]["message"] and len(rec.calls) == 2


def test_redrive_json_and_text_report_what_was_sent_per_source_partition() -> None:
    result = RedriveResult(
        "orders-dlt",
        "orders.redrive",
        sent={"orders[1]": 2, "orders[0]": 1},
        foreign=1,
        committed={1: 3, 0: 2},
    )
    code, doc = run_json(["redrive", "orders-dlt", "--group", "orders"], Recorder(redrive=result))
    assert code == 0
    assert doc == {
        "dead_letter_topic": "orders-dlt",
        "group": "orders.redrive",
        "sent": {"orders[1]": 2, "orders[0]": 1},
        "total": 3,
        "foreign": 1,
        "committed": {"0": 2, "1": 3},
        "dry_run": False,
        "exit_code": 0,
    }
    assert list(doc["committed"]) == ["0", "1"]  # partitions in order
    code, out, _ = run(["redrive", "orders-dlt", "--group", "orders"], Recorder(redrive=result))
    assert out.splitlines() == [
        "sent 3 records from orders-dlt (group orders.redrive):",
        "  orders[0]: 1",
        "  orders[1]: 2",
        "  passed over (no dlt.original.* headers): 1",
    ]
    dry = RedriveResult("orders-dlt", "orders.redrive", sent={"orders[0]": 1}, dry_run=True)
    code, out, _ = run(["redrive", "orders-dlt", "--group", "orders", "--dry-run"], Recorder(redrive=dry))
    assert out.splitlines() == [
        "would send 1 record from orders-dlt (group orders.redrive):",
        "  orders[0]: 1",
    ]


def test_redrive_of_a_missing_dead_letter_topic_is_exit_78() -> None:
    missing = DeadLetterTopicError(
        "re-driving 'orders-dlt': the dead-letter topic does not exist", topic="orders-dlt"
    )
    code, doc = run_json(["redrive", "orders-dlt", "--group", "orders"], Recorder(redrive=missing))
    assert code == 78 and doc["error"]["type"] == "DeadLetterTopicError" and doc["error"]["exit_code"] == 78


def test_unreachable_brokers_exit_75_and_unexpected_errors_exit_70() -> None:
    rec = Recorder(audit_group=BrokerUnavailableError("no answer from kafka-0:9092 within 30s"))
    assert run(["describe", "orders"], rec)[0] == 75
    code, doc = run_json(["describe", "orders"], Recorder(audit_group=RuntimeError("boom")))
    assert code == 70 and doc["error"] == {"type": "RuntimeError", "message": "boom", "exit_code": 70}


def test_demo_is_delegated_to_the_demo_module(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []
    fake = types.ModuleType("static_consumer_lab.demo")

    def demo_main(argv: list[str]) -> int:
        seen.append(argv)
        return 3

    fake.main = demo_main  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "static_consumer_lab.demo", fake)
    assert main(["demo", "--fast", "x"]) == 3 and seen == [["--fast", "x"]]


@pytest.mark.parametrize("missing", ["static_consumer_lab", "static_consumer_lab.demo"])
def test_demo_without_the_lab_installed_says_which_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """The runtime wheel holds no demo: without static-consumer-lab, one line names the extra."""
    monkeypatch.delitem(sys.modules, "static_consumer_lab.demo", raising=False)
    monkeypatch.setitem(sys.modules, missing, None)  # import raises ModuleNotFoundError, as when absent
    out, err = io.StringIO(), io.StringIO()
    code = main(["demo"], stdout=out, stderr=err)
    assert code == 78 and out.getvalue() == ""
    line = (
        "static-consumer demo: the demo is not installed; pip install ./ './lab[demo]' (from a checkout: "
        "the package index does not have it yet)\n"
    )
    assert err.getvalue() == line


def test_a_demo_that_misses_a_dependency_of_its_own_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    class MissingMatplotlib(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "static_consumer_lab.demo":  # as if the demo imported a module that is absent
                raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
            return None

    monkeypatch.delitem(sys.modules, "static_consumer_lab.demo", raising=False)
    monkeypatch.setattr(sys, "meta_path", [MissingMatplotlib(), *sys.meta_path])
    with pytest.raises(ModuleNotFoundError, match="matplotlib"):
        main(["demo"])
