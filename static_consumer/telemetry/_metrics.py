"""The metric reference: every instrument the OpenTelemetry listener creates, and the docs table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GROUP = "messaging.consumer.group.name"  # OpenTelemetry messaging semantic conventions
INSTANCE_ID = "static_consumer.instance_id"
PROTOCOL = "static_consumer.protocol"
JOIN_KIND = "static_consumer.join.kind"
REASON = "static_consumer.reason"
PHASE = "static_consumer.spark.phase"
COMMITTED = "static_consumer.spark.committed"
VERDICT = "static_consumer.stall.verdict"
TOPIC = "messaging.destination.name"  # the source topic of a failing record


@dataclass(frozen=True, slots=True)
class Metric:
    """One instrument; ``java`` names the Java consumer's coordinator metric with the same meaning."""

    name: str
    instrument: Literal["counter", "updowncounter", "histogram", "gauge"]
    unit: str
    description: str
    attributes: tuple[str, ...] = ()
    java: str = ""


METRICS: tuple[Metric, ...] = (
    Metric(
        "static_consumer.rebalances",
        "counter",
        "{rebalance}",
        "Rebalances this member went through (a new generation or moved partitions after its join); "
        "the rate is the backend's rate() of it.",
        java="rebalance-total, rebalance-rate-per-hour",
    ),
    Metric(
        "static_consumer.rebalance.duration",
        "histogram",
        "s",
        "From the first revoke (or loss) of a rebalance to the new assignment.",
        java="rebalance-latency-avg/max/total",
    ),
    Metric(
        "static_consumer.rebalances.failed",
        "counter",
        "{rebalance}",
        "Rebalances that failed: partitions lost, or a fence or fatal error during a join or rebalance.",
        (REASON,),
        java="failed-rebalance-total, failed-rebalance-rate-per-hour",
    ),
    Metric(
        "static_consumer.rebalance.time_since_last",
        "gauge",
        "s",
        "Seconds since this member's last rebalance; no value before the first one.",
        java="last-rebalance-seconds-ago",
    ),
    Metric(
        "static_consumer.assigned_partitions",
        "updowncounter",
        "{partition}",
        "Partitions assigned to this member now.",
        java="assigned-partitions",
    ),
    Metric(
        "static_consumer.partitions.revoked",
        "counter",
        "{partition}",
        "Partitions revoked: by a rebalance (reason=rebalance) or released by close() (reason=close).",
        (REASON,),
        java="partition-revoked-latency (count)",
    ),
    Metric(
        "static_consumer.partitions.lost",
        "counter",
        "{partition}",
        "Partitions lost without a chance to commit (session timeout, max.poll.interval exceeded).",
        java="partition-lost-latency (count)",
    ),
    Metric(
        "static_consumer.rebalance.partitions_moved",
        "histogram",
        "{partition}",
        "Per rebalance: partitions this member gained plus partitions it gave up.",
    ),
    Metric(
        "static_consumer.fenced",
        "counter",
        "{fence}",
        "Times this instance id was fenced: another process joined with it.",
    ),
    Metric(
        "static_consumer.joins",
        "counter",
        "{join}",
        "First assignments of a new client, by kind: static_rejoin (no rebalance), static_join, "
        "dynamic_join (these two rebalance the group), manual, unknown.",
        (JOIN_KIND,),
    ),
    Metric(
        "static_consumer.static_rejoins",
        "counter",
        "{rejoin}",
        "Restarts of a static member that got its held partitions back without a rebalance.",
    ),
    Metric(
        "static_consumer.join.duration",
        "histogram",
        "s",
        "From the Joining announcement (a new client, before subscribe; includes the held look-up) to "
        "the first assignment.",
        java="join-time-avg/max (roughly)",
    ),
    Metric(
        "static_consumer.spark.records",
        "counter",
        "{record}",
        "Spark bridge: records handed to fn in processed batches; the backend's rate() of it is the "
        "processing rate.",
    ),
    Metric(
        "static_consumer.spark.batches",
        "counter",
        "{batch}",
        "Spark bridge: batches processed, by whether their Kafka commit succeeded.",
        (COMMITTED,),
    ),
    Metric(
        "static_consumer.spark.batch.duration",
        "histogram",
        "s",
        "Spark bridge: per batch, seconds spent collecting it, in fn, and committing it (checkpoint "
        "and Kafka).",
        (PHASE,),
    ),
    Metric(
        "static_consumer.spark.lag",
        "gauge",
        "{record}",
        "Spark bridge: records behind the last processed batch in its partitions (end offsets looked up "
        "at most every lag_interval_s); no value before it is known.",
        java="records-lag (summed over the batch's partitions)",
    ),
    Metric(
        "static_consumer.spark.input_rows_per_s",
        "gauge",
        "{record}/s",
        "Spark bridge: the last processed batch's input rate, its records over the time since the "
        "previous batch was handed to fn (a streaming query's inputRowsPerSecond); no value before the "
        "first batch.",
    ),
    Metric(
        "static_consumer.spark.processing_rows_per_s",
        "gauge",
        "{record}/s",
        "Spark bridge: the last processed batch's processing rate, its records over the seconds fn took "
        "(a streaming query's processedRowsPerSecond); no value before the first batch.",
    ),
    Metric(
        "static_consumer.commits.refused",
        "counter",
        "{commit}",
        "Commits the broker refused because the partitions moved or this member's session or generation "
        "had ended (a lost session, a handler blocked past max_poll_interval_ms), by Kafka error name; "
        "their records come again and the consumer goes on (see the CommitRefused event).",
        (REASON,),
        java="commit failures (CommitFailedException)",
    ),
    Metric(
        "static_consumer.stalls",
        "counter",
        "{stall}",
        "Gaps between client calls longer than half the session timeout that were checked before records "
        "went out, by verdict: ok (still the owner), lost, gone (the broker refused the member), unknown, "
        "expired (see the Stalled event).",
        (VERDICT,),
    ),
    Metric(
        "static_consumer.handler.retries",
        "counter",
        "{retry}",
        "Times a runner called the batch handler again after it raised (failure_retries; see the "
        "RecordsRetried event), by the source topic of the record it failed on.",
        (TOPIC,),
        java="(Spring Kafka: DefaultErrorHandler back-off attempts)",
    ),
    Metric(
        "static_consumer.records.dead_lettered",
        "counter",
        "{record}",
        "Records written to their dead-letter topic (acknowledged) after the retries, by source topic "
        "(failure_action='dead_letter'; the RecordDeadLettered event).",
        (TOPIC,),
    ),
    Metric(
        "static_consumer.records.skipped",
        "counter",
        "{record}",
        "Records left unhandled after the retries, by source topic (failure_action='skip'; the "
        "RecordSkipped event).",
        (TOPIC,),
    ),
    Metric(
        "static_consumer.stall.dropped_records",
        "counter",
        "{record}",
        "Records fetched before a stall and not handed out: their partitions belonged to another member "
        "by then (or were about to).",
    ),
)


def metric_reference() -> str:
    """The Markdown table of docs/observability.md."""
    rows = [
        "| metric | instrument | unit | attributes | meaning | Java consumer |",
        "|---|---|---|---|---|---|",
    ]
    for m in METRICS:
        attrs = ", ".join(f"`{a}`" for a in m.attributes) or "-"
        java = m.java or "-"
        rows.append(f"| `{m.name}` | {m.instrument} | `{m.unit}` | {attrs} | {m.description} | {java} |")
    return "\n".join(rows)


__all__ = [
    "COMMITTED",
    "GROUP",
    "INSTANCE_ID",
    "JOIN_KIND",
    "METRICS",
    "PHASE",
    "PROTOCOL",
    "REASON",
    "TOPIC",
    "VERDICT",
    "Metric",
    "metric_reference",
]
