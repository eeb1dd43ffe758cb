"""Operator API without a broker: group descriptions from recorded DescribeGroups answers, the refusal of
unknown instance ids, scale-down's ordinal selection, and ordinal <-> instance id through the template."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kafka.errors as kafka_errors
import pytest
from hypothesis import given
from hypothesis import strategies as st

from static_consumer import admin
from static_consumer._base.errors import (
    BrokerUnavailableError,
    CapabilityError,
    ConfigurationError,
    InvalidInstanceIdError,
    RetriableError,
    UnknownInstanceIdError,
)
from static_consumer._base.records import TopicPartition
from static_consumer._kafka import kafka_python
from static_consumer._kafka.kafka_python import translate
from static_consumer.admin._ordinals import instance_id_for, ordinal_of, ordinal_pattern, worker_of
from static_consumer.settings import ConsumerSettings

DATA = Path(__file__).parent / "data"
RECORDED = json.loads((DATA / "describe_groups_mixed.json").read_text())  # Kafka 4.3.1, librdkafka range


def settings(**overrides: Any) -> ConsumerSettings:
    return ConsumerSettings(**{"bootstrap_servers": "kafka-0:9092", "group_id": "orders", **overrides})


def group_answer(instance_ids: list[str | None], state: str = "Stable") -> dict[str, Any]:
    """A kafka-python describe_groups() entry for members with these instance ids (None = dynamic)."""
    members = []
    for k, iid in enumerate(instance_ids):
        members.append(
            {
                "member_id": f"{iid or 'rdkafka'}-{k:04d}",
                "group_instance_id": iid,
                "client_id": "orders-consumer",
                "client_host": f"/10.0.0.{k}",
                "member_metadata": {"topics": ["orders"]},
                "member_assignment": {"assigned_partitions": [{"topic": "orders", "partitions": [k]}]},
            }
        )
    return {"group_state": state, "protocol_type": "consumer", "protocol_data": "range", "members": members}


class FakeAdmin:
    """Answers like kafka-python's KafkaAdminClient; records LeaveGroup batches."""

    def __init__(self, answer: dict[str, Any], leave_errors: dict[str, type] | None = None) -> None:
        self.answer = {"error": None, **answer}
        self.leave_errors = leave_errors or {}
        self.removed: list[list[str]] = []

    def describe_groups(self, group_ids: list[str]) -> dict[str, Any]:
        return {group_ids[0]: {"group_id": group_ids[0], **self.answer}}

    def remove_group_members(self, group_id: str, members: list[Any]) -> dict[str, Any]:
        ids = [m.group_instance_id for m in members]
        self.removed.append(ids)
        return {i: self.leave_errors.get(i, kafka_errors.NoError) for i in ids}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeAdmin]]:
    """Route the admin session to the FakeAdmin the test appends."""
    slot: list[FakeAdmin] = []

    @contextmanager
    def session(_settings: ConsumerSettings, _doing: str, **_: object) -> Iterator[FakeAdmin]:
        yield slot[0]

    monkeypatch.setattr(kafka_python, "kafka_admin", session)
    yield slot


# -------------------------------------------------------------------------------------- describe
def test_recorded_describe_groups_answer_becomes_a_typed_description(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(RECORDED))
    d = admin.describe_group(settings())

    assert (d.state, d.group_type, d.assignor, d.exists) == ("Stable", "classic", "range", True)
    assert [m.instance_id for m in d.members] == ["orders-0", "orders-1", None]  # static first, by id
    assert d.instance_ids == {"orders-0", "orders-1"} and d.mixed
    first = d.members[0]
    assert first.host == "127.0.0.1"  # the broker's leading '/' stripped
    assert first.subscription == ("orders",) and first.assignment == (TopicPartition("orders", 1),)
    assert d.to_dict()["members"][0]["assignment"] == {"orders": [1]}


def test_unknown_group_on_old_brokers_is_dead_and_does_not_exist(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin({"group_state": "Dead", "protocol_data": "", "members": []}))
    d = admin.describe_group(settings(), "nope")
    assert (d.group_id, d.exists, d.members) == ("nope", False, ())


# ---------------------------------------------------------------------------------- remove_members
def test_remove_members_sends_one_batch_for_known_ids(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer(["orders-0", "orders-1", "orders-2"])))
    result = admin.remove_members(settings(), ["orders-2", "orders-1", "orders-2"])
    assert fake[0].removed == [["orders-2", "orders-1"]]  # deduplicated, one request
    assert (result.removed, result.absent, result.ok) == (("orders-2", "orders-1"), (), True)


