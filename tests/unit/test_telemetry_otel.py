"""OtelListener against the OpenTelemetry SDK's in-memory metric reader and span exporter."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import MODERN, Assign, FakeFactory, Revoke, tp
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, NumberDataPoint
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from static_consumer._base.records import TopicPartition
from static_consumer._core import membership
from static_consumer._core.consumer import StaticConsumer
from static_consumer._core.events import (
    Assigned,
    BatchProgress,
    Closed,
    CommitRefused,
    Fenced,
    HeldAssignment,
    Joining,
    Lost,
    MembershipEvent,
    Revoked,
    Stalled,
)
from static_consumer._core.seams import Seams
from static_consumer.settings import ConsumerSettings
from static_consumer.telemetry import (
    EVENT_LOG_SPARK_SCHEMA,
    METRICS,
    OtelListener,
    metric_reference,
    schema_reference,
)

GROUP = "orders"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


class Otel:
    """An OtelListener wired to in-memory SDK readers, with a settable clock."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.now = 0.0
        self.listener = OtelListener(
            meter_provider=MeterProvider(metric_readers=[self.reader]),
            tracer_provider=tracer_provider,
            clock=lambda: self.now,
        )

    def feed(self, *events: MembershipEvent) -> None:
        for event in events:
            self.listener.on_event(event)

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """name -> [(attributes, value)]: sums and gauges give their value, histograms (count, sum)."""
        out: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        if isinstance(point, HistogramDataPoint):
                            value: Any = (point.count, point.sum)
                        else:
                            assert isinstance(point, NumberDataPoint)
                            value = point.value
                        out.setdefault(metric.name, []).append((dict(point.attributes or {}), value))
        return out

    def total(self, name: str, **attrs: Any) -> Any:
        values = [v for a, v in self.metrics().get(name, []) if attrs.items() <= a.items()]
        if values and isinstance(values[0], tuple):
            return tuple(map(sum, zip(*values, strict=True)))
        return sum(values)


def tps(*partitions: int) -> tuple[TopicPartition, ...]:
    return tuple(TopicPartition("t", p) for p in partitions)


def fields(at: float, generation: int | None = None) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "instance_id": "app-1",
        "member_id": "app-1-x",
        "generation": generation,
        "at": at,
    }


def joining(at: float, held: HeldAssignment | None, protocol: str = "classic") -> Joining:
    return Joining(**fields(at), protocol=protocol, lookup_held=lambda: held)


@pytest.fixture
def otel() -> Iterator[Otel]:
    yield Otel()


def test_static_restart_counts_a_rejoin_and_no_rebalance(otel: Otel) -> None:
    otel.feed(
        joining(100.0, HeldAssignment(True, tps(2, 3), "Stable")),
        Assigned(**fields(100.2, 2), partitions=tps(2, 3)),
    )
    base = {"messaging.consumer.group.name": GROUP, "static_consumer.instance_id": "app-1"}
    assert (
        otel.total("static_consumer.static_rejoins", **base, **{"static_consumer.protocol": "classic"}) == 1
    )
    assert otel.total("static_consumer.joins", **{"static_consumer.join.kind": "static_rejoin"}) == 1
    assert otel.total("static_consumer.rebalances") == 0
    assert otel.total("static_consumer.assigned_partitions") == 2
    assert "static_consumer.rebalance.time_since_last" not in otel.metrics(), "no rebalance seen yet"
    (span,) = otel.spans.get_finished_spans()
    assert span.name == "static_consumer.join"
    assert span.attributes is not None
    assert span.attributes["messaging.consumer.group.name"] == GROUP
    assert span.attributes["static_consumer.instance_id"] == "app-1"
    assert span.attributes["static_consumer.generation"] == 2
    assert span.attributes["static_consumer.protocol"] == "classic"
    assert span.attributes["static_consumer.join.kind"] == "static_rejoin"
    assert (span.start_time, span.end_time) == (100_000_000_000, 100_200_000_000)


def test_join_after_the_session_expired_is_not_a_rejoin(otel: Otel) -> None:
    otel.feed(joining(0, HeldAssignment(False, (), "Stable")), Assigned(**fields(4, 5), partitions=tps(2, 3)))
    assert otel.total("static_consumer.static_rejoins") == 0
    assert otel.total("static_consumer.joins", **{"static_consumer.join.kind": "static_join"}) == 1


def test_rebalance_metrics_and_span(otel: Otel) -> None:
    otel.feed(
        joining(0, HeldAssignment(False, (), "Empty")),
        Assigned(**fields(1, 1), partitions=tps(0, 1, 2, 3)),
        Revoked(**fields(10.0, 1), partitions=tps(0, 1, 2, 3)),
        Assigned(**fields(10.5, 2), partitions=tps(0, 1)),
    )
    otel.now = 70.5
    assert otel.total("static_consumer.rebalances") == 1
    assert otel.total("static_consumer.rebalance.duration") == (1, 0.5)
    assert otel.total("static_consumer.rebalance.partitions_moved") == (1, 2)
    assert otel.total("static_consumer.partitions.revoked", **{"static_consumer.reason": "rebalance"}) == 4
    assert otel.total("static_consumer.assigned_partitions") == 2
    assert otel.total("static_consumer.rebalance.time_since_last") == 60.0
    rebalance = [s for s in otel.spans.get_finished_spans() if s.name == "static_consumer.rebalance"]
    assert len(rebalance) == 1 and rebalance[0].attributes is not None
    assert rebalance[0].attributes["static_consumer.generation"] == 2
    assert rebalance[0].attributes["static_consumer.previous_generation"] == 1
    assert rebalance[0].attributes["static_consumer.partitions_moved"] == 2


