"""The collector at fleet scale (docs/BENCH-COLLECTOR.md): the CollectSignals handler, with the
environment template.yaml gives it (``function_environment``: its Globals and own variables, the
table and DynamoDB Local's endpoint in place of the stack's), over N registry routes in DynamoDB
Local; its wall time, DynamoDB calls and the items each route read (DynamoDB's own ``ScannedCount``
of every Query, one per GetItem that found its item, counted per route by partition key).

**What is loaded**, per route, is what a run reads and no more (a run reads a bounded number of
items per route whatever the history, signals/collector.py), generated the way the write path
writes it (signals/rollup.py ``record_ops``):

- its registry item (``replmon fleet put``'s ``put_explicit``), default ``ProbeClasses``;
- hour items (their counters; the last two hours hold a heartbeat a minute): the newest
  ``KEEP_HOURS`` (the read hours and the one folded next) and the ``KEEP_HOURS`` starting
  ``COLD_HOURS`` ago (where a lost cache's catch-up starts); and the probe records of the RPO window
  (the last two hours);
- the period cache (``<route>#roll`` / ``period``) as the collector leaves it: every hour of the
  30-day period folded through ``H - 7 h``, the probes judged and good in each.

No raw records older than the RPO window and no heartbeat records (the RPO reads the heartbeats'
entries in the hour items): nothing a run reads is left out (a test checks the bound on 30 days of
everything, tests/test_collector_scale.py). The phases: ``steady`` (``repeats`` runs), ``late``
(a record written 3 days late on every route, then one run: its counts ride on the period item),
``cold`` (every route's period cache deleted, then one run: each folds its ``CATCH_UP_HOURS``
oldest hour items).

**CloudWatch** is a recording stand-in (an idle route's replication metrics: no points); the
template's ``REPLMON_READ_RTC`` is kept, so the calls are counted. The EMF the handler prints is
counted, not kept. Nothing is sent anywhere but DynamoDB Local.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from replmon.core.cadence import ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.core.keys import HEARTBEAT_SIZE_BYTES, HEARTBEAT_SIZE_CLASS, RUN_STAMP, heartbeat_probe_id, heartbeat_run_id
from replmon.core.ports import MetricQuery, MetricSeries, ReaderKey
from replmon.core.record import PARTITION_KEY, SORT_KEY, ProbeRecord, ProbeStatus
from replmon.lab.servers import LabError

__all__ = ["CallCounter", "function_environment", "history_items", "load", "run_collector_bench"]

#: Hours of hour items loaded per route (what a cold run's catch-up reads from, at its oldest end).
COLD_HOURS = 72
#: Hour items loaded at each end of those hours (the rest are generated, not loaded: see ``_kept``).
KEEP_HOURS = 9
#: The RPO window's records (signals/health.py: the window, the probe interval and a Lambda's 15 minutes).
RECORD_HOURS = 2.0
LOAD_THREADS = 4
LAB_ACCOUNT = "111111111111"  # the registry's account label (nothing is called in it)
LOAD_ATTEMPTS = 8


@dataclass
class CallCounter:
    """A boto3 DynamoDB client's calls by operation and the items each read returned, per route
    (the partition key's route: ``<route>#roll`` -> ``<route>``), from botocore's events."""

    calls: dict[str, int] = field(default_factory=dict)
    items_read: int = 0
    by_route: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)  # "<operation> <partition kind>" -> calls (``#roll``, ``#live``...)
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, client: Any) -> None:
        client.meta.events.register("provide-client-params.dynamodb", self._params)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _params(self, params: dict[str, Any], **_: Any) -> None:
        self._local.params = params

    @staticmethod
    def _route(params: Mapping[str, Any]) -> str | None:
        pk = (params.get("Key") or {}).get(PARTITION_KEY) or {}
        if not pk:
            values = params.get("ExpressionAttributeValues") or {}
            pk = values.get(":p") or values.get(":r") or {}
        value = pk.get("S") if isinstance(pk, dict) else None
        return None if value is None else str(value).split("#", 1)[0] or value

    def _after(self, http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        n = 0
        if model.name in ("Query", "Scan"):
            n = int(parsed.get("ScannedCount", parsed.get("Count", 0)))
        elif model.name == "GetItem" and parsed.get("Item"):
            n = 1
        params = getattr(self._local, "params", {}) or {}
        route = self._route(params)
        pk = str(((params.get("Key") or {}).get(PARTITION_KEY) or {}).get("S") or
                 ((params.get("ExpressionAttributeValues") or {}).get(":p") or (params.get("ExpressionAttributeValues") or {}).get(":r")
                  or {}).get("S") or ((params.get("Item") or {}).get(PARTITION_KEY) or {}).get("S") or "")
        kind = f"{model.name} {'#' + pk.split('#', 1)[1].split('/')[0] if '#' in pk[1:] else ('registry' if pk.startswith('#') else 'records')}"
        with self._lock:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
            self.calls[model.name] = self.calls.get(model.name, 0) + 1
            self.items_read += n
            if route is not None and n:
                self.by_route[route] = self.by_route.get(route, 0) + n

    def reset(self) -> None:
        with self._lock:
            self.calls, self.items_read, self.by_route, self.by_kind = {}, 0, {}, {}

    def per_route(self, routes: Sequence[str]) -> dict[str, float]:
        """Items read per route of ``routes``: max and mean (the registry's own reads are not a route's)."""
        got = [self.by_route.get(r, 0) for r in routes]
        return {"max": max(got, default=0), "mean": round(sum(got) / max(1, len(got)), 1)}


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


def function_environment(function: str, table: str, dynamodb_endpoint: str, parameters: Mapping[str, Any] | None = None) -> dict[str, str]:
    """What Lambda gives ``function`` (template.yaml's Globals and its own variables, resolved with the
    template's defaults), with the lab's table and DynamoDB Local in place of the stack's, and lab keys."""
    from replmon.local.cfn import Resolver
    from replmon.local.template import load_template

    template = load_template()
    env = dict(template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {}))
    env.update(template["Resources"][f"{function}Function"]["Properties"].get("Environment", {}).get("Variables", {}))
    resolver = Resolver(template, parameters, physical={"LatencyTable": table})
    out = {k: str(v) for k, v in resolver.resolve(env).items()}
    out.pop("REPLMON_SPOOL_QUEUE_URL", None)  # nothing the collector sends; no queue in the lab
    out.pop("REPLMON_SPOOL_QUARANTINE_URL", None)
    out.pop("REPLMON_EVIDENCE_TOPIC_ARN", None)
    out.update({"REPLMON_DYNAMODB_ENDPOINT": dynamodb_endpoint, "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "lab", "AWS_SECRET_ACCESS_KEY": "lab", "AWS_LAMBDA_FUNCTION_NAME": function,
                "POWERTOOLS_TRACE_DISABLED": "true"})
    return out


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def bench_route_name(i: int, stamp: str) -> str:
    """Route ``i`` of one bench run (``stamp``: the lab keeps DynamoDB, and a second run must not read the first's items)."""
    return f"bench-{stamp.lower()}-{i:04d}"


def history_items(route: str, now: float, classes: str = DEFAULTS.probe_classes, days: float = DEFAULTS.slo_period_days + 1,
                  heartbeat_hours: float = 2.0, record_hours: float | None = None) -> list[dict[str, Any]]:
    """The route's records as the default schedule leaves them (COMPLETED, latencies of a few seconds),
    and its heartbeats, with the hour items their transactions build (counters, the heartbeats'
    entries); ``record_hours``: only the records of the last that many hours (the hour items all the same),
    and no heartbeat records."""
    from replmon.core.ports import TransactAdd, TransactPut
    from replmon.signals.rollup import record_ops

    out: list[dict[str, Any]] = []
    hours: dict[tuple[str, str], dict[str, Any]] = {}

    def stored(r: ProbeRecord, heartbeat: bool = False) -> None:
        for op in record_ops(r, now=r.put_end or r.planned_at):  # stored on time: no late write
            if isinstance(op, TransactPut):
                if record_hours is None or (not heartbeat and r.planned_at >= now - record_hours * 3600):
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
                           latency_lo=0.4, latency_hi=0.6), heartbeat=True)
        t += 60
    return out + list(hours.values())


