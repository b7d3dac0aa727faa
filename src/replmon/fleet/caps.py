"""What a fleet plan may probe: at most ``max_routes`` routes, within ``monthly_usd`` a month, and
each route judged at a target its probes can support (PlanProbes, fleet/planner.py ``fleet_plan``).

**Caps** (REPLMON_FLEET ``max_routes``, ``monthly_usd``; core/fleetconfig.py). The probe-mode
routes are taken in a fixed order - the stack's own route(s) first, then explicit routes (written
by ``replmon fleet put``), then discovered ones (enrolled by their bucket's tag), each by name - and
a route is planned while both caps hold. A route over ``max_routes``, or whose modelled cost would
take the total past ``monthly_usd``, is *left out*: not planned at all (not deferred to the next
tick: the caps hold for the month), named in a warning log line (``routes left out by the fleet
caps``) and counted in ``RoutesOverCap`` (every plan, 0 when none), which tickets
(``RoutesOverCapAlarm``). A cheaper route after a left-out one still fits if it fits, so the same
registry always gives the same plan.

The cost is ``replmon cost``'s model (cost/fleet.py): the deployment's fixed lines at this many
routes, plus each route's own (:func:`~replmon.cost.fleet.route_monthly_usd`, for its classes,
its Regions, RTC on any destination, heartbeats). A route whose source Region has no transfer rate
in cost/pricing.json is priced at the dearest rate there (an upper bound, logged).

**Heartbeats per group** (:data:`HEARTBEAT_ROUTES_PER_GROUP`): one Heartbeat invocation a minute
puts and polls every heartbeat route of its group within ``WORK_SECONDS`` (probe/heartbeat.py), so
a group holds at most that many heartbeat routes. Past it, the routes after the first that many (in
the caps' order) get no heartbeats (:func:`heartbeat_routes_within_cap`, which the Heartbeat applies):
PlanProbes names them (cap ``heartbeat_routes_per_group``) and counts them in ``RoutesOverCap``
(the same ticket); their probes still run. `replmon fleet put` refuses a heartbeat route the group
has no room for. The fix is more groups (``RouteGroups``: each group its own invocation).

**SLO** (signals/slo.py ``route_target``): every planned route's classes give a number of judged
probes a period; a route whose target leaves under ``REFUSE_BELOW_EVENTS`` bad probes is judged at
the highest target that leaves that many, or not at all. Each such route is named in a warning
log line (``routes whose probes cannot support their SLO target``) and counted in
``SloUnsupported`` (every plan), which tickets (``SloUnsupportedAlarm``). The collector judges a
route with the same rule (signals/slo.py ``slo_for_route``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from replmon.core.cadence import ProbeClasses
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.heartbeatcap import HEARTBEAT_CAP, HEARTBEAT_FIX, HEARTBEAT_ROUTES_PER_GROUP, heartbeat_routes_within_cap
from replmon.core.ports import MetricsSink
from replmon.core.registry import Origin, RouteSpec
from replmon.core.route import Route
from replmon.cost.estimate import pricing
from replmon.cost.fleet import fixed_monthly_usd, route_monthly_usd
from replmon.signals.slo import RouteTarget, SloSpec, route_target


class CappedRoute(Protocol):
    """What the caps read of a planner's route (fleet/planner.py ``FleetRoute``; the planner calls
    this module, so it is named by its shape here, not imported)."""

    @property
    def route(self) -> Route: ...
    @property
    def classes(self) -> ProbeClasses: ...
    @property
    def spec(self) -> RouteSpec | None: ...


R = TypeVar("R", bound=CappedRoute)

log = logging.getLogger("replmon")

__all__ = ["HEARTBEAT_CAP", "HEARTBEAT_ROUTES_PER_GROUP", "OVER_CAP", "SLO_UNSUPPORTED", "Admission", "LeftOut", "admit", "cap_routes",
           "check_heartbeat_room", "heartbeat_routes_within_cap", "route_cost"]

OVER_CAP = "RoutesOverCap"
SLO_UNSUPPORTED = "SloUnsupported"
#: How many left-out or unsupported routes a log line names (all are counted).
NAMED = 100
class CapsDeps(Protocol):
    fleet: FleetSettings
    metrics: MetricsSink
    slo: SloSpec  # REPLMON_SLO: the target a route without its own ``slo`` asks for


@dataclass(frozen=True)
class LeftOut:
    route: str
    cap: str  # "max_routes" or "monthly_usd" (the REPLMON_FLEET field)
    monthly_usd: float  # the route's own modelled cost

    def to_json(self) -> dict[str, object]:
        return {"route": self.route, "cap": self.cap, "monthly_usd": round(self.monthly_usd, 2)}


@dataclass
class Admission(Generic[R]):
    admitted: list[R] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    fixed_usd: float = 0.0
    routes_usd: float = 0.0  # the admitted routes' own cost
    unsupported: list[RouteTarget] = field(default_factory=list)  # admitted routes judged at a lower target, or not at all

    @property
    def monthly_usd(self) -> float:
        return self.fixed_usd + self.routes_usd


def _rank(fr: CappedRoute) -> tuple[int, str]:
    spec = fr.spec
    if spec is None or spec.managed_by == "stack":
        return 0, fr.route.name
    return (1 if spec.origin is Origin.EXPLICIT else 2), fr.route.name


def check_heartbeat_room(spec: RouteSpec, group_specs: Sequence[RouteSpec], cap: int = HEARTBEAT_ROUTES_PER_GROUP) -> None:
    """`replmon fleet put`: ConfigError if ``spec`` would be a heartbeat route past its group's cap
    (``group_specs``: the group's routes as stored; the route itself, if there, is replaced)."""
    if not spec.heartbeat:
        return
    others = [s for s in group_specs if s.name != spec.name and s.heartbeat]
    if len(others) >= cap:
        raise ConfigError(f"probe.heartbeat: group {spec.group} already holds {len(others)} heartbeat routes, the most one Heartbeat "
                          f"invocation puts and polls within its 45 s ({HEARTBEAT_CAP} = {cap}); {HEARTBEAT_FIX}")


def _dearest_region() -> str:
    rates = pricing()["prices"]["s3_inter_region_transfer_per_gb_by_source_region"]
    return str(max((k for k in rates if not k.startswith("_")), key=lambda k: float(rates[k])))


def route_cost(fr: CappedRoute, fleet: FleetSettings) -> float:
    """One route's modelled monthly cost (cost/fleet.py); RTC is assumed on when the registry item
    is unknown (the stack's own route: an upper bound)."""
    source = fr.route.source
    cross = any(d.region is not None and d.region != source.region for d in fr.route.destinations)
    rtc = any(d.rtc for d in fr.spec.destinations) if fr.spec is not None else True
    beats = fleet.heartbeat_seconds if fr.spec is None or fr.spec.heartbeat else None
    try:
        return route_monthly_usd(fr.classes, cross_region=cross, rtc=rtc, source_region=source.region if cross else None,
                                 heartbeat_seconds=beats)
    except ConfigError:  # no transfer rate for that Region: the dearest one, never a silent cheaper guess
        log.warning("no transfer rate for the route's source Region in cost/pricing.json: priced at the dearest",
                    extra={"route": fr.route.name, "region": source.region})
        return route_monthly_usd(fr.classes, cross_region=cross, rtc=rtc, source_region=_dearest_region(), heartbeat_seconds=beats)


def cap_routes(routes: Sequence[R], fleet: FleetSettings, base: SloSpec) -> Admission[R]:
    """The routes a plan may probe (in the caps' order) and those left out; the admitted routes
    whose SLO their probes cannot support. Pure: :func:`admit` logs and counts."""
    out: Admission[R] = Admission(fixed_usd=fixed_monthly_usd(len(routes), fleet.classes, route_groups=fleet.route_groups,
                                                 heartbeat_seconds=fleet.heartbeat_seconds))
    for fr in sorted(routes, key=_rank):
        usd = route_cost(fr, fleet)
        if len(out.admitted) >= fleet.max_routes:
            out.left_out.append(LeftOut(fr.route.name, "max_routes", usd))
        elif out.monthly_usd + usd > fleet.monthly_usd:
            out.left_out.append(LeftOut(fr.route.name, "monthly_usd", usd))
        else:
            out.admitted.append(fr)
            out.routes_usd += usd
            requested = fr.spec.slo.target_percent / 100 if fr.spec is not None and fr.spec.slo is not None else base.target
            t = route_target(fr.route.name, fr.classes, requested, base.period_days)
            if t.lowered:
                out.unsupported.append(t)
    return out


def heartbeat_left_out(routes: Sequence[CappedRoute]) -> list[LeftOut]:
    """The routes whose group holds more heartbeat routes than :data:`HEARTBEAT_ROUTES_PER_GROUP`:
    those past it, which the Heartbeat leaves without heartbeats (their probes still run)."""
    by_group: dict[str, list[RouteSpec]] = {}
    for fr in routes:
        if fr.spec is not None:
            by_group.setdefault(fr.spec.group, []).append(fr.spec)
    return [LeftOut(s.name, HEARTBEAT_CAP, 0.0) for specs in by_group.values() for s in heartbeat_routes_within_cap(specs)[1]]


def admit(routes: Sequence[R], deps: CapsDeps) -> list[R]:
    """:func:`cap_routes`, logged and counted (``RoutesOverCap``, ``SloUnsupported``): the routes to plan;
    and the heartbeat routes past their group's cap (:func:`heartbeat_left_out`), counted in
    ``RoutesOverCap`` and named too (planned all the same: they lose their heartbeats only)."""
    fleet = deps.fleet
    a = cap_routes(routes, fleet, deps.slo)
    no_beats = heartbeat_left_out(a.admitted)
    deps.metrics.count(OVER_CAP, len(a.left_out) + len(no_beats))
    if no_beats:
        log.warning("routes left without heartbeats: their group holds more than one Heartbeat invocation serves", extra={
            "left_out": [x.to_json() for x in no_beats[:NAMED]], "left_out_count": len(no_beats),
            "routes": ", ".join(x.route for x in no_beats[:NAMED]), HEARTBEAT_CAP: HEARTBEAT_ROUTES_PER_GROUP, "fix": HEARTBEAT_FIX})
    deps.metrics.count(SLO_UNSUPPORTED, len(a.unsupported))
    if a.left_out:
        log.warning("routes left out by the fleet caps", extra={
            "left_out": [x.to_json() for x in a.left_out[:NAMED]], "left_out_count": len(a.left_out),
            "routes": ", ".join(x.route for x in a.left_out[:NAMED]), "planned": len(a.admitted),
            "max_routes": fleet.max_routes, "monthly_usd": fleet.monthly_usd, "modelled_usd": round(a.monthly_usd, 2),
            "fix": "raise REPLMON_FLEET max_routes / monthly_usd, or enroll fewer routes (remove the enroll tag from their buckets)"})
    if a.unsupported:
        log.warning("routes whose probes cannot support their SLO target", extra={
            "routes": ", ".join(t.route for t in a.unsupported[:NAMED]), "count": len(a.unsupported),
            "detail": [t.message() for t in a.unsupported[:NAMED]]})
    return a.admitted
