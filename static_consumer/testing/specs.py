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
