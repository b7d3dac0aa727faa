"""Passive signals in the latency store: which route an event belongs to, what is stored, and how
a replica's creation time tightens a probe's interval.

Store layout (one table; a route name never contains '#', config.py enforces it):

| partition | sort key | item |
| --- | --- | --- |
| ``<route>`` | record key | a probe's record (record.py) |
| ``<route>#events`` | ``<event time>#<event id>`` | one S3 replication event |
| ``<route>#arrivals`` | record key | replica creation times of a probe, one attribute per destination |
| ``<route>#rtc`` | ``<collection time>`` | one collection of the route's RTC metrics |

A replica's ``ObjectCreated`` event time ``t`` is when S3 finished writing it, on S3's clock; the
probe's ``put_end`` is on UploadProbe's clock. With ``skew`` the allowance for the two clocks:

- any destination's replica at ``t`` means replication was not done before it: ``lo >= t - put_end - skew``;
- replication is done when *every* destination has its replica (S3's multi-destination rule, R6):
  with events from all of them, ``hi <= max(t) - put_end + skew``.

The interval only ever narrows; if the event contradicts the poll beyond the allowance, the poll
interval stands and the disagreement is counted (docs/SEMANTICS.md, "Replica events").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from replmon.core.keys import iso_ms, parse_probe_object_key, record_sort_key
from replmon.probe.request import Route
from replmon.signals.s3events import ObjectCreated, ReplicationEvent

EVENTS = "events"
ARRIVALS = "arrivals"
RTC = "rtc"
#: Attribute of an arrivals item holding one destination's replica creation time.
ARRIVAL_ATTR = "replica@"


def partition(route: str, kind: str) -> str:
    return f"{route}#{kind}"


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
    route: str
    event: ReplicationEvent

    @property
    def sort_key(self) -> str:
        return f"{iso_ms(self.event.event_time)}#{self.event.event_id}"

    def to_item(self, retention_days: int) -> dict[str, Any]:
        body = {k: v for k, v in self.event.to_json().items() if v is not None}
        return {**body, "route": partition(self.route, EVENTS), "at": self.sort_key,
                "expires_at": int(self.event.event_time + retention_days * 86_400)}


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


class ClockDisagreement(ValueError):
    """An event and the poll disagree by more than the clock-skew allowance."""
