"""IngestEvents' work: what each parsed S3 event record means (:func:`plan_ingest`) and storing
it (:func:`ingest`): a replication event counted per route, a replica's arrival, an event no
registry route owns (kept and counted apart, :class:`Unmapped`), or nothing (and why).

A backlog must not throttle one partition key (docs/design/fleet.md 7; DynamoDB: 1,000
write units per second per partition). So a batch's events are *counted*, not stored one
by one: each writes a dedupe marker under one of 16 keys per route, and the markers of a (route,
hour) go in one ``TransactWriteItems`` with one ``ADD`` on the route's hour item (signals/rollup.py
``e*_MM``). Only failures, missed thresholds and undocumented kinds are kept as items, under 8 keys
per route. The collector reads the counters (signals/health.py ``event_counts``).

``plan_ingest`` takes records parsed by s3events.py; the ingest Lambda (entry/ingest_events.py)
wraps ``ingest`` in Powertools' batch processor, and `replmon events parse` prints the plans
without a store.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import StoreUnavailable
from replmon.core.keys import iso_ms
from replmon.core.partitions import (
    ARRIVAL_ATTR,
    ARRIVALS,
    events_partition,
    hour_sort_key,
    roll_partition,
    seen_partition,
    signal_partition,
    unmapped_partition,
)
from replmon.core.ports import MAX_TRANSACT_ACTIONS, Item, LatencyTable, MetricsSink, RollupStore, TransactItem, TransactPut
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.core.route import Route
from replmon.core.telemetry import EVENT, REASON, ROUTE
from replmon.signals.arrivals import ARRIVAL_TTL_SECONDS, Arrival, apply_arrivals, arrival_for
from replmon.signals.rollup import EVENT_ATTRS, event_add, event_attr
from replmon.signals.s3events import ObjectCreated, Parsed, ReplicationEvent
from replmon.signals.slo import SloSpec
from replmon.signals.windows import floor_hour

log = logging.getLogger("replmon")


#: Why an event maps to no registry route (the ``Reason`` dimension of UnmappedEvent).
UNMAPPED_REASONS = ("source_bucket", "destination", "rule_id")


@dataclass(frozen=True)
class Unmapped:
    """An event no registry route owns: counted (UnmappedEvent{Reason}), kept under
    ``#unmapped/<day>`` and logged with the record, never stored under an invented route."""

    reason: str  # one of UNMAPPED_REASONS
    detail: str

    def to_item(self, event: ReplicationEvent, retention_days: int) -> Item:
        body = {k: v for k, v in event.to_json().items() if v is not None}
        return {**body, "reason": self.reason, "detail": self.detail, PARTITION_KEY: unmapped_partition(event.event_time),
                SORT_KEY: f"{iso_ms(event.event_time)}#{event.event_id}", TTL_ATTRIBUTE: int(event.event_time + retention_days * 86_400)}


def route_for_event(event: ReplicationEvent, routes: Sequence[Route]) -> str | Unmapped:
    """The registry route the event belongs to: its source bucket, then the destination bucket
    (when the event names one: S3's do, MinIO's do not), then the replication rule (when both name
    one; a route that does not record the rule id takes any), preferring one whose probe prefix holds
    the key, then the first by name. Else :class:`Unmapped`, with the first check that failed."""
    found = sorted((r for r in routes if r.source.bucket == event.source_bucket), key=lambda r: r.name)
    if not found:
        return Unmapped("source_bucket", f"no registry route has source bucket {event.source_bucket}")
    dest = event.destination_bucket
    if dest is not None:
        found = [r for r in found if any(d.bucket == dest for d in r.destinations)]
        if not found:
            return Unmapped("destination", f"no registry route from {event.source_bucket} replicates to {dest}")
    if event.rule_id is not None:
        found = [r for r in found if any(d.rule_id in (None, event.rule_id) for d in r.destinations if dest is None or d.bucket == dest)]
        if not found:
            return Unmapped("rule_id", f"no registry route from {event.source_bucket} to {dest or 'its destinations'} "
                                       f"has replication rule {event.rule_id!r}")
    for r in found:
        if event.key.startswith(r.prefix):
            return r.name
    return found[0].name