def period_item(route: str, now: float, classes: str = DEFAULTS.probe_classes, period_days: int = DEFAULTS.slo_period_days) -> dict[str, Any]:
    """The period cache as the collector leaves it (signals/slo_rollup.py): the period's hours through
    ``H - 7 h``, each with the default schedule's probes judged and good (all good: a few seconds)."""
    from replmon.core.partitions import PERIOD, hour_sort_key, roll_partition
    from replmon.signals.rollup import DGEN, GEN
    from replmon.signals.slo_rollup import CACHED_DGEN, CACHED_GEN, HOURS_PACKED, THROUGH_AT, THROUGH_HOUR, first_read_hour, pack_hours
    from replmon.signals.windows import HOUR_SECONDS, floor_hour, window_start

    fold_to = first_read_hour(now) - HOUR_SECONDS
    start = window_start(period_days * 86_400, now)
    counts: dict[int, int] = {}
    for c in ProbeClasses.parse(classes):
        t = now - (period_days + 1) * 86400
        while t < now:
            hour = floor_hour(t + 1 + c.size_bytes / 2**27)
            if start <= hour <= fold_to:
                counts[int(hour)] = counts.get(int(hour), 0) + 1
            t += c.every_seconds
    return {PARTITION_KEY: roll_partition(route), SORT_KEY: PERIOD, GEN: 0, CACHED_GEN: 0, DGEN: 0, CACHED_DGEN: 0,
            THROUGH_HOUR: hour_sort_key(fold_to), THROUGH_AT: fold_to, HOURS_PACKED: pack_hours({float(h): (n, n) for h, n in counts.items()})}


