"""The collector against a fleet's history (docs/BENCH-COLLECTOR.md): CollectSignals' ``collect``
(signals/collector.py) over N routes whose 30 days of probe records sit in DynamoDB Local, with the
wall time, the DynamoDB calls and items read (the service's own ``ScannedCount`` of every Query,
one per GetItem) and the GetMetricData calls, per run and per route.

**The history.** Each route has what the default schedule leaves (``ProbeClasses``
``1MiB@1h,64MiB@6h,1GiB@1d``): one COMPLETED record per class cadence over ``SloPeriodDays`` (30) days
and a day, and the last two hours of heartbeats (one a minute), with the hour items their writes
leave (signals/rollup.py ``record_ops``: the SLO and the RPO's heartbeats are read from these).
Everything is written by batch (loading through a transaction per record would take longer than
the bench). The first collector run over a route builds its period cache from every hour item
(signals/slo_rollup.py): it is measured apart (``first_run``) from the steady runs that follow.

**CloudWatch** is a recording stand-in that answers every query with no points (an idle route: S3
publishes replication metrics only when there is something to report); what is measured is how
many GetMetricData calls the collector makes and with how many queries (at most 500 a call).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.core.cadence import ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.core.keys import HEARTBEAT_SIZE_BYTES, HEARTBEAT_SIZE_CLASS, RUN_STAMP, heartbeat_probe_id, heartbeat_run_id
from replmon.core.ports import MetricQuery, MetricSeries, ReaderKey
from replmon.core.record import PARTITION_KEY, SORT_KEY, ProbeRecord, ProbeStatus
from replmon.core.route import Route

__all__ = ["CallCounter", "history_items", "run_collector_bench"]


@dataclass
class CallCounter:
    """Counts a boto3 client's calls by operation and the items each read returned (botocore events)."""

    calls: dict[str, int] = field(default_factory=dict)
    items_read: int = 0

    def attach(self, client: Any) -> None:
        client.meta.events.register("after-call.dynamodb", self._after)

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self.calls[model.name] = self.calls.get(model.name, 0) + 1
        if model.name in ("Query", "Scan"):
            self.items_read += int(parsed.get("ScannedCount", parsed.get("Count", 0)))
        elif model.name == "GetItem" and parsed.get("Item"):
            self.items_read += 1

    def reset(self) -> None:
        self.calls, self.items_read = {}, 0


@dataclass
class IdleReaders:
    """MetricReaders answering every query with no points, counting the calls and queries."""

    calls: int = 0
    queries: int = 0
    largest: int = 0

    def __call__(self, key: ReaderKey, /) -> IdleReaders:
        return self

    def read(self, queries: Sequence[MetricQuery], start: float, end: float) -> list[MetricSeries]:
        self.calls += 1
        self.queries += len(queries)
        self.largest = max(self.largest, len(queries))
        return [MetricSeries(q.id, ()) for q in queries]


def bench_route(i: int, stamp: str) -> Route:
    """Route ``i`` of one bench run (``stamp``: the lab keeps DynamoDB, and a second run must not read the first's history)."""
    return Route.model_validate({"name": f"bench-{stamp}-{i:04d}", "source": {"bucket": f"bench-src-{i:04d}", "region": "us-east-1"},
                                 "destinations": [{"bucket": f"bench-dst-{i:04d}", "region": "eu-west-1", "rule_id": "replmon-probes"}]})


