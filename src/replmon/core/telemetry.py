"""The CloudWatch metrics replmon emits: names, units and the exact dimension sets.

CloudWatch treats every distinct dimension set as a different metric, so an alarm must name
exactly the set the code emits. Powertools Metrics adds a ``service`` dimension to every
metric when ``POWERTOOLS_SERVICE_NAME`` is set (template.yaml sets it for every function), so
``service`` is part of every set below. template.yaml's alarms name these sets; the contract
test (tests/test_alarm_contract.py) runs each function's metric code with that function's
environment and fails if an alarm watches a (namespace, metric, dimensions) nobody emits.

>>> METRICS["ProbeCompleted"].dimension_sets  # switched: group-level (nothing reads it per route)
(('service', 'RouteGroup'),)
>>> METRICS["ProbeFailed"].dimension_sets  # switched: the fleet alarms' schema
(('service', 'RouteGroup', 'Route'),)

**The fleet's metrics** (docs/design/fleet.md 9) are :data:`FLEET_METRICS`: every
per-route series carries ``RouteGroup`` (the Metrics Insights alarms' shard), fleet totals carry
``RouteGroup`` or nothing. While the packages move the code over, :data:`METRICS` stays what the
code emits *today* (the alarm contract test holds it to that): a package that switches a metric
to its fleet dimension sets adds its name to :data:`SWITCHED`, and :data:`METRICS` then holds the
fleet definition. :data:`RETIRING` are today's metrics the fleet drops (remove them with their
last emitter and alarm).

>>> FLEET_METRICS["StallSeconds"].dimension_sets
(('service', 'RouteGroup', 'Route'),)
>>> sorted(RETIRING)
['RtcBytesPending', 'RtcOperationsPending']
"""

from __future__ import annotations

from dataclasses import dataclass

from replmon.core.record import ProbeStatus

#: template.yaml's Mappings.Telemetry holds the same two values (POWERTOOLS_METRICS_NAMESPACE and
#: POWERTOOLS_SERVICE_NAME come from there); the contract test checks they agree.
NAMESPACE = "Replmon"
SERVICE = "replmon"

SERVICE_DIM = "service"  # added by Powertools, never by replmon's code
ROUTE = "Route"
SIZE_CLASS = "SizeClass"
EVENT = "Event"  # S3 replication event name (passive signals)
RULE = "RuleId"
ROUTE_GROUP = "RouteGroup"  # the fleet's shard: g00..g07 (core/registry.py group_of)
TARGET = "Target"  # a mount baseline's target (its configured name)
PRESET = "Preset"  # a mount preset (replmon/mounts/presets.json)
REASON = "Reason"  # why: a registry item is not a route (core/registry.py INVALID_REASONS); an S3 event maps to no route (signals/event_ingest.py UNMAPPED_REASONS)
JOB = "Job"  # a fio job (or dd test) of a preset, with its direction: "1M-read/read"


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: str  # a CloudWatch unit name (Powertools MetricUnit value)
    dimension_sets: tuple[tuple[str, ...], ...]  # each emitted separately; ``service`` first
    description: str
    cadence: str = ""  # fleet metrics: continuous | sparse (only when non-zero) | per run | per probe

    @property
    def own_dimensions(self) -> set[str]:
        """Dimensions replmon's code must supply (all but ``service``)."""
        return {d for ds in self.dimension_sets for d in ds if d != SERVICE_DIM}


def _m(name: str, unit: str, description: str, *sets: tuple[str, ...]) -> MetricDef:
    return MetricDef(name, unit, tuple((SERVICE_DIM, *s) for s in sets), description)