def _earlier_bench_routes(client: Any, table: str, groups: Sequence[str]) -> list[tuple[str, str]]:
    from replmon.core.partitions import registry_partition

    out: list[tuple[str, str]] = []
    for group in groups:
        query = {"TableName": table, "KeyConditionExpression": "#pk = :p AND begins_with(#sk, :b)", "ProjectionExpression": "#sk",
                 "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
                 "ExpressionAttributeValues": {":p": {"S": registry_partition(group)}, ":b": {"S": "bench-"}}}
        pages: list[dict[str, Any]] = _retrying("reading the registry",
                                                functools.partial(lambda q: list(client.get_paginator("query").paginate(**q)), query))
        out += [(registry_partition(group), i[SORT_KEY]["S"]) for p in pages for i in p["Items"]]
    return out


def _kept(item: Mapping[str, Any], now: float) -> bool:
    """What a run reads of the generated history: the records, the newest ``KEEP_HOURS`` hour items
    (the read hours and the one folded next) and the oldest ``KEEP_HOURS`` (where a cold cache's
    catch-up starts reading); the hour items between are never read by one run and not loaded."""
    from replmon.core.partitions import hour_sort_key
    from replmon.signals.windows import HOUR_SECONDS, floor_hour

    sk = str(item[SORT_KEY])
    if not sk.startswith("h#"):
        return True
    newest = hour_sort_key(floor_hour(now) - (KEEP_HOURS - 1) * HOUR_SECONDS)
    oldest = hour_sort_key(floor_hour(now - COLD_HOURS * 3600) + KEEP_HOURS * HOUR_SECONDS)
    return sk >= newest or sk < oldest


