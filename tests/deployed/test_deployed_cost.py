"""`replmon cost` against what the deployed stack really does: one stepped hour of the fleet
(tests/deployed/scenario.py: the tagged cross-Region pair and the stack's own route, 1KiB@5m, a
heartbeat a minute, the collector every 5 minutes), counted by replmon.local.costcount, and the
model (cost/fleet.py fleet_estimate) for the same deployment, each line within 5 %.

The model is given the harness's conditions, not pricing.json's guesses: its replication latency
(the harness replicates in 4 s), a HEAD and an API call taking no time (moto answers at once: the
stepped clock does not move), and the Heartbeat's slowest heartbeat at that latency. What is
compared is what the model derives from the code: which calls, how many, how long a poll or a
Heartbeat invocation runs, which series exist for how many hours and which of them each Metrics
Insights alarm analyzes.

CloudWatch bills a custom metric for each hour it receives data, prorated, and Lambda by the
GB-second ("Amazon CloudWatch pricing", https://aws.amazon.com/cloudwatch/pricing/; "AWS Lambda
pricing", https://aws.amazon.com/lambda/pricing/). Not counted here (no emulation bills them):
DynamoDB request units (their size depends on item sizes the harness does not price), X-Ray traces,
log bytes, S3's own replication metrics (AWS publishes them) and the probes' Step Functions
transitions (they run in the Map's child workflows, whose histories moto does not list); the
execution's own transitions are counted from its history (every state entered: "AWS Step Functions
pricing", https://aws.amazon.com/step-functions/pricing/).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator
from typing import Any

import pytest

from replmon.core.cadence import ProbeClasses
from replmon.cost.estimate import RUN_INVOCATIONS, RUN_TRANSITIONS, pricing
from replmon.cost.fleet import MI_LINE, fleet_estimate, heartbeat_invocation_line, metric_months_per_route
from replmon.local.costcount import Counts, count, function_memory
from replmon.local.stack import DeployedStack
from replmon.signals.health import budget_hour
from tests.deployed.scenario import deployed

pytestmark = pytest.mark.deployed

TOLERANCE = 0.05
HARNESS_LATENCY = 4.0  # DeployedStack's replication latency (Replication.latency)
PROBE_STEPS = ("UploadProbe", "PollReplication", "RecordResult", "Cleanup", "EndRouteRun")
RUN_STEPS = ("PlanProbes", "BeginRouteRun", "Housekeeping")
PUT_CLASS = {"PutObject", "CopyObject", "UploadPart", "UploadPartCopy", "CreateMultipartUpload", "CompleteMultipartUpload",
             "ListObjectVersions", "ListMultipartUploads", "ListObjectsV2"}
GET_CLASS = {"HeadObject", "GetObject"}


@pytest.fixture(scope="module")
def hour() -> Iterator[tuple[DeployedStack, Counts]]:
    """Twenty minutes to settle (the first runs, the first collector, and the routes' history: a
    probe's first HEAD waits for what its route's last 3 probes make implausible), then one hour
    counted: the steady state the model prices."""
    # Placed so the counted hour is one whole hour 0 mod 6, whatever the time of day: ErrorBudgetRemaining is
    # emitted in those hours only (signals/health.py budget_hour), and a window across two hours would count it
    # in one hour of the model's rule and not the other.
    every = 6 * 3600
    # CollectSignals evaluates routes on 16 threads; in this one process they starve the executions the
    # driver watches for QUIET_SECONDS of real time (replmon.local.stack), which it then takes as parked and
    # steps past, so polls wake late and count HEADs a real poller would not make. One thread here: the
    # collector's own calls and series are the same, and none of the compared Lambda lines is the collector's.
    with pytest.MonkeyPatch.context() as mp, deployed(start=(time.time() // every + 8) * every - 20 * 60) as stack:
        mp.setattr("replmon.signals.collector.WORKERS", 1)
        stack.advance(minutes=20)
        since = stack.clock.now()
        stack.advance(hours=1)  # a Heartbeat fired on the last minute may still step the clock a few seconds on
        routes = len([r for r in stack.registry() if r.probing])
        yield stack, count(stack, since, since + 3600, routes)


def replicas(stack: DeployedStack, c: Counts, function: str) -> int:
    """Replica PUTs S3 made for ``function``'s uploads in the window (billed at the destination)."""
    uploaded = {call.params["Key"] for call in stack.calls
                if call.function == function and call.operation == "PutObject" and c.since <= call.at < c.until}
    return sum(1 for (_dst, key, _v) in stack._replicas if key in uploaded)


def steady(values: list[float] | list[int]) -> float:
    """The median probe's figure. A poll sleeps in the state machine's thread, parked at the driver's
    horizon (replmon.local.stack); on a loaded machine the driver may take an execution as waiting a
    moment early (QUIET_SECONDS of real time) and step on, so now and then one poll wakes late and
    its HEAD schedule shifts: an artefact of the emulation, not of the code, which the median probe
    does not carry."""
    return float(statistics.median(values))


