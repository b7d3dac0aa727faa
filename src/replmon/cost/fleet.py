"""What the fleet costs per month for N routes (`replmon cost --routes 1,10,100,1000`), and per route
(:func:`route_monthly_usd`: the planner's monthly ceiling, fleet/caps.py).

*Modelled*, like cost/estimate.py, whose single-route model it reuses: each size class of the
fleet's ``ProbeClasses`` is played as one route's probe schedule at that class's cadence
(:func:`~replmon.cost.estimate.estimate`: the real plan and poller), and its per-probe lines are
counted once per route. The rest is counted from what the code defines:

- **custom metrics** from core/telemetry.py ``FLEET_METRICS`` as emitted today (``SWITCHED``):
  CloudWatch bills a metric for each hour it receives data, so a per-route metric counts as the
  share of hours it is emitted in: continuous ones every hour (``ErrorBudgetRemaining`` in hours
  = 0 mod 6 only: 4 of 24), a class's ``ReplicationLatencySeconds`` in the hours a probe of it
  completes (min(1, 1 h / cadence)), sparse ones (failures) not at all in a healthy month (an
  incident's sparse signal adds its hours, and its fall back one explicit 0: at most one more
  metric-hour and analyzed hour, $0.0006, and one write of the period item, per transition); plus
  S3's own replication metrics (4 per rule with RTC, billed as custom metrics);
- **Metrics Insights alarms** (fleet/alarms.py, per RouteGroup): priced per metric analyzed, a basis
  AWS's pricing page (as stored) names without its rate or proration (pricing.json
  ``cloudwatch_mi_alarms``). The line is priced on the assumed basis, ``hours-with-data``: $0.10 per
  metric-month analyzed, an alarm analyzing a route's series only in the hours it has data (a sparse
  metric at 0 costs nothing; a fall back to 0 adds one datapoint-hour); :func:`mi_alarm_range` gives
  it with the other plausible basis, ``every-alarm-whole-month`` (each of the group's alarms bills
  every route a whole month), which `replmon cost` shows beside it; the stack's other alarms at the
  standard rate;
- **the collector**: per route, the S3 replication metrics it reads (GetMetricData) and the SLO's
  rollups (the period cache and 7 hour items: estimate.py ``slo_read_units``), every run.

A run's own steps (the execution's PlanProbes, BeginRouteRun, Housekeeping, EndRouteRun and their
transitions) are counted once per tick, fixed: in the fleet one tick's execution serves every route.
Checked against what the deployed stack really does (local/costcount.py, tests/deployed/
test_deployed_cost.py): within 5 % on each line it counts.

>>> from replmon.core.cadence import ProbeClasses
>>> one, hundred = (fleet_estimate(n, ProbeClasses.parse("1MiB@1h")) for n in (1, 100))
>>> round(hundred.per_route - one.per_route, 6) == 0   # linear in N: one marginal cost per route
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from replmon.core.cadence import ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.core.telemetry import CONTINUOUS, FLEET_METRICS, PER_PROBE, PER_ROUTE, PER_ROUTE_CLASS, SWITCHED
from replmon.cost.estimate import RUN_INVOCATIONS, RUN_TRANSITIONS, Line, estimate, pricing, slo_read_units, transfer_rate
from replmon.fleet.alarms import FLEET_ALARMS
from replmon.probe.request import load_request

MONTH_HOURS = 30 * 24
#: The single-route model's lines that scale with each probe (the rest is counted here).
PROBE_LINES = ("Step Functions transitions", "Lambda duration (arm64)", "Lambda requests", "S3 PUT/COPY/LIST requests",
               "S3 GET/HEAD requests", "S3 RTC fee", "DynamoDB writes and reads", "CloudWatch Logs ingestion", "X-Ray traces")
TRANSFER = "S3 inter-region transfer"
#: ErrorBudgetRemaining is emitted in hours = 0 mod 6 only (core/telemetry.py).
HOUR_SHARE = {"ErrorBudgetRemaining": 4 / 24}


@dataclass
class FleetEstimate:
    routes: int
    per_route_lines: list[Line] = field(default_factory=list)  # one route's share, per month
    fixed_lines: list[Line] = field(default_factory=list)  # the deployment's, whatever N
    as_of: str = ""
    region: str = ""
    assumptions: dict[str, Any] = field(default_factory=dict)
    ranges: list[PriceRange] = field(default_factory=list)  # per-route lines whose pricing basis is assumed

    @property
    def per_route(self) -> float:
        return sum(x.dollars for x in self.per_route_lines)

    @property
    def per_route_range(self) -> tuple[float, float]:
        """:attr:`per_route` with each :attr:`ranges` line at its low and at its high basis."""
        assumed = {r.item: r.bases[r.assumed] for r in self.ranges}
        base = self.per_route - sum(assumed.values())
        return base + sum(r.low for r in self.ranges), base + sum(r.high for r in self.ranges)

    @property
    def fixed(self) -> float:
        return sum(x.dollars for x in self.fixed_lines)

    @property
    def total(self) -> float:
        return self.routes * self.per_route + self.fixed


def metric_months_per_route(classes: ProbeClasses, rtc: bool, heartbeats: bool = True) -> dict[str, float]:
    """Billed metric-months of one healthy route, by metric (see the module docstring)."""
    out: dict[str, float] = {}
    for m in FLEET_METRICS.values():
        if m.name not in SWITCHED or (m.name == "StallSeconds" and not heartbeats):
            continue  # not emitted with its fleet dimensions (yet), or no heartbeats
        dims = m.dimension_sets[0][1:]  # after Powertools' service
        if dims == PER_ROUTE and m.cadence == CONTINUOUS:
            out[m.name] = HOUR_SHARE.get(m.name, 1.0)
        elif dims == PER_ROUTE_CLASS and m.cadence == PER_PROBE:
            for c in classes:
                out[f"{m.name}[{c.label}]"] = min(1.0, 3600 / c.every_seconds)
    if rtc:
        out["S3 replication metrics (RTC)"] = float(pricing()["assumptions"]["s3_replication_metrics_per_rule"])
    return out


METRICS_LINE = "CloudWatch metrics (metric-months: the hours each is emitted in)"
MI_LINE = "Metrics Insights alarms (per metric analyzed; basis assumed, see the range)"
#: The plausible bases of "per metric analyzed" (pricing.json ``cloudwatch_mi_alarms``), low to high;
#: the line is priced on ``MI_ASSUMED``.
MI_BASES = {
    "hours-with-data": "$0.10 per metric-month analyzed, prorated like a custom metric: a route's series counts in the "
                       "hours it has data, for each alarm whose query matches it (RpoSeconds, StallSeconds when healthy)",
    "every-alarm-whole-month": "$0.10 a month for each of the group's Metrics Insights alarms and each route it evaluates, "
                               "whatever the hours with data (as if each contributor were a standard alarm metric)",
}
MI_ASSUMED = "hours-with-data"


def mi_metrics_analyzed(months: dict[str, float]) -> dict[str, float]:
    """Metric-months the fleet's Metrics Insights alarms analyze for one healthy route: each alarm's
    query matches the route's series of its metric only while that series has data (a sparse metric
    at 0 is not emitted, so not analyzed); priced per metric analyzed (CloudWatch pricing: alarms on
    Metrics Insights queries are charged by the metrics they analyze)."""
    out: dict[str, float] = {}
    for a in FLEET_ALARMS:
        if a.metric in months and not a.where:
            out[a.name] = months[a.metric]
    return out


@dataclass(frozen=True)
class PriceRange:
    """A line whose pricing basis AWS's page does not confirm: its dollars per route-month on each
    plausible basis (``low`` .. ``high``) and the one the estimate assumes."""

    item: str
    low: float
    high: float
    assumed: str
    bases: dict[str, float]  # basis -> $ per route-month

    def to_json(self) -> dict[str, Any]:
        return {"item": self.item, "low_usd": round(self.low, 4), "high_usd": round(self.high, 4), "assumed_basis": self.assumed,
                "bases": [{"basis": b, "usd_per_route_month": round(v, 4), "meaning": MI_BASES[b]} for b, v in self.bases.items()]}


def mi_alarm_range(months: dict[str, float]) -> PriceRange:
    """The Metrics Insights alarm line per route-month on each basis of ``MI_BASES``.

    >>> r = mi_alarm_range({"RpoSeconds": 1.0, "StallSeconds": 1.0})
    >>> round(r.low, 2), round(r.high, 2), r.assumed
    (0.2, 1.6, 'hours-with-data')
    """
    rate = float(pricing()["prices"]["cloudwatch_per_mi_alarm_metric_month"])
    bases = {"hours-with-data": sum(mi_metrics_analyzed(months).values()) * rate,
             "every-alarm-whole-month": len(FLEET_ALARMS) * rate}
    return PriceRange(MI_LINE, min(bases.values()), max(bases.values()), MI_ASSUMED, bases)


#: Heartbeat lines of one route (:func:`heartbeat_lines`): what a route's heartbeats add, apart from the
#: StallSeconds metric and the RouteStalled alarm (counted with the metrics and alarms).
HEARTBEAT_PREFIX = "Heartbeats: "
HEARTBEAT_BYTES = 1024


def heartbeat_lines(period_seconds: int, *, cross_region: bool, rtc: bool, source_region: str | None,
                    assumptions: dict[str, Any] | None = None) -> list[Line]:
    """One route's heartbeats a month (probe/heartbeat.py), modelled at a healthy route: one PUT per
    period (and its replica's PUT, billed at the destination), the HEADs :func:`heartbeat_play` takes at ``replication_base_seconds`` (source,
    then the replica), one DeleteObjects a side (DELETE requests are free), DynamoDB writes (period
    claim, record, state: ``heartbeat_write_units``) and reads (state, in-flight markers), the
    hourly expectation (:func:`expectation_read_units`: 72 hour items, not 72 h of records), the EMF
    log lines; replication bytes (RTC fee, inter-Region transfer) of 1 KiB each. DynamoDB request
    units are modelled from item sizes, not counted: the deployed cost test counts calls, not units."""
    data = pricing()
    p, a = data["prices"], {**data["assumptions"], **(assumptions or {})}
    beats = MONTH_HOURS * 3600 / period_seconds
    heads = heartbeat_play(a["replication_base_seconds"], a["head_seconds"])[1]  # at the route's own latency
    gb = beats * HEARTBEAT_BYTES / 2**30
    learning = learnings_per_month() * expectation_read_units(a)
    lines = [
        Line(f"{HEARTBEAT_PREFIX}S3 PUT (source and replica)", 2 * beats, "requests", 2 * beats / 1000 * p["s3_put_copy_post_list_per_1000"]),
        Line(f"{HEARTBEAT_PREFIX}S3 HEAD (source and replica)", heads * beats, "requests", heads * beats / 1000 * p["s3_get_head_per_1000"]),
        Line(f"{HEARTBEAT_PREFIX}{DYNAMODB_LINE}",
             a["heartbeat_write_units"] * beats + a["heartbeat_read_units"] * beats + learning, "request units",
             a["heartbeat_write_units"] * beats / 1e6 * p["dynamodb_per_million_write_units"]
             + (a["heartbeat_read_units"] * beats + learning) / 1e6 * p["dynamodb_per_million_read_units"]),
        Line(f"{HEARTBEAT_PREFIX}CloudWatch Logs (EMF, two StallSeconds lines a minute)", 2 * MONTH_HOURS * 60 * a["log_bytes_per_invocation"] / 1e9,
             "GB", 2 * MONTH_HOURS * 60 * a["log_bytes_per_invocation"] / 1e9 * p["cloudwatch_logs_per_gb_ingested"]),
    ]
    if rtc:
        lines.append(Line(f"{HEARTBEAT_PREFIX}S3 RTC fee", gb, "GiB replicated", gb * p["s3_rtc_per_gb"]))
    if cross_region:
        lines.append(Line(f"{HEARTBEAT_PREFIX}S3 inter-region transfer", gb, "GiB replicated", gb * transfer_rate(source_region or data["region"])))
    return lines


DYNAMODB_LINE = "DynamoDB (claim, record, state; hourly expectation from 72 hour items; units modelled, not counted)"
#: probe/heartbeat.py ``learn``: a route re-learns once REFRESH_SECONDS plus its own offset (crc32 of its
#: name mod 600 s, 300 s on average) have passed, at the next minute's invocation (30 s on average).
LEARN_OFFSET_MEAN_SECONDS = 300 + 30


def expectation_read_units(a: dict[str, Any]) -> float:
    """Read units of one learning of a route's expectation (signals/expectation.py ``learn_expectation``):
    one strongly consistent Query of its ``LEARN_HOURS`` (72) hour items, billed on their summed size
    per 4 KB.

    >>> expectation_read_units({"hour_item_bytes": 1536})
    27.0
    """
    from replmon.signals.expectation import LEARN_HOURS

    return float(math.ceil(LEARN_HOURS * a["hour_item_bytes"] / 4096))


def learnings_per_month() -> float:
    """How often the Heartbeat re-learns a route's expectation in a month (``LEARN_OFFSET_MEAN_SECONDS``)."""
    from replmon.signals.expectation import REFRESH_SECONDS

    return MONTH_HOURS * 3600 / (REFRESH_SECONDS + LEARN_OFFSET_MEAN_SECONDS)


