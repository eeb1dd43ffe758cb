"""Permission faults on a broker with KRaft's StandardAuthorizer: an ACL revoked while a member runs idle
(and restored), a ``^regex`` subscription whose topics the principal may not read, and the removal
tools without their ACLs. Each ends with exit 78 naming the ACL, and the ACL it names is enough.

One broker with the authorizer for the module (``kafka_acl_cluster``); the consumer logs in as
``User:app``, the tools as ``User:ops``. The members keep their default sessions (45 s): every end
asserted here comes well before a session could expire.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from test_acls import CONSUMER, RECORDS, cli, needs, run_pod, settings_for

from static_consumer import MissingTopicError, StaticConsumer, exit_code_for
from static_consumer._base.errors import AuthorizationError
from static_consumer._kafka.acls import Acl
from static_consumer.admin import remove_members
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers.authorizer import OPS_USER, AclCluster
from static_consumer_lab.brokers.kafka_ops import committed_offsets, create_topic, produce

PROTOCOLS = ["classic", "consumer"]
SESSION_S = 45.0  # both protocols' default session: what a refusal found only by the session would take
FOUND_WITHIN_S = 20.0  # a refused heartbeat ends the member within this (heartbeats every 3 s or 5 s)


@pytest.fixture
def acl(kafka_acl_cluster: AclCluster) -> AclCluster:
    return kafka_acl_cluster


def stock_session(protocol: str) -> dict[str, Any]:
    """The default session under the classic protocol (test_acls's settings shorten it); the consumer
    protocol's is the broker's."""
    return {"session_timeout_ms": int(SESSION_S * 1000)} if protocol == "classic" else {}


def joined(consumer: StaticConsumer, bound_s: float = 30.0) -> None:
    deadline = time.monotonic() + bound_s
    while not consumer.assignment and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment, "no assignment within the bound"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_group_acl_revoked_while_idle_ends_the_member_at_a_refused_heartbeat_and_restored_it_runs(
    protocol: str, acl: AclCluster, kafka_group_id_factory: Callable[..., str]
) -> None:
    # An idle topic: no Fetch answer, no commit; only the heartbeat meets the revoked ACL.
    topic = create_topic(acl.cluster.bootstrap_servers, f"acl-idle-{uuid.uuid4().hex[:8]}", 2)
    group = kafka_group_id_factory("revoked")
    group_read = Acl("READ", "Group", group)
    acl.only(needs(CONSUMER[protocol], group, topic))
    settings = settings_for(acl, group, topic, protocol, **stock_session(protocol))
    consumer = StaticConsumer(settings, env={}).start()
    error: BaseException | None = None
    try:
        joined(consumer)
        with acl.revoked([group_read]):
            revoked = time.monotonic()
            with pytest.raises(AuthorizationError) as raised:
                while time.monotonic() - revoked < SESSION_S + 10:
                    consumer.poll(0.2)
            ended_s = time.monotonic() - revoked
            error = raised.value
    finally:
        consumer.close()
    print(f"{protocol}: exit {exit_code_for(error)} {ended_s:.1f} s after the revoke: {error}")
    assert exit_code_for(error) == 78 and isinstance(error, AuthorizationError)
    assert (error.operation, error.resource, error.name) == ("READ", "Group", group)
    assert "User:app" in str(error) and f"--operation Read --group {group}" in str(error)
    assert ended_s < FOUND_WITHIN_S, ended_s  # a heartbeat, not the 45 s session, found it

    # Restored (revoked() granted it back): once the ended member is removed (as scale-down does; under
    # KIP-848 the broker would hold its id for a session), the next start consumes and commits.
    admin = ConsumerSettings(bootstrap_servers=acl.cluster.bootstrap_servers, group_id=group, topics=[topic])
    assert remove_members(admin, ["app-0"]).removed == ("app-0",)  # the PLAINTEXT listener: a super user
    produce(acl.cluster.bootstrap_servers, topic, RECORDS)
    done = run_pod(settings, records=RECORDS)
    assert (done.code, done.records) == (0, RECORDS), done
    assert sum(committed_offsets(acl.cluster.bootstrap_servers, group, topic, 2).values()) == RECORDS


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_regex_subscription_without_acls_on_its_topics_is_told_the_prefixed_acl_that_covers_it(
    protocol: str, acl: AclCluster, kafka_group_id_factory: Callable[..., str]
) -> None:
    base = f"acl-rx-{uuid.uuid4().hex[:6]}-"
    for suffix in ("a", "b"):
        create_topic(acl.cluster.bootstrap_servers, base + suffix, 2)
        produce(acl.cluster.bootstrap_servers, base + suffix, RECORDS)
    regex = f"^{base}.*"
    covering = Acl("READ", "Topic", base, "PREFIXED")
    command = f"--operation Read --topic {base} --resource-pattern-type prefixed"

    def pod(grants: list[Acl], records: int, **fields: Any) -> Any:
        group = kafka_group_id_factory("regex")
        acl.only([Acl("READ", "Group", group), *grants])
        return run_pod(settings_for(acl, group, regex, protocol, topics=[regex], **fields), records=records)

    # No ACL on the topics: the brokers hide them, the regex matches none.
    hidden = pod([], 1, missing_topic_timeout_s=2)
    print(f"{protocol}, no topic ACL: exit {hidden.code} after {hidden.seconds:.1f} s: {hidden.error}")
    assert hidden.code == 78 and isinstance(hidden.error, MissingTopicError), hidden
    assert "hide them from User:app" in str(hidden.error) and f"grant {covering}" in str(hidden.error)
    assert command in str(hidden.error)

    # DESCRIBE on the prefix: the topics are assigned, the first Fetch is refused.
    refused = pod([Acl("DESCRIBE", "Topic", base, "PREFIXED")], 1)
    print(f"{protocol}, DESCRIBE: exit {refused.code} after {refused.seconds:.1f} s: {refused.error}")
    error = refused.error
    assert refused.code == 78 and isinstance(error, AuthorizationError), refused
    assert (error.operation, error.resource, error.name, error.pattern) == ("READ", "Topic", base, "PREFIXED")
    assert command in str(error) and refused.records == 0

    # What both named is enough for every topic the regex matches.
    granted = pod([covering], 2 * RECORDS)
    assert (granted.code, granted.records) == (0, 2 * RECORDS), granted


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_acl_removal_tools_name_read_on_the_group_and_need_topic_describe_only_for_kip848(
    protocol: str,
    acl: AclCluster,
    kafka_group_id_factory: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = create_topic(acl.cluster.bootstrap_servers, f"acl-rm-{uuid.uuid4().hex[:8]}", 2)
    group = kafka_group_id_factory("removal")
    acl.only(needs(CONSUMER[protocol], group, topic))
    consumer = StaticConsumer(settings_for(acl, group, topic, protocol, **stock_session(protocol)), env={})
    try:
        joined(consumer.start())
    finally:
        consumer.close()  # a static member: the group keeps it until its session expires

    monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", acl.users.password(OPS_USER))
    flags = ["-b", acl.cluster.sasl_bootstrap_servers, "--security-protocol", "SASL_PLAINTEXT"]
    flags += ["--sasl-mechanism", "SCRAM-SHA-256", "--sasl-username", OPS_USER, "--connect-timeout-s", "5"]
    remove = ["remove-members", group, "--instance-id", "app-0", *flags]

    acl.only([], user=OPS_USER)  # FindCoordinator (DESCRIBE on the group) is refused first
    for argv in (remove, ["scale-down", group, "--statefulset", "app", "--replicas", "0", *flags]):
        code, refused = cli(*argv)
        assert (code, refused["error"]["type"]) == (78, "AuthorizationError"), refused
        assert f"grant READ on Group {group!r}" in refused["error"]["message"], refused

    acl.only([Acl("READ", "Group", group)], user=OPS_USER)  # what it named
    code, result = cli(*remove)
    if protocol == "classic":  # DescribeGroups and LeaveGroup need no topic ACL
        assert code == 0 and result["removed"] == ["app-0"], result
        return
    # ConsumerGroupDescribe of a KIP-848 group needs DESCRIBE on its topics.
    assert (code, result["error"]["type"]) == (78, "AuthorizationError"), result
    assert "grant DESCRIBE on Topic" in result["error"]["message"], result
    acl.only([Acl("READ", "Group", group), Acl("DESCRIBE", "Topic", topic)], user=OPS_USER)
    code, result = cli(*remove)
    assert code == 0 and result["removed"] == ["app-0"], result
