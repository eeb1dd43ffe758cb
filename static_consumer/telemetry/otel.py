"""OpenTelemetry metrics and spans for one consumer's group membership (``opentelemetry-api`` only).

The listener records through the meter and tracer providers the application configured (or the ones
passed in); with none configured the API's no-op providers make it free. Metric attributes are the
group, the instance id and the protocol: all stable across restarts of a static member, so series do not
multiply. Member ids and generations change on every join and appear on spans only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from opentelemetry import metrics, trace
from opentelemetry.trace import Status, StatusCode

from static_consumer import __version__
from static_consumer._core.events import (
    Assigned,
    BatchProgress,
    Closed,
    CommitRefused,
    FatalError,
    Fenced,
    Joining,
    Lost,
    MembershipEvent,
    MembershipListener,
    RecordDeadLettered,
    RecordSkipped,
    RecordsRetried,
    Revoked,
    Stalled,
)
from static_consumer.telemetry._metrics import (
    COMMITTED,
    GROUP,
    INSTANCE_ID,
    JOIN_KIND,
    METRICS,
    PHASE,
    PROTOCOL,
    REASON,
    TOPIC,
    VERDICT,
)
from static_consumer.telemetry._tracker import (
    Failed,
    Interrupted,
    Join,
    MembershipTracker,
    Outcome,
    Rebalance,
    Released,
)

SCOPE = "static_consumer"
Attributes = dict[str, str | int]
SpanAttributes = dict[str, str | int | float]

_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_PARTITIONS = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0)


class OtelListener(MembershipListener):
    """Records membership metrics and spans for one :class:`~static_consumer.StaticConsumer`.

    Use one listener per consumer. ``look_up_held`` (default True) asks the broker, once per join, what
    it held for the instance id, which is how a restart is told to be a static rejoin (see
    :class:`~static_consumer._core.events.Joining`); ``clock`` feeds the time-since-last-rebalance gauge.
    """

    def __init__(
        self,
        *,
        meter_provider: metrics.MeterProvider | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        look_up_held: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._tracker = MembershipTracker(look_up_held=look_up_held)
        self._clock = clock
        self._attrs: Attributes = {"messaging.system": "kafka"}
        self._tracer = trace.get_tracer(SCOPE, __version__, tracer_provider)
        meter = metrics.get_meter(SCOPE, __version__, meter_provider)
        by_name = {m.name: m for m in METRICS}

        def counter(name: str) -> metrics.Counter:
            return meter.create_counter(name, by_name[name].unit, by_name[name].description)

        def histogram(name: str, bounds: tuple[float, ...]) -> metrics.Histogram:
            spec = by_name[name]
            return meter.create_histogram(
                name, spec.unit, spec.description, explicit_bucket_boundaries_advisory=bounds
            )

        self._rebalances = counter("static_consumer.rebalances")
        self._rebalance_duration = histogram("static_consumer.rebalance.duration", _SECONDS)
        self._failed = counter("static_consumer.rebalances.failed")
        self._revoked = counter("static_consumer.partitions.revoked")
        self._lost = counter("static_consumer.partitions.lost")
        self._moved = histogram("static_consumer.rebalance.partitions_moved", _PARTITIONS)
        self._fenced = counter("static_consumer.fenced")
        self._joins = counter("static_consumer.joins")
        self._rejoins = counter("static_consumer.static_rejoins")
        self._join_duration = histogram("static_consumer.join.duration", _SECONDS)
        self._stalls = counter("static_consumer.stalls")
        self._refused = counter("static_consumer.commits.refused")
        self._stall_dropped = counter("static_consumer.stall.dropped_records")
        self._retries = counter("static_consumer.handler.retries")
        self._dead_lettered = counter("static_consumer.records.dead_lettered")
        self._skipped = counter("static_consumer.records.skipped")
        spec = by_name["static_consumer.assigned_partitions"]
        self._assigned = meter.create_up_down_counter(spec.name, spec.unit, spec.description)
        spec = by_name["static_consumer.rebalance.time_since_last"]
        meter.create_observable_gauge(spec.name, [self._since_last], spec.unit, spec.description)
        self._records = counter("static_consumer.spark.records")
        self._batches = counter("static_consumer.spark.batches")
        self._batch_duration = histogram("static_consumer.spark.batch.duration", _SECONDS)
        # The last batch's lag and rates, observed by the gauges (each pod reports its own: summed over
        # pods, the rates are the pipeline's).
        self._last_batch: dict[str, float | int] = {}
        self._batch_attrs: Attributes = {}
        for name, field in (
            ("static_consumer.spark.lag", "lag"),
            ("static_consumer.spark.input_rows_per_s", "input_rows_per_s"),
            ("static_consumer.spark.processing_rows_per_s", "processing_rows_per_s"),
        ):
            spec = by_name[name]
            meter.create_observable_gauge(spec.name, [self._observe(field)], spec.unit, spec.description)

    # -- MembershipListener --------------------------------------------------------------------------

    def on_joining(self, event: Joining) -> None:
        self._handle(event)

    def on_assigned(self, event: Assigned) -> None:
        self._handle(event)

    def on_revoked(self, event: Revoked) -> None:
        self._handle(event)

    def on_lost(self, event: Lost) -> None:
        self._handle(event)
        self._lost.add(len(event.partitions), self._attrs)

    def on_fenced(self, event: Fenced) -> None:
        self._handle(event)
        self._fenced.add(1, self._attrs)

    def on_fatal(self, event: FatalError) -> None:
        self._handle(event)

    def on_closed(self, event: Closed) -> None:
        self._handle(event)

    def on_batch(self, event: BatchProgress) -> None:
        """A Spark bridge batch: rows, durations by phase, the lag, the input and processing rates, and a
        span over its processing."""
        attrs = self._metric_attributes(event)
        self._records.add(event.records, attrs)
        self._batches.add(1, {**attrs, COMMITTED: str(event.committed).lower()})
        for phase, seconds in (
            ("collect", event.collect_s),
            ("process", event.process_s),
            ("commit", event.commit_s),
        ):
            self._batch_duration.record(seconds, {**attrs, PHASE: phase})
        self._batch_attrs = attrs
        self._last_batch["input_rows_per_s"] = event.input_rows_per_s
        self._last_batch["processing_rows_per_s"] = event.processing_rows_per_s
        if event.lag is not None:
            self._last_batch["lag"] = event.lag
        extra: SpanAttributes = {
            "static_consumer.spark.batch_id": event.batch_id,
            "static_consumer.spark.records": event.records,
            "static_consumer.spark.committed": str(event.committed).lower(),
            "static_consumer.spark.input_rows_per_s": event.input_rows_per_s,
            "static_consumer.spark.processing_rows_per_s": event.processing_rows_per_s,
        }
        if event.version is not None:
            extra["static_consumer.spark.version"] = event.version
        end = event.at - event.commit_s
        self._span("static_consumer.spark.batch", end - event.process_s, end, event, extra)

    def on_stalled(self, event: Stalled) -> None:
        self._handle(event)
        self._stalls.add(1, {**self._attrs, VERDICT: event.verdict})
        if event.dropped:
            self._stall_dropped.add(event.dropped, self._attrs)
        # The span covers the gap and the check; the member id and generation are the ones after it.
        extra: Attributes = {
            VERDICT: event.verdict,
            "static_consumer.stall.dropped_records": event.dropped,
            "static_consumer.stall.rewound_partitions": len(event.rewound),
        }
        error = None if event.verdict == "ok" else event.verdict
        began = event.at - event.gap_s - event.waited_s
        self._span("static_consumer.stall", began, event.at, event, extra, error)

    def on_commit_refused(self, event: CommitRefused) -> None:
        self._handle(event)
        self._refused.add(1, {**self._attrs, REASON: event.error})

    def on_records_retried(self, event: RecordsRetried) -> None:
        self._retries.add(1, {**self._metric_attributes(event), TOPIC: event.partition.topic})

    def on_record_dead_lettered(self, event: RecordDeadLettered) -> None:
        self._dead_lettered.add(1, {**self._metric_attributes(event), TOPIC: event.partition.topic})

    def on_record_skipped(self, event: RecordSkipped) -> None:
        self._skipped.add(1, {**self._metric_attributes(event), TOPIC: event.partition.topic})

    # -- recording -----------------------------------------------------------------------------------

    def _handle(self, event: MembershipEvent) -> None:
        owned = len(self._tracker.owned)
        outcomes = self._tracker.observe(event)
        self._attrs = self._metric_attributes(event)
        if len(self._tracker.owned) != owned:
            self._assigned.add(len(self._tracker.owned) - owned, self._attrs)
        for outcome in outcomes:
            self._record(outcome, event)

    def _metric_attributes(self, event: MembershipEvent) -> Attributes:
        attrs: Attributes = {"messaging.system": "kafka", GROUP: event.group_id}
        if event.instance_id is not None:
            attrs[INSTANCE_ID] = event.instance_id
        if self._tracker.protocol is not None:
            attrs[PROTOCOL] = self._tracker.protocol
        return attrs

    def _record(self, outcome: Outcome, event: MembershipEvent) -> None:
        attrs = self._attrs
        if isinstance(outcome, Join):
            self._joins.add(1, {**attrs, JOIN_KIND: outcome.kind})
            if outcome.kind == "static_rejoin":
                self._rejoins.add(1, attrs)
            self._join_duration.record(outcome.duration_s, attrs)
            self._span(
                "static_consumer.join",
                outcome.started_at,
                outcome.at,
                event,
                {JOIN_KIND: outcome.kind, "static_consumer.partitions": len(outcome.partitions)},
            )
        elif isinstance(outcome, Rebalance):
            self._rebalances.add(1, attrs)
            self._rebalance_duration.record(outcome.duration_s, attrs)
            self._moved.record(outcome.moved, attrs)
            self._revoked.add(outcome.revoked, {**attrs, REASON: "rebalance"})
            extra: Attributes = {
                "static_consumer.partitions_moved": outcome.moved,
                "static_consumer.partitions": len(outcome.after),
            }
            if outcome.previous_generation is not None:
                extra["static_consumer.previous_generation"] = outcome.previous_generation
            self._span("static_consumer.rebalance", outcome.started_at, outcome.at, event, extra)
        elif isinstance(outcome, Failed):
            self._failed.add(1, {**attrs, REASON: outcome.reason})
        elif isinstance(outcome, Released):
            self._revoked.add(outcome.partitions, {**attrs, REASON: "close"})
        elif isinstance(outcome, Interrupted):
            self._revoked.add(outcome.revoked, {**attrs, REASON: "rebalance"})
            name, reason = f"static_consumer.{outcome.what}", {REASON: outcome.reason}
            self._span(name, outcome.started_at, outcome.at, event, reason, error=outcome.reason)

    def _span(
        self,
        name: str,
        start: float,
        end: float,
        event: MembershipEvent,
        extra: Mapping[str, str | int | float],
        error: str | None = None,
    ) -> None:
        attrs: SpanAttributes = {**self._attrs, **extra}
        if event.member_id is not None:
            attrs["static_consumer.member_id"] = event.member_id
        if event.generation is not None:
            attrs["static_consumer.generation"] = event.generation
        span = self._tracer.start_span(
            name, kind=trace.SpanKind.INTERNAL, attributes=attrs, start_time=_ns(start)
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=_ns(end))

    def _observe(self, field: str) -> Callable[[metrics.CallbackOptions], Iterable[metrics.Observation]]:
        def observe(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
            value = self._last_batch.get(field)
            return [] if value is None else [metrics.Observation(value, self._batch_attrs)]

        return observe

    def _since_last(self, _options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        last = self._tracker.last_rebalance_at
        if last is None or self._tracker.closed:
            return []
        return [metrics.Observation(max(0.0, self._clock() - last), self._attrs)]


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


__all__ = ["SCOPE", "OtelListener"]
