"""A route's health: its RPO and SLO from the store (records, in-flight markers, events, RTC
collections), one definition for CollectSignals, the Report function, `replmon report` and the
lab's chaos run; and the metrics CollectSignals emits from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replmon.core.partitions import EVENTS, RTC, signal_partition
from replmon.core.ports import LatencyTable, MetricsSink
from replmon.core.telemetry import ROUTE, WINDOW
from replmon.signals.inflight import in_flight_put_ends
from replmon.signals.rtc import RtcSample, latest
from replmon.signals.slo import Rpo, SloSpec, SloStatus, rpo, slo_status


@dataclass
class RouteHealth:
    route: str
    rpo: Rpo
    slo: SloStatus
    rtc: list[RtcSample] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)

    def to_json(self, spec: SloSpec) -> dict[str, Any]:
        return {
            "route": self.route, "rpo": self.rpo.to_json(),
            "slo": {"threshold_seconds": spec.threshold_seconds, "target": spec.target, "period_days": spec.period_days,
                    "good": self.slo.good, "total": self.slo.total, "attainment": self.slo.attainment,
                    "budget_left": self.slo.budget_left, "budget_events": self.slo.budget_events(spec.target),
                    "burn_rates": self.slo.burn, "windows": self.slo.windows, "alerts": self.slo.alerts},
            "events": self.events,
            "rtc": [s.to_item() for s in self.rtc],
        }


def route_health(store: LatencyTable, route: str, now: float, spec: SloSpec, window: float) -> RouteHealth:
    """The route's RPO and SLO from the store: records, in-flight markers, events and the RTC
    collections of the window (every collection in it, not only the latest)."""
    records = store.query(route, now - spec.period_days * 86_400 - 86_400, now)
    in_flight = in_flight_put_ends(store, route, now)
    events = store.items(signal_partition(route, EVENTS), now - window, now)
    rtc_samples = [RtcSample.from_item(i) for i in store.items(signal_partition(route, RTC), now - window, now)]
    counts: dict[str, int] = {}
    for e in events:
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    r = rpo(now, window, records, in_flight, latest(rtc_samples, now - window), counts.get("OperationFailedReplication", 0))
    return RouteHealth(route, r, slo_status(records, now, spec), rtc_samples, counts)


def publish_health(metrics: MetricsSink, h: RouteHealth) -> None:
    metrics.count("RpoSeconds", h.rpo.seconds, {ROUTE: h.route})
    metrics.count("RpoUnbounded", 1 if h.rpo.unbounded else 0, {ROUTE: h.route})
    if h.slo.budget_left is not None:
        metrics.count("ErrorBudgetRemaining", round(h.slo.budget_left * 100, 4), {ROUTE: h.route})
    for label, rate in h.slo.burn.items():
        if rate is not None:  # no judged probe in the window: no data, not zero
            metrics.count("SloBurnRate", rate, {ROUTE: h.route, WINDOW: label})
    for name, attr in (("RtcBytesPending", "rtc_bytes_pending"), ("RtcOperationsPending", "rtc_operations_pending")):
        value = h.rpo.inputs.get(attr)
        if value is not None:
            metrics.count(name, value, {ROUTE: h.route})
    metrics.count("CollectorHeartbeat", 1)
