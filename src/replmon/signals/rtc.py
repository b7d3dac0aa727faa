"""S3 Replication metrics (RTC) per rule and destination, read with GetMetricData.

S3 publishes them per minute, best effort, in namespace AWS/S3 with dimensions SourceBucket,
DestinationBucket and RuleId, only while the rule has replication metrics (or RTC) enabled, and
**only when there is something to report**: an idle route has no data points (R6, R13). A
series without points is stored as missing, never as zero.

>>> [q.stat for q in queries("src", "dst", "rule-1", 60)]
['Maximum', 'Maximum', 'Maximum', 'Sum']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.core.ports import MetricQuery, MetricReader, MetricSeries
from replmon.core.route import Route
from replmon.signals.slo import RtcLatest

NAMESPACE = "AWS/S3"
#: metric -> (statistic, unit): the statistics S3's documentation recommends for each.
RTC_METRICS = {
    "ReplicationLatency": ("Maximum", "Seconds"),
    "BytesPendingReplication": ("Maximum", "Bytes"),
    "OperationsPendingReplication": ("Maximum", "Count"),
    "OperationsFailedReplication": ("Sum", "Count"),
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


def collect_rtc(reader: MetricReader, route: Route, now: float, lookback: float = 900, period: int = 60) -> list[RtcSample]:
    """One read (GetMetricData, every page) for every (rule, destination) of the route that names its rule."""
    pairs = [(d.bucket, d.rule_id) for d in route.destinations if d.rule_id]
    if not pairs:
        return []
    qs = [q for n, (dst, rule) in enumerate(pairs) for q in queries(route.source.bucket, dst, rule, period, n)]
    series = reader.read(qs, now - lookback, now)
    return [parse_results(series, dst, rule, now, n) for n, (dst, rule) in enumerate(pairs)]


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