_TODAY: dict[str, MetricDef] = {
    m.name: m
    for m in (
        # Active probes (RecordResult, or Housekeeping when it replays a spooled record).
        _m("ReplicationLatencySeconds", "Seconds", "a COMPLETED probe's latency upper bound (hi)", (ROUTE,), (ROUTE, SIZE_CLASS)),
        _m("ProbeCompleted", "Count", "probes that replicated and whose replicas were verified", (ROUTE,)),
        _m("ProbeFailed", "Count", "probes whose replication FAILED or whose replica did not match", (ROUTE,)),
        _m("ProbeStuck", "Count", "probes still PENDING when their timeout ran out", (ROUTE,)),
        _m("ProbeError", "Count", "probes that could not be measured (upload or polling error)", (ROUTE,)),
        _m("ProbeInterrupted", "Count", "probes abandoned by an operator's interrupt (local runs only)", (ROUTE,)),
        # Durability of the measurement itself (RecordResult, Cleanup, Housekeeping).
        _m("RecordSpooled", "Count", "records that went to the spool because the store was unavailable", (ROUTE,)),
        _m("RecordLost", "Count", "records neither stored nor spooled (the probe's measurement is lost)", (ROUTE,)),
        _m("SpoolReplayed", "Count", "spooled records written to the store by a later run", ()),
        _m("RecordQuarantined", "Count", "spool entries replay could neither read nor store: set aside with their reason", ()),
        _m("CleanupFailed", "Count", "probe objects or uploads a Cleanup could not remove", (ROUTE,)),
        # One run per route at a time (BeginRouteRun, fleet/lease.py).
        _m("RunSkipped", "Count", "runs of the route skipped because its previous run still held the route's lease", (ROUTE,)),
        _m("ProbeObjectsSwept", "Count", "expired probe objects removed by the housekeeping sweep", ()),
        # Passive signals (IngestEvents).
        _m("ReplicationEvents", "Count", "S3 replication events stored, by event name", (ROUTE, EVENT)),
        _m("ReplicaArrivals", "Count", "ObjectCreated events for probe replicas", (ROUTE,)),
        _m("IntervalNarrowedByEvent", "Count", "probe intervals narrowed by a replica's creation time", (ROUTE,)),
        _m("EventClockDisagreement", "Count", "replica events contradicting the poll beyond the clock-skew allowance", (ROUTE,)),
        _m("EventsRejected", "Count", "event records missing a field storing needs (batch item failures)", ()),
        _m("EventsFlagged", "Count", "stored event records with fields kept as sent (unexpected type or format)", ()),
        # Route health (CollectSignals, every run).
        _m("RpoSeconds", "Seconds", "the route's current RPO (signals/slo.py): the largest bounded input", (ROUTE,)),
        _m("RpoUnbounded", "Count", "1 when an object is known not to be on the destination, else 0", (ROUTE,)),
        _m("ErrorBudgetRemaining", "Percent", "SLO error budget left over the period (negative: overspent)", (ROUTE,)),
        _m("RtcBytesPending", "Bytes", "S3 BytesPendingReplication (Maximum) in the window", (ROUTE,)),
        _m("RtcOperationsPending", "Count", "S3 OperationsPendingReplication (Maximum) in the window", (ROUTE,)),
        _m("RtcReadFailed", "Count", "collections whose GetMetricData call failed", (ROUTE,)),
        _m("CollectorHeartbeat", "Count", "one per collector run (missing = the collector is not running)", ()),
        # Mount baselines (the fio runner, then IngestFioResults).
        _m("FioRunFailed", "Count", "runner runs that failed (mount, layout, fio, dd, upload or unmount)", (TARGET, PRESET), ()),
        _m("FioBandwidth", "Bytes/Second", "a stored job's bandwidth (fio bw_bytes)", (TARGET, PRESET, JOB)),
        _m("FioRegression", "Count", "jobs below their baseline by more than the threshold and the noise", (TARGET, PRESET), ()),
        _m("FioNoBaseline", "Count", "jobs with too few earlier runs for a baseline", (TARGET, PRESET)),
        _m("FioJobErrors", "Count", "jobs fio reported with a non-zero error", (TARGET, PRESET)),
        _m("FioResultsRejected", "Count", "result objects that could not be parsed (batch item failures)", ()),
    )
}

#: A record's status -> its status metric (every status a record can have; PENDING is never recorded).
STATUS_METRICS: dict[ProbeStatus, str] = {
    ProbeStatus.COMPLETED: "ProbeCompleted",
    ProbeStatus.FAILED: "ProbeFailed",
    ProbeStatus.STUCK: "ProbeStuck",
    ProbeStatus.ERROR: "ProbeError",
    ProbeStatus.INTERRUPTED: "ProbeInterrupted",
}
LATENCY_METRIC = "ReplicationLatencySeconds"


# ------------------------------------------------------------------------------ the fleet (docs/design/fleet.md 9)
#: Dimension sets of the fleet, without ``service`` (Powertools adds it; every set below starts with it).
PER_ROUTE = (ROUTE_GROUP, ROUTE)
PER_ROUTE_CLASS = (ROUTE_GROUP, ROUTE, SIZE_CLASS)
PER_ROUTE_EVENT = (ROUTE_GROUP, ROUTE, EVENT)
PER_ROUTE_REASON = (ROUTE_GROUP, ROUTE, REASON)
PER_GROUP = (ROUTE_GROUP,)
FLEET_WIDE: tuple[str, ...] = ()

CONTINUOUS, SPARSE, PER_RUN, PER_PROBE = "continuous", "sparse", "per run", "per probe"


