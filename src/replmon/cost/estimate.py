"""What a probe schedule costs per month, before anyone deploys it (`replmon cost`).

The estimate is *modelled*: it expands the request with the same plan the state machine uses
(:func:`replmon.probe.plan.plan_probes`), plays each probe's polling with the same policy and poller
(:func:`replmon.probe.poll.poll_replication`) against a modelled latency, and counts what a run
makes AWS do: state transitions, Lambda invocations and GB-seconds, S3 requests, replicated
bytes (the RTC fee and inter-region transfer), DynamoDB writes and reads, CloudWatch metrics,
alarms and log bytes. Prices come from ``pricing.json`` (one file, with its sources and date);
free tiers are not applied.

>>> from replmon.probe.request import load_request
>>> req = load_request({"routes": [{"name": "p", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]}],
...                     "sizes": "1GiB", "trials": 1})
>>> est = estimate(req, runs_per_month=2880, cross_region=False, rtc=True)
>>> round(est.line("S3 RTC fee").dollars, 2)
43.2
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replmon.core.clock import ManualClock
from replmon.core.errors import ConfigError
from replmon.core.ports import HeadResult
from replmon.core.record import ProbeStatus
from replmon.probe.plan import plan_probes
from replmon.probe.poll import poll_replication, start_polling
from replmon.probe.polling import MIN_HISTORY, earliest_completion
from replmon.probe.request import ProbeRequest
from replmon.probe.state import ProbeState, Upload
from replmon.probe.upload import UploadSettings, plan_upload

GiB = 2**30
MiB = 2**20


#: A run's own steps, whatever its probes: PlanProbes, BeginRouteRun, AnyRouteLeased, Probes (Map),
#: Housekeeping, EndRouteRun, Done; of which 4 Lambda invocations at 256 MB. In the fleet one
#: execution per tick serves every route (cost/fleet.py counts them once per tick).
RUN_TRANSITIONS = 7.0
RUN_INVOCATIONS = 4.0


def pricing() -> dict[str, Any]:
    prices: dict[str, Any] = json.loads(Path(__file__).with_name("pricing.json").read_text())
    return prices


@dataclass
class Line:
    item: str
    quantity: float
    unit: str
    dollars: float


@dataclass
class Estimate:
    runs_per_month: float
    probes_per_run: int
    lines: list[Line] = field(default_factory=list)
    assumptions: dict[str, Any] = field(default_factory=dict)
    as_of: str = ""
    region: str = ""
    transfer_source_region: str = ""  # whose rate priced the inter-Region transfer
    transfer_rate_per_gb: float = 0.0
    #: One run's modelled wall-clock seconds: each probe's upload, replication and polling, the
    #: probes taken in plan order ``max_concurrency`` at a time (the state machine's Map).
    run_seconds: float = 0.0
    replicated_gib_per_run: float = 0.0  # every destination's copy of every probe

    @property
    def total(self) -> float:
        return sum(x.dollars for x in self.lines)

    def line(self, item: str) -> Line:
        return next(x for x in self.lines if x.item == item)

    def add(self, item: str, quantity: float, unit: str, dollars: float) -> None:
        self.lines.append(Line(item, quantity, unit, dollars))


class _ModelledSource:
    """A source bucket whose HEAD answers PENDING until the modelled latency has passed."""

    def __init__(self, clock: ManualClock, put_end: float, latency: float, head_seconds: float) -> None:
        self.clock, self.put_end, self.latency, self.head_seconds = clock, put_end, latency, head_seconds

    def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult:
        self.clock.advance(self.head_seconds)
        done = self.clock.now() - self.put_end >= self.latency
        return HeadResult("COMPLETED" if done else "PENDING", 0, '"m"', version_id, "CRC64NVME/FULL_OBJECT:m")


@dataclass
class PollingModel:
    heads: int
    invocations: int
    waits: int
    lambda_seconds: float  # time spent inside PollReplication invocations (inline sleeps + HEADs)
    latency_lo: float | None = None  # the last PENDING HEAD after the PUT: what the route's history keeps


def model_polling(probe: ProbeState, latency: float, head_seconds: float, not_before: float = 0.0) -> PollingModel:
    """Play the real poller against a source that completes after ``latency`` seconds; ``not_before``:
    the route's history says completion is implausible before (probe/steps.py history_start)."""
    clock = ManualClock(0.0)
    state = probe.model_copy(deep=True)
    state.upload = Upload(key="k", version_id="v", etag='"m"', method="put", put_start=0.0, put_end=0.0)
    state.started_at = 0.0
    source = _ModelledSource(clock, 0.0, latency, head_seconds)
    state = start_polling(state, not_before)
    invocations = waits = 0
    inside = 0.0
    while True:
        invocations += 1
        t0 = clock.now()
        # Destination HEADs on COMPLETED (replica verification) are counted with the source's.
        state = poll_replication(state, lambda e: source, clock)  # type: ignore[arg-type,return-value]
        inside += clock.now() - t0
        assert state.poll is not None
        if state.poll.status is not ProbeStatus.PENDING:
            break
        if state.poll.wait_seconds:
            waits += 1
        clock.advance(state.poll.wait_seconds)
    return PollingModel(state.poll.head_count, invocations, waits, inside, state.poll.last_pending)