def _retrying(what: str, fn: Callable[[], Any], attempts: int = LOAD_ATTEMPTS) -> Any:
    """``fn()`` with exponential backoff and jitter on any error (DynamoDB Local under load times out);
    after ``attempts``, a LabError that says what failed and what to do."""
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:  # a read timeout, a refused connection, throttling: all retried alike
            if attempt == attempts - 1:
                raise LabError(f"{what}: {type(exc).__name__}: {exc} (after {attempts} attempts with backoff). DynamoDB Local is "
                               "overloaded or gone: run the bench with fewer routes (--routes), or on a quieter machine") from exc
            time.sleep(min(10.0, 0.2 * 2**attempt) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")


def load(client: Any, table: str, items: Sequence[Mapping[str, Any]], *, threads: int = LOAD_THREADS,
         deletes: Sequence[tuple[str, str]] = ()) -> None:
    """BatchWriteItem, 25 items a call, ``threads`` calls at a time; unprocessed items and failed calls
    retried with backoff (:func:`_retrying`)."""
    from replmon.adapters.dynamodb import DynamoLatencyStore

    requests: list[dict[str, Any]] = [{"PutRequest": {"Item": DynamoLatencyStore._item(dict(i))}} for i in items]
    requests += [{"DeleteRequest": {"Key": {PARTITION_KEY: {"S": pk}, SORT_KEY: {"S": sk}}}} for pk, sk in deletes]

    def batch(chunk: list[dict[str, Any]]) -> None:
        pending: dict[str, Any] = {table: chunk}
        for attempt in range(LOAD_ATTEMPTS * 4):
            if not pending:
                return
            answer: dict[str, Any] = _retrying("loading the bench's items (BatchWriteItem)",
                                               functools.partial(client.batch_write_item, RequestItems=pending))
            pending = answer.get("UnprocessedItems") or {}
            if pending:
                time.sleep(min(5.0, 0.05 * 2**attempt))
        raise LabError("loading the bench's items: DynamoDB Local kept items unprocessed; run the bench with fewer routes")

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(batch, [requests[i:i + 25] for i in range(0, len(requests), 25)]))


def loading_client(endpoint: str) -> Any:
    """A client for loading only: long timeouts (DynamoDB Local on a busy host answers a batch late)."""
    from replmon.adapters import clients

    loading = clients.CallClass("bench-load", 10, 120, 3, "the collector bench's loading: DynamoDB Local on a busy host "
                                "answers a batch late", pool=LOAD_THREADS * 2)
    return clients.dynamodb(loading, endpoint_url=endpoint, keys=("lab", "lab"))


