"""The capability gate on a real broker.

The gate reads the broker's ApiVersions and group configs before the client exists, so a consumer that
cannot join correctly fails clearly and at once instead of being rejected by the coordinator later (or,
for an out-of-bounds session timeout, retrying a refused JoinGroup forever with a non-fatal error).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import pytest

from static_consumer import ConsumerSettings, StaticConsumer
from static_consumer_lab.brokers import describe_consumer_group
from static_consumer_lab.brokers.jvm import JvmKafkaCluster
from static_consumer_lab.children.processes import ConsumerProcess, wait_until
from static_consumer_lab.children.specs import confluent_spec, static_spec

# The stock broker's (Apache Kafka's defaults): the bounds a consumer meets on an unchanged cluster.
STOCK_MIN_SESSION_MS = 6000  # group.min.session.timeout.ms
BROKER_DEFAULT_CONSUMER_SESSION_MS = 45000  # group.consumer.session.timeout.ms


def _spec(protocol: str, bootstrap: str, group: str, topic: str, **settings: Any) -> dict[str, Any]:
    spec = static_spec(bootstrap, group, [topic], None, env={"POD_NAME": "orders-0"}, protocol=protocol)
    spec["settings"].update(settings)
    return spec


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.parametrize(
    ("policy", "instance_id"), [("require", "orders-0"), ("warn", "orders-0"), ("dynamic", None)]
)
def test_static_policy_decides_whether_the_member_has_an_instance_id(
    protocol: str,
    policy: str,
    instance_id: str | None,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    group, topic = kafka_group_id_factory(), kafka_topic_factory(2)
    proc = kafka_consumer_process_factory(
        _spec(protocol, kafka_bootstrap_servers, group, topic, static_policy=policy)
    )
    ready = proc.wait_for_kind("ready", timeout_s=30)
    assert (ready["static"], ready["instance_id"]) == (instance_id is not None, instance_id)
    member_id = proc.wait_for_kind("assigned", timeout_s=60)["member_id"]
    # What the broker sees: the instance id (POD_NAME orders-0) for a static member, none for a dynamic one.
    members = describe_consumer_group(kafka_bootstrap_servers, group).members
    assert [(m.group_instance_id, m.member_id) for m in members] == [(instance_id, member_id)]
    assert proc.stop() == 0


def _assert_refused_before_joining(proc: ConsumerProcess, bootstrap: str, group: str, bounds: str) -> None:
    """Exit 78 (a configuration error: change session_timeout_ms) with SessionTimeoutOutOfBoundsError
    naming the broker's bounds; never a member in the group."""
    while proc.returncode is None:
        assert list(describe_consumer_group(bootstrap, group).members) == []
        time.sleep(0.2)
    assert proc.wait(timeout_s=5) == 78, proc.stderr_tail()
    error = proc.wait_for_kind("error", timeout_s=1)
    assert (error["kind_of"], error["exit_code"]) == ("SessionTimeoutOutOfBoundsError", 78)
    assert bounds in error["reason"], error["reason"]  # read from the live broker, not assumed
    # start() raised before the client subscribed: no "ready", and librdkafka never sent a JoinGroup.
    assert [e["kind"] for e in proc.events()] == ["error", "exit"]
    assert "INVALID_SESSION_TIMEOUT" not in proc.stderr_tail(200)
    assert list(describe_consumer_group(bootstrap, group).members) == []