#: Events kept as items (beside their counters): what a person reads when the route fails. Other
#: kinds (and MinIO's completions) are only counted; a kind S3 does not document is kept as well.
KEPT_KINDS = frozenset({"OperationFailedReplication", "OperationMissedThreshold"})
#: How long a dedupe marker stops a redelivered event from counting twice: as long as the events
#: DLQ keeps a message (14 days, template.yaml EventsDeadLetterQueue) plus a day, so a redrive of the
#: DLQ never counts a record twice. TTL deletes "typically within two days" after expiry (DynamoDB's TTL page):
#: not a bound, but only the upper side (a marker living longer) varies. ~100 B a marker.
MARKER_TTL_SECONDS = 15 * 86_400


@dataclass(frozen=True)
class EventItem:
    """One S3 replication event of a route: counted once behind its dedupe marker
    (``<route>#seen/<crc32(object key) % 16>`` / event id) on the hour item's ``e*_MM`` counter,
    and - for failures, missed thresholds and undocumented kinds - kept as an item under
    ``<route>#events/<crc32(event id) % 8>`` (docs/design/fleet.md 7)."""

    route: str
    event: ReplicationEvent

    @property
    def sort_key(self) -> str:
        return f"{iso_ms(self.event.event_time)}#{self.event.event_id}"

    @property
    def kept(self) -> bool:
        return self.event.kind in KEPT_KINDS or self.event.kind not in EVENT_ATTRS

    @property
    def partition(self) -> str:
        """Where the kept item goes (also for events only counted: the shard they would use)."""
        return events_partition(self.route, self.event.event_id)

    @property
    def counter(self) -> tuple[str, str, str]:
        """(partition, sort key, attribute) of the counter this event adds 1 to."""
        t = self.event.event_time
        return roll_partition(self.route), hour_sort_key(floor_hour(t)), event_attr(self.event.kind, t)

    def marker(self, now: float) -> Item:
        return {PARTITION_KEY: seen_partition(self.route, self.event.key), SORT_KEY: self.event.event_id,
                "key": self.event.key, "kind": self.event.kind,  # what a person (or a test) looks for; ~100 bytes, 1 WCU
                TTL_ATTRIBUTE: int(now + MARKER_TTL_SECONDS)}

    def to_item(self, retention_days: int) -> Item:
        body = {k: v for k, v in self.event.to_json().items() if v is not None}
        return {**body, PARTITION_KEY: self.partition, SORT_KEY: self.sort_key,
                TTL_ATTRIBUTE: int(self.event.event_time + retention_days * 86_400)}

    def writes(self, now: float, retention_days: int) -> list[TransactPut]:
        """The conditional puts that make this event count once: its marker (+ its kept item)."""
        puts = [TransactPut(self.marker(now))]
        if self.kept:
            puts.append(TransactPut(self.to_item(retention_days)))
        return puts


@dataclass
class IngestPlan:
    """What one parsed record leads to: an event to count (and maybe keep), an arrival, or nothing (and why)."""

    parsed: Parsed
    event: EventItem | None = None
    arrival: Arrival | None = None
    ignored: str | None = None
    unmapped: Unmapped | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.parsed.to_json()
        if self.event:
            pk, sk, attr = self.event.counter
            out["store"] = {"partition": pk, "sort_key": sk, "counter": attr, "route": self.event.route,
                            "marker": seen_partition(self.event.route, self.event.event.key),
                            "kept": self.event.partition if self.event.kept else None}
        if self.arrival:
            out["store" if not self.event else "arrival"] = {"partition": signal_partition(self.arrival.route, ARRIVALS), "sort_key": self.arrival.record_key,
                            "route": self.arrival.route, "replica": self.arrival.bucket, "created_at": iso_ms(self.arrival.created_at)}
        if self.ignored:
            out["ignored"] = self.ignored
        if self.unmapped:
            out["unmapped"] = {"reason": self.unmapped.reason, "detail": self.unmapped.detail}
        return out


def plan_ingest(parsed: Parsed, routes: Sequence[Route], prefixes: Sequence[str]) -> IngestPlan:
    sig = parsed.signal
    if isinstance(sig, ReplicationEvent):
        owner = route_for_event(sig, routes)
        if isinstance(owner, Unmapped):
            return IngestPlan(parsed, unmapped=owner)
        item = EventItem(owner, sig)
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
    now: Callable[[], float] = time.time  # the markers' TTL starts now
    slo: SloSpec = field(default_factory=SloSpec)  # REPLMON_SLO: a narrowed record's good is judged against its threshold
    #: Registry groups whose read failed (core/registry.py ``RegistryRead.unread``): their routes are
    #: not in ``routes``, so an event that maps to none may be theirs: it is retried, not filed as unmapped.
    unread_groups: list[str] = field(default_factory=list)

    @property
    def prefixes(self) -> list[str]:
        return probe_prefixes(self.routes)


