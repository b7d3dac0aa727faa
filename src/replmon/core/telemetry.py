"""The CloudWatch metrics replmon emits: names, units and the exact dimension sets.

CloudWatch treats every distinct dimension set as a different metric, so an alarm must name
exactly the set the code emits. Powertools Metrics adds a ``service`` dimension to every
metric when ``POWERTOOLS_SERVICE_NAME`` is set (template.yaml sets it for every function), so
``service`` is part of every set below. template.yaml's alarms name these sets; the contract
test (tests/test_alarm_contract.py) runs each function's metric code with that function's
environment and fails if an alarm watches a (namespace, metric, dimensions) nobody emits.

>>> METRICS["ProbeFailed"].dimension_sets
(('service', 'Route'),)
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
WINDOW = "Window"  # an SLO burn-rate window: "1h", "5m", "6h", "30m"
TARGET = "Target"  # a mount baseline's target (its configured name)
PRESET = "Preset"  # a mount preset (replmon/mounts/presets.json)
JOB = "Job"  # a fio job (or dd test) of a preset, with its direction: "1M-read/read"


@dataclass(frozen=True)
class MetricDef:
    name: str
    unit: str  # a CloudWatch unit name (Powertools MetricUnit value)
    dimension_sets: tuple[tuple[str, ...], ...]  # each emitted separately; ``service`` first
    description: str

    @property
    def own_dimensions(self) -> set[str]:
        """Dimensions replmon's code must supply (all but ``service``)."""
        return {d for ds in self.dimension_sets for d in ds if d != SERVICE_DIM}


def _m(name: str, unit: str, description: str, *sets: tuple[str, ...]) -> MetricDef:
    return MetricDef(name, unit, tuple((SERVICE_DIM, *s) for s in sets), description)


METRICS: dict[str, MetricDef] = {
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
        _m("CleanupFailed", "Count", "probe objects or uploads a Cleanup could not remove", (ROUTE,)),
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
        _m("SloBurnRate", "None", "error rate / allowed error rate over a window", (ROUTE, WINDOW)),
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