def heartbeat_play(latency: float, head_seconds: float) -> tuple[float, int]:
    """One heartbeat played from probe/heartbeat.py against a replication of ``latency`` seconds: the
    seconds until nothing is pending (the Heartbeat returns then; a heartbeat still pending keeps it to
    its deadline, WORK_SECONDS after it began) and the HEADs it took (source HEADs on the probe's poll
    policy, probe/polling.py, then the replica's).

    >>> heartbeat_play(4.0, 0.0)[0] < 6.0, heartbeat_play(600.0, 0.0)[0]
    (True, 45.0)
    """
    from replmon.probe.heartbeat import WORK_SECONDS
    from replmon.probe.polling import PollPolicy
    from replmon.probe.request import PollSettings

    settings = PollSettings(use_history=False)
    policy = PollPolicy(settings.floor_seconds, settings.relative)
    t, last, heads = head_seconds, None, 0  # after the PUT
    while t < WORK_SECONDS:
        sent = max(t, policy.next_head_at(last))
        t, heads = sent + head_seconds, heads + 1
        if sent >= latency:  # COMPLETED: the replica's HEAD, then nothing is pending
            return min(WORK_SECONDS, t + head_seconds), heads + 1
        last = sent
    return WORK_SECONDS, heads


def heartbeat_invocation_seconds(latency: float, head_seconds: float) -> float:
    """:func:`heartbeat_play`'s run time."""
    return heartbeat_play(latency, head_seconds)[0]


