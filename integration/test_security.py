"""Secure listeners: everything works through a SASL_PLAINTEXT listener with the same
ConsumerSettings, a wrong password is a typed error within a bound, and the password never shows up in
logs (DEBUG, kafka-python and librdkafka included), reprs, CLI output or exception messages.

The passwords are random per session (``kafka_sasl_cluster``), so finding one anywhere is a leak.
"""

from __future__ import annotations

import io
import json
import logging
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from static_consumer import StaticConsumer
from static_consumer._base.errors import AuthenticationError, ConfigurationError, StaticConsumerError
from static_consumer._base.records import Record
from static_consumer.admin.audit import audit_group
from static_consumer.admin.cli import main
from static_consumer.settings import ConsumerSettings
from static_consumer_lab.brokers import JvmKafkaCluster, committed_offsets, create_topic, produce

PARTITIONS = 3
RECORDS = 300
CONNECT_TIMEOUT_S = 3.0
# librdkafka debug contexts an operator would turn on to debug a login (conf dumps the configuration).
LIBRDKAFKA_DEBUG = "security,broker,conf,protocol,cgrp"


def cli(*argv: str) -> tuple[int, dict[str, Any], str]:
    """Run the CLI with -v (DEBUG logs, kafka loggers left on); returns code, JSON and stderr."""
    out, err = io.StringIO(), io.StringIO()
    code = main([*argv, "--json", "-v"], stdout=out, stderr=err)
    return code, json.loads(out.getvalue()), out.getvalue() + err.getvalue()


def sasl_flags(cluster: JvmKafkaCluster, mechanism: str, user: str = "alice") -> list[str]:
    return [
        "-b",
        cluster.sasl_bootstrap_servers,
        "--security-protocol",
        "SASL_PLAINTEXT",
        "--sasl-mechanism",
        mechanism,
        "--sasl-username",
        user,
        "--connect-timeout-s",
        str(CONNECT_TIMEOUT_S),
    ]


def settings_for(cluster: JvmKafkaCluster, group: str, mechanism: str, **fields: Any) -> ConsumerSettings:
    assert cluster.sasl is not None
    base = cluster.sasl.settings_fields(cluster.sasl_bootstrap_servers, "alice", mechanism)
    return ConsumerSettings(**{"group_id": group, "connect_timeout_s": CONNECT_TIMEOUT_S, **base, **fields})


def assert_no_secret(secrets: list[str], *texts: str) -> None:
    for text in texts:
        leaked = [s for s in secrets if s in text]
        assert leaked == [], f"password leaked into: {text[:200]!r}..."


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    for name in ("kafka", "static_consumer"):  # a previous CLI run may have quietened them
        logging.getLogger(name).setLevel(logging.NOTSET)
    return caplog