def test_session_timeout_below_the_broker_minimum_fails_before_joining(
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    bootstrap, topic = kafka_bootstrap_servers, kafka_topic_factory(1)
    too_short = {"session_timeout_ms": STOCK_MIN_SESSION_MS // 2, "heartbeat_interval_ms": 100}

    # The control: plain librdkafka with the same timeout is refused by the coordinator with a
    # *non-fatal* INVALID_SESSION_TIMEOUT and keeps retrying; nothing tells the process to stop.
    control_group = kafka_group_id_factory("control")
    control = kafka_consumer_process_factory(
        confluent_spec(
            bootstrap,
            control_group,
            [topic],
            **{
                "session.timeout.ms": too_short["session_timeout_ms"],
                "heartbeat.interval.ms": too_short["heartbeat_interval_ms"],
                "group.instance.id": "orders-0",
            },
        ),
        name="control",
    )
    wait_until(lambda: len(control.events("error")) >= 2, 30, "repeated JoinGroup refusals")
    assert {(e["code"], e["fatal"]) for e in control.events("error")} == {(26, False)}
    assert control.returncode is None

    group = kafka_group_id_factory()
    proc = kafka_consumer_process_factory(_spec("classic", bootstrap, group, topic, **too_short))
    _assert_refused_before_joining(proc, bootstrap, group, f"[{STOCK_MIN_SESSION_MS}, ")


def test_session_timeout_above_the_broker_maximum_fails_before_joining(
    kafka_jvm_cluster_factory: Callable[..., JvmKafkaCluster],
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
    kafka_consumer_process_factory: Callable[..., ConsumerProcess],
) -> None:
    cluster = kafka_jvm_cluster_factory(1, extra_config={"group.max.session.timeout.ms": "20000"})
    bootstrap = cluster.bootstrap_servers
    topic, group = kafka_topic_factory(1, bootstrap=bootstrap), kafka_group_id_factory()
    too_long = {"session_timeout_ms": 30000, "max_poll_interval_ms": 60000}
    proc = kafka_consumer_process_factory(_spec("classic", bootstrap, group, topic, **too_long))
    _assert_refused_before_joining(proc, bootstrap, group, f"[{STOCK_MIN_SESSION_MS}, 20000]")


# Under the consumer protocol the session timeout is the broker's (session_timeout_ms is refused by the
# settings), so there is nothing to bound-check; what the gate can still do is compare the broker's
# group.consumer.session.timeout.ms with how long a restart takes, and warn.
@pytest.mark.parametrize(
    ("protocol", "settings", "warns"),
    [
        ("consumer", {"expected_restart_ms": BROKER_DEFAULT_CONSUMER_SESSION_MS + 15000}, True),
        ("consumer", {"expected_restart_ms": BROKER_DEFAULT_CONSUMER_SESSION_MS - 15000}, False),
        ("classic", {"session_timeout_ms": 10000, "expected_restart_ms": 20000}, True),
        ("classic", {"session_timeout_ms": 10000, "expected_restart_ms": 5000}, False),
    ],
)
def test_a_session_timeout_shorter_than_a_restart_is_warned_about_and_still_joins(
    protocol: Literal["classic", "consumer"],
    settings: dict[str, Any],
    warns: bool,
    caplog: pytest.LogCaptureFixture,
    kafka_bootstrap_servers: str,
    kafka_topic_factory: Callable[..., str],
    kafka_group_id_factory: Callable[..., str],
) -> None:
    group, topic = kafka_group_id_factory(), kafka_topic_factory(1)
    consumer = StaticConsumer(
        ConsumerSettings(
            bootstrap_servers=kafka_bootstrap_servers,
            group_id=group,
            topics=(topic,),
            instance_id="orders-0",
            protocol=protocol,
            connect_timeout_s=10,
            shutdown_timeout_s=10,
            **settings,
        )
    )
    with caplog.at_level(logging.WARNING, logger="static_consumer"), consumer:
        assert consumer.static
        warned = [r.getMessage() for r in caplog.records if "expected_restart_ms" in r.getMessage()]
        assert bool(warned) == warns, warned
        if warns:
            assert "rebalance" in warned[0] and str(settings["expected_restart_ms"]) in warned[0]
        # A warning, not a refusal: the consumer joins as a static member.
        deadline = time.monotonic() + 60
        while not consumer.assignment and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment
        members = describe_consumer_group(kafka_bootstrap_servers, group).members
        assert [m.group_instance_id for m in members] == ["orders-0"]


def test_probe_prefers_a_kip848_group_session_timeout_override(
    kafka_bootstrap_servers: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    """A group-level consumer.session.timeout.ms decides how long a crashed member's id stays held, so
    the gate and the wait for a held instance id must use it rather than the broker-wide value (the
    heartbeat interval likewise); the broker's maximum bounds both."""
    from static_consumer._kafka.probe import probe
    from static_consumer_lab.brokers.kafka_ops import set_group_config

    overridden, plain = kafka_group_id_factory("override"), kafka_group_id_factory("plain")
    # Within the stock broker's bounds (session 45-60 s, heartbeat 5-15 s): it refuses anything else.
    set_group_config(
        kafka_bootstrap_servers,
        overridden,
        {"consumer.session.timeout.ms": "55000", "consumer.heartbeat.interval.ms": "6000"},
    )

    def settings(group: str) -> ConsumerSettings:
        return ConsumerSettings(
            bootstrap_servers=kafka_bootstrap_servers, group_id=group, topics=("t",), protocol="consumer"
        )

    broker, group = (
        probe(settings(plain), group_overrides=True),
        probe(settings(overridden), group_overrides=True),
    )
    # librdkafka's path (the consumer's) and kafka-python's (the check command's) read the same overrides.
    with_version = probe(settings(overridden), group_overrides=True, broker_version=True)
    assert replace(with_version, broker_version=None) == group
    assert (group.consumer_session_timeout_ms, group.consumer_heartbeat_interval_ms) == (55000, 6000)
    # The stock broker: Kafka's defaults, 45 s session (max 60 s), 5 s heartbeat.
    assert (broker.consumer_session_timeout_ms, broker.consumer_heartbeat_interval_ms) == (45000, 5000)
    assert broker.consumer_max_session_timeout_ms == group.consumer_max_session_timeout_ms == 60000


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_the_gate_reads_librdkafkas_own_apiversions_without_importing_kafka_python(
    protocol: str, kafka_bootstrap_servers: str, kafka_group_id_factory: Callable[..., str]
) -> None:
    """The consumer's start reads the broker's ApiVersions as librdkafka received them in its login check
    (no kafka-python, whose import cost more than the rest of a restart); they and the group configs are
    what kafka-python reads from the same broker, so the gate decides on the same answer as before."""
    from static_consumer._kafka.probe import probe

    settings = ConsumerSettings(
        bootstrap_servers=kafka_bootstrap_servers, group_id=kafka_group_id_factory(), protocol=protocol
    )
    overrides = protocol == "consumer"  # what the consumer protocol's mode asks for
    ours = probe(settings, group_overrides=overrides)
    theirs = probe(settings, group_overrides=overrides, broker_version=True)
    assert ours.supports_classic_static and ours.join_group_max_version == theirs.join_group_max_version
    assert ours == replace(theirs, broker_version=None)
    started = subprocess.run(
        [sys.executable, "-c", _START_AND_LIST_MODULES, kafka_bootstrap_servers, settings.group_id, protocol],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    static, kafka_python = started.stdout.split()
    assert (static, kafka_python) == ("static", "no-kafka-python"), started.stderr[-2000:]


# A consumer started on the real broker in a fresh interpreter: static or not, and whether kafka-python
# was imported on the way.
_START_AND_LIST_MODULES = """
import sys
from static_consumer import ConsumerSettings, StaticConsumer
bootstrap, group, protocol = sys.argv[1:]
settings = ConsumerSettings(bootstrap_servers=bootstrap, group_id=group, topics=("gate-modules",),
                            protocol=protocol, instance_id="modules-0", missing_topic_timeout_s=None)
with StaticConsumer(settings) as consumer:
    imported = "kafka-python" if "kafka" in sys.modules else "no-kafka-python"
    print("static" if consumer.static else "dynamic", imported)
"""