def heartbeat_invocation_line(route_groups: int, routes_per_group: float, latency: float | None = None,
                              head_seconds: float | None = None) -> Line:
    """The Heartbeat function: one invocation per group a minute at its MemorySize (template.yaml;
    ``heartbeat_memory_mb``, one vCPU), lasting
    :func:`heartbeat_invocation_seconds` at the group's slowest heartbeat (``heartbeat_slowest_seconds``:
    a healthy group; a stalled route keeps every invocation of its group to the 45 s deadline)."""
    data = pricing()
    p, a = data["prices"], data["assumptions"]
    invocations = route_groups * MONTH_HOURS * 60
    # each round's HEADs go through WORKERS threads: a round of a large group takes that many HEADs' time
    from replmon.probe.heartbeat import WORKERS

    rounds = math.ceil(max(1.0, routes_per_group) / WORKERS)
    seconds = heartbeat_invocation_seconds(a["heartbeat_slowest_seconds"] if latency is None else latency,
                                           (a["head_seconds"] if head_seconds is None else head_seconds) * rounds)
    gb_s = invocations * seconds * a["heartbeat_memory_mb"] / 1024
    return Line(f"{HEARTBEAT_FUNCTION}, {seconds:.1f} s each at {a['heartbeat_memory_mb']} MB)", invocations, "invocations",
                gb_s * p["lambda_arm_per_gb_second"] + invocations * p["lambda_per_million_requests"] / 1e6)