def everything_logged(caplog: pytest.LogCaptureFixture) -> str:
    # caplog.text is formatted (tracebacks included); messages also carry what a formatter might drop.
    return caplog.text + "\n".join(r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_probe_through_the_sasl_listener(
    mechanism: str,
    kafka_sasl_cluster: JvmKafkaCluster,
    monkeypatch: pytest.MonkeyPatch,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    users = kafka_sasl_cluster.sasl
    assert users is not None
    monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", users.password("alice"))

    code, report, output = cli("probe", *sasl_flags(kafka_sasl_cluster, mechanism))

    assert code == 0, report
    assert report["supports"]["classic_static"] and report["supports"]["consumer_protocol"]
    assert report["configured"]["static"] is True
    assert report["group_session_timeout_ms"]["min"] == 6000  # the stock broker's, readable through SASL
    assert_no_secret([users.password("alice")], output, everything_logged(debug_logs))


def test_static_consumer_and_operator_tools_through_the_sasl_listener(
    kafka_sasl_cluster: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    cluster, users = kafka_sasl_cluster, kafka_sasl_cluster.sasl
    assert users is not None
    password = users.password("alice")
    sasl = cluster.sasl_bootstrap_servers
    group = kafka_group_id_factory()
    topic = create_topic(cluster.bootstrap_servers, f"t-{group}", PARTITIONS)  # the harness: PLAINTEXT
    produce(sasl, topic, RECORDS, extra=users.client_config(sasl, "bob", "PLAIN"))
    settings = settings_for(
        cluster,
        group,
        "SCRAM-SHA-256",
        topics=[topic],
        instance_id="sasl-0",
        session_timeout_ms=30_000,
        librdkafka={"debug": LIBRDKAFKA_DEBUG},
    )

    consumer = StaticConsumer(settings, env={}).start()
    try:
        seen: list[Record] = []
        deadline = time.monotonic() + 60
        while len(seen) < RECORDS and time.monotonic() < deadline:
            records = consumer.consume(500, 0.5)
            seen += records
            if records:
                consumer.commit(records)
        assert len({(r.partition, r.offset) for r in seen}) == RECORDS
        assert consumer.static and consumer.instance_id == "sasl-0"

        # The operator tools, with the same settings (the password from the environment, as in a pod).
        monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", password)
        code, described, describe_output = cli("describe", group, *sasl_flags(cluster, "SCRAM-SHA-256"))
        assert code == 0, described
        assert [m["instance_id"] for m in described["group"]["members"]] == ["sasl-0"]
        assert described["audit"]["verdict"] == "ok", described["audit"]
        reprs = [repr(settings), str(settings), settings.model_dump_json(), repr(consumer.plan)]
    finally:
        consumer.close()

    last: dict[int, int] = {}
    for r in seen:
        last[r.partition] = max(last.get(r.partition, -1), r.offset)
    committed = committed_offsets(sasl, group, topic, PARTITIONS, extra=users.client_config(sasl))
    assert committed == {p: o + 1 for p, o in last.items()}
    # close() left the static member in the group; remove-members takes it out at once.
    code, removed, remove_output = cli(
        "remove-members", group, "--instance-id", "sasl-0", *sasl_flags(cluster, "PLAIN")
    )
    assert (code, removed["removed"]) == (0, ["sasl-0"]), removed
    assert audit_group(settings).verdict == "empty"

    logged = everything_logged(debug_logs)
    # The checks below are only meaningful if the client libraries really logged at DEBUG.
    names = {r.name for r in debug_logs.records}
    assert "static_consumer.librdkafka" in names and any(n.startswith("kafka.") for n in names)
    assert "sasl.password" in logged  # librdkafka's conf dump ran (and printed the key, not the value)
    assert_no_secret([password], logged, describe_output, remove_output, *reprs)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_a_wrong_password_is_an_authentication_error_within_the_bound(
    mechanism: str,
    kafka_sasl_cluster: JvmKafkaCluster,
    kafka_group_id_factory: Callable[..., str],
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    settings = settings_for(
        kafka_sasl_cluster,
        kafka_group_id_factory(),
        mechanism,
        topics=["t"],
        instance_id="sasl-0",
        sasl_password=wrong,
    )

    began = time.monotonic()
    with pytest.raises(AuthenticationError) as info:
        StaticConsumer(settings, env={}).start()
    elapsed = time.monotonic() - began

    error: StaticConsumerError = info.value
    print(f"{mechanism}: wrong password -> {type(error).__name__} after {elapsed:.2f} s")
    # One librdkafka login round trip names the refusal (kafka-python's bootstrap would wait out
    # its timeout first).
    assert elapsed < 2 * CONNECT_TIMEOUT_S + 2
    assert isinstance(error, ConfigurationError) and not error.retriable and error.exit_code == 78
    assert "'alice'" in str(error) and mechanism in str(error) and "sasl_password" in str(error)
    formatted = "".join(traceback.format_exception(error))
    assert_no_secret(
        [wrong], str(error), repr(error), formatted, repr(settings), everything_logged(debug_logs)
    )


def test_the_first_refusal_ends_a_start_with_the_default_connect_timeout(
    kafka_sasl_cluster: JvmKafkaCluster, kafka_group_id_factory: Callable[..., str]
) -> None:
    # With connect_timeout_s at its default (30 s), a wrong SCRAM password ends the start at the first
    # refusal: kafka-python alone would wait out its bootstrap, as it drops the broker's refusal.
    settings = settings_for(
        kafka_sasl_cluster,
        kafka_group_id_factory(),
        "SCRAM-SHA-256",
        topics=["t"],
        instance_id="sasl-0",
        sasl_password=f"wrong-{uuid.uuid4().hex}",
        connect_timeout_s=30.0,
    )

    began = time.monotonic()
    with pytest.raises(AuthenticationError):
        StaticConsumer(settings, env={}).start()
    elapsed = time.monotonic() - began

    print(f"wrong password with connect_timeout_s=30 -> AuthenticationError after {elapsed:.2f} s")
    assert elapsed < settings.connect_timeout_s / 2  # seconds, not the connect timeout (a loaded machine)


def test_the_cli_reports_a_wrong_password_as_a_configuration_error(
    kafka_sasl_cluster: JvmKafkaCluster, monkeypatch: pytest.MonkeyPatch, debug_logs: pytest.LogCaptureFixture
) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    monkeypatch.setenv("STATIC_CONSUMER_SASL_PASSWORD", wrong)

    code, result, output = cli("describe", "some-group", *sasl_flags(kafka_sasl_cluster, "SCRAM-SHA-256"))

    assert code == 78, result
    assert result["error"]["type"] == "AuthenticationError"
    assert "refused to authenticate 'alice'" in result["error"]["message"]
    assert_no_secret([wrong], output, everything_logged(debug_logs))
