"""The routes a deployment measures, read from its one list of routes: the registry.

CollectSignals, IngestEvents, Report and ``replmon report --fleet`` read routes here (PlanProbes and
the Heartbeat read the probe-mode ones, fleet/planner.py and probe/heartbeat.py). The stack's own
route is a registry item like any other (fleet/stack_route.py writes it), so a single route is a
fleet of one and no function keeps a second list. A route in mode ``off`` is listed, not measured.

>>> from replmon.core.registry import load_route_spec
>>> spec = load_route_spec({"name": "dr", "group": "g00", "origin": "explicit",
...     "source": {"account": "111122223333", "region": "us-east-1", "bucket": "src"},
...     "destinations": [{"account": "111122223333", "region": "us-west-2", "bucket": "dst"}]})
>>> no_data_limit(spec, ProbeClasses.parse("1MiB@1h,1GiB@1d"), 900)
4500.0
"""

from __future__ import annotations

from collections.abc import Iterable

from replmon.core.cadence import ProbeClasses
from replmon.core.ports import RegistryStore
from replmon.core.registry import Mode, RegistryRead, RouteSpec, read_registry

__all__ = ["measured_read", "measured_routes", "no_data_limit", "require_registry"]


def require_registry(registry: RegistryStore | None, function: str) -> RegistryStore:
    """The registry port, or an error naming what wires it (every deployed function has REPLMON_TABLE)."""
    if registry is None:
        raise RuntimeError(f"{function}: no route registry wired: set REPLMON_TABLE (the registry lives in the latency "
                           "table; template.yaml sets it for every function)")
    return registry


def measured_read(registry: RegistryStore, groups: Iterable[str]) -> RegistryRead:
    """Every route of ``groups`` in mode probe or passive (S3's metrics and events are read for both),
    in group then name order, with the items skipped (core/registry.py :func:`read_registry`: an
    invalid item, a group whose read failed). Raises only when no group could be read."""
    read = read_registry(registry, groups)
    return RegistryRead([spec for spec in read.routes if spec.verdict.mode is not Mode.OFF], read.invalid)


def measured_routes(registry: RegistryStore, groups: Iterable[str]) -> list[RouteSpec]:
    """The routes of :func:`measured_read` (its findings are the caller's to report, or the planner's)."""
    return measured_read(registry, groups).routes


def no_data_limit(spec: RouteSpec, fleet_classes: ProbeClasses, tick_seconds: float) -> float | None:
    """How long a probe-mode route may go without an RPO input before it is a ticket (RouteNoData):
    its most frequent size class's interval plus one schedule tick (a class runs at the first tick it
    is due). None for a passive route: its only RPO input is S3's ReplicationLatency, which S3 does
    not publish while the bucket is idle, so its having none is not a fault (its RpoSeconds is
    simply absent, shown as no data)."""
    if not spec.probing:
        return None
    return float(min(c.every_seconds for c in spec.classes(fleet_classes))) + tick_seconds