def test_remove_members_refuses_unknown_ids_before_removing_anything(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer(["orders-0", "orders-1"])))
    with pytest.raises(UnknownInstanceIdError) as raised:
        admin.remove_members(settings(), ["orders-1", "orders-9"])
    assert fake[0].removed == []
    message = str(raised.value)
    assert "orders-9" in message and "orders-0, orders-1" in message and "Nothing was removed" in message
    assert raised.value.exit_code == 78 and isinstance(raised.value, ConfigurationError)


def test_remove_members_can_skip_unknown_ids(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer(["orders-0"])))
    result = admin.remove_members(settings(), ["orders-0", "orders-5"], missing="skip")
    assert (result.removed, result.absent) == (("orders-0",), ("orders-5",))


def test_member_that_left_meanwhile_is_absent_and_broker_refusals_are_failures(fake: list[FakeAdmin]) -> None:
    errors = {
        "orders-0": kafka_errors.UnknownMemberIdError,
        "orders-1": kafka_errors.RebalanceInProgressError,
    }
    fake.append(FakeAdmin(group_answer(["orders-0", "orders-1"]), errors))
    result = admin.remove_members(settings(), ["orders-0", "orders-1"])
    assert result.absent == ("orders-0",) and not result.ok
    (failure,) = result.failed
    assert (failure.instance_id, failure.error) == ("orders-1", "RebalanceInProgressError")


def test_remove_members_validates_ids_and_needs_at_least_one() -> None:
    with pytest.raises(InvalidInstanceIdError):
        admin.remove_members(settings(), ["orders 1"])
    with pytest.raises(ConfigurationError, match="at least one"):
        admin.remove_members(settings(), [])


# ------------------------------------------------------------------------------------ scale_down
def test_scale_down_removes_members_at_or_above_the_new_replica_count(fake: list[FakeAdmin]) -> None:
    ids = ["orders-0", "orders-1", "orders-2", "orders-10", "billing-3", "orders-x"]
    fake.append(FakeAdmin(group_answer([*ids, None])))
    result = admin.scale_down(settings(), replicas=2, statefulset="orders")
    assert sorted(result.removed) == ["orders-10", "orders-2"]  # not billing-3, orders-x or the dynamic one


def test_scale_down_by_ordinal_is_idempotent(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer(["orders-0"])))
    result = admin.scale_down(settings(), ordinals=[1, 2], statefulset="orders")
    assert (result.removed, result.absent, result.ok) == ((), ("orders-1", "orders-2"), True)
    assert fake[0].removed == []


def test_scale_down_follows_the_instance_id_template(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer(["orders-0", "orders-1"])))
    result = admin.scale_down(settings(instance_id_template="{group}-{ordinal}"), replicas=1)
    assert result.removed == ("orders-1",)


def test_scale_down_needs_the_statefulset_name_for_pod_templates() -> None:
    with pytest.raises(ConfigurationError, match="StatefulSet name"):
        admin.scale_down(settings(), ordinals=[3])
    with pytest.raises(ConfigurationError, match="replicas, processes, ordinals or instance_ids"):
        admin.scale_down(settings(), statefulset="orders")


POOLS = ["orders-0-0", "orders-0-1", "orders-0-2", "orders-1-0", "orders-1-1", "orders-1-2", "orders-10-0"]


def test_scale_down_reads_pool_workers_as_members_of_their_pod(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer([*POOLS, "orders-canary-1-0", "orders-1-01"])))
    result = admin.scale_down(settings(), replicas=1, statefulset="orders")
    assert sorted(result.removed) == ["orders-1-0", "orders-1-1", "orders-1-2", "orders-10-0"]


def test_scale_down_with_fewer_processes_removes_the_workers_that_went_away(fake: list[FakeAdmin]) -> None:
    """N 3 -> 2: every pod's worker 2 goes, and so do the single-process ids the pools replaced."""
    fake.append(FakeAdmin(group_answer([*POOLS, "orders-3", "billing-0-2"])))
    result = admin.scale_down(settings(), processes=2, statefulset="orders")
    assert sorted(result.removed) == ["orders-0-2", "orders-1-2", "orders-3"]
    fake[0] = FakeAdmin(group_answer(POOLS))
    both = admin.scale_down(settings(), replicas=1, processes=2, statefulset="orders")
    assert sorted(both.removed) == ["orders-0-2", "orders-1-0", "orders-1-1", "orders-1-2", "orders-10-0"]