def steady_polling(probe: ProbeState, latency: float, head_seconds: float) -> PollingModel:
    """A probe of a route whose recent probes of the size took the same ``latency``: with
    ``use_history`` its first HEAD waits for what the history makes implausible (probe/polling.py
    earliest_completion of the earlier probes' ``latency_lo``), as the deployed poller does."""
    first = model_polling(probe, latency, head_seconds)
    if not probe.poll_settings.use_history or first.latency_lo is None:
        return first
    start = earliest_completion(probe.size_bytes, [(probe.size_bytes, first.latency_lo)] * MIN_HISTORY)
    return model_polling(probe, latency, head_seconds, start)


def transfer_rate(source_region: str) -> float:
    """$/GB of inter-Region transfer for replication **from** ``source_region``: AWS bills it by the
    source Region ("AWS Global Network FAQs"). A Region without a dated rate in pricing.json is an error, never a
    silent us-east-1 price.

    >>> transfer_rate("ap-northeast-1") > transfer_rate("us-east-1")
    True
    """
    rates = {k: v for k, v in pricing()["prices"]["s3_inter_region_transfer_per_gb_by_source_region"].items() if not k.startswith("_")}
    if source_region not in rates:
        raise ConfigError(f"--source-region: no inter-Region transfer rate for {source_region!r} in cost/pricing.json "
                          f"(known: {', '.join(sorted(rates))}); add the Region's rate from the S3 pricing page, with its date")
    return float(rates[source_region])


def slo_read_units(a: dict[str, Any]) -> float:
    """Read units of one route's SLO per collector run (signals/slo_rollup.py): the period cache
    (a GetItem) and 7 hour items (one Query), both strongly consistent. Not counted: the hourly
    cache write and a rebuild after a late write (every hour item of the period, once)."""
    return float(math.ceil(a["period_item_bytes"] / 4096) + math.ceil(7 * a["hour_item_bytes"] / 4096))


