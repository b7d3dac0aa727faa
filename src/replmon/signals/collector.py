"""CollectSignals (every 5 minutes): per registry route (probe or passive mode, core/measured.py),
read S3's RTC metrics (when the deployment reads them) into the store, evaluate the route's RPO and
SLO (health.py) and emit them as metrics. A route without an RPO input publishes no RpoSeconds (no
data is not an RPO of 0); a probe-mode route that has had none for longer than its class interval
publishes RouteNoData = 1, which tickets (fleet/alarms.py).

**At scale** (docs/BENCH-COLLECTOR.md): the routes are read ``WORKERS`` at a time (a boto3 client is
thread-safe; the metrics are emitted from the calling thread), and each route reads a bounded
number of items whatever the state of its period cache: a cache that is missing or behind folds at
most ``CATCH_UP_HOURS`` hour items a run (slo_rollup.py ``fold_period``; the period's attainment
and budget are published once it has caught up, its burn rates at once), and a late write carries
its own counts to the cache (signals/rollup.py ``late_period_add``) instead of forcing a rebuild."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from replmon.core.clock import Clock
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import iso_ms
from replmon.core.measured import measured_read, no_data_limit, require_registry
from replmon.core.partitions import RTC, signal_partition
from replmon.core.ports import LatencyTable, MetricReaders, MetricsSink, RegistryStore
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.core.registry import InvalidRoute, note_invalid
from replmon.core.route import Route
from replmon.core.telemetry import ROUTE
from replmon.signals.health import RouteHealth, had_data, publish_health, route_health
from replmon.signals.rtc import RtcSample, Series, collect_rtc_fleet
from replmon.signals.slo import SloSpec, slo_for_route
from replmon.signals.slo_rollup import save_sparse_up

log = logging.getLogger("replmon")

#: Routes read at once. Each read is a round trip of a few ms; CPU is the parsing (the function's
#: MemorySize sets its share of a vCPU).
WORKERS = 16
#: Older hour items a route's period cache folds at most per run: with the read hours (7-8), the
#: period item, the records of the RPO window and the heartbeat state, a route reads <= 20 items.
CATCH_UP_HOURS = 6
#: The points a stored RTC collection keeps (the Report function and `replmon report` read them back).
STORED_LOOKBACK = 900


def trimmed(sample: RtcSample, since: float) -> RtcSample:
    """The collection as stored: each series' points since ``since`` (what a 15-minute read held)."""
    return dataclasses.replace(sample, series={m: Series(s.metric, [p for p in s.points if p[0] >= since]) for m, s in sample.series.items()})


def collect(routes: Sequence[Route], store: LatencyTable, readers: MetricReaders | None, metrics: MetricsSink, now: float,
            spec: SloSpec, window: float, retention_days: int, no_data_limits: Mapping[str, float] | None = None,
            slos: Mapping[str, SloSpec | None] | None = None, groups: Mapping[str, str] | None = None) -> list[RouteHealth]:
    """Every route's RTC metrics in batched reads (each metric in the Region S3 publishes it, at most
    500 queries a GetMetricData call; signals/rtc.py), stored; then per route RPO and SLO, emitted. A
    route whose RTC read fails is still evaluated from probes and events (RtcReadFailed, logged).
    ``no_data_limits``: route -> seconds it may go without an RPO input (core/measured.py); those
    routes get RouteNoData = 1 past the limit (and one 0 when that ends), the rest none. ``slos``: route -> the
    SLO it is judged with (signals/slo.py ``slo_for_route``; None: its probes support no target, so it
    publishes no error budget or burn rate); a route not named is judged with ``spec``. A route whose
    own reads fail (a throttled or denied key) is left out of the answer and marked alone,
    ``InvalidRoute{RouteGroup (from ``groups``), Route, Reason=ReadFailed}``; every route failing is
    the store, not a route: the first error is raised and the run fails."""
    # the whole RPO window in this read (GetMetricData is billed per metric, not per point), so a route's
    # RTC input comes from this run's samples and the stored collections are not read back
    rtc = collect_rtc_fleet(readers, routes, now, lookback=max(STORED_LOOKBACK, window)) if readers is not None else None
    if rtc is not None:
        log.info("RTC metrics read", extra={"routes": len(routes), "get_metric_data_calls": rtc.calls, "failed_routes": len(rtc.failed)})

    def evaluate(route: Route) -> RouteHealth:
        fresh = None  # None: read the stored collections (no RTC read this run, or it failed for this route)
        if rtc is not None and route.name not in rtc.failed:
            fresh = rtc.samples.get(route.name, [])
            for s in fresh:  # a store failure is not an RTC failure: it fails the run
                store.put_item({PARTITION_KEY: signal_partition(route.name, RTC), SORT_KEY: f"{iso_ms(now)}#{s.destination}#{s.rule_id}",
                                **trimmed(s, now - STORED_LOOKBACK).to_item(), TTL_ATTRIBUTE: int(now + retention_days * 86_400)})
        judged = (slos or {}).get(route.name, spec)
        h = route_health(store, route.name, now, judged or spec, window, save_cache=True, catch_up=CATCH_UP_HOURS, rtc_samples=fresh)
        h.slo_judged = judged is not None
        limit = (no_data_limits or {}).get(route.name)
        if limit is not None:
            h.no_data = not h.has_data and not had_data(store, route.name, now, limit)
        return h

    def isolated(route: Route) -> RouteHealth | Exception:
        try:
            return evaluate(route)
        except Exception as exc:  # this route's reads or writes only: the others are judged
            return exc

    with ThreadPoolExecutor(max(1, min(WORKERS, len(routes)))) as pool:
        results = list(pool.map(isolated, routes))  # in the routes' order
    failed = [(route, r) for route, r in zip(routes, results, strict=True) if isinstance(r, Exception)]
    if failed and len(failed) == len(routes):
        raise failed[0][1]
    for route, exc in failed:
        note_invalid(metrics, InvalidRoute((groups or {}).get(route.name, "g00"), route.name, "ReadFailed", "(reads)",
                                           f"{type(exc).__name__}: {exc}"))
    out = [r for r in results if not isinstance(r, Exception)]
    for route, h in ((route, r) for route, r in zip(routes, results, strict=True) if not isinstance(r, Exception)):
        if rtc is not None and route.name in rtc.failed:  # CloudWatch down or denied there: the rest of the evaluation stands
            log.warning("RTC metrics unavailable", extra={"route": route.name, "error": rtc.failed[route.name]})
            metrics.count("RtcReadFailed", dimensions={ROUTE: route.name})
        up = publish_health(metrics, h, now)
        if h.sparse_up is not None and up != h.sparse_up:  # a sparse signal rose or fell back: kept for the next run's 0
            try:
                save_sparse_up(store, route.name, h.period_item, up)
            except Exception as exc:  # this route's write only: the next run compares again and writes again (a
                # signal still up is emitted anyway; one that fell back may emit its 0 once more), so it is logged, not fatal
                log.warning("sparse signal flags not kept", extra={"route": route.name, "error": f"{type(exc).__name__}: {exc}"})
    return out