def test_scale_down_by_ordinal_takes_the_pods_workers_too(fake: list[FakeAdmin]) -> None:
    fake.append(FakeAdmin(group_answer(POOLS)))
    result = admin.scale_down(settings(), ordinals=[1], statefulset="orders")
    assert sorted(result.removed) == ["orders-1-0", "orders-1-1", "orders-1-2"]
    assert result.absent == ("orders-1",)  # the pod's own id, not in the group: reported, not refused
    with pytest.raises(ConfigurationError, match="processes must be >= 1"):
        admin.scale_down(settings(), processes=0, statefulset="orders")


# -------------------------------------------------------------------------- ordinals <-> instance ids
@given(
    template=st.sampled_from(["{pod}", "{statefulset}-{ordinal}", "{group}-{ordinal}", "c.{pod}.{ordinal}"]),
    ordinal=st.integers(0, 10_000),
    other=st.integers(0, 10_000),
)
def test_every_ordinal_round_trips_through_the_template(template: str, ordinal: int, other: int) -> None:
    pattern = ordinal_pattern(template, statefulset="orders-v2", group_id="orders")
    instance_id = instance_id_for(template, ordinal, statefulset="orders-v2", group_id="orders")
    assert ordinal_of(instance_id, pattern) == ordinal
    if "{pod}" in template and "{ordinal}" in template and other != ordinal:
        # both spell the ordinal: an id whose two numbers disagree is no pod of this StatefulSet
        assert ordinal_of(f"c.orders-v2-{ordinal}.{other}", pattern) is None


def test_pool_worker_ids_round_trip_through_every_template() -> None:
    for template in ["{pod}", "{statefulset}-{ordinal}", "{group}-{ordinal}", "c.{pod}.{ordinal}"]:
        pattern = ordinal_pattern(template, statefulset="orders-v2", group_id="orders")
        pod_id = instance_id_for(template, 12, statefulset="orders-v2", group_id="orders")
        assert (ordinal_of(f"{pod_id}-3", pattern), worker_of(f"{pod_id}-3", pattern)) == (12, 3)
        assert (ordinal_of(pod_id, pattern), worker_of(pod_id, pattern)) == (12, None)
        assert ordinal_of(f"{pod_id}-03", pattern) is None  # not a worker pool.worker_id would name


def test_ordinal_pattern_rejects_other_statefulsets_and_leading_zeros() -> None:
    pattern = ordinal_pattern("{pod}", statefulset="orders", group_id="g")
    assert [ordinal_of(i, pattern) for i in ["orders-3", "orders-03", "orders-canary-3", "xorders-3"]] == [
        3,
        None,
        None,
        None,
    ]


# ------------------------------------------------------------------------------------ error mapping
def test_kafka_python_errors_map_to_project_errors_without_secrets() -> None:
    s = settings(
        security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_username="u", sasl_password="hunter2"
    )
    timeout = translate(kafka_errors.KafkaTimeoutError("auth hunter2 failed"), s, "describe group g")
    assert isinstance(timeout, BrokerUnavailableError) and timeout.exit_code == 75
    assert "hunter2" not in str(timeout) and "kafka-0:9092" in str(timeout)
    auth = translate(kafka_errors.SaslAuthenticationFailedError(), s, "describe group g")
    assert isinstance(auth, ConfigurationError)
    old = translate(kafka_errors.UnsupportedVersionError(), s, "remove members")
    assert isinstance(old, CapabilityError) and old.exit_code == 69


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("[Error 14] CoordinatorLoadInProgressError: loading", RetriableError),
        ("[Error 30] GroupAuthorizationFailedError: denied", ConfigurationError),
    ],
)
def test_group_level_errors_say_whether_to_retry(fake: list[FakeAdmin], error: str, kind: type) -> None:
    fake.append(FakeAdmin({"group_state": "Dead", "members": [], "error": error}))
    with pytest.raises(kind):
        admin.describe_group(settings())


