"""Least privilege: on a broker with KRaft's StandardAuthorizer, the ACLs docs/security.md lists
(``static_consumer._kafka.acls.NEEDS``) are enough for the consumer under both protocols, the probe and the
operator tools, and without any one of them the pod main (``run_until_sigterm``) ends with a typed error
naming the ACL, exit 78, within seconds, where librdkafka would retry the refused request forever.

One broker with the authorizer for the whole module (``kafka_acl_cluster``); the consumer logs in as
``User:app``, the operator tools as ``User:ops``, and each test sets exactly the ACLs it grants them.
The broker keeps Kafka's group.min.session.timeout.ms (6000).
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from static_consumer import StaticConsumer, exit_code_for, run_until_sigterm
from static_consumer._base.errors import AuthorizationError, SessionTimeoutOutOfBoundsError
from static_consumer._kafka.acls import GROUP, NEEDS, TOPICS, Acl
from static_consumer._kafka.probe import probe
from static_consumer._kafka.release import release_static_member
from static_consumer.admin.cli import main
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers.authorizer import OPS_USER, AclCluster
from static_consumer_lab.brokers.kafka_ops import committed_offsets, create_topic, produce, set_group_config

PARTITIONS = 3
RECORDS = 30
TYPED_WITHIN_S = 10.0  # librdkafka retries every refusal below for ever; the pod ends within this
CONSUMER = {"classic": "consumer, protocol='classic'", "consumer": "consumer, protocol='consumer' (KIP-848)"}


def needs(operation: str, group: str, topic: str, *, optional: bool = False) -> list[Acl]:
    """The ACLs the table lists for ``operation``, for this group and topic (optional ones if asked)."""
    names = {GROUP: group, TOPICS: topic}
    return [
        Acl(n.acl.operation, n.acl.resource, names.get(n.acl.name, n.acl.name))
        for n in NEEDS[operation]
        if optional or not n.optional
    ]


@dataclass
class Outcome:
    code: int
    error: BaseException | None
    records: int
    seconds: float


def run_pod(settings: ConsumerSettings, *, records: int, bound_s: float = 60.0) -> Outcome:
    """The README's pod main: ``run_until_sigterm`` until ``records`` were handled (or ``bound_s``), and
    the exit code a pod would end with."""
    consumer = StaticConsumer(settings, env={})
    handled: list[Any] = []

    def handle(batch: list[Any]) -> None:
        handled.extend(batch)
        if len(handled) >= records:
            consumer.stop()

    timer = threading.Timer(bound_s, consumer.stop)
    timer.start()
    began, error = time.monotonic(), None
    try:
        run_until_sigterm(consumer, handle, poll_timeout_s=0.2)
    except Exception as exc:  # noqa: BLE001 - what the pod main turns into its exit code
        error = exc
    finally:
        timer.cancel()
    return Outcome(exit_code_for(error), error, len(handled), time.monotonic() - began)


def cli(*argv: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main([*argv, "--json"], stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


@pytest.fixture
def acl(kafka_acl_cluster: AclCluster) -> AclCluster:
    return kafka_acl_cluster


@pytest.fixture
def topic(acl: AclCluster) -> str:
    # Created on the authorizing broker directly: the file needs no other broker (not the session one).
    name = create_topic(acl.cluster.bootstrap_servers, f"acl-{uuid.uuid4().hex[:8]}", PARTITIONS)
    produce(acl.cluster.bootstrap_servers, name, RECORDS)
    return name


def settings_for(acl: AclCluster, group: str, topic: str, protocol: str, **fields: Any) -> ConsumerSettings:
    classic = {"session_timeout_ms": 10_000} if protocol == "classic" else {}
    values = {"group_id": group, "topics": [topic], "instance_id": "app-0", "protocol": protocol, **classic}
    return ConsumerSettings(**{**acl.settings_fields(), "connect_timeout_s": 5.0, **values, **fields})


def assert_ends_naming(outcome: Outcome, acl: Acl) -> None:
    error = outcome.error
    assert outcome.code == 78 and isinstance(error, AuthorizationError), (outcome, error)
    assert (error.operation, error.resource, error.name) == (acl.operation, acl.resource, acl.name), error
    assert f"grant {acl}" in str(error) and "User:app" in str(error)
    assert outcome.records == 0 and outcome.seconds < TYPED_WITHIN_S, outcome


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_consumer_runs_with_its_two_acls_and_ends_typed_without_either(
    protocol: str, acl: AclCluster, topic: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    group = kafka_group_id_factory()
    acl.only(needs(CONSUMER[protocol], group, topic))
    done = run_pod(settings_for(acl, group, topic, protocol), records=RECORDS)
    assert (done.code, done.records) == (0, RECORDS), done
    committed = committed_offsets(acl.cluster.bootstrap_servers, group, topic, PARTITIONS)
    assert sum(committed.values()) == RECORDS  # OffsetCommit allowed by READ on the group

    group_read, topic_read = Acl("READ", "Group", ""), Acl("READ", "Topic", topic)
    cases: list[tuple[str, Callable[[str], Iterable[Acl]], Acl]] = [
        ("no ACL on the group", lambda g: [topic_read], group_read),
        (
            "DESCRIBE instead of READ on the group",
            lambda g: [Acl("DESCRIBE", "Group", g), topic_read],
            group_read,
        ),
        ("no ACL on the topic", lambda g: [Acl("READ", "Group", g)], topic_read),
        (
            "DESCRIBE instead of READ on the topic",
            lambda g: [Acl("READ", "Group", g), Acl("DESCRIBE", "Topic", topic)],
            topic_read,
        ),
    ]
    for case, granted, missing in cases:
        group = kafka_group_id_factory(case.split()[0])
        acl.only(granted(group))
        outcome = run_pod(settings_for(acl, group, topic, protocol), records=1)
        print(f"{protocol}, {case}: exit {outcome.code} after {outcome.seconds:.1f} s: {outcome.error}")
        expected = Acl(missing.operation, missing.resource, missing.name or group)
        assert_ends_naming(outcome, expected)


def test_a_session_the_broker_refuses_ends_the_join_typed_whether_or_not_its_bounds_can_be_read(
    acl: AclCluster, topic: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    group = kafka_group_id_factory()
    too_short = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 1000}  # the broker's minimum: 6000
    # Without DESCRIBE_CONFIGS on the Cluster the gate cannot check the bounds: the coordinator refuses
    # the JoinGroup (INVALID_SESSION_TIMEOUT), which librdkafka would send again for ever.
    acl.only(needs(CONSUMER["classic"], group, topic))
    refused = run_pod(settings_for(acl, group, topic, "classic", **too_short), records=1)
    print(f"refused by the coordinator: exit {refused.code} after {refused.seconds:.1f} s: {refused.error}")
    assert refused.code == 78 and isinstance(refused.error, SessionTimeoutOutOfBoundsError), refused
    assert "INVALID_SESSION_TIMEOUT" in str(refused.error) and "unknown here" in str(refused.error)
    assert refused.seconds < TYPED_WITHIN_S

    # With it, the gate refuses before joining, naming the broker's bounds.
    acl.only(needs(CONSUMER["classic"], group, topic) + [Acl("DESCRIBE_CONFIGS", "Cluster", "kafka-cluster")])
    gated = run_pod(settings_for(acl, group, topic, "classic", **too_short), records=1)
    assert gated.code == 78 and isinstance(gated.error, SessionTimeoutOutOfBoundsError), gated
    assert "[6000, 1800000]" in str(gated.error) and "INVALID_SESSION_TIMEOUT" not in str(gated.error)


def test_the_probe_needs_no_acl_and_reads_a_group_session_only_with_describe_configs_on_the_group(
    acl: AclCluster, topic: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    overridden, plain = kafka_group_id_factory("override"), kafka_group_id_factory("plain")
    set_group_config(acl.cluster.bootstrap_servers, overridden, {"consumer.session.timeout.ms": "50000"})

    def session(group: str) -> int | None:
        return probe(
            settings_for(acl, group, topic, "consumer"), group_overrides=True
        ).consumer_session_timeout_ms

    acl.only([])
    caps = probe(settings_for(acl, plain, topic, "classic"))
    assert caps.supports_classic_static and caps.group_min_session_timeout_ms is None  # degraded: unread
    cluster = Acl("DESCRIBE_CONFIGS", "Cluster", "kafka-cluster")
    acl.only([cluster])
    assert probe(settings_for(acl, plain, topic, "classic")).group_min_session_timeout_ms == 6000
    # The group's own session is unknown without DESCRIBE_CONFIGS on it: not the broker's 45 s, which
    # would be wrong here (50 s; a stock broker takes 45-60 s), but None, so the wait for a held id
    # assumes the broker's maximum.
    assert session(overridden) is None
    acl.only([cluster, Acl("DESCRIBE_CONFIGS", "Group", overridden), Acl("DESCRIBE_CONFIGS", "Group", plain)])
    assert (session(overridden), session(plain)) == (50000, 45000)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_operator_tools_run_with_their_acls_and_end_typed_without_them(
    protocol: str,
    acl: AclCluster,
    topic: str,
    kafka_group_id_factory: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = kafka_group_id_factory()
    acl.only(needs(CONSUMER[protocol], group, topic))
    consumer = StaticConsumer(settings_for(acl, group, topic, protocol), env={}).start()
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment

        monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", acl.users.password(OPS_USER))
        flags = ["-b", acl.cluster.sasl_bootstrap_servers, "--security-protocol", "SASL_PLAINTEXT"]
        flags += [
            "--sasl-mechanism",
            "SCRAM-SHA-256",
            "--sasl-username",
            OPS_USER,
            "--connect-timeout-s",
            "5",
        ]

        acl.only(needs("describe", group, topic), user=OPS_USER)
        code, described = cli("describe", group, *flags)
        assert code == 0, described
        assert [m["instance_id"] for m in described["group"]["members"]] == ["app-0"]
        assert described["audit"]["verdict"] == "ok", described["audit"]
        acl.only([Acl("DESCRIBE", "Group", group)], user=OPS_USER)
        code, refused = cli("describe", group, *flags)
        assert (code, refused["error"]["type"]) == (78, "AuthorizationError"), refused
        # ConsumerGroupDescribe's refusal names no topic (and the tool is not told the group's topics):
        # the ACL is named by operation and resource, for each topic the group reads.
        named = repr(topic) if protocol == "classic" else "'each topic the group reads'"
        assert f"grant DESCRIBE on Topic {named}" in refused["error"]["message"]

        removal = needs("remove-members, scale-down", group, topic)
        acl.only([Acl("DESCRIBE", "Group", group), *removal[1:]], user=OPS_USER)
        code, refused = cli("remove-members", group, "--instance-id", "app-0", *flags)
        assert (code, refused["error"]["type"]) == (78, "AuthorizationError"), refused
        assert f"grant READ on Group {group!r}" in refused["error"]["message"]  # the LeaveGroup
        acl.only(removal, user=OPS_USER)
        code, removed = cli("scale-down", group, "--statefulset", "app", "--replicas", "0", *flags)
        assert code == 0 and removed["removed"] == ["app-0"], removed
    finally:
        consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_dead_letter_topic_needs_write_and_without_it_the_start_ends_typed_before_joining(
    protocol: str, acl: AclCluster, topic: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    dead_letter = create_topic(acl.cluster.bootstrap_servers, f"{topic}-dlt", PARTITIONS)
    fields = {"failure_action": "dead_letter"}
    group = kafka_group_id_factory()
    granted = needs(CONSUMER[protocol], group, topic)
    [write] = [n.acl for n in NEEDS["dead-letter (failure_action='dead_letter')"]]
    acl.only([*granted, Acl(write.operation, write.resource, dead_letter)])  # the table's row, this topic
    done = run_pod(settings_for(acl, group, topic, protocol, **fields), records=RECORDS)
    assert (done.code, done.records) == (0, RECORDS), done

    for case, extra in (
        ("no ACL", []),
        ("DESCRIBE instead of WRITE", [Acl("DESCRIBE", "Topic", dead_letter)]),
    ):
        group = kafka_group_id_factory("dlt")
        acl.only([*needs(CONSUMER[protocol], group, topic), *extra])
        outcome = run_pod(settings_for(acl, group, topic, protocol, **fields), records=1)
        print(f"{protocol}, dead-letter topic, {case}: exit {outcome.code} after {outcome.seconds:.1f} s")
        assert_ends_naming(outcome, Acl("WRITE", "Topic", dead_letter))
        assert committed_offsets(acl.cluster.bootstrap_servers, group, topic, PARTITIONS) == {}


def test_the_predecessor_release_needs_read_on_the_group(
    acl: AclCluster, topic: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    # The static leave a crash restart sends for its dead predecessor (restart_state_dir) is a
    # ConsumerGroupHeartbeat: the KIP-848 consumer's READ on the group allows it, DESCRIBE alone does not.
    group = kafka_group_id_factory()
    acl.only(needs(CONSUMER["consumer"], group, topic))
    settings = settings_for(acl, group, topic, "consumer")
    consumer = StaticConsumer(settings, env={}).start()
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment and time.monotonic() < deadline:
            consumer.poll(0.2)
        member = consumer.member_id
        assert consumer.assignment and member
        assert release_static_member(settings, "app-0", ["not-its-member-id", member]) == member

        acl.only([Acl("DESCRIBE", "Group", group), Acl("READ", "Topic", topic)])
        with pytest.raises(AuthorizationError) as refused:
            release_static_member(settings, "app-0", [member])
        assert (refused.value.operation, refused.value.resource, refused.value.name) == (
            "READ",
            "Group",
            group,
        )
    finally:
        consumer.close()