def run_collector_bench(dynamodb_endpoint: str, table: str, routes: int, *, repeats: int = 3,
                        progress: Callable[[str], None] = print) -> dict[str, Any]:
    """``routes`` routes registered and loaded (see the module's docstring), then the CollectSignals
    handler: ``repeats`` steady runs, one after a late write on every route, one cold."""
    from statistics import median

    from replmon import wiring
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.registry_table import DynamoRegistry
    from replmon.core.partitions import PERIOD, roll_partition
    from replmon.core.registry import group_of, load_route_spec
    from replmon.entry.collect_signals import handler
    from replmon.local.aslrun import LambdaContext
    from replmon.signals.collector import CATCH_UP_HOURS
    from replmon.signals.rollup import store_record

    env = function_environment("CollectSignals", table, dynamodb_endpoint)
    with environment(env):
        deps = wiring.from_env(os.environ)
    fleet = deps.fleet
    now = time.time()
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now))
    names = [bench_route_name(i, stamp) for i in range(routes)]
    loader = loading_client(dynamodb_endpoint)

    began = time.time()
    registry = DynamoRegistry(table, loader)
    earlier = _earlier_bench_routes(loader, table, fleet.groups)  # the lab keeps DynamoDB: a run judges its own routes only
    if earlier:
        load(loader, table, [], deletes=earlier)
        progress(f"removed {len(earlier)} routes of earlier bench runs from the registry")

    def register(name: str) -> None:
        spec = load_route_spec({"name": name, "origin": "explicit", "group": group_of(name, fleet.route_groups),
                                "source": {"account": LAB_ACCOUNT, "bucket": f"{name}-src", "region": "us-east-1"},
                                "destinations": [{"account": LAB_ACCOUNT, "bucket": f"{name}-dst", "region": "eu-west-1",
                                                  "rule_id": "replmon-probes", "rtc": True, "metrics": True}]})
        _retrying(f"registering route {name}", lambda: registry.put_explicit(spec, None))

    with ThreadPoolExecutor(LOAD_THREADS) as pool:
        list(pool.map(register, names))
    progress(f"registered {routes} routes in {time.time() - began:.1f} s")
    items: list[dict[str, Any]] = []
    for name in names:
        hours = history_items(name, now, days=COLD_HOURS / 24, record_hours=RECORD_HOURS)
        items += [i for i in hours if _kept(i, now)]
        items.append(period_item(name, now))
    per_route_loaded = len(items) // routes
    load(loader, table, items)
    loaded = {"routes": routes, "items": len(items) + routes, "items_per_route": per_route_loaded + 1, "seconds": round(time.time() - began, 1),
              "what": f"per route: its registry item (RTC on its destination), {KEEP_HOURS} hour items at each end of the last "
                      f"{COLD_HOURS} h (the newest: the read hours and the next folded; the oldest: where a lost cache's catch-up starts), "
                      f"the probe records of the last {RECORD_HOURS:g} h, the period cache (30 days folded)"}
    progress(f"loaded {loaded['items']} items ({loaded['items_per_route']} a route) in {loaded['seconds']} s")
    del items

    counter = CallCounter()
    counter.attach(deps.store.client)  # type: ignore[attr-defined]

    def invoke(phase: str) -> dict[str, Any]:
        readers = IdleReaders()
        run_deps = dataclasses.replace(deps, metric_readers=readers)  # CloudWatch's stand-in (the module's docstring)
        counter.reset()
        out = io.StringIO()
        t0, c0 = time.perf_counter(), time.process_time()
        with environment(env), wiring.injected({"CollectSignals": run_deps}), contextlib.redirect_stdout(out):
            result = handler({}, LambdaContext("CollectSignals"))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        judged = sum(1 for r in result["routes"] if r["route"] in set(names))
        per_route = counter.per_route(names)
        row: dict[str, Any] = {"phase": phase, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "routes_evaluated": len(result["routes"]), "bench_routes_evaluated": judged,
               "dynamodb_calls": sum(counter.calls.values()), "dynamodb_calls_by_operation": dict(sorted(counter.calls.items())),
               "dynamodb_calls_by_partition": dict(sorted(counter.by_kind.items())),
               "items_read": counter.items_read, "items_read_per_route": per_route,
               "get_metric_data_calls": readers.calls, "metric_queries": readers.queries, "emf_lines": out.getvalue().count("\n")}
        progress(f"{phase}: {row['wall_s']} s, items read per route max {per_route['max']} mean {per_route['mean']}, "
                 f"{row['dynamodb_calls']} DynamoDB calls")
        return row

    steady = [invoke("steady") for _ in range(repeats)]
    walls = [r["wall_s"] for r in steady]
    store = DynamoLatencyStore(table, loader)
    late_at = now - 3 * 86400  # replayed from a spool three days late: an hour the period cache folded

    def late(name: str) -> None:
        run = time.strftime(RUN_STAMP, time.gmtime(late_at)) + "-late00"
        r = ProbeRecord(route=name, probe_id=f"{run}-{name}-1MiB-t1", run_id=run, planned_at=late_at, size_bytes=2**20, size_class="1MiB",
                        trial=1, status=ProbeStatus.FAILED, put_end=late_at + 1)
        _retrying(f"the late write of {name}", lambda: store_record(store, r, time.time(), threshold_seconds=900.0))

    with ThreadPoolExecutor(LOAD_THREADS) as pool:
        list(pool.map(late, names))
    after_late = invoke("late")
    load(loader, table, [], deletes=[(roll_partition(n), PERIOD) for n in names])  # the caches lost: every route cold
    cold = invoke("cold")
    return {"routes": routes, "repeats": repeats, "loaded": loaded, "catch_up_hours": CATCH_UP_HOURS,
            "steady_wall_s": [round(min(walls), 3), round(median(walls), 3), round(max(walls), 3)],
            "runs": [*steady, after_late, cold], "function_timeout_s": 120, "workers": _workers(),
            "goal": {"routes": 1000, "wall_s": 60, "items_read_per_route": 20}}


def _workers() -> int:
    from replmon.signals.collector import WORKERS

    return WORKERS