def probe_prefixes(routes: Sequence[Route]) -> list[str]:
    """Where probe keys live: the routes' prefixes, or the default one."""
    return sorted({r.prefix for r in routes}) or [DEFAULTS.probe_prefix]


@dataclass(frozen=True)
class Transaction:
    """One ``TransactWriteItems`` of a batch: the events it counts (their puts first, in order)
    and the one ``ADD`` on their (route, hour) item, last."""

    events: tuple[EventItem, ...]
    writes: tuple[TransactItem, ...]
    owners: tuple[int, ...]  # writes[i] belongs to events[owners[i]] (-1: the ADD)


def transaction(events: Sequence[EventItem], now: float, retention_days: int) -> Transaction:
    """Markers (+ kept items) of ``events`` (one route and hour) and one ADD of their counts."""
    writes: list[TransactItem] = []
    owners: list[int] = []
    counts: dict[tuple[str, float], int] = {}
    for i, e in enumerate(events):
        for w in e.writes(now, retention_days):
            writes.append(w)
            owners.append(i)
        counts[(e.event.kind, e.event.event_time)] = counts.get((e.event.kind, e.event.event_time), 0) + 1
    [add] = event_add(events[0].route, counts)
    return Transaction(tuple(events), (*writes, add), (*owners, -1))


def transactions(events: Sequence[EventItem], now: float, retention_days: int) -> list[Transaction]:
    """A batch's events grouped per (route, hour item), each group cut into transactions of at most
    ``MAX_TRANSACT_ACTIONS`` (100, TransactWriteItems' limit) actions: one ADD per (route, hour) and transaction.
    Events are distinct (one marker key once: a transaction may not touch an item twice)."""
    groups: dict[tuple[str, float], list[EventItem]] = {}
    for e in events:
        groups.setdefault((e.route, floor_hour(e.event.event_time)), []).append(e)
    out = []
    for group in groups.values():
        chunk: list[EventItem] = []
        actions = 1  # the ADD
        for e in group:
            need = 2 if e.kept else 1
            if actions + need > MAX_TRANSACT_ACTIONS:
                out.append(transaction(chunk, now, retention_days))
                chunk, actions = [], 1
            chunk.append(e)
            actions += need
        if chunk:
            out.append(transaction(chunk, now, retention_days))
    return out


def count_events(events: Sequence[EventItem], store: RollupStore, now: float, retention_days: int) -> dict[int, str | Exception]:
    """Count each event once: per transaction, markers and the ADD commit together or not at all.
    A transaction cancelled because markers existed (duplicates: an ADD alone is not
    idempotent) is retried without the events those markers belong to. Returns, per index of
    ``events``: "counted", "duplicate", or the exception of a transaction that failed otherwise
    (the message is retried by SQS; nothing of that transaction was applied)."""
    out: dict[int, str | Exception] = {}
    index: dict[tuple[str, str], int] = {}
    distinct: list[EventItem] = []
    for i, e in enumerate(events):
        key = (seen_partition(e.route, e.event.key), e.event.event_id)
        if key in index:  # the same event twice in one batch (S3's at-least-once delivery)
            out[i] = "duplicate"
            continue
        index[key] = i
        distinct.append(e)

    def position(e: EventItem) -> int:
        return index[(seen_partition(e.route, e.event.key), e.event.event_id)]

    for tx in transactions(distinct, now, retention_days):
        live = list(tx.events)
        t = tx
        try:
            while live:
                outcome = store.transact(t.writes)
                if outcome.applied:
                    out.update({position(e): "counted" for e in live})
                    break
                dup = {t.owners[i] for i in outcome.duplicates if t.owners[i] >= 0}
                if not dup:
                    raise StoreUnavailable("transaction cancelled without naming a duplicate marker")
                out.update({position(live[i]): "duplicate" for i in dup})
                live = [e for i, e in enumerate(live) if i not in dup]
                if live:
                    t = transaction(live, now, retention_days)
        except Exception as exc:
            out.update({position(e): exc for e in live})
    return out


