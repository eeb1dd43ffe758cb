"""Test specs leave the classic-only session settings out under KIP-848, in one place, for both clients."""

from __future__ import annotations

from static_consumer.settings import ConsumerSettings
from static_consumer_lab.children.specs import confluent_spec, static_spec


def test_static_spec_serves_both_protocols_with_one_call() -> None:
    classic = static_spec("b:9092", "g", ["t"], "app-0", session_timeout_ms=30000)["settings"]
    assert (classic["session_timeout_ms"], classic["heartbeat_interval_ms"]) == (30000, 500)
    consumer = static_spec("b:9092", "g", ["t"], "app-0", protocol="consumer", session_timeout_ms=30000)
    settings = consumer["settings"]
    assert "session_timeout_ms" not in settings and "heartbeat_interval_ms" not in settings
    ConsumerSettings(**settings)  # what the child builds: refused if a classic-only setting were left


def test_confluent_spec_drops_the_librdkafka_session_properties_under_kip848() -> None:
    classic = confluent_spec("b:9092", "g", ["t"], **{"session.timeout.ms": 60000})["config"]
    assert (classic["session.timeout.ms"], classic["heartbeat.interval.ms"]) == (60000, 500)
    consumer = confluent_spec("b:9092", "g", ["t"], **{"group.protocol": "consumer"})["config"]
    assert consumer["group.protocol"] == "consumer"
    assert "session.timeout.ms" not in consumer and "heartbeat.interval.ms" not in consumer