def _f(name: str, unit: str, dims: tuple[str, ...], cadence: str, description: str) -> MetricDef:
    return MetricDef(name, unit, ((SERVICE_DIM, *dims),), description, cadence)


FLEET_METRICS: dict[str, MetricDef] = {
    m.name: m
    for m in (
        # Per route, continuous: a probe-mode route never goes a period without RpoSeconds and StallSeconds
        # (a vanished series turns its Metrics Insights contributor OK, and their values mean something).
        _f("RpoSeconds", "Seconds", PER_ROUTE, CONTINUOUS, "the route's RPO (signals/slo.py), every collector run with an RPO "
           "input; unbounded, the measured inputs' lower bound (a late route stays late; RpoUnbounded pages the failure)"),
        _f("StallSeconds", "Seconds", PER_ROUTE, CONTINUOUS, "0 when the route is healthy, else seconds since it stalled (heartbeat, every minute)"),
        _f("ErrorBudgetRemaining", "Percent", PER_ROUTE, CONTINUOUS, "SLO budget left over the period; emitted in hours = 0 mod 6 only"),
        # Per route, sparse: only emitted when non-zero, and once as 0 when a 0/1, burn or RTC pending
        # signal falls back (signals/health.py publish_health: the 0 clears its alarm at the next
        # evaluation); missing data is not breaching, and CloudWatch bills a metric only for the hours
        # it receives data.
        _f("SloBurnPage", "None", PER_ROUTE, SPARSE, "min(burn 1h, burn 5m) when above 0; 0 (not emitted) below SloMinBadEvents "
           "bad samples in 1 h"),
        _f("SloBurnTicket", "None", PER_ROUTE, SPARSE, "min(burn 6h, burn 30m) when above 0; 0 (not emitted) below SloMinBadEvents "
           "bad samples in 6 h"),
        _f("RouteNoData", "Count", PER_ROUTE, SPARSE, "probe-mode routes: 1 on each collector run while the route has had no RPO "
           "input for longer than its most frequent class interval (then it has no RpoSeconds)"),
        _f("RpoUnbounded", "Count", PER_ROUTE, SPARSE, "1 when an object is known not to be on the destination"),
        _f("ProbeFailed", "Count", PER_ROUTE, SPARSE, "probes whose replication FAILED or whose replica did not match"),
        _f("ProbeStuck", "Count", PER_ROUTE, SPARSE, "probes still PENDING when their timeout ran out"),
        _f("ProbeError", "Count", PER_ROUTE, SPARSE, "probes that could not be measured (upload or polling error)"),
        _f("ProbeInterrupted", "Count", PER_ROUTE, SPARSE, "probes abandoned by an operator's interrupt (local runs only)"),
        _f("RunSkipped", "Count", PER_ROUTE, SPARSE, "route-runs skipped because the route's previous run still held its lease"),
        _f("RecordLost", "Count", PER_ROUTE, SPARSE, "records neither stored nor spooled"),
        _f("RecordSpooled", "Count", PER_ROUTE, SPARSE, "records that went to the spool because the store was unavailable"),
        _f("CleanupFailed", "Count", PER_ROUTE, SPARSE, "probe objects or uploads a cleanup could not remove"),
        _f("RtcReadFailed", "Count", PER_ROUTE, SPARSE, "collections whose S3 metrics read failed (that account and Region)"),
        _f("EventClockDisagreement", "Count", PER_ROUTE, SPARSE, "replica events contradicting the poll beyond the skew allowance"),
        _f("ReplicationLatencySeconds", "Seconds", PER_ROUTE_CLASS, PER_PROBE, "a COMPLETED probe's latency upper bound (hi)"),
        _f("ReplicationEvents", "Count", PER_ROUTE_EVENT, SPARSE, "S3 replication events counted, by event name"),
        _f("InvalidRoute", "Count", PER_ROUTE_REASON, PER_RUN, "registry items skipped because they are not valid routes "
           "(Route = the item's name, Reason = MissingField | BadName | BadField | UnknownField), every plan; "
           "Reason ReadFailed: a group's registry read or a route's own reads failed (PlanProbes, CollectSignals)"),
        # Per group, every run.
        _f("CollectorHeartbeat", "Count", PER_GROUP, PER_RUN, "one per collector run of the group (missing = not running)"),
        _f("HeartbeatRun", "Count", PER_GROUP, PER_RUN, "one per heartbeat invocation of the group (missing = not running)"),
        _f("ProbeCompleted", "Count", PER_GROUP, PER_PROBE, "probes that replicated and whose replicas were verified"),
        _f("ReplicaArrivals", "Count", PER_GROUP, SPARSE, "ObjectCreated events for probe and heartbeat replicas"),
        _f("IntervalNarrowedByEvent", "Count", PER_GROUP, SPARSE, "probe intervals narrowed by a replica's creation time"),
        _f("RollupRecomputed", "Count", PER_GROUP, SPARSE, "period caches recomputed because a late write landed in a folded hour"),
        # Fleet-wide.
        _f("SpoolReplayed", "Count", FLEET_WIDE, SPARSE, "spooled records written to the store by a later run"),
        _f("RecordQuarantined", "Count", FLEET_WIDE, SPARSE, "spool entries replay could neither read nor store (quarantined)"),
        _f("ProbeObjectsSwept", "Count", FLEET_WIDE, SPARSE, "expired probe objects removed by a sweep"),
        _f("EventsRejected", "Count", FLEET_WIDE, SPARSE, "malformed or unknown event records (batch item failures)"),
        _f("UnmappedEvent", "Count", (REASON,), SPARSE, "S3 replication events that map to no registry route (kept under "
           "#unmapped/<day>, never counted under an invented route), by reason"),
        _f("InventoryIncomplete", "Count", FLEET_WIDE, SPARSE, "inventory runs that stopped at their deadline (the next run resumes)"),
        _f("RoutesDiscovered", "Count", FLEET_WIDE, PER_RUN, "routes the inventory run wrote or confirmed"),
        _f("RoutesUnprobeable", "Count", FLEET_WIDE, PER_RUN, "routes the inventory run listed as passive or off"),
        _f("PlanFailed", "Count", FLEET_WIDE, SPARSE, "PlanFleet runs that could not plan (registry or plan bucket unavailable)"),
        _f("RoutesOverCap", "Count", FLEET_WIDE, PER_RUN, "probe-mode routes a fleet plan left out: over REPLMON_FLEET "
           "max_routes or monthly_usd (fleet/caps.py; 0 when none)"),
        _f("SloUnsupported", "Count", FLEET_WIDE, PER_RUN, "probe-mode routes whose probes cannot support their SLO target: "
           "judged at a lower one, or not judged (signals/slo.py route_target; 0 when none)"),
    )
}

