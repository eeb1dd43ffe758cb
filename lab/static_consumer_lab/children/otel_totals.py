"""Telemetry for the child consumer: an OtelListener on the SDK's in-memory reader whose totals are
streamed as ``metrics`` events after every membership event (needs ``opentelemetry-sdk``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from static_consumer._core.events import (
    MembershipEvent,
    MembershipListener,
)
from static_consumer.telemetry import OtelListener

Emit = Callable[..., None]
# Attributes whose values get their own total, e.g. "static_consumer.joins[static_rejoin]".
_SPLIT = ("static_consumer.join.kind", "static_consumer.reason")


class MetricsSnapshot(MembershipListener):
    """Emits ``metrics`` with ``values``: total per metric (histograms: their count), after each event.

    Register it after the OtelListener so that the snapshot includes the event just recorded.
    """

    def __init__(self, reader: Any, emit: Emit) -> None:
        self._reader, self._emit = reader, emit

    def snapshot(self) -> dict[str, float]:
        values: dict[str, float] = {}
        data = self._reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = point.count if hasattr(point, "bucket_counts") else point.value
                        values[metric.name] = values.get(metric.name, 0) + value
                        for key in _SPLIT:
                            if key in (point.attributes or {}):
                                name = f"{metric.name}[{point.attributes[key]}]"
                                values[name] = values.get(name, 0) + value
        return values

    def _after(self, event: MembershipEvent) -> None:
        self._emit("metrics", event=type(event).__name__, values=self.snapshot())

    def on_event(self, event: MembershipEvent) -> None:
        self._after(event)


def otel_listeners(emit: Emit) -> list[MembershipListener]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    listener = OtelListener(meter_provider=MeterProvider(metric_readers=[reader]))
    return [listener, MetricsSnapshot(reader, emit)]


__all__ = ["MetricsSnapshot", "otel_listeners"]
