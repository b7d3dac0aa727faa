"""Reading CloudWatch metrics (GetMetricData): the :class:`~replmon.core.ports.MetricReader` for
S3's replication metrics. Every page is read; a query's points split over pages are merged;
timestamps become epoch seconds. (Writing metrics is adapters/metrics.py: EMF, no API call.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from replmon.core.ports import MetricQuery, MetricSeries


def _query(q: MetricQuery) -> dict[str, Any]:
    return {"Id": q.id, "ReturnData": True,
            "MetricStat": {"Metric": {"Namespace": q.namespace, "MetricName": q.metric,
                                      "Dimensions": [{"Name": n, "Value": v} for n, v in q.dimensions]},
                           "Period": q.period, "Stat": q.stat}}


class CloudWatchReader:
    """``client`` is a CloudWatch client from adapters/clients.py (in the Region S3 publishes the
    route's metrics in)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def read(self, queries: Sequence[MetricQuery], start: float, end: float) -> list[MetricSeries]:
        kwargs: dict[str, Any] = {"MetricDataQueries": [_query(q) for q in queries], "StartTime": datetime.fromtimestamp(start, UTC),
                                  "EndTime": datetime.fromtimestamp(end, UTC), "ScanBy": "TimestampAscending"}
        points: dict[str, list[tuple[float, float]]] = {}
        while True:
            page = self.client.get_metric_data(**kwargs)
            for r in page["MetricDataResults"]:  # pages split one query's points
                points.setdefault(r["Id"], []).extend(
                    (ts.timestamp(), float(v)) for ts, v in zip(r.get("Timestamps", []), r.get("Values", []), strict=True))
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        return [MetricSeries(qid, tuple(pts)) for qid, pts in points.items()]