def calls(c: Counts, functions: tuple[str, ...], operations: set[str]) -> int:
    return sum(n for (f, _s, op), n in c.calls_by_function.items() if f in functions and op in operations)


def expert(stack: DeployedStack) -> Any:
    """The stack's ExpertSettings (probe classes and the other expert knobs live there)."""
    from replmon.core.expert import load_expert

    return load_expert(stack.parameters["ExpertSettings"])


def collector_rate(stack: DeployedStack) -> int:
    """CollectSignals' schedule, minutes: fixed in template.yaml's Fixed mapping."""
    return int(stack.template["Mappings"]["Fixed"]["Settings"]["CollectorRateMinutes"])


def lines(stack: DeployedStack, c: Counts) -> list[tuple[str, float, float]]:
    """(line, model $ per route-month, counted $ per route-month) of every line the count covers."""
    p = pricing()["prices"]
    step_seconds = [s for f in ("UploadProbe", "RecordResult", "Cleanup", "EndRouteRun") for s in c.seconds.get(f, [])]
    assumptions = {"replication_base_seconds": HARNESS_LATENCY, "head_seconds": 0.0, "heartbeat_slowest_seconds": HARNESS_LATENCY,
                   "other_step_seconds": sum(step_seconds) / len(step_seconds), "upload_mib_per_s": 1e9}
    classes = ProbeClasses.parse(expert(stack).probe_classes)
    est = fleet_estimate(c.routes, classes, rtc=True, heartbeat_seconds=60, schedule_rate_minutes=stack.parameters["ScheduleRateMinutes"],
                         collector_rate_minutes=collector_rate(stack), assumptions=assumptions)
    model = {x.item: x for x in est.per_route_lines}
    month = c.per_route_month
    executions = c.invocations["PlanProbes"]
    out: list[tuple[str, float, float]] = []

    # S3 requests of the probes (the run's Housekeeping sweep is per route) and of the heartbeats
    put = calls(c, (*PROBE_STEPS, "Housekeeping"), PUT_CLASS) + replicas(stack, c, "UploadProbe")
    out.append(("S3 PUT/COPY/LIST requests", model["S3 PUT/COPY/LIST requests"].dollars, month(put) / 1000 * p["s3_put_copy_post_list_per_1000"]))
    # per probe, the median probe's HEADs (see :func:`steady`)
    heads: dict[str, int] = {}
    for call in stack.calls:
        if call.function in PROBE_STEPS and call.operation in GET_CLASS and c.since <= call.at < c.until:
            heads[call.params["Key"]] = heads.get(call.params["Key"], 0) + 1
    get = steady(list(heads.values())) * c.invocations["UploadProbe"]
    out.append(("S3 GET/HEAD requests", model["S3 GET/HEAD requests"].dollars, month(get) / 1000 * p["s3_get_head_per_1000"]))
    hb_put = calls(c, ("Heartbeat",), {"PutObject"}) + replicas(stack, c, "Heartbeat")
    item = "Heartbeats: S3 PUT (source and replica)"
    out.append((item, model[item].dollars, month(hb_put) / 1000 * p["s3_put_copy_post_list_per_1000"]))
    item = "Heartbeats: S3 HEAD (source and replica)"
    out.append((item, model[item].dollars, month(calls(c, ("Heartbeat",), GET_CLASS)) / 1000 * p["s3_get_head_per_1000"]))

    # Step Functions: the execution's own states (its history; the Map's child workflows' histories
    # are not listed by moto, so the probes' transitions are not counted), once per tick: fixed
    ticks = 720 * 60 / stack.parameters["ScheduleRateMinutes"]
    out.append(("Probe runs' own transitions (per tick, fixed)", ticks * RUN_TRANSITIONS / 1000 * p["sfn_per_1000_transitions"],
                ticks * c.transitions / c.executions / 1000 * p["sfn_per_1000_transitions"]))
    # the RTC fee: the bytes S3 replicated for the probes and for the heartbeats
    gib = c.replicated_bytes["UploadProbe"] / 2**30
    out.append(("S3 RTC fee", model["S3 RTC fee"].dollars, month(gib) * p["s3_rtc_per_gb"]))
    gib = c.replicated_bytes["Heartbeat"] / 2**30
    out.append(("Heartbeats: S3 RTC fee", model["Heartbeats: S3 RTC fee"].dollars, month(gib) * p["s3_rtc_per_gb"]))

    # Lambda: the probes' steps per route (the run's own steps are one execution a tick: fixed)
    n = sum(c.invocations[f] for f in PROBE_STEPS + RUN_STEPS) - RUN_INVOCATIONS * executions
    out.append(("Lambda requests", model["Lambda requests"].dollars, month(n) / 1e6 * p["lambda_per_million_requests"]))
    run_gb = sum(c.gb_seconds.get(f, 0.0) for f in RUN_STEPS) + executions * min(c.seconds["EndRouteRun"]) * 0.25
    gb = sum(c.gb_seconds.get(f, 0.0) for f in PROBE_STEPS + RUN_STEPS) - run_gb
    polls = c.seconds["PollReplication"]  # the median poll (see :func:`steady`), at PollReplication's memory
    gb += (steady(polls) - sum(polls) / len(polls)) * len(polls) * function_memory(stack.template)["PollReplication"] / 1024
    out.append(("Lambda duration (arm64)", model["Lambda duration (arm64)"].dollars, month(gb) * p["lambda_arm_per_gb_second"]))

    # CloudWatch: replmon's per-route series and their hours (S3's own RTC metrics apart), and what the MI alarms analyze
    months = metric_months_per_route(classes, rtc=False)
    hours = round(c.hours)
    share = sum(budget_hour(c.since + 3600 * h) for h in range(hours)) / hours
    if "ErrorBudgetRemaining" in months:  # this window's hours, by the model's rule (hours = 0 mod 6)
        months["ErrorBudgetRemaining"] = share
    out.append(("CloudWatch metrics (replmon's per-route series)", sum(months.values()) * p["cloudwatch_per_metric_month"],
                c.metric_hours_per_route() * p["cloudwatch_per_metric_month"]))
    out.append((MI_LINE, model[MI_LINE].dollars, c.analyzed_hours_per_route() * p["cloudwatch_per_mi_alarm_metric_month"]))

    # the collector's GetMetricData: metrics requested per route and run (every route it judged)
    judged = max(len(i.result["routes"]) for i in stack.invocations if i.function == "CollectSignals" and isinstance(i.result, dict))
    queries = sum(len(call.params.get("MetricDataQueries", [])) for call in stack.calls
                  if call.function == "CollectSignals" and call.operation == "GetMetricData" and c.since <= call.at < c.until)
    modelled = 720 * 60 / collector_rate(stack) * pricing()["assumptions"]["s3_replication_metrics_per_rule"]
    out.append(("CollectSignals GetMetricData (metrics requested)", modelled / 1000 * p["cloudwatch_getmetricdata_per_1000_metrics"],
                queries / judged / c.hours * 720 / 1000 * p["cloudwatch_getmetricdata_per_1000_metrics"]))

    # the Heartbeat function, per group (fixed): its invocations' GB-seconds
    line = heartbeat_invocation_line(1, c.routes, HARNESS_LATENCY, 0.0)
    counted = c.gb_seconds["Heartbeat"] / c.hours * 720 * p["lambda_arm_per_gb_second"] + c.invocations["Heartbeat"] / c.hours * 720 \
        * p["lambda_per_million_requests"] / 1e6
    out.append(("Heartbeat function (per group)", line.dollars, counted))
    return out


