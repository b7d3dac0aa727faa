"""The passive steps: ingest S3 events, collect RTC metrics, evaluate RPO and SLO per route.

``ingest`` takes parsed records (s3events.py) and stores what each means (signals.py); the
ingest Lambda wraps it in Powertools' batch processor, `replmon events parse` prints its plan
without a store. ``collect`` reads RTC metrics and emits each route's RPO, SLO and burn rates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.keys import iso_ms
from replmon.core.ports import StoreUnavailable
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.telemetry import EVENT, ROUTE, WINDOW
from replmon.probe.request import Route
from replmon.signals.arrivals import (
    ARRIVAL_ATTR,
    ARRIVALS,
    EVENTS,
    RTC,
    Arrival,
    ClockDisagreement,
    EventItem,
    arrival_for,
    partition,
    route_for_event,
    tighten,
)
from replmon.signals.rtc import RtcSample, latest, parse_results, queries
from replmon.signals.s3events import ObjectCreated, Parsed, ReplicationEvent
from replmon.signals.slo import Rpo, SloSpec, SloStatus, rpo, slo_status

log = logging.getLogger("replmon")

IN_FLIGHT = "inflight"
#: Arrivals are kept as long as a probe can live (1 day) plus an hour.
ARRIVAL_TTL_SECONDS = 86_400 + 3600


@dataclass
class Plan:
    """What one parsed record leads to: an event to store, an arrival, or nothing (and why)."""

    parsed: Parsed
    event: EventItem | None = None
    arrival: Arrival | None = None
    ignored: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.parsed.to_json()
        if self.event:
            out["store"] = {"partition": partition(self.event.route, EVENTS), "sort_key": self.event.sort_key, "route": self.event.route}
        if self.arrival:
            out["store" if not self.event else "arrival"] = {"partition": partition(self.arrival.route, ARRIVALS), "sort_key": self.arrival.record_key,
                            "route": self.arrival.route, "replica": self.arrival.bucket, "created_at": iso_ms(self.arrival.created_at)}
        if self.ignored:
            out["ignored"] = self.ignored
        return out


def plan(parsed: Parsed, routes: Sequence[Route], prefixes: Sequence[str]) -> Plan:
    sig = parsed.signal
    if isinstance(sig, ReplicationEvent):
        item = EventItem(route_for_event(sig, routes), sig)
        arrival = None
        if sig.kind == "OperationCompletedReplication":  # MinIO's: the lab's stand-in for a replica's ObjectCreated
            route = next((r for r in routes if r.name == item.route), None)
            dest = sig.destination_bucket or (route.destinations[0].bucket if route and len(route.destinations) == 1 else None)
            if dest:
                arrival = arrival_for(ObjectCreated(dest, sig.key, sig.event_time, "Replication:OperationCompletedReplication"), prefixes)
        return Plan(parsed, event=item, arrival=arrival)
    if isinstance(sig, ObjectCreated):
        arr = arrival_for(sig, prefixes)
        if arr is None:
            return Plan(parsed, ignored="not a probe object: replmon times only its probes' replicas")
        # The probe's own PUT on its route's source (a bucket may be another route's destination:
        # two-way replication), not a replica.
        if any(r.name == arr.route and r.source.bucket == sig.bucket for r in routes):
            return Plan(parsed, ignored=f"{sig.bucket} is this probe's source: only its replicas time it")
        return Plan(parsed, arrival=arr)
    return Plan(parsed)


@dataclass
class IngestDeps:
    store: Any  # DynamoLatencyStore
    metrics: Any  # MetricsSink
    routes: list[Route]
    retention_days: int
    skew_seconds: float

    @property
    def prefixes(self) -> list[str]:
        return probe_prefixes(self.routes)


def probe_prefixes(routes: Sequence[Route]) -> list[str]:
    """Where probe keys live: the routes' prefixes, or the default one."""
    return sorted({r.prefix for r in routes}) or [DEFAULTS.probe_prefix]


def apply_arrivals(store: Any, metrics: Any, record: ProbeRecord, skew: float) -> str | None:
    """Narrow a stored record with its replicas' creation times; a conditional update that retries
    on a concurrent change. Returns what happened, for the log."""
    for _ in range(3):
        item = store.get_item(partition(record.route, ARRIVALS), record.sort_key)
        if not item:
            return None
        arrivals = {k.removeprefix(ARRIVAL_ATTR): float(v) for k, v in item.items() if k.startswith(ARRIVAL_ATTR)}
        if record.status is not ProbeStatus.COMPLETED or record.put_end is None:
            return "not COMPLETED: the event is kept, the record unchanged"
        try:
            t = tighten(record.latency_lo, record.latency_hi, record.put_end, [d["bucket"] for d in record.destinations], arrivals, skew)
        except ClockDisagreement as exc:
            metrics.count("EventClockDisagreement", dimensions={ROUTE: record.route})
            return f"disagreement: {exc}"
        if t is None:
            return "no narrower"
        if store.narrow_interval(record, t.lo, t.hi, t.replica_at):
            metrics.count("IntervalNarrowedByEvent", dimensions={ROUTE: record.route})
            return f"narrowed to [{t.lo}, {t.hi}]"
        fresh = store.get_record(record.route, record.sort_key)
        if fresh is None:
            return None
        record = fresh
    return "gave up after 3 concurrent changes"


