"""CloudWatch metrics through Powertools Metrics (EMF on stdout; no API calls from Lambda).

Every metric and its dimension sets come from :mod:`replmon.core.telemetry`; Powertools adds the
``service`` dimension itself (POWERTOOLS_SERVICE_NAME), which telemetry lists too. A metric whose set
carries ``RouteGroup`` (the fleet alarms' shard, fleet/alarms.py) gets it here from its ``Route``:
``group_of(route, RouteGroups)`` is the group the registry files the route under, so emitters pass
the route only and a route's series always land in an alarm set the stack has.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_lambda_powertools import single_metric
from aws_lambda_powertools.metrics import MetricUnit

from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.registry import group_of
from replmon.core.telemetry import (
    LATENCY_METRIC,
    METRICS,
    NAMESPACE,
    ROUTE,
    ROUTE_GROUP,
    SERVICE,
    SERVICE_DIM,
    SIZE_CLASS,
    STATUS_METRICS,
)


class EmfMetrics:
    def __init__(self, namespace: str = NAMESPACE, route_groups: int = 1) -> None:
        self.namespace = namespace
        self.route_groups = route_groups  # RouteGroups (REPLMON_FLEET): a route's group is group_of(route, this)

    def dimension_sets(self, metric: str, dimensions: Mapping[str, str] | None = None) -> list[dict[str, str]]:
        """The dimensions of each EMF document :meth:`count` emits for ``metric`` (``service`` as
        Powertools adds it): one per dimension set telemetry defines, the route's group filled in."""
        spec = METRICS[metric]
        given = dict(dimensions or {})
        if ROUTE_GROUP in spec.own_dimensions and ROUTE_GROUP not in given and ROUTE in given:
            given[ROUTE_GROUP] = group_of(given[ROUTE], self.route_groups)
        missing = spec.own_dimensions - set(given)
        if missing:
            raise ValueError(f"metric {metric} needs dimensions {sorted(missing)}")
        return [{name: SERVICE if name == SERVICE_DIM else given[name] for name in dims} for dims in spec.dimension_sets]

    def count(self, metric: str, value: float = 1, dimensions: Mapping[str, str] | None = None) -> None:
        """Emit ``metric`` once per dimension set telemetry defines for it."""
        spec = METRICS[metric]
        for dims in self.dimension_sets(metric, dimensions):
            with single_metric(name=metric, unit=MetricUnit(spec.unit), value=value, namespace=self.namespace) as m:
                for name, v in dims.items():
                    if name != SERVICE_DIM:  # Powertools adds it (POWERTOOLS_SERVICE_NAME)
                        m.add_dimension(name=name, value=v)

    def publish(self, record: ProbeRecord) -> None:
        if record.status is ProbeStatus.COMPLETED and record.latency_hi is not None:
            # The upper bound: an RPO alarm must not fire late because of our polling resolution.
            self.count(LATENCY_METRIC, record.latency_hi, {ROUTE: record.route, SIZE_CLASS: record.size_class})
        self.count(STATUS_METRICS[record.status], 1, {ROUTE: record.route})


class NullMetrics:
    """For the lab and the CLI, where there is no CloudWatch to read EMF."""

    def publish(self, record: ProbeRecord) -> None:
        return None

    def count(self, metric: str, value: float = 1, dimensions: Mapping[str, str] | None = None) -> None:
        if metric not in METRICS:  # an unknown name is a bug wherever it runs
            raise KeyError(f"unknown metric {metric!r}; telemetry.METRICS names them")