def estimate(request: ProbeRequest, runs_per_month: float, cross_region: bool, rtc: bool,
             assumptions: dict[str, Any] | None = None, alarms: int | None = None, settings: UploadSettings | None = None,
             source_region: str | None = None) -> Estimate:
    """``source_region``: the replication source's Region, whose rate prices the inter-Region
    transfer (default: pricing.json's Region)."""
    data = pricing()
    settings = settings or UploadSettings()
    p, a = data["prices"], {**data["assumptions"], **(assumptions or {})}
    probes = plan_probes(request, "cost-model", 0.0)
    est = Estimate(runs_per_month, len(probes), assumptions={k: v for k, v in a.items() if not k.startswith("_")},
                   as_of=data["as_of"], region=data["region"])
    dests = sum(len(r.destinations) for r in request.routes) / len(request.routes)

    transitions = RUN_TRANSITIONS
    invocations = {"small": RUN_INVOCATIONS}
    gb_seconds = RUN_INVOCATIONS * 0.25 * a["other_step_seconds"]
    put_class = get_class = 0.0
    list_class = 4.0 * len(request.routes)  # Housekeeping's sweep: versions and uploads, both sides
    replicated_bytes = 0.0
    write_units = read_units = 0.0
    lanes = [0.0] * max(1, request.max_concurrency)  # when each of the Map's concurrent slots is free
    for probe in probes:
        size = probe.size_bytes
        latency = a["replication_base_seconds"] + size / (a["replication_mib_per_s"] * MiB)
        polling = steady_polling(probe, latency, a["head_seconds"])
        up = plan_upload(size, settings)
        if up.method == "put":
            put_class += 1
            upload_s = size / (a["upload_mib_per_s"] * MiB)
        elif up.method == "multipart":
            put_class += 2 + len(up.part_sizes)
            upload_s = size / (a["upload_mib_per_s"] * MiB)
        else:  # one part through the function, the rest copied server-side from the seed
            put_class += 2 + len(up.part_sizes) + 1  # + the seed listing
            upload_s = up.part_sizes[0] / (a["upload_mib_per_s"] * MiB) + (size - up.part_sizes[0]) / (a["compose_copy_mib_per_s"] * MiB)
        lane = lanes.index(min(lanes))
        lanes[lane] += upload_s + latency + 5 * a["other_step_seconds"]  # Upload, Poll, Record, Cleanup, EndProbe
        get_class += polling.heads + dests  # source HEADs, then one HEAD per replica
        list_class += 2 * (1 + dests)  # Cleanup: versions and uploads on every side
        put_class += dests  # the replication PUT on each destination
        replicated_bytes += size * dests
        transitions += 1 + 2 * polling.invocations + polling.waits + 3  # Upload; Poll+Choice each; Waits; Record; Cleanup; EndProbe
        invocations["small"] = invocations.get("small", 0) + polling.invocations + 3
        invocations["upload"] = invocations.get("upload", 0) + 1
        gb_seconds += 1.0 * (upload_s + a["other_step_seconds"]) + 0.25 * (polling.lambda_seconds + polling.invocations * a["other_step_seconds"])
        gb_seconds += 3 * 0.25 * a["other_step_seconds"]  # RecordResult, Cleanup, EndProbe (the route's lease: fleet/lease.py)
        # the record, its hour item's counters and the marker's delete in one transaction (2 units per KB each); the marker's put
        write_units += 2 * (math.ceil(a["record_bytes"] / 1024) + math.ceil(a["hour_item_bytes"] / 1024)) + a["in_flight_marker_write_units"]
        if probe.poll_settings.use_history:  # the history Query: up to 50 records, eventually consistent
            read_units += math.ceil(50 * a["record_bytes"] / 4096) / 2

    est.run_seconds, est.replicated_gib_per_run = max(lanes), replicated_bytes / GiB
    runs = runs_per_month
    n_inv = sum(invocations.values()) * runs
    gb = replicated_bytes * runs / GiB
    est.add("Step Functions transitions", transitions * runs, "transitions", transitions * runs / 1000 * p["sfn_per_1000_transitions"])
    est.add("Lambda duration (arm64)", gb_seconds * runs, "GB-seconds", gb_seconds * runs * p["lambda_arm_per_gb_second"])
    est.add("Lambda requests", n_inv, "invocations", n_inv / 1e6 * p["lambda_per_million_requests"])
    est.add("S3 PUT/COPY/LIST requests", (put_class + list_class) * runs, "requests",
            (put_class + list_class) * runs / 1000 * p["s3_put_copy_post_list_per_1000"])
    est.add("S3 GET/HEAD requests", get_class * runs, "requests", get_class * runs / 1000 * p["s3_get_head_per_1000"])
    est.add("S3 RTC fee", gb if rtc else 0.0, "GiB replicated", (gb * p["s3_rtc_per_gb"]) if rtc else 0.0)
    source = source_region or data["region"]
    rate = transfer_rate(source)
    est.transfer_source_region, est.transfer_rate_per_gb = source, rate
    est.add(f"S3 inter-region transfer (from {source}, ${rate}/GB)", gb if cross_region else 0.0, "GiB replicated",
            gb * rate if cross_region else 0.0)
    sizes = {pr.size_class for pr in probes}
    # The passive side (CollectSignals on its schedule; IngestEvents scales with your traffic's events, not modelled).
    collector_runs = a["days_per_month"] * 24 * 60 / a["collector_rate_minutes"]
    n_inv += collector_runs
    est.add("CollectSignals (RPO, SLO, RTC metrics)", collector_runs, "runs",
            collector_runs * (a["collector_memory_mb"] / 1024 * a["collector_seconds"] * p["lambda_arm_per_gb_second"] + p["lambda_per_million_requests"] / 1e6)
            + (collector_runs * a["s3_replication_metrics_per_rule"] * len(request.routes) / 1000 * p["cloudwatch_getmetricdata_per_1000_metrics"] if rtc else 0.0)
            + collector_runs * len(request.routes) * slo_read_units(a) / 1e6 * p["dynamodb_per_million_read_units"])
    metrics = len(request.routes) * (2 + len(sizes) + a["passive_metrics_per_route"]) + (a["s3_replication_metrics_per_rule"] * len(request.routes) if rtc else 0)
    est.add("CloudWatch metrics", metrics, "metrics", metrics * p["cloudwatch_per_metric_month"])
    n_alarms = a["alarms"] if alarms is None else alarms
    est.assumptions["alarms"] = n_alarms
    est.add("CloudWatch alarms", n_alarms, "alarms", n_alarms * p["cloudwatch_per_standard_alarm_month"])
    log_gb = n_inv * a["log_bytes_per_invocation"] / 1e9
    est.add("CloudWatch Logs ingestion", log_gb, "GB", log_gb * p["cloudwatch_logs_per_gb_ingested"])
    est.add("DynamoDB writes and reads", write_units * runs + read_units * runs, "request units",
            write_units * runs / 1e6 * p["dynamodb_per_million_write_units"] + read_units * runs / 1e6 * p["dynamodb_per_million_read_units"])
    est.add("CloudWatch composite alarms and dashboard", a["composite_alarms"] + 1, "resources",
            a["composite_alarms"] * p["cloudwatch_per_composite_alarm_month"] + p["cloudwatch_per_dashboard_month"])
    est.add("KMS key (alarm topic)", 1, "keys", p["kms_per_key_month"])
    est.add("X-Ray traces", n_inv, "traces (every invocation sampled)", n_inv / 1e6 * p["xray_per_million_traces"])
    return est
