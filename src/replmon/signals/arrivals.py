"""Replica arrivals: a replica's creation time (its ``ObjectCreated`` event) narrows its probe's
latency interval.

A replica's ``ObjectCreated`` event time ``t`` is when S3 finished writing it, on S3's clock; the
probe's ``put_end`` is on UploadProbe's clock. With ``skew`` the allowance for the two clocks:

- any destination's replica at ``t`` means replication was not done before it: ``lo >= t - put_end - skew``;
- replication is done when *every* destination has its replica (S3's multi-destination rule, R6):
  with events from all of them, ``hi <= max(t) - put_end + skew``.

The interval only ever narrows; if the event contradicts the poll beyond the allowance, the poll
interval stands and the disagreement is counted (docs/SEMANTICS.md, "Replica events"). An event
may come before or after its probe's record: IngestEvents applies it to a stored record, and
RecordResult (or Housekeeping replaying a spooled record) applies the arrivals already kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from replmon.core.keys import parse_probe_object_key, record_sort_key
from replmon.core.partitions import ARRIVAL_ATTR, ARRIVALS, signal_partition
from replmon.core.ports import LatencyTable, MetricsSink
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.telemetry import ROUTE
from replmon.signals.rollup import COUNTED_GOOD, GOOD, narrow_ops
from replmon.signals.s3events import ObjectCreated
from replmon.signals.slo import SloSpec

#: Arrivals are kept as long as a probe can live (1 day) plus an hour.
ARRIVAL_TTL_SECONDS = 86_400 + 3600


@dataclass(frozen=True)
class Arrival:
    """A replica of a probe, seen by an ObjectCreated event on a bucket other than the route's source."""

    route: str
    record_key: str  # the probe record's sort key
    bucket: str
    created_at: float


def arrival_for(event: ObjectCreated, prefixes: Iterable[str]) -> Arrival | None:
    """The probe an ObjectCreated event's key names (the key carries run, route and probe), or None."""
    for prefix in prefixes:
        pk = parse_probe_object_key(event.key, prefix)
        if pk is not None:
            return Arrival(pk.route, record_sort_key(pk.run_id, pk.probe_id), event.bucket, event.event_time)
    return None


@dataclass(frozen=True)
class Tightened:
    lo: float
    hi: float | None
    replica_at: float  # the latest replica creation time used (epoch, S3's clock)


class ClockDisagreement(ValueError):
    """An event and the poll disagree by more than the clock-skew allowance."""


def tighten(lo: float | None, hi: float | None, put_end: float, destinations: Sequence[str],
            arrivals: Mapping[str, float], skew: float) -> Tightened | None:
    """The narrower interval the arrivals give, or None if they give nothing new or disagree.

    >>> tighten(1.0, 9.0, 100.0, ["dst"], {"dst": 103.0}, 0.25)
    Tightened(lo=2.75, hi=3.25, replica_at=103.0)
    >>> tighten(1.0, 9.0, 100.0, ["dst", "dr2"], {"dst": 103.0}, 0.25)  # one of two: lo only
    Tightened(lo=2.75, hi=9.0, replica_at=103.0)
    """
    seen = {b: t for b, t in arrivals.items() if b in destinations}
    if not seen or lo is None:
        return None
    latest = max(seen.values())
    complete = set(destinations) <= set(seen)
    new_lo = max(lo, latest - put_end - skew, 0.0)
    new_hi = hi
    if complete:
        cand = latest - put_end + skew
        new_hi = cand if hi is None else min(hi, cand)
    if new_hi is not None and new_lo > new_hi:
        raise ClockDisagreement(f"replica at {latest - put_end:+.3f} s vs poll [{lo:.3f}, {hi}] beyond the {skew} s allowance")
    if new_lo <= lo + 1e-6 and (new_hi is None or (hi is not None and new_hi >= hi - 1e-6)):
        return None  # nothing narrower (to the microsecond the store keeps)
    return Tightened(round(new_lo, 6), None if new_hi is None else round(new_hi, 6), latest)


def apply_arrivals(store: LatencyTable, metrics: MetricsSink, record: ProbeRecord, skew: float, slo: SloSpec, now: float) -> str | None:
    """Narrow a stored record with its replicas' creation times; a conditional update that retries
    on a concurrent change, moving the hour item's counters in the same transaction (a sample that
    becomes good under ``slo``'s threshold). Returns what happened, for the log."""
    for _ in range(3):
        item = store.get_item(signal_partition(record.route, ARRIVALS), record.sort_key)
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
        counted = (store.get_item(record.route, record.sort_key) or {}).get(COUNTED_GOOD)  # the verdict its hour item holds
        moves = narrow_ops(record, t.hi, slo.threshold_seconds, now, None if counted is None else bool(counted), period_days=slo.period_days)
        if store.narrow_interval(record, t.lo, t.hi, t.replica_at, moves, mark_good=any(GOOD in m.add for m in moves)):
            metrics.count("IntervalNarrowedByEvent", dimensions={ROUTE: record.route})
            return f"narrowed to [{t.lo}, {t.hi}]"
        fresh = store.get_record(record.route, record.sort_key)
        if fresh is None:
            return None
        record = fresh
    return "gave up after 3 concurrent changes"