def history_items(route: str, now: float, classes: str = DEFAULTS.probe_classes, days: int = DEFAULTS.slo_period_days + 1,
                  heartbeat_hours: float = 2.0) -> list[dict[str, Any]]:
    """The route's records as the default schedule leaves them (COMPLETED, latencies of a few seconds),
    and its heartbeats, with the hour items their transactions build (counters, the heartbeats' entries)."""
    from replmon.core.ports import TransactAdd, TransactPut
    from replmon.signals.rollup import record_ops

    out: list[dict[str, Any]] = []
    hours: dict[tuple[str, str], dict[str, Any]] = {}

    def stored(r: ProbeRecord) -> None:
        for op in record_ops(r, now=r.put_end or r.planned_at):  # stored on time: no late-write generation
            if isinstance(op, TransactPut):
                out.append(dict(op.item))
            elif isinstance(op, TransactAdd):
                item = hours.setdefault((op.pk, op.sk), {PARTITION_KEY: op.pk, SORT_KEY: op.sk})
                for k, v in op.set_once.items():
                    item.setdefault(k, v)
                for k, v in op.add.items():
                    item[k] = item.get(k, 0) + v

    for c in ProbeClasses.parse(classes):
        t = now - days * 86400
        while t < now:
            run = time.strftime(RUN_STAMP, time.gmtime(t)) + "-bench0"
            size = c.size_bytes
            stored(ProbeRecord(route=route, probe_id=f"{run}-{route}-{c.label}-t1", run_id=run, planned_at=t, size_bytes=size,
                               size_class=c.label, trial=1, status=ProbeStatus.COMPLETED, put_end=t + 1 + size / 2**27,
                               latency_lo=2.0, latency_hi=3.0 + size / 2**26))
            t += c.every_seconds
    t = now - heartbeat_hours * 3600
    while t < now:
        run = heartbeat_run_id(t)
        stored(ProbeRecord(route=route, probe_id=heartbeat_probe_id(run, route), run_id=run, planned_at=t, size_bytes=HEARTBEAT_SIZE_BYTES,
                           size_class=HEARTBEAT_SIZE_CLASS, trial=1, status=ProbeStatus.COMPLETED, put_end=t + 0.05,
                           latency_lo=0.4, latency_hi=0.6))
        t += 60
    return out + list(hours.values())


def load(client: Any, table: str, items: list[dict[str, Any]]) -> None:
    from replmon.adapters.dynamodb import DynamoLatencyStore

    serial = [{"PutRequest": {"Item": DynamoLatencyStore._item(i)}} for i in items]
    for start in range(0, len(serial), 25):
        batch: dict[str, Any] = {table: serial[start:start + 25]}
        while batch:
            batch = client.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}


def run_collector_bench(client: Any, table: str, sizes: Sequence[int], *, repeats: int = 3,
                        progress: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """For each N: the fleet's history loaded (routes added to the previous N's), then ``repeats``
    collector runs over the N routes; min / median / max wall time, calls and items read per run."""
    from statistics import median

    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.metrics import NullMetrics
    from replmon.signals.collector import collect
    from replmon.signals.slo import SloSpec

    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    counter = CallCounter()
    counter.attach(client)
    store = DynamoLatencyStore(table, client)
    loaded, per_route = 0, 0
    out: list[dict[str, Any]] = []
    first_runs: list[dict[str, Any]] = []
    for n in sorted(sizes):
        began = time.time()
        items = [it for i in range(loaded, n) for it in history_items(bench_route(i, stamp).name, now)]
        per_route = len(items) // (n - loaded) if n > loaded else per_route
        load(client, table, items)
        new, loaded = range(loaded, n), n
        progress(f"N = {n}: {len(items)} items loaded in {time.time() - began:.1f} s")
        routes = [bench_route(i, stamp) for i in new]
        counter.reset()
        t0 = time.perf_counter()
        collect(routes, store, IdleReaders(), NullMetrics(), now, SloSpec(), 3600, 1)  # the new routes' period caches
        first_runs.append({"routes": len(routes), "wall_s": round(time.perf_counter() - t0, 3),
                           "items_read_per_route": round(counter.items_read / max(1, len(routes)), 1)})
        routes = [bench_route(i, stamp) for i in range(n)]
        walls: list[float] = []
        for _ in range(repeats):
            counter.reset()
            readers = IdleReaders()
            t0 = time.perf_counter()
            collect(routes, store, readers, NullMetrics(), now, SloSpec(), 3600, 1)
            walls.append(time.perf_counter() - t0)
        out.append({"routes": n, "repeats": repeats, "wall_s": [round(min(walls), 3), round(median(walls), 3), round(max(walls), 3)],
                    "dynamodb_calls": sum(counter.calls.values()), "dynamodb_calls_by_operation": dict(sorted(counter.calls.items())),
                    "items_read": counter.items_read, "items_read_per_route": round(counter.items_read / n, 1),
                    "get_metric_data_calls": readers.calls, "metric_queries": readers.queries, "largest_call_queries": readers.largest,
                    "history_items_per_route": per_route, "first_run": first_runs[-1]})
        progress(f"N = {n}: {out[-1]['wall_s'][1]} s median, {out[-1]['items_read_per_route']} items read per route, "
                 f"{readers.calls} GetMetricData calls")
    return out