HEARTBEAT_FUNCTION = "Heartbeat invocations (one per group a minute"


def stall_metric_and_alarm(est: FleetEstimate) -> float:
    """What the StallSeconds metric and RouteStalled's alarm share add per route (heartbeats on)."""
    p = pricing()["prices"]
    months = est.assumptions.get("metric_months_per_route", {}).get("StallSeconds", 0.0)
    return float(float(months) * (p["cloudwatch_per_metric_month"] + p["cloudwatch_per_mi_alarm_metric_month"]))


def _run_steps(runs: float, a: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """The lines of ``runs`` runs' own steps (estimate.py RUN_TRANSITIONS, RUN_INVOCATIONS): item ->
    (quantity, dollars)."""
    p = pricing()["prices"]
    n = RUN_INVOCATIONS * runs
    gb = n * 0.25 * a["other_step_seconds"]
    return {"Step Functions transitions": (RUN_TRANSITIONS * runs, RUN_TRANSITIONS * runs / 1000 * p["sfn_per_1000_transitions"]),
            "Lambda requests": (n, n / 1e6 * p["lambda_per_million_requests"]),
            "Lambda duration (arm64)": (gb, gb * p["lambda_arm_per_gb_second"]),
            "X-Ray traces": (n, n / 1e6 * p["xray_per_million_traces"]),
            "CloudWatch Logs ingestion": (n * a["log_bytes_per_invocation"] / 1e9,
                                          n * a["log_bytes_per_invocation"] / 1e9 * p["cloudwatch_logs_per_gb_ingested"])}


def fleet_estimate(routes: int, classes: ProbeClasses, *, cross_region: bool = False, rtc: bool = True,
                   source_region: str | None = None, route_groups: int = 1, standard_alarms: int = 7, composite_alarms: int = 0,
                   collector_rate_minutes: float | None = None, heartbeat_seconds: int | None = 60,
                   schedule_rate_minutes: float | None = None, assumptions: dict[str, Any] | None = None) -> FleetEstimate:
    """N routes on ``classes``; ``standard_alarms`` / ``composite_alarms``: the stack's own (the CLI
    counts them in template.yaml), the Metrics Insights alarms apart; ``heartbeat_seconds`` None: no
    heartbeats (the template's ``Heartbeats: disabled``); ``schedule_rate_minutes``: the probe runs'
    tick (one execution a tick serves every due route); ``assumptions`` override pricing.json's."""
    data = pricing()
    p, a = data["prices"], {**data["assumptions"], **(assumptions or {})}
    est = FleetEstimate(routes, as_of=data["as_of"], region=data["region"])
    per: dict[str, Line] = {}

    def add(item: str, quantity: float, unit: str, dollars: float) -> None:
        line = per.setdefault(item, Line(item, 0.0, unit, 0.0))
        line.quantity += quantity
        line.dollars += dollars

    for c in classes:
        request = load_request({"routes": [{"name": "r", "source": {"bucket": "src-bucket"}, "destinations": [{"bucket": "dst-bucket"}]}],
                                "sizes": c.label, "trials": c.trials})
        runs = MONTH_HOURS * 3600 / c.every_seconds
        one = estimate(request, runs, cross_region, rtc, assumptions=assumptions, source_region=source_region)
        own = _run_steps(runs, a)  # the run's own steps: once per tick for the whole fleet (fixed, below)
        for line in one.lines:
            if line.item in PROBE_LINES or line.item.startswith(TRANSFER):
                q, d = own.get(line.item, (0.0, 0.0))
                add(line.item, line.quantity - q, line.unit, line.dollars - d)
    if heartbeat_seconds:
        for line in heartbeat_lines(heartbeat_seconds, cross_region=cross_region, rtc=rtc, source_region=source_region,
                                    assumptions=assumptions):
            add(line.item, line.quantity, line.unit, line.dollars)
    months = metric_months_per_route(classes, rtc, heartbeats=bool(heartbeat_seconds))
    add(METRICS_LINE, sum(months.values()), "metric-months",
        sum(months.values()) * p["cloudwatch_per_metric_month"])
    analyzed = mi_metrics_analyzed(months)
    mi = sum(analyzed.values())
    add(MI_LINE, mi, "metric-months analyzed", mi * p["cloudwatch_per_mi_alarm_metric_month"])
    est.ranges = [mi_alarm_range(months)]
    rate = collector_rate_minutes or a["collector_rate_minutes"]
    collector_runs = MONTH_HOURS * 60 / rate
    window_reads = slo_read_units(a)
    add("CollectSignals per route (GetMetricData, the SLO's rollups, Lambda time)", collector_runs, "runs",
        collector_runs * ((a["s3_replication_metrics_per_rule"] / 1000 * p["cloudwatch_getmetricdata_per_1000_metrics"] if rtc else 0.0)
                          + window_reads / 1e6 * p["dynamodb_per_million_read_units"]
                          # its run time per route at 1,000 routes (lab bench-collector: 24-38 s a run), at its MemorySize
                          + a["collector_memory_mb"] / 1024 * a["collector_seconds_per_route"] * p["lambda_arm_per_gb_second"]))
    est.per_route_lines = list(per.values())
    est.fixed_lines = [
        Line("CloudWatch alarms (the stack's standard alarms)", standard_alarms, "alarms",
             standard_alarms * p["cloudwatch_per_standard_alarm_month"]),
        Line("CollectSignals invocations (one per group and run)", route_groups * collector_runs, "invocations",
             route_groups * collector_runs * p["lambda_per_million_requests"] / 1e6),
        _run_steps_line(MONTH_HOURS * 60 / (schedule_rate_minutes or DEFAULTS.schedule_rate_minutes), a),
        Line("CloudWatch metrics (group-level and fleet-wide, every run)", route_groups * GROUP_METRICS + FLEET_WIDE_METRICS, "metrics",
             (route_groups * GROUP_METRICS + FLEET_WIDE_METRICS) * p["cloudwatch_per_metric_month"]),
        *([heartbeat_invocation_line(route_groups, routes / route_groups, a["heartbeat_slowest_seconds"], a["head_seconds"]),
           Line("Heartbeat liveness alarms (HeartbeatRun, one per group)", route_groups, "alarms",
                route_groups * p["cloudwatch_per_standard_alarm_month"])] if heartbeat_seconds else []),
        Line("Dashboard, composite alarms, KMS key", 1 + composite_alarms + 1, "resources",
             p["cloudwatch_per_dashboard_month"] + composite_alarms * p["cloudwatch_per_composite_alarm_month"] + p["kms_per_key_month"]),
    ]
    est.assumptions = {"probe_classes": str(classes), "metric_months_per_route": {k: round(v, 4) for k, v in months.items()},
                       "metrics_insights_alarms_per_group": len(FLEET_ALARMS),
                       "mi_metric_months_analyzed_per_route": {k: round(v, 4) for k, v in analyzed.items()},
                       "mi_alarm_basis": MI_ASSUMED, "collector_rate_minutes": rate, "heartbeat_seconds": heartbeat_seconds,
                       "probe_lines": "per probe; each run's own steps once per tick (fixed)"}
    return est


#: Group-level series emitted every run of a healthy fleet (core/telemetry.py): HeartbeatRun and
#: ProbeCompleted per RouteGroup; fleet-wide: CollectorHeartbeat, RoutesOverCap, SloUnsupported (and
#: Inventory's RoutesDiscovered, RoutesUnprobeable).
GROUP_METRICS = 2
FLEET_WIDE_METRICS = 5


def _run_steps_line(ticks: float, a: dict[str, Any]) -> Line:
    steps = _run_steps(ticks, a)
    return Line("Probe runs' own steps (one execution a tick for every route)", ticks, "executions", sum(d for _, d in steps.values()))


@lru_cache(maxsize=256)
def _route_usd(classes: str, cross_region: bool, rtc: bool, source_region: str | None, heartbeat_seconds: int | None) -> float:
    return fleet_estimate(1, ProbeClasses.parse(classes), cross_region=cross_region, rtc=rtc, source_region=source_region,
                          heartbeat_seconds=heartbeat_seconds).per_route


def route_monthly_usd(classes: ProbeClasses, *, cross_region: bool, rtc: bool, source_region: str | None = None,
                      heartbeat_seconds: int | None = 60) -> float:
    """One route's modelled monthly cost: :func:`fleet_estimate`'s ``per_route`` (what ``replmon cost``
    adds per route), for its classes, Regions, RTC and heartbeats (cached: the planner asks per route).

    >>> from replmon.core.cadence import ProbeClasses
    >>> c = ProbeClasses.parse("1MiB@1h")
    >>> route_monthly_usd(c, cross_region=False, rtc=True) == fleet_estimate(1, c, rtc=True).per_route
    True
    """
    return _route_usd(str(classes), cross_region, rtc, source_region, heartbeat_seconds)


def fixed_monthly_usd(routes: int, classes: ProbeClasses, *, route_groups: int, heartbeat_seconds: int | None = 60) -> float:
    """The deployment's modelled monthly cost whatever its routes (:func:`fleet_estimate`'s ``fixed``
    at ``routes`` routes: the Heartbeat's invocations grow with the routes per group)."""
    return fleet_estimate(max(1, routes), classes, route_groups=route_groups, heartbeat_seconds=heartbeat_seconds).fixed
