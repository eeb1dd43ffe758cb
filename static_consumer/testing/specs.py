"""Child-process specs (see ``static_consumer.testing.child``) with defaults that suit group tests."""

from __future__ import annotations

from typing import Any


def confluent_spec(bootstrap: str, group: str, topics: list[str], **config: Any) -> dict[str, Any]:
    """A plain confluent-kafka consumer: librdkafka ``config`` overrides the test defaults."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    return {"mode": "confluent", "topics": topics, "config": {**base, **config}}


# Classic-protocol session defaults for tests (a dead member is noticed in seconds, not 45 s).
CLASSIC_DEFAULTS: dict[str, Any] = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 500}


def static_spec(
    bootstrap: str,
    group: str,
    topics: list[str],
    instance_id: str | None,
    *,
    env: dict[str, str] | None = None,
    event_log: str | None = None,
    otel: bool = False,
    **settings: Any,
) -> dict[str, Any]:
    """A StaticConsumer: ``settings`` are ConsumerSettings fields overriding the test defaults.

    ``instance_id`` None leaves identity to ``env`` (e.g. ``{"POD_NAME": "app-2"}``). ``event_log``: a
    path for the JSONL membership event log; ``otel``: stream OpenTelemetry totals as ``metrics`` events.
    Under ``protocol="consumer"`` the classic-only defaults (session and heartbeat) are left out: the
    broker decides them under KIP-848 and the settings refuse them (``Group`` sets a per-group session).
    """
    base: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": topics,
        "max_poll_interval_ms": 30000,
        "connect_timeout_s": 10.0,
        "shutdown_timeout_s": 10.0,
    }
    if settings.get("protocol", "classic") == "classic":
        base.update(CLASSIC_DEFAULTS)
    if instance_id is not None:
        base["instance_id"] = instance_id
    spec: dict[str, Any] = {"mode": "static", "env": env or {}, "settings": {**base, **settings}}
    if event_log is not None:
        spec["event_log"] = event_log
    if otel:
        spec["otel"] = True
    return spec