#: Today's metrics the fleet drops: S3 publishes the pending metrics itself (alarmed natively in the
#: member Region). (SloBurnRate and its Window dimension are gone: SloBurnPage/SloBurnTicket replaced them.)
#: Until then both are sparse: emitted only when above 0 (signals/health.py publish_health).
RETIRING = frozenset({"RtcBytesPending", "RtcOperationsPending"})

#: Fleet metrics the code already emits with their fleet dimension sets. A package that moves a
#: metric's emitter adds its name here (one per line), in the same commit as the emitter and alarm.
SWITCHED: frozenset[str] = frozenset({
    # The fleet alarms (fleet/alarms.py): what the Metrics Insights alarms read, and the rest of
    # the per-route series; EmfMetrics adds RouteGroup = group_of(Route, RouteGroups) to each.
    "RpoSeconds",
    "RpoUnbounded",
    "SloBurnPage",
    "SloBurnTicket",
    "ErrorBudgetRemaining",
    "ProbeFailed",
    "ProbeStuck",
    "ProbeError",
    "ProbeInterrupted",
    "RunSkipped",
    "RecordLost",
    "RecordSpooled",
    "CleanupFailed",
    "RtcReadFailed",
    "EventClockDisagreement",
    "ReplicationLatencySeconds",
    "ReplicationEvents",
    "InvalidRoute",  # the planner, for each registry item it skips (fleet/planner.py); the collector, a route it cannot read
    # Heartbeats (probe/heartbeat.py): the stall series and the Heartbeat's own liveness
    "StallSeconds",
    "HeartbeatRun",
    # the planner's admission (fleet/caps.py): routes over the caps, routes whose SLO their probes cannot support
    "RoutesOverCap",
    "SloUnsupported",
    # one route model (signals/collector.py, signals/event_ingest.py): no data is not an RPO of 0;
    # an event no registry route owns is counted by reason
    "RouteNoData",
    "UnmappedEvent",
    # group-level: nothing alarms on or draws them per route (the dashboard's fleet widgets sum them)
    "ProbeCompleted",
    "ReplicaArrivals",
    "IntervalNarrowedByEvent",
})

#: What the code emits now: today's definitions, with each switched metric's fleet definition.
METRICS: dict[str, MetricDef] = {**_TODAY, **{n: FLEET_METRICS[n] for n in SWITCHED}}