@dataclass
class IngestResult:
    notes: list[str]  # per plan
    failed: set[int] = field(default_factory=set)  # plans whose SQS message must be retried


def ingest(plans: Sequence[IngestPlan], deps: IngestDeps, now: float | None = None) -> IngestResult:
    """Count the plans' events (a whole batch at once: one ADD per (route, hour) and transaction),
    keep the ones worth keeping, and store arrivals. A plan whose write failed is in ``failed``."""
    now = deps.now() if now is None else now
    events = [(i, p.event) for i, p in enumerate(plans) if p.event is not None]
    counted = count_events([e for _, e in events], deps.store, now, deps.retention_days)
    notes = ["" for _ in plans]
    failed: set[int] = set()
    per_kind: dict[tuple[str, str], int] = {}
    for j, (i, e) in enumerate(events):
        res = counted[j]
        if isinstance(res, Exception):
            failed.add(i)
            notes[i] = f"not stored: {type(res).__name__}: {res}"
            continue
        notes[i] = res
        if res == "counted":
            per_kind[(e.route, e.event.kind)] = per_kind.get((e.route, e.event.kind), 0) + 1
    for (route, kind), n in sorted(per_kind.items()):
        deps.metrics.count("ReplicationEvents", n, {ROUTE: route, EVENT: kind})
    for i, p in enumerate(plans):
        if p.arrival is not None:
            try:
                notes[i] = ", ".join(n for n in (notes[i], _arrival(p.arrival, deps)) if n)
            except Exception as exc:
                failed.add(i)
                notes[i] = f"not stored: {type(exc).__name__}: {exc}"
        if p.unmapped is not None and deps.unread_groups:  # maybe a route of an unread group: SQS delivers it again
            failed.add(i)
            notes[i] = f"not mapped while registry groups {', '.join(deps.unread_groups)} are unread: retried"
        elif p.unmapped is not None:
            try:
                notes[i] = _unmapped(p, deps)
            except Exception as exc:
                failed.add(i)
                notes[i] = f"not stored: {type(exc).__name__}: {exc}"
        elif p.event is None and p.arrival is None:
            notes[i] = p.ignored or p.parsed.acknowledged or "nothing"
    return IngestResult(notes, failed)


def _unmapped(p: IngestPlan, deps: IngestDeps) -> str:
    """Kept in the table (``#unmapped/<day>`` for the retention: the operator's list, with the
    reason; a redelivery finds its item there and is not counted again), logged with the record,
    counted by reason (UnmappedEvent, which tickets). Not the DLQ: SQS would redeliver the whole
    message (its mapped records too) and expire it after 14 days."""
    assert p.unmapped is not None and isinstance(p.parsed.signal, ReplicationEvent)
    item = p.unmapped.to_item(p.parsed.signal, deps.retention_days)
    if not deps.store.put_item_once(item):
        return "unmapped, duplicate"
    log.warning("replication event maps to no registry route; kept, not counted under any route",
                extra={"reason": p.unmapped.reason, "detail": p.unmapped.detail, "record": p.parsed.signal.to_json(),
                       "kept": {"partition": item[PARTITION_KEY], "sort_key": item[SORT_KEY]}})
    deps.metrics.count("UnmappedEvent", dimensions={REASON: p.unmapped.reason})
    return f"unmapped ({p.unmapped.reason}): kept under {item[PARTITION_KEY]}"


def _arrival(a: Arrival, deps: IngestDeps) -> str:
    first = deps.store.add_arrival(signal_partition(a.route, ARRIVALS), a.record_key, ARRIVAL_ATTR + a.bucket, a.created_at,
                                   int(a.created_at + max(deps.retention_days * 86_400, ARRIVAL_TTL_SECONDS)))
    if first:  # a redelivery (or a later duplicate) is not another arrival
        deps.metrics.count("ReplicaArrivals", dimensions={ROUTE: a.route})
    record = deps.store.get_record(a.route, a.record_key)
    # No record yet: RecordResult applies the arrival when it stores the record.
    return (apply_arrivals(deps.store, deps.metrics, record, deps.skew_seconds, deps.slo, deps.now()) or "arrival kept") if record else "arrival kept"