def test_the_login_check_notes_brokers_that_hung_up_during_apiversions() -> None:
    """librdkafka 2.16's log line when Kafka's TLS listener hangs up on a PLAINTEXT client (measured on
    Kafka 4.3); a refused connection is not one."""
    from static_consumer._kafka.login import _LoginLog

    log = _LoginLog()
    thread = "[thrd:127.0.0.1:35165/bootstrap]"
    log.log(
        20,
        "%s [%s] %s",
        "FAIL",
        "rdkafka#producer-4",
        f"{thread}: 127.0.0.1:35165/bootstrap: Disconnected: connection closed by peer: receive 0 after "
        "POLLIN (after 2ms in state APIVERSION_QUERY)",
    )
    log.log(
        20,
        "%s [%s] %s",
        "FAIL",
        "rdkafka#producer-4",
        "[thrd:127.0.0.1:1/bootstrap]: 127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: "
        "Connection refused (after 0ms in state CONNECT)",
    )
    assert log.hung_up == [("127.0.0.1", 35165)]


def test_the_login_check_keeps_the_apiversions_librdkafka_logged_for_the_first_broker() -> None:
    """librdkafka's debug=feature lines for a broker's ApiVersions (the capability probe reads them);
    a second broker's answer does not mix in, other lines are ignored."""
    from static_consumer._kafka.login import _LoginLog

    log = _LoginLog()

    def line(broker: str, text: str) -> None:
        log.log(7, "%s [%s] %s", "APIVERSION", "rdkafka#producer-2", f"[thrd:{broker}]: {broker}: {text}")

    line("127.0.0.1:9092/bootstrap", "Broker API support:")
    line("127.0.0.1:9092/bootstrap", "  ApiKey Fetch (1) Versions 4..17")
    line("127.0.0.1:9092/bootstrap", "  ApiKey JoinGroup (11) Versions 0..9")
    line("127.0.0.1:9093/bootstrap", "  ApiKey JoinGroup (11) Versions 0..4")
    line("127.0.0.1:9092/bootstrap", "  ApiKey ConsumerGroupHeartbeat (68) Versions 0..1")
    line("127.0.0.1:9092/bootstrap", "Updated enabled protocol features to MsgVer2,ApiVersion")
    assert log.api_versions == {1: (4, 17), 11: (0, 9), 68: (0, 1)}


class _Described:
    def __init__(self, outcome: object) -> None:
        self.outcome = outcome

    def result(self, timeout: float) -> object:
        if isinstance(outcome := self.outcome, BaseException):
            raise outcome
        return outcome


class _Entry:
    def __init__(self, value: str, source: int = 5) -> None:
        self.value, self.source = value, source


class _LoginClient:
    """The login check's librdkafka AdminClient, as far as the probe uses it."""

    def __init__(self, broker: object, group: object = None) -> None:
        self.answers = {"BROKER": broker, "GROUP": group}

    def list_topics(self, timeout: float) -> object:
        return type("Metadata", (), {"brokers": {3: None, 1: None}})()

    def describe_configs(self, resources: list[object], request_timeout: float) -> dict[object, _Described]:
        kind = str(getattr(resources[0], "restype", "")).rpartition(".")[2]
        return {resources[0]: _Described(self.answers[kind])}


def test_the_probe_reads_group_configs_through_librdkafka_and_falls_back_when_it_cannot() -> None:
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaError, KafkaException

    from static_consumer._kafka.probe import _from_librdkafka
    from static_consumer.settings import ConsumerSettings

    settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id="g", protocol="consumer")
    apis = {11: (0, 9), 68: (0, 1)}
    broker = {
        "group.min.session.timeout.ms": _Entry("6000"),
        "group.consumer.session.timeout.ms": _Entry("45000"),
    }
    override = {"consumer.session.timeout.ms": _Entry("25000", source=8)}
    (caps,) = _from_librdkafka(_LoginClient(broker, override), apis, settings, True)
    assert (caps.api_versions, caps.group_min_session_timeout_ms) == (apis, 6000)
    assert caps.consumer_session_timeout_ms == 25000 and caps.group_max_session_timeout_ms is None
    assert _from_librdkafka(_LoginClient(broker, override), {}, settings, True) == []  # nothing logged
    # No answer in time, or a transport error: kafka-python asks instead (and reports it as before).
    assert _from_librdkafka(_LoginClient(FutureTimeout()), apis, settings, True) == []
    down = KafkaException(KafkaError(KafkaError._TRANSPORT))
    assert _from_librdkafka(_LoginClient(down), apis, settings, True) == []
    # Not allowed to describe them: unknown (the gate warns), as on kafka-python's path.
    refused = KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED))
    (caps,) = _from_librdkafka(_LoginClient(refused, refused), apis, settings, True)
    assert caps.group_min_session_timeout_ms is None and caps.consumer_session_timeout_ms is None
