"""CloudWatch metrics through Powertools Metrics (EMF on stdout; no API calls from Lambda)."""

from __future__ import annotations

from aws_lambda_powertools import single_metric
from aws_lambda_powertools.metrics import MetricUnit

from replmon.record import ProbeRecord, ProbeStatus

NAMESPACE = "Replmon"
#: metric name per final status; alarms in template.yaml use the same names.
STATUS_METRICS = {
    ProbeStatus.COMPLETED: "ProbeCompleted",
    ProbeStatus.FAILED: "ProbeFailed",
    ProbeStatus.STUCK: "ProbeStuck",
    ProbeStatus.ERROR: "ProbeError",
}
LATENCY_METRIC = "ReplicationLatencySeconds"


class EmfMetrics:
    def __init__(self, namespace: str = NAMESPACE) -> None:
        self.namespace = namespace

    def publish(self, record: ProbeRecord) -> None:
        # Two dimension sets for latency: per size class for dashboards, per route for the RPO alarm.
        if record.status is ProbeStatus.COMPLETED and record.latency_hi is not None:
            # The upper bound: an RPO alarm must not fire late because of our polling resolution.
            for dims in ({"Route": record.route, "SizeClass": record.size_class}, {"Route": record.route}):
                with single_metric(
                    name=LATENCY_METRIC, unit=MetricUnit.Seconds, value=record.latency_hi, namespace=self.namespace
                ) as m:
                    for k, v in dims.items():
                        m.add_dimension(name=k, value=v)
        with single_metric(name=STATUS_METRICS[record.status], unit=MetricUnit.Count, value=1, namespace=self.namespace) as m:
            m.add_dimension(name="Route", value=record.route)


class NullMetrics:
    """For the lab and the CLI, where there is no CloudWatch to read EMF."""

    def publish(self, record: ProbeRecord) -> None:
        return None
