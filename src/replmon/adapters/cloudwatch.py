"""Reading CloudWatch metrics (GetMetricData): the :class:`~replmon.core.ports.MetricReader` for
S3's replication metrics. Every page is read; a query's points split over pages are merged;
timestamps become epoch seconds. (Writing metrics is adapters/metrics.py: EMF, no API call.)

CloudWatch is regional and S3 publishes a route's metrics in two Regions ("Using S3 Replication metrics"):
:class:`CloudWatchReaders` gives one reader per (account, Region), its client built once by
adapters/clients.py in that Region, as that account's ``<MemberRolePrefix>-reader`` role (assumed
with the deployment's ExternalId, the one AssumeRole path of adapters/clients.py). A member
account's metrics are in that account's CloudWatch: the hub's own credentials would read the
hub's, and find nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from replmon.adapters import clients
from replmon.core.errors import StoreUnavailable
from replmon.core.ports import MetricQuery, MetricSeries, ReaderKey
from replmon.core.registry import member_role_arn


def _query(q: MetricQuery) -> dict[str, Any]:
    return {"Id": q.id, "ReturnData": True,
            "MetricStat": {"Metric": {"Namespace": q.namespace, "MetricName": q.metric,
                                      "Dimensions": [{"Name": n, "Value": v} for n, v in q.dimensions]},
                           "Period": q.period, "Stat": q.stat}}


class CloudWatchReader:
    """``client`` is a CloudWatch client from adapters/clients.py (in the Region S3 publishes the
    route's metrics in), made as ``role`` when it reads another account's metrics."""

    def __init__(self, client: Any, role: str | None = None) -> None:
        self.client = client
        self.role = role

    def read(self, queries: Sequence[MetricQuery], start: float, end: float) -> list[MetricSeries]:
        try:
            return self._read(queries, start, end)
        except ClientError as exc:
            if self.role and exc.operation_name == "AssumeRole":  # the member account refused the collector
                raise StoreUnavailable(f"cannot assume {self.role} to read S3's replication metrics: "
                                       f"{exc.response.get('Error', {}).get('Code')}; deploy templates/member-account.yaml in "
                                       "that account with this stack's HubAccountId, HubStackName and ExternalId "
                                       "(MemberExternalId)") from exc
            raise

    def _read(self, queries: Sequence[MetricQuery], start: float, end: float) -> list[MetricSeries]:
        kwargs: dict[str, Any] = {"MetricDataQueries": [_query(q) for q in queries], "StartTime": datetime.fromtimestamp(start, UTC),
                                  "EndTime": datetime.fromtimestamp(end, UTC), "ScanBy": "TimestampAscending"}
        points: dict[str, list[tuple[float, float]]] = {}
        while True:
            page = self.client.get_metric_data(**kwargs)
            for r in page["MetricDataResults"]:  # pages split one query's points
                if r.get("StatusCode") in ("InternalError", "Forbidden"):  # not "no data": the read failed for this query
                    raise RuntimeError(f"GetMetricData {r['StatusCode']} for query {r['Id']}: "
                                       + "; ".join(m.get("Value", "") for m in r.get("Messages", []))[:300])
                points.setdefault(r["Id"], []).extend(
                    (ts.timestamp(), float(v)) for ts, v in zip(r.get("Timestamps", []), r.get("Values", []), strict=True))
            if not page.get("NextToken"):
                break
            kwargs["NextToken"] = page["NextToken"]
        return [MetricSeries(qid, tuple(pts)) for qid, pts in points.items()]


class CloudWatchReaders:
    """The :class:`~replmon.core.ports.MetricReaders` port: a :class:`CloudWatchReader` per
    :class:`~replmon.core.ports.ReaderKey`, cached for the execution environment.

    ``region=None`` in a key is the client's default Region (the stack's). A key with an account
    is read as ``<member_role_prefix>-reader`` in that account (``external_id`` sent when set);
    a key without one (the stack's own route) with the function's own credentials.

    >>> r = CloudWatchReaders("replmon", "ext-1")
    >>> r.role_for(ReaderKey("444455556666", "eu-west-1")), r.role_for(ReaderKey(None, "us-east-1"))
    ('arn:aws:iam::444455556666:role/replmon-reader', None)
    """

    def __init__(self, member_role_prefix: str | None = None, external_id: str | None = None, *,
                 call: clients.CallClass = clients.STORE, partition: str = "aws") -> None:
        self.member_role_prefix = member_role_prefix
        self.external_id = external_id or None
        self.call = call
        self.partition = partition
        self._readers: dict[ReaderKey, CloudWatchReader] = {}

    def role_for(self, key: ReaderKey) -> str | None:
        if key.account is None or not self.member_role_prefix:
            return None
        return member_role_arn(key.account, self.member_role_prefix, "reader", self.partition)

    def __call__(self, key: ReaderKey, /) -> CloudWatchReader:
        if key not in self._readers:
            role = self.role_for(key)
            self._readers[key] = CloudWatchReader(clients.client("cloudwatch", self.call, region=key.region, role_arn=role,
                                                                 external_id=self.external_id if role else None), role)
        return self._readers[key]
