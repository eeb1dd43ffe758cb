"""Observability for static membership: an OpenTelemetry listener and a JSONL membership event log.

Both are :class:`~static_consumer._core.events.MembershipListener` objects; pass them to ``StaticConsumer``::

    consumer = StaticConsumer(settings, listeners=[OtelListener(), EventLog("/var/log/app/members.jsonl")])

:class:`OtelListener` needs only ``opentelemetry-api``: it records through whatever meter and tracer
providers the application configured (none configured: the API's no-op providers). See
docs/observability.md for the metric reference and the event-log schema.
"""

from static_consumer.telemetry._metrics import METRICS, metric_reference
from static_consumer.telemetry._schema import EVENT_LOG_SPARK_SCHEMA, SCHEMA_VERSION, schema_reference
from static_consumer.telemetry._tracker import (
    JOIN_KINDS,
    Failed,
    Interrupted,
    Join,
    JoinKind,
    MembershipTracker,
    Outcome,
    Rebalance,
    Released,
)
from static_consumer.telemetry.eventlog import EventLog, read_event_log
from static_consumer.telemetry.otel import OtelListener

__all__ = [
    "EVENT_LOG_SPARK_SCHEMA",
    "JOIN_KINDS",
    "METRICS",
    "SCHEMA_VERSION",
    "EventLog",
    "Failed",
    "Interrupted",
    "Join",
    "JoinKind",
    "MembershipTracker",
    "OtelListener",
    "Outcome",
    "Rebalance",
    "Released",
    "metric_reference",
    "read_event_log",
    "schema_reference",
]