def test_close_releases_partitions_without_a_rebalance(otel: Otel) -> None:
    otel.feed(
        joining(0, HeldAssignment(True, tps(2, 3), "Stable")),
        Assigned(**fields(1, 2), partitions=tps(2, 3)),
        Revoked(**fields(5, 2), partitions=tps(2, 3)),
        Closed(**fields(5.1, 2), left_group=False),
    )
    assert otel.total("static_consumer.rebalances") == 0
    assert otel.total("static_consumer.partitions.revoked", **{"static_consumer.reason": "close"}) == 2
    assert otel.total("static_consumer.partitions.revoked", **{"static_consumer.reason": "rebalance"}) == 0
    assert otel.total("static_consumer.assigned_partitions") == 0


def test_lost_and_fenced(otel: Otel) -> None:
    otel.feed(
        joining(0, HeldAssignment(False, (), "Stable")),
        Assigned(**fields(1, 2), partitions=tps(2, 3)),
        Lost(**fields(8, 2), partitions=tps(2, 3)),
        Fenced(**fields(9, 2), error="Static consumer fenced by other consumer with same group.instance.id"),
    )
    assert otel.total("static_consumer.partitions.lost") == 2
    assert otel.total("static_consumer.rebalances.failed", **{"static_consumer.reason": "lost"}) == 1
    assert otel.total("static_consumer.rebalances.failed", **{"static_consumer.reason": "fenced"}) == 0
    assert otel.total("static_consumer.fenced") == 1
    interrupted = [s for s in otel.spans.get_finished_spans() if s.name == "static_consumer.rebalance"]
    assert [s.status.status_code for s in interrupted] == [StatusCode.ERROR]


def test_stalls_count_by_verdict_with_dropped_records_and_a_span(otel: Otel) -> None:
    otel.feed(
        joining(0, HeldAssignment(False, (), "Stable"), protocol="consumer"),
        Assigned(**fields(1, 2), partitions=tps(2, 3)),
        Stalled(**fields(20, 2), gap_s=9.5, threshold_s=3.0, verdict="gone", dropped=17, waited_s=0.5),
        Stalled(**fields(30, 2), gap_s=4.0, threshold_s=3.0, verdict="ok"),
    )
    assert otel.total("static_consumer.stalls", **{"static_consumer.stall.verdict": "gone"}) == 1
    assert otel.total("static_consumer.stalls", **{"static_consumer.stall.verdict": "ok"}) == 1
    assert otel.total("static_consumer.stall.dropped_records") == 17
    spans = [s for s in otel.spans.get_finished_spans() if s.name == "static_consumer.stall"]
    assert [s.status.status_code for s in spans] == [StatusCode.ERROR, StatusCode.UNSET]
    assert spans[0].start_time == 10 * 10**9 and spans[0].end_time == 20 * 10**9  # the gap and the check


def test_refused_commits_count_by_kafka_error_and_change_no_membership_metric(otel: Otel) -> None:
    otel.feed(
        joining(0, HeldAssignment(False, (), "Stable")),
        Assigned(**fields(1, 2), partitions=tps(2, 3)),
        CommitRefused(**fields(20, 2), offsets=((tps(2)[0], 40),), error="UNKNOWN_MEMBER_ID"),
        CommitRefused(**fields(21, 2), offsets=((tps(3)[0], 7),), error="ILLEGAL_GENERATION"),
    )
    assert otel.total("static_consumer.commits.refused") == 2
    assert (
        otel.total("static_consumer.commits.refused", **{"static_consumer.reason": "UNKNOWN_MEMBER_ID"}) == 1
    )
    assert otel.total("static_consumer.assigned_partitions") == 2  # the loss, not the refusal, moves them
    assert otel.total("static_consumer.rebalances.failed") == 0


def batch(at: float, batch_id: int, records: int, **extra: Any) -> BatchProgress:
    values: dict[str, Any] = {
        "collect_s": 0.5,
        "process_s": 2.0,
        "commit_s": 0.25,
        "input_rows_per_s": records / 4.0,
        "processing_rows_per_s": records / 2.0,
        "lag": None,
        "committed": True,
        **extra,
    }
    return BatchProgress(**fields(at, 3), batch_id=batch_id, records=records, bytes=100 * records, **values)


