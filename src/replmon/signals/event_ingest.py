"""IngestEvents' work: what each parsed S3 event record means (:func:`plan_ingest`) and storing
it (:func:`ingest`): a replication event per route, a replica's arrival, or nothing (and why).

``plan_ingest`` takes records parsed by s3events.py; the ingest Lambda (entry/ingest_events.py)
wraps ``ingest`` in Powertools' batch processor, and `replmon events parse` prints the plans
without a store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.keys import iso_ms
from replmon.core.partitions import ARRIVAL_ATTR, ARRIVALS, EVENTS, signal_partition
from replmon.core.ports import Item, LatencyTable, MetricsSink
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.core.route import Route
from replmon.core.telemetry import EVENT, ROUTE
from replmon.signals.arrivals import ARRIVAL_TTL_SECONDS, Arrival, apply_arrivals, arrival_for
from replmon.signals.s3events import ObjectCreated, Parsed, ReplicationEvent


def route_for_event(event: ReplicationEvent, routes: Sequence[Route]) -> str:
    """The configured route whose source bucket (and destination, when the event names one) match,
    preferring one whose probe prefix holds the key; else ``<source>><destination>``, so an event
    on a bucket pair no route names is still stored and reported, under that name."""
    candidates = [r for r in routes if r.source.bucket == event.source_bucket
                  and (event.destination_bucket is None or event.destination_bucket in {d.bucket for d in r.destinations})]
    for r in candidates:
        if event.key.startswith(r.prefix):
            return r.name
    if candidates:
        return candidates[0].name
    return f"{event.source_bucket}>{event.destination_bucket or '*'}"


@dataclass(frozen=True)
class EventItem:
    """One S3 replication event as stored in its route's events partition."""

    route: str
    event: ReplicationEvent

    @property
    def sort_key(self) -> str:
        return f"{iso_ms(self.event.event_time)}#{self.event.event_id}"

    def to_item(self, retention_days: int) -> Item:
        body = {k: v for k, v in self.event.to_json().items() if v is not None}
        return {**body, PARTITION_KEY: signal_partition(self.route, EVENTS), SORT_KEY: self.sort_key,
                TTL_ATTRIBUTE: int(self.event.event_time + retention_days * 86_400)}


@dataclass
class IngestPlan:
    """What one parsed record leads to: an event to store, an arrival, or nothing (and why)."""

    parsed: Parsed
    event: EventItem | None = None
    arrival: Arrival | None = None
    ignored: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.parsed.to_json()
        if self.event:
            out["store"] = {"partition": signal_partition(self.event.route, EVENTS), "sort_key": self.event.sort_key, "route": self.event.route}
        if self.arrival:
            out["store" if not self.event else "arrival"] = {"partition": signal_partition(self.arrival.route, ARRIVALS), "sort_key": self.arrival.record_key,
                            "route": self.arrival.route, "replica": self.arrival.bucket, "created_at": iso_ms(self.arrival.created_at)}
        if self.ignored:
            out["ignored"] = self.ignored
        return out


def plan_ingest(parsed: Parsed, routes: Sequence[Route], prefixes: Sequence[str]) -> IngestPlan:
    sig = parsed.signal
    if isinstance(sig, ReplicationEvent):
        item = EventItem(route_for_event(sig, routes), sig)
        arrival = None
        if sig.kind == "OperationCompletedReplication":  # MinIO's: the lab's stand-in for a replica's ObjectCreated
            route = next((r for r in routes if r.name == item.route), None)
            dest = sig.destination_bucket or (route.destinations[0].bucket if route and len(route.destinations) == 1 else None)
            if dest:
                arrival = arrival_for(ObjectCreated(dest, sig.key, sig.event_time, "Replication:OperationCompletedReplication"), prefixes)
        return IngestPlan(parsed, event=item, arrival=arrival)
    if isinstance(sig, ObjectCreated):
        arr = arrival_for(sig, prefixes)
        if arr is None:
            return IngestPlan(parsed, ignored="not a probe object: replmon times only its probes' replicas")
        # The probe's own PUT on its route's source (a bucket may be another route's destination:
        # two-way replication), not a replica.
        if any(r.name == arr.route and r.source.bucket == sig.bucket for r in routes):
            return IngestPlan(parsed, ignored=f"{sig.bucket} is this probe's source: only its replicas time it")
        return IngestPlan(parsed, arrival=arr)
    return IngestPlan(parsed)


@dataclass
class IngestDeps:
    store: LatencyTable
    metrics: MetricsSink
    routes: list[Route]
    retention_days: int
    skew_seconds: float

    @property
    def prefixes(self) -> list[str]:
        return probe_prefixes(self.routes)


def probe_prefixes(routes: Sequence[Route]) -> list[str]:
    """Where probe keys live: the routes' prefixes, or the default one."""
    return sorted({r.prefix for r in routes}) or [DEFAULTS.probe_prefix]


def ingest(plans: Sequence[IngestPlan], deps: IngestDeps) -> list[str]:
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
            first = deps.store.add_arrival(signal_partition(a.route, ARRIVALS), a.record_key, ARRIVAL_ATTR + a.bucket, a.created_at,
                                           int(a.created_at + max(deps.retention_days * 86_400, ARRIVAL_TTL_SECONDS)))
            if first:  # a redelivery (or a later duplicate) is not another arrival
                deps.metrics.count("ReplicaArrivals", dimensions={ROUTE: a.route})
            record = deps.store.get_record(a.route, a.record_key)
            # No record yet: RecordResult applies the arrival when it stores the record.
            notes.append(apply_arrivals(deps.store, deps.metrics, record, deps.skew_seconds) or "arrival kept") if record else notes.append("arrival kept")
        if p.event is None and p.arrival is None:
            notes.append(p.ignored or p.parsed.acknowledged or "nothing")
    return notes