class CollectorDeps(Protocol):
    """What CollectSignals needs (the composition root's ``Deps`` has it)."""

    store: LatencyTable
    registry: RegistryStore | None
    fleet: FleetSettings
    metric_readers: MetricReaders | None
    metrics: MetricsSink
    clock: Clock
    slo: SloSpec
    rpo_window: float
    retention_days: int


def collect_step(event: Mapping[str, Any], deps: CollectorDeps) -> dict[str, Any]:
    """Scheduled (``{}``: every RouteGroup; ``{"group": "g00"}``: one): RTC metrics in, RPO / SLO /
    burn rates out, for every registry route in probe or passive mode. Each route is judged at the SLO
    target its own probe classes support (signals/slo.py ``slo_for_route``, the rule PlanProbes
    tickets as SloUnsupported); a route whose probes support none publishes no budget or burn rate,
    so one slow probe of a thin sample never pages."""
    group = event.get("group")
    if group is not None and group not in deps.fleet.groups:
        raise ConfigError(f"group: {group!r} is not a RouteGroup of this deployment ({', '.join(deps.fleet.groups)}); "
                          'omit it for every group, or pass {"group": "g00"}')
    registry = require_registry(deps.registry, "CollectSignals")
    read = measured_read(registry, [group] if group else deps.fleet.groups)  # one bad item or group costs only itself
    for bad in read.invalid:  # PlanProbes counts invalid items (InvalidRoute); a group unread here is this run's finding
        if bad.reason == "ReadFailed":
            note_invalid(deps.metrics, bad)
        else:
            log.warning("registry item not collected: " + bad.line(), extra={"route": bad.name, "field": bad.field})
    routes, limits, slos, groups = [], {}, {}, {}
    for spec in read.routes:
        try:
            routes.append(spec.to_route(deps.fleet.member_role_prefix))
        except (ConfigError, ValueError) as exc:  # one bad item must not stop the fleet's signals
            log.error("registry route not collected", extra={"route": spec.name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        groups[spec.name] = spec.group
        slos[spec.name] = slo_for_route(spec, deps.fleet, deps.slo) if spec.probing else None
        limit = no_data_limit(spec, deps.fleet.classes, deps.fleet.tick_seconds)
        if limit is not None:
            limits[spec.name] = limit
    health = collect(routes, deps.store, deps.metric_readers, deps.metrics, deps.clock.now(), deps.slo,
                     deps.rpo_window, deps.retention_days, limits, slos, groups)
    judged = {h.route for h in health}
    skipped = [b.to_json() for b in read.invalid] + [{"name": r.name, "group": groups[r.name], "reason": "ReadFailed",
                                                      "field": "(reads)"}
                                                     for r in routes if r.name not in judged]
    return {"routes": [h.to_json(slos.get(h.route) or deps.slo) for h in health], "skipped": skipped}