def test_spark_batches_report_rows_rates_durations_lag_and_a_span(otel: Otel) -> None:
    otel.feed(joining(0, HeldAssignment(False, (), "Stable")), Assigned(**fields(1, 3), partitions=tps(0)))
    assert "static_consumer.spark.input_rows_per_s" not in otel.metrics(), "no value before a batch"
    assert "static_consumer.spark.lag" not in otel.metrics()
    otel.feed(batch(10.0, 0, 1_000, version=1_000))
    assert "static_consumer.spark.lag" not in otel.metrics(), "lag not known yet: no value"
    otel.feed(batch(14.0, 1, 3_000, lag=500, committed=False, input_rows_per_s=750.0))

    pod = {"messaging.consumer.group.name": GROUP, "static_consumer.instance_id": "app-1"}
    assert otel.total("static_consumer.spark.records", **pod) == 4_000
    assert otel.total("static_consumer.spark.batches", **{"static_consumer.spark.committed": "true"}) == 1
    assert otel.total("static_consumer.spark.batches", **{"static_consumer.spark.committed": "false"}) == 1
    for phase, seconds in (("collect", 0.5), ("process", 2.0), ("commit", 0.25)):
        by_phase = {"static_consumer.spark.phase": phase}
        assert otel.total("static_consumer.spark.batch.duration", **by_phase) == (2, 2 * seconds), phase
    # Gauges: the last batch's values (summed over pods, the rates are the pipeline's).
    assert otel.metrics()["static_consumer.spark.input_rows_per_s"] == [
        ({**pod, "messaging.system": "kafka", "static_consumer.protocol": "classic"}, 750.0)
    ]
    assert otel.total("static_consumer.spark.processing_rows_per_s", **pod) == 1_500.0
    assert otel.total("static_consumer.spark.lag", **pod) == 500
    otel.feed(batch(16.0, 2, 200))  # lag unknown again: the last known lag stays
    assert otel.total("static_consumer.spark.lag") == 500
    assert otel.total("static_consumer.spark.processing_rows_per_s") == 100.0

    spans = [s for s in otel.spans.get_finished_spans() if s.name == "static_consumer.spark.batch"]
    assert len(spans) == 3 and spans[0].attributes is not None and spans[1].attributes is not None
    # The span is fn's time: it ended commit_s before the event, after process_s.
    assert (spans[0].start_time, spans[0].end_time) == (7_750_000_000, 9_750_000_000)
    assert spans[0].attributes["static_consumer.spark.version"] == 1_000
    assert spans[0].attributes["static_consumer.spark.records"] == 1_000
    assert spans[1].attributes["static_consumer.spark.committed"] == "false"
    assert spans[1].attributes["static_consumer.spark.input_rows_per_s"] == 750.0
    assert spans[1].attributes["static_consumer.spark.processing_rows_per_s"] == 1_500.0
    assert "static_consumer.spark.version" not in spans[1].attributes
    assert spans[1].attributes["static_consumer.generation"] == 3


def test_listener_works_without_an_sdk() -> None:
    listener = OtelListener()  # the API's global (no-op unless the application set one) providers
    for event in (
        joining(0, None),
        Assigned(**fields(1, 1), partitions=tps(0)),
        Closed(**fields(2), left_group=False),
    ):
        listener.on_event(event)


def test_through_the_consumer_the_broker_is_asked_before_the_join(
    otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    factory = FakeFactory([None, Assign((tp(2), tp(3))), None, Revoke((tp(2), tp(3)))])

    def held_lookup(settings: ConsumerSettings, instance_id: str | None) -> Any:
        def lookup() -> HeldAssignment:
            calls.append(f"lookup {instance_id} subscribed={bool(factory.adapters[0].calls)}")
            return HeldAssignment(True, (tp(2), tp(3)), "Stable")

        return lookup

    monkeypatch.setattr(membership, "held_lookup", held_lookup)
    settings = ConsumerSettings(bootstrap_servers="127.0.0.1:9092", group_id=GROUP, topics=("t",))
    consumer = StaticConsumer(
        settings,
        listeners=[otel.listener],
        env={"POD_NAME": "app-1"},
        seams=Seams(adapter_factory=factory, probe=lambda s, **_: MODERN),
    )
    with consumer:
        factory.last.gen = 7
        while not consumer.assignment:
            consumer.poll(0)
        assert consumer.generation == 7
    assert calls == ["lookup app-1 subscribed=False"]
    assert otel.total("static_consumer.static_rejoins") == 1
    assert otel.total("static_consumer.rebalances") == 0
    assert otel.total("static_consumer.partitions.revoked", **{"static_consumer.reason": "close"}) == 2
    join = next(s for s in otel.spans.get_finished_spans() if s.name == "static_consumer.join")
    assert join.attributes is not None and join.attributes["static_consumer.generation"] == 7


def test_docs_reference_tables_are_the_generated_ones() -> None:
    text = DOCS.read_text()
    assert metric_reference() in text, "docs/observability.md: regenerate the metric table"
    assert schema_reference() in text, "docs/observability.md: regenerate the event-log table"
    assert EVENT_LOG_SPARK_SCHEMA in text
    documented = set(re.findall(r"^\| `(static_consumer\.[a-z_.]+)` \|", text, re.M))
    assert documented == {m.name for m in METRICS}
