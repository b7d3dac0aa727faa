"""S3 Replication metrics (RTC) per rule and destination, read with GetMetricData.

S3 publishes them per minute, best effort, in namespace AWS/S3 with dimensions SourceBucket,
DestinationBucket and RuleId, only while the rule has replication metrics (or RTC) enabled, and
**only when there is something to report**: an idle route has no data points (R6, R13). A
series without points is stored as missing, never as zero.

**Each metric is read where S3 publishes it** ("Using S3 Replication metrics"):
ReplicationLatency, BytesPendingReplication and OperationsPendingReplication in the
*destination* bucket's Region, OperationsFailedReplication in the *source* bucket's Region
(:data:`METRIC_REGION`). CloudWatch is regional ("CloudWatch cross-account observability"), so a route's queries are grouped by
:class:`~replmon.core.ports.ReaderKey` (account, Region), each group read by that key's reader.

>>> [q.stat for q in queries("src", "dst", "rule-1", 60)]
['Maximum', 'Maximum', 'Maximum', 'Sum']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from replmon.core.ports import MetricQuery, MetricReaders, MetricSeries, ReaderKey
from replmon.core.route import Destination, Route
from replmon.signals.slo import RtcLatest

NAMESPACE = "AWS/S3"
#: metric -> (statistic, unit): the statistics S3's documentation recommends for each.
RTC_METRICS = {
    "ReplicationLatency": ("Maximum", "Seconds"),
    "BytesPendingReplication": ("Maximum", "Bytes"),
    "OperationsPendingReplication": ("Maximum", "Count"),
    "OperationsFailedReplication": ("Sum", "Count"),
}
#: metric -> the bucket whose Region S3 publishes it in ("Using S3 Replication metrics").
METRIC_REGION = {
    "ReplicationLatency": "destination",
    "BytesPendingReplication": "destination",
    "OperationsPendingReplication": "destination",
    "OperationsFailedReplication": "source",
}


def _qid(metric: str, n: int) -> str:
    return f"m{n}_{metric.lower()}"  # GetMetricData ids: lowercase start, letters, digits, '_'


def queries(source: str, destination: str, rule_id: str, period: int, n: int = 0) -> list[MetricQuery]:
    dims = (("SourceBucket", source), ("DestinationBucket", destination), ("RuleId", rule_id))
    return [MetricQuery(_qid(m, n), NAMESPACE, m, dims, period, stat) for m, (stat, _unit) in RTC_METRICS.items()]


@dataclass
class Series:
    metric: str
    points: list[tuple[float, float]]  # (epoch seconds, value), oldest first

    @property
    def missing(self) -> bool:
        return not self.points

    @property
    def latest(self) -> float | None:
        return self.points[-1][1] if self.points else None


@dataclass
class RtcSample:
    """One collection for one (rule, destination)."""

    destination: str
    rule_id: str
    collected_at: float
    series: dict[str, Series] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        return [m for m, s in self.series.items() if s.missing]

    def to_item(self) -> dict[str, Any]:
        return {"destination": self.destination, "rule_id": self.rule_id, "collected_at": self.collected_at,
                "missing": self.missing,
                "series": {m: [[t, v] for t, v in s.points] for m, s in self.series.items() if s.points}}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> RtcSample:
        series = {m: Series(m, [(float(t), float(v)) for t, v in item.get("series", {}).get(m, [])]) for m in RTC_METRICS}
        return cls(item["destination"], item["rule_id"], float(item["collected_at"]), series)


def parse_results(series: Sequence[MetricSeries], destination: str, rule_id: str, now: float, n: int = 0) -> RtcSample:
    by_id = {s.id: s for s in series}
    sample = RtcSample(destination, rule_id, now)
    for m in RTC_METRICS:
        found = by_id.get(_qid(m, n))
        sample.series[m] = Series(m, sorted(found.points) if found else [])
    return sample


def reader_key(route: Route, destination: Destination, metric: str) -> ReaderKey:
    """Where ``metric`` of the (source, ``destination``) pair is read: the Region S3 publishes it
    in (:data:`METRIC_REGION`; a destination without a Region is in the source's), in the source
    account (whose reader role reads it; None = the stack's own credentials, docs/design/fleet.md 3).

    >>> r = Route.model_validate({"name": "t", "source": {"bucket": "src-tokyo", "region": "ap-northeast-1"},
    ...                           "destinations": [{"bucket": "dst-singapore", "region": "ap-southeast-1", "rule_id": "r"}]})
    >>> [reader_key(r, r.destinations[0], m).region for m in METRIC_REGION]
    ['ap-southeast-1', 'ap-southeast-1', 'ap-southeast-1', 'ap-northeast-1']
    """
    side = METRIC_REGION[metric]
    region = route.source.region if side == "source" else (destination.region or route.source.region)
    return ReaderKey(route.source.account, region)


def queries_for(route: Route, period: int = 60) -> list[tuple[ReaderKey, MetricQuery]]:
    """Every query of the route's (rule, destination) pairs that name their rule, with where it is
    read. Query ids carry the pair's index, so they stay unique within any one read."""
    out = []
    for n, dest in enumerate(d for d in route.destinations if d.rule_id):
        assert dest.rule_id is not None
        for q in queries(route.source.bucket, dest.bucket, dest.rule_id, period, n):
            out.append((reader_key(route, dest, q.metric), q))
    return out


def collect_rtc(readers: MetricReaders, route: Route, now: float, lookback: float = 900, period: int = 60) -> list[RtcSample]:
    """One read (GetMetricData, every page) per (account, Region) the route's metrics live in, for
    every (rule, destination) of the route that names its rule."""
    pairs = [(d.bucket, d.rule_id) for d in route.destinations if d.rule_id]
    if not pairs:
        return []
    by_key: dict[ReaderKey, list[MetricQuery]] = {}
    for key, q in queries_for(route, period):
        by_key.setdefault(key, []).append(q)
    series: list[MetricSeries] = []
    for key, qs in by_key.items():
        series.extend(readers(key).read(qs, now - lookback, now))
    return [parse_results(series, dst, rule, now, n) for n, (dst, rule) in enumerate(pairs)]


#: GetMetricData takes at most 500 MetricDataQuery structures a call; each Id unique within the call,
#: a lowercase letter first, then letters, digits and '_' (CloudWatch API reference, GetMetricData).
MAX_QUERIES_PER_CALL = 500


@dataclass
class FleetRtc:
    """Every route's RTC collection of one collector run (:func:`collect_rtc_fleet`)."""

    samples: dict[str, list[RtcSample]]  # route -> one sample per (rule, destination); [] when none names its rule
    failed: dict[str, str]  # route -> why a read it needed failed (its samples are left out, never half-read)
    calls: int  # GetMetricData reads (one call of at most 500 queries each, all its pages)


def collect_rtc_fleet(readers: MetricReaders, routes: Sequence[Route], now: float, lookback: float = 900,
                      period: int = 60) -> FleetRtc:
    """The same samples as :func:`collect_rtc` per route, in as few GetMetricData calls as the API
    allows: every route's queries grouped by :class:`ReaderKey` (account, Region), at most
    :data:`MAX_QUERIES_PER_CALL` a call (1,000 routes of one destination in one Region: 8 calls,
    not 1,000). A key whose read fails (denied, throttled past the client's retries) fails only the
    routes with a query there, each named with the error.

    >>> class Echo:
    ...     def read(self, qs, start, end):
    ...         return [MetricSeries(q.id, ((end - 60, 7.0),)) for q in qs]
    >>> rs = [Route.model_validate({"name": f"r{i}", "source": {"bucket": f"src-{i}"}, "destinations": [{"bucket": f"dst-{i}", "rule_id": "x"}]})
    ...       for i in range(200)]
    >>> got = collect_rtc_fleet(lambda key: Echo(), rs, 1795428000.0)
    >>> (got.calls, got.samples["r199"][0].series["ReplicationLatency"].latest, got.failed)
    (2, 7.0, {})
    """
    by_key: dict[ReaderKey, list[tuple[int, MetricQuery]]] = {}
    for i, route in enumerate(routes):
        for key, q in queries_for(route, period):
            by_key.setdefault(key, []).append((i, replace(q, id=f"r{i}_{q.id}")))
    series: dict[int, list[MetricSeries]] = {}
    failed: dict[int, str] = {}
    calls = 0
    for key, items in by_key.items():
        for start in range(0, len(items), MAX_QUERIES_PER_CALL):
            chunk = items[start:start + MAX_QUERIES_PER_CALL]
            calls += 1
            try:
                got = readers(key).read([q for _, q in chunk], now - lookback, now)
            except Exception as exc:  # this key's routes only: the rest of the fleet is read
                for i, _ in chunk:
                    failed.setdefault(i, f"{type(exc).__name__}: {exc}")
                continue
            for s in got:
                head, _, local = s.id.partition("_")
                series.setdefault(int(head[1:]), []).append(MetricSeries(local, s.points))
    out: dict[str, list[RtcSample]] = {}
    for i, route in enumerate(routes):
        if i in failed:
            continue
        pairs = [(d.bucket, d.rule_id) for d in route.destinations if d.rule_id]
        out[route.name] = [parse_results(series.get(i, []), dst, rule, now, n) for n, (dst, rule) in enumerate(pairs)]
    return FleetRtc(out, {routes[i].name: why for i, why in failed.items()}, calls)


def latest(samples: list[RtcSample], since: float) -> RtcLatest | None:
    """The worst value of each metric since ``since`` over a route's (rule, destination) pairs."""
    if not samples:
        return None
    out = RtcLatest()
    fields = {"ReplicationLatency": "replication_latency", "BytesPendingReplication": "bytes_pending",
              "OperationsPendingReplication": "operations_pending", "OperationsFailedReplication": "operations_failed"}
    for metric, attr in fields.items():
        # Collections overlap: one value per (destination, rule, minute), the latest collection's.
        points = {(s.destination, s.rule_id, t): v for s in sorted(samples, key=lambda s: s.collected_at)
                  for t, v in s.series.get(metric, Series(metric, [])).points if t >= since}
        values = list(points.values())
        if values:
            setattr(out, attr, sum(values) if metric == "OperationsFailedReplication" else max(values))
    return out