def table(rows: list[tuple[str, float, float]]) -> str:
    out = ["| line | model $ | counted $ | diff % |", "| --- | ---: | ---: | ---: |"]
    for item, model, counted in rows:
        out.append(f"| {item} | {model:.4f} | {counted:.4f} | {diff(model, counted):+.1f} |")
    return "\n".join(out)


def diff(model: float, counted: float) -> float:
    return 0.0 if model == counted else 100 * (model - counted) / (counted or model)


def test_each_cost_line_of_the_model_is_within_5_percent_of_what_the_stack_did(hour: tuple[DeployedStack, Counts]) -> None:
    stack, c = hour
    rows = lines(stack, c)
    print("\n" + table(rows))
    assert len(rows) >= 13 and all(counted > 0 for _, _, counted in rows), rows
    off = [(item, round(diff(m, k), 1)) for item, m, k in rows if abs(diff(m, k)) > 100 * TOLERANCE]
    assert off == [], table(rows)


def test_the_count_sees_what_runs_per_route(hour: tuple[DeployedStack, Counts]) -> None:
    """The counter counts: a probe every 5 minutes and a heartbeat a minute on each route, the
    collector's runs, the alarms' analyzed series only for the continuous metrics of a healthy route."""
    _stack, c = hour
    assert c.invocations["UploadProbe"] == 12 * c.routes and c.invocations["Heartbeat"] == 60
    assert c.invocations["CollectSignals"] == 12
    assert {a for a, m in c.analyzed.items() if m} == {"RpoAboveTargetG00Alarm", "RouteStalledG00Alarm"}
    names = {s[0] for s in c.per_route_series()}
    assert names == {"RpoSeconds", "StallSeconds", "ReplicationLatencySeconds"} | ({"ErrorBudgetRemaining"} & names), names
    assert 40 <= sum(c.seconds["Heartbeat"]) / len(c.seconds["Heartbeat"]) * 10 <= 60  # about 4-6 s: its heartbeats settle, it returns
