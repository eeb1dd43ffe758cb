"""Child-process specs (see ``static_consumer_lab.children.child``) with defaults that suit group tests."""

from __future__ import annotations

from typing import Any

# Classic-protocol session defaults for tests (a dead member is noticed in seconds, not 45 s), as
# ConsumerSettings fields and as librdkafka properties.
CLASSIC_DEFAULTS: dict[str, Any] = {"session_timeout_ms": 10000, "heartbeat_interval_ms": 500}
LIBRDKAFKA_CLASSIC_DEFAULTS: dict[str, Any] = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


def for_protocol(protocol: str, classic_defaults: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """``classic_defaults`` overridden by ``settings``; under ``protocol="consumer"`` (KIP-848) every
    key of ``classic_defaults`` is left out, whoever set it: the broker decides the session and the
    heartbeat interval there, and both clients refuse them. The one place that decides this."""
    if protocol == "classic":
        return {**classic_defaults, **settings}
    return {k: v for k, v in settings.items() if k not in classic_defaults}


def confluent_spec(bootstrap: str, group: str, topics: list[str], **config: Any) -> dict[str, Any]:
    """A plain confluent-kafka consumer: librdkafka ``config`` overrides the test defaults (the classic
    session ones left out under ``"group.protocol": "consumer"``, see :func:`for_protocol`)."""
    base: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    protocol = config.get("group.protocol", "classic")
    return {
        "mode": "confluent",
        "topics": topics,
        "config": {**base, **for_protocol(protocol, LIBRDKAFKA_CLASSIC_DEFAULTS, config)},
    }


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
    Under ``protocol="consumer"`` the classic-only settings (session and heartbeat, the defaults and any
    given here) are left out (:func:`for_protocol`): the broker decides them under KIP-848 and the
    settings refuse them (``Group`` sets a per-group session). So one call serves both protocols.
    """
    base: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "topics": topics,
        "max_poll_interval_ms": 30000,
        "connect_timeout_s": 10.0,
        "shutdown_timeout_s": 10.0,
    }
    if instance_id is not None:
        base["instance_id"] = instance_id
    chosen = for_protocol(settings.get("protocol", "classic"), CLASSIC_DEFAULTS, settings)
    spec: dict[str, Any] = {"mode": "static", "env": env or {}, "settings": {**base, **chosen}}
    if event_log is not None:
        spec["event_log"] = event_log
    if otel:
        spec["otel"] = True
    return spec