def ingest(plans: Sequence[Plan], deps: IngestDeps) -> list[str]:
    """Store each plan's item. Raises for a record that must be retried (store unavailable)."""
    notes = []
    for p in plans:
        if p.event is not None:
            new = deps.store.put_item_once(p.event.to_item(deps.retention_days))
            if new:
                deps.metrics.count("ReplicationEvents", dimensions={ROUTE: p.event.route, EVENT: p.event.event.kind})
            notes.append("stored" if new else "duplicate")
        if p.arrival is not None:
            a = p.arrival
            first = deps.store.add_arrival(partition(a.route, ARRIVALS), a.record_key, ARRIVAL_ATTR + a.bucket, a.created_at,
                                           int(a.created_at + max(deps.retention_days * 86_400, ARRIVAL_TTL_SECONDS)))
            if first:  # a redelivery (or a later duplicate) is not another arrival
                deps.metrics.count("ReplicaArrivals", dimensions={ROUTE: a.route})
            record = deps.store.get_record(a.route, a.record_key)
            # No record yet: RecordResult applies the arrival when it stores the record.
            notes.append(apply_arrivals(deps.store, deps.metrics, record, deps.skew_seconds) or "arrival kept") if record else notes.append("arrival kept")
        if p.event is None and p.arrival is None:
            notes.append(p.ignored or p.parsed.acknowledged or "nothing")
    return notes


# ---------------------------------------------------------------------------- in-flight probes
def mark_in_flight(store: Any, route: str, record_key: str, put_end: float, expires_at: float) -> None:
    store.put_item({"route": partition(route, IN_FLIGHT), "at": record_key, "put_end": put_end, "expires_at": int(expires_at)})


def clear_in_flight(store: Any, route: str, record_key: str) -> None:
    store.delete_item(partition(route, IN_FLIGHT), record_key)


# ---------------------------------------------------------------------------- collector
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
                    "budget_left": self.slo.budget_left, "burn_rates": self.slo.burn, "alerts": self.slo.alerts},
            "events": self.events,
            "rtc": [s.to_item() for s in self.rtc],
        }


def collect_rtc(cloudwatch: Any, route: Route, now: float, lookback: float = 900, period: int = 60) -> list[RtcSample]:
    """One GetMetricData call for every (rule, destination) of the route that names its rule."""
    from datetime import UTC, datetime

    pairs = [(d.bucket, d.rule_id) for d in route.destinations if d.rule_id]
    if not pairs:
        return []
    qs = [q for n, (dst, rule) in enumerate(pairs) for q in queries(route.source.bucket, dst, rule, period, n)]
    results: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"MetricDataQueries": qs, "StartTime": datetime.fromtimestamp(now - lookback, UTC),
                              "EndTime": datetime.fromtimestamp(now, UTC), "ScanBy": "TimestampAscending"}
    while True:
        page = cloudwatch.get_metric_data(**kwargs)
        results += page["MetricDataResults"]
        if not page.get("NextToken"):
            break
        kwargs["NextToken"] = page["NextToken"]
    merged: dict[str, dict[str, Any]] = {}
    for r in results:  # pages split one query's points
        m = merged.setdefault(r["Id"], {"Id": r["Id"], "Timestamps": [], "Values": []})
        m["Timestamps"] += r.get("Timestamps", [])
        m["Values"] += r.get("Values", [])
    return [parse_results(list(merged.values()), dst, rule, now, n) for n, (dst, rule) in enumerate(pairs)]


def route_health(store: Any, route: str, now: float, spec: SloSpec, window: float) -> RouteHealth:
    """The route's RPO and SLO from the store: records, in-flight markers, events and the RTC
    collections of the window (every collection in it, not only the latest)."""
    records = store.query(route, now - spec.period_days * 86_400 - 86_400, now)
    in_flight = [float(i["put_end"]) for i in store.partition_items(partition(route, IN_FLIGHT))
                 if float(i.get("expires_at", now + 1)) > now]
    events = store.items(partition(route, EVENTS), now - window, now)
    rtc_samples = [RtcSample.from_item(i) for i in store.items(partition(route, RTC), now - window, now)]
    counts: dict[str, int] = {}
    for e in events:
        counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    r = rpo(now, window, records, in_flight, latest(rtc_samples, now - window), counts.get("OperationFailedReplication", 0))
    return RouteHealth(route, r, slo_status(records, now, spec), rtc_samples, counts)


def publish_health(metrics: Any, h: RouteHealth, spec: SloSpec) -> None:
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


def collect(routes: Sequence[Route], store: Any, cloudwatch: Any, metrics: Any, now: float, spec: SloSpec,
            window: float, retention_days: int) -> list[RouteHealth]:
    """Per route: read and store RTC metrics, evaluate RPO and SLO, emit them. A route whose RTC
    read fails is still evaluated from probes and events (the failure is named in the result)."""
    out = []
    for route in routes:
        if cloudwatch is not None:
            try:
                fresh = collect_rtc(cloudwatch, route, now)
                for s in fresh:
                    store.put_item({"route": partition(route.name, RTC), "at": f"{iso_ms(now)}#{s.destination}#{s.rule_id}",
                                    **s.to_item(), "expires_at": int(now + retention_days * 86_400)})
            except StoreUnavailable:
                raise
            except Exception as exc:  # CloudWatch down or denied: the rest of the evaluation stands
                log.warning("RTC metrics unavailable", extra={"route": route.name, "error": f"{type(exc).__name__}: {exc}"})
                metrics.count("RtcReadFailed", dimensions={ROUTE: route.name})
        h = route_health(store, route.name, now, spec, window)
        publish_health(metrics, h, spec)
        out.append(h)
    return out


__all__ = ["IN_FLIGHT", "IngestDeps", "Plan", "RouteHealth", "apply_arrivals", "clear_in_flight", "collect", "ingest",
           "mark_in_flight", "plan", "route_health"]
