"""CollectSignals (every 5 minutes): per route, read S3's RTC metrics (when the deployment reads
them) into the store, evaluate the route's RPO and SLO (health.py) and emit them as metrics."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from replmon.core.clock import Clock
from replmon.core.defaults import DEFAULTS
from replmon.core.keys import iso_ms
from replmon.core.partitions import RTC, signal_partition
from replmon.core.ports import LatencyTable, MetricReaders, MetricsSink
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.core.route import Route
from replmon.core.telemetry import ROUTE
from replmon.signals.health import RouteHealth, publish_health, route_health
from replmon.signals.rtc import collect_rtc_fleet
from replmon.signals.slo import SloSpec, check_budget

log = logging.getLogger("replmon")


def collect(routes: Sequence[Route], store: LatencyTable, readers: MetricReaders | None, metrics: MetricsSink, now: float,
            spec: SloSpec, window: float, retention_days: int) -> list[RouteHealth]:
    """Every route's RTC metrics in batched reads (each metric in the Region S3 publishes it, at most
    500 queries a GetMetricData call; signals/rtc.py), stored; then per route RPO and SLO, emitted. A
    route whose RTC read fails is still evaluated from probes and events (RtcReadFailed, logged)."""
    rtc = collect_rtc_fleet(readers, routes, now) if readers is not None else None
    if rtc is not None:
        log.info("RTC metrics read", extra={"routes": len(routes), "get_metric_data_calls": rtc.calls, "failed_routes": len(rtc.failed)})
    out = []
    for route in routes:
        if rtc is not None and route.name in rtc.failed:  # CloudWatch down or denied there: the rest of the evaluation stands
            log.warning("RTC metrics unavailable", extra={"route": route.name, "error": rtc.failed[route.name]})
            metrics.count("RtcReadFailed", dimensions={ROUTE: route.name})
        elif rtc is not None:
            for s in rtc.samples.get(route.name, []):  # a store failure is not an RTC failure: it fails the run
                store.put_item({PARTITION_KEY: signal_partition(route.name, RTC), SORT_KEY: f"{iso_ms(now)}#{s.destination}#{s.rule_id}",
                                **s.to_item(), TTL_ATTRIBUTE: int(now + retention_days * 86_400)})
        h = route_health(store, route.name, now, spec, window, save_cache=True)
        publish_health(metrics, h)
        out.append(h)
    return out


class CollectorDeps(Protocol):
    """What CollectSignals needs (the composition root's ``Deps`` has it)."""

    store: LatencyTable
    metric_readers: MetricReaders | None
    metrics: MetricsSink
    clock: Clock
    slo: SloSpec
    rpo_window: float
    retention_days: int
    defaults: dict[str, Any]  # REPLMON_DEFAULTS: sizes and trials make the SLO's sample

    @property
    def routes(self) -> list[Route]: ...


def probes_per_run(defaults: Mapping[str, Any]) -> int:
    """Probes one scheduled run makes of each route: sizes x trials (REPLMON_DEFAULTS, else defaults.json)."""
    sizes = defaults.get("sizes", DEFAULTS.sizes)
    count = len(sizes) if isinstance(sizes, list) else len([s for s in str(sizes).split(",") if s.strip()])
    return count * int(defaults.get("trials", DEFAULTS.trials))


def collect_step(event: Mapping[str, Any], deps: CollectorDeps) -> dict[str, Any]:
    """Scheduled: RTC metrics in, RPO / SLO / burn rates out, for every route of the deployment.
    An SLO the probes cannot support is refused here (ConfigError naming SloTargetPercent): the
    collector fails loudly (CollectorHeartbeat goes missing) instead of paging on one slow probe."""
    warning = check_budget(deps.slo, probes_per_run(deps.defaults))
    if warning:
        log.warning("SLO budget is thin", extra={"detail": warning})
    health = collect(deps.routes, deps.store, deps.metric_readers, deps.metrics, deps.clock.now(), deps.slo,
                     deps.rpo_window, deps.retention_days)
    return {"routes": [h.to_json(deps.slo) for h in health]}
