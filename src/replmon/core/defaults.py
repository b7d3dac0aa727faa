"""replmon's defaults, read from ``defaults.json``: the one place they are defined.

template.yaml's parameter defaults, :mod:`replmon.probe.request` and the CLI flags use these values
(tests/test_defaults.py checks the template against them).

>>> DEFAULTS.timeout_seconds, DEFAULTS.target_seconds, DEFAULTS.slo_target
(7200, 900.0, 0.999)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PollDefaults:
    floor_seconds: float
    relative: float
    inline_budget_seconds: float
    use_history: bool


@dataclass(frozen=True)
class Defaults:
    sizes: str
    trials: int
    timeout_seconds: int  # a probe still PENDING this long after its PUT is STUCK
    target_seconds: float  # RTC's promise: 99.99 % within 15 minutes
    max_concurrency: int
    poll: PollDefaults
    poll_function_timeout_seconds: int  # PollReplication's Lambda timeout: bounds the inline budget
    schedule_rate_minutes: int
    retention_days: int
    log_retention_days: int  # the functions' CloudWatch Logs (template.yaml Fixed LogRetentionDays)
    route_name: str
    probe_prefix: str
    seed_prefix: str
    spool_prefix: str
    slo_target: float  # the SLO: this share of judged samples within target_seconds (99.9 %: a budget of tens of samples)
    slo_period_days: int  # the error budget's period
    rpo_window_seconds: int  # how far back the RPO looks at probes, events and RTC metrics
    event_clock_skew_seconds: float  # allowance between S3's event clock and Lambda's (signals/arrivals.py)
    collector_rate_minutes: int  # CollectSignals' schedule
    pending_bytes_alarm: int  # the RTC BytesPendingReplication alarm's threshold
    # The fleet (TEMPLATE_PARAMETERS, FIXED_SETTINGS below and core/expert.py say where each is set).
    probe_classes: str  # ProbeClasses: size classes on their own cadence, multiples of the schedule's tick (core/cadence.py)
    heartbeat_seconds: int  # HeartbeatSeconds: one 1 KiB heartbeat per probed route this often
    stall_floor_seconds: float  # StallFloorSeconds: the least a heartbeat is expected to take (signals/expectation.py)
    route_groups: int  # RouteGroups: shards of <= 500 routes (one set of Metrics Insights alarms each)
    route_max_concurrency: int  # a route's probes in flight at once (a registry item's probe.max_concurrency)
    fleet_max_route_runs: int  # FleetMaxRouteRuns: route-runs in flight at once
    fleet_max_probes: int  # FleetMaxProbes: probes in flight at once, fleet-wide
    spread_seconds: int  # SpreadSeconds: route-runs start spread over [0, this) after the tick
    slo_min_bad_events: int  # SloMinBadEvents: a burn pair alerts only with this many bad samples in its long window
    member_role_prefix: str  # MemberRolePrefix: member-account roles <prefix>-inventory|prober|reader
    opt_out_tag: str  # OptOutTag: key=value on a source bucket that stops probes (the route stays passive)
    enroll_tag: str  # REPLMON_FLEET enroll_tag: key=value on a source bucket that enrolls its discovered route for probes
    fleet_max_routes: int  # REPLMON_FLEET max_routes: probe-mode routes the planner plans at most (fleet/caps.py)
    fleet_monthly_usd: float  # REPLMON_FLEET monthly_usd: the modelled monthly cost the planned routes stay within
    events_topic_name: str  # EventsTopicName: each member Region's SNS topic for S3 events
    events_max_concurrency: int  # EventsMaxConcurrency: IngestEvents' event source mapping MaximumConcurrency
    inventory_rate_minutes: int  # InventoryRateMinutes: the inventory's schedule
    inventory_workers: int  # InventoryWorkers: bucket reads in parallel per account


def _load() -> Defaults:
    raw: dict[str, Any] = json.loads(Path(__file__).with_name("defaults.json").read_text())  # a file of the package
    raw.pop("_comment", None)
    poll = PollDefaults(**raw.pop("poll"))
    raw["target_seconds"] = float(raw["target_seconds"])
    raw["fleet_monthly_usd"] = float(raw["fleet_monthly_usd"])
    return Defaults(poll=poll, **raw)


DEFAULTS = _load()

#: Where each default reaches the deployed stack: a template parameter's Default, a fixed value in
#: template.yaml's ``Fixed`` mapping (read by resource properties), or an ExpertSettings key
#: (core/expert.py; its field defaults are these). tests/test_defaults.py holds each one to its default.
TEMPLATE_PARAMETERS: dict[str, str] = {
    "ScheduleRateMinutes": "schedule_rate_minutes",  # the tick
    "LatencyTargetSeconds": "target_seconds",
    "RouteGroups": "route_groups",
    "RouteName": "route_name",
    "ProbePrefix": "probe_prefix",
}
FIXED_SETTINGS: dict[str, str] = {
    "SeedPrefix": "seed_prefix",
    "PollFunctionTimeoutSeconds": "poll_function_timeout_seconds",
    "CollectorRateMinutes": "collector_rate_minutes",
    "PendingBytesAlarmBytes": "pending_bytes_alarm",
    "EventsMaxConcurrency": "events_max_concurrency",
    "InventoryRateMinutes": "inventory_rate_minutes",
    "EventsTopicName": "events_topic_name",
    "LogRetentionDays": "log_retention_days",
}
