"""PlanProbes for the fleet: the scheduled run plans every probe-mode route of the registry
(docs/design/fleet.md 4).

An input that names routes (``sam remote invoke``, ``replmon probe``, the lab) is planned as
before (probe/steps.py ``plan_step``), a route named alone (``"routes": ["primary"]``,
events/probe_route.json) being that probe-mode registry route; one that names sizes but no routes (events/probe_now.json)
probes the registry's probe-mode routes with those sizes. An input that names nothing - the
schedule's ``{}`` - reads the registry (every route group) and, per route, plans the size classes
due at this tick (core/cadence.py ``due_classes``; ``last_started`` is the lease's ``ls_<class>``,
written by BeginRouteRun only when the route really starts). The registry is the only list of
routes: the stack's own route is an item there (fleet/stack_route.py); an empty registry plans nothing.

First, fleet/caps.py admits the routes the fleet may probe at all (REPLMON_FLEET ``max_routes`` and
``monthly_usd``; the rest are left out for as long as the caps hold, named and ticketed).
Caps (FleetMaxRouteRuns, FleetMaxProbes) bound what one tick plans. What is over them is
*deferred*, never dropped: named in the plan's output (the first :data:`DEFERRED_NAMED`; all of
them in the log line), counted (``RunSkipped{Route}``), and - since it did not start, its
``ls_<class>`` is unchanged - due again at the next tick, where it comes first: routes are
planned most-overdue first, so a deferred route cannot starve.

Spread: every probe item carries ``wait_seconds``, its route's start offset
(core/cadence.py ``start_offset``, within SpreadSeconds) less the time already gone since the
tick's start; the child workflow waits that long before UploadProbe. Items are sorted by it.

Size: Step Functions passes at most 256 KiB between states (Step Functions' service quotas). A plan whose
probes would not fit inline (:data:`INLINE_PLAN_BYTES`) is written to the plan bucket (core/keys.py
``plan_object_key``) as one JSON array, and the state machine's Map reads it with ``ItemReader``
(``s3:getObject``, ``InputType JSON``); the state then carries only the route names and classes.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from replmon.core.cadence import ProbeClass, ProbeClasses, due_classes, start_offset, tick_start
from replmon.core.errors import ConfigError, StoreUnavailable
from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import new_run_id, plan_object_key, tick_id
from replmon.core.ports import Lease, LeaseRead, LeaseStore, PlanStore, RegistryStore
from replmon.core.registry import InvalidRoute, RouteSpec, note_invalid, read_registry
from replmon.core.route import Route
from replmon.core.telemetry import ROUTE
from replmon.fleet.caps import admit
from replmon.fleet.lease import RUN_SKIPPED
from replmon.probe.plan import CLEANUP_BOUND_SECONDS, HOUSEKEEPING_BOUND_SECONDS, MAX_PLAN_BYTES, RECORD_BOUND_SECONDS
from replmon.probe.request import PollSettings, ProbeRequest, load_request
from replmon.probe.state import ProbeState
from replmon.probe.steps import ProbeDeps
from replmon.probe.steps import plan_step as adhoc_plan_step

log = logging.getLogger("replmon")

__all__ = ["DEFERRED_NAMED", "INLINE_PLAN_BYTES", "FleetPlanDeps", "FleetRoute", "fleet_plan", "named_routes", "plan_step"]

#: Probe items above this many bytes go to the plan bucket: the state keeps room for the route
#: list, the leases and the skips below the 256 KiB quota.
INLINE_PLAN_BYTES = 96 * 1024
#: The route names and classes one run's state carries at most (the probes themselves may be in the
#: plan bucket; names are not): ~2,000 routes of ~20 characters per tick, well below the quota.
STATE_ROUTE_BYTES = 128 * 1024
#: How many deferred routes the plan's output names (all are counted and logged): the output stays
#: bounded whatever the registry holds.
DEFERRED_NAMED = 100


class FleetPlanDeps(ProbeDeps, Protocol):
    fleet: FleetSettings
    registry: RegistryStore | None
    leases: LeaseStore | None
    plans: PlanStore | None


@dataclass(frozen=True)
class FleetRoute:
    """One route as the planner sees it: where it is, its classes, its probe settings."""

    route: Route
    group: str
    classes: ProbeClasses
    timeout_seconds: int
    max_concurrency: int = 1
    spec: RouteSpec | None = None  # its registry item (None: the stack's own route)


@dataclass(frozen=True)
class _Candidate:
    fr: FleetRoute
    due: list[ProbeClass]
    overdue: float  # seconds past due (the most overdue class); inf for a class that never ran
    held: bool  # its lease is visibly held by another run: planned last (BeginRouteRun will skip it)
    offset: float

    @property
    def probes(self) -> int:
        return sum(c.trials for c in self.due)


#: Input keys that make a run ad hoc (``events/probe_now.json`` names sizes, not routes: the
#: registry's probe-mode routes with those sizes). The schedule's ``{}`` names none of them.
REQUEST_KEYS = frozenset(ProbeRequest.model_fields) - {"run_id"}


def plan_step(event: Mapping[str, Any], deps: FleetPlanDeps) -> dict[str, Any]:
    """PlanProbes' handler: the fleet plan when the input asks for nothing in particular (the
    schedule's ``{}``); a request plan when it names sizes, routes or the like (no routes: the
    registry's probe-mode routes)."""
    if set(event) & REQUEST_KEYS or deps.registry is None:
        if any(isinstance(r, str) for r in event.get("routes") or []):
            event = {**event, "routes": named_routes(event["routes"], deps)}
        elif "routes" not in event and deps.registry is not None:
            # every enrolled route, within the same caps as the schedule's plan (fleet/caps.py)
            event = {**event, "routes": [r.route.model_dump(mode="json", exclude_none=True) for r in admit(registry_routes(deps), deps)]}
        return adhoc_plan_step(event, deps)
    routes = registry_routes(deps)
    if not routes:
        log.info("the registry holds no probe-mode route: nothing to plan")
    return fleet_plan(routes, deps, event)


def named_routes(routes: Sequence[Any], deps: FleetPlanDeps) -> list[Any]:
    """``routes`` with each name (a string, e.g. ``events/probe_route.json``'s ``["primary"]``)
    replaced by that probe-mode registry route, as the schedule would probe it (its member roles);
    a route given in full stays as it is. Named routes are probed as asked: the fleet's caps bound
    what the registry as a whole costs, not one route asked for by name."""
    names = [r for r in routes if isinstance(r, str)]
    if deps.registry is None:
        raise ConfigError(f"invalid probe configuration:\n  routes: {names} name registry routes, but this deployment has no "
                          "registry; give each route in full, e.g. {\"name\": \"primary\", \"source\": {\"bucket\": \"src\"}, "
                          "\"destinations\": [{\"bucket\": \"dst\"}]}")
    known = {fr.route.name: fr.route for fr in registry_routes(deps)}
    unknown = [n for n in names if n not in known]
    if unknown:
        listed = ", ".join(sorted(known)[:20]) + (" ..." if len(known) > 20 else "")
        raise ConfigError(f"invalid probe configuration:\n  routes: {', '.join(map(repr, unknown))} is not a probe-mode registry "
                          f"route; use one of: {listed or '(none enrolled)'} (replmon report --fleet lists them), or enroll it with replmon fleet put")
    return [known[r].model_dump(mode="json", exclude_none=True) if isinstance(r, str) else r for r in routes]


def registry_routes(deps: FleetPlanDeps) -> list[FleetRoute]:
    """Every probe-mode route of every route group, with its classes (its own, else the fleet's).

    One bad item never stops the fleet: an item that is not a valid route (core/registry.py
    :class:`InvalidRoute`), a route whose probe settings cannot be turned into probes, or a group whose
    read fails is skipped and counted, ``InvalidRoute{Route, Reason}`` (a ticket alarm per route),
    with a log line naming the item and the field; every other route is planned."""
    assert deps.registry is not None
    fleet_classes = deps.fleet.classes
    out: list[FleetRoute] = []
    read = read_registry(deps.registry, deps.fleet.groups)  # every group failing is the table: the run fails (ExecutionsFailed)
    for bad in read.invalid:
        note_invalid(deps.metrics, bad)
    for spec in read.routes:
        if not spec.probing:
            continue
        probe = spec.probe
        try:
            out.append(FleetRoute(
                route=spec.to_route(deps.fleet.member_role_prefix), group=spec.group, classes=spec.classes(fleet_classes),
                timeout_seconds=probe.timeout_seconds if probe else _default_timeout(deps),
                max_concurrency=probe.max_concurrency if probe else 1, spec=spec))
        except (ConfigError, ValueError) as exc:
            note_invalid(deps.metrics, InvalidRoute(spec.group, spec.name, "BadField", "probe", f"{type(exc).__name__}: {exc}"))
    return out


#: Per-route lease reads tried before a failed batch is taken as the table's failure, not one route's.
LEASE_PROBE_ROUTES = 3
#: How long the routes a batch left unread are read again, one at a time (each with the SDK's own
#: retries), before the rest are left out of this tick: well inside PlanProbes' Timeout (template.yaml).
LEASE_REREAD_SECONDS = 30.0


def route_leases(routes: Sequence[FleetRoute], deps: FleetPlanDeps) -> tuple[dict[str, Lease], list[FleetRoute]]:
    """The routes' leases in batches, and the routes whose lease could be read. BatchGetItem returns a
    throttled key in ``UnprocessedKeys`` while it answers the others ("Amazon DynamoDB API Reference",
    BatchGetItem); the adapter retries those and keeps what it read (``LeaseStore.read_leases``). Only
    the routes it left unread are read again, one at a time for at most :data:`LEASE_REREAD_SECONDS`;
    a route still unread is left out of this tick, counted as ``InvalidRoute{Reason=ReadFailed}``.
    When nothing could be read and the first reads on their own fail too, it is the table: the first
    error is raised (the run fails, ExecutionsFailed)."""
    if deps.leases is None or not routes:
        return {}, list(routes)
    names = [r.route.name for r in routes]
    batch: StoreUnavailable | None = None
    try:
        read = deps.leases.read_leases(names)
    except StoreUnavailable as exc:  # no key read at all: every route is read on its own
        batch, read = exc, LeaseRead({}, {n: f"{type(exc).__name__}: {exc}" for n in names})
    if not read.unread:
        return dict(read.leases), list(routes)
    out = dict(read.leases)
    got = {n for n in names if n not in read.unread}
    failed = 0
    deadline = deps.clock.now() + LEASE_REREAD_SECONDS
    for fr in routes:
        name = fr.route.name
        if name not in read.unread:
            continue
        why = read.unread[name]
        if deps.clock.now() < deadline:
            try:
                again = deps.leases.read_leases([name])
                if name not in again.unread:
                    out.update(again.leases)
                    got.add(name)
                    continue
                why = again.unread[name]
            except StoreUnavailable as exc:
                why = f"{type(exc).__name__}: {exc}"
                failed += 1
                if batch is not None and not got and failed >= min(LEASE_PROBE_ROUTES, len(routes)):
                    raise batch from exc
        else:
            why = f"{why}; not read again within {LEASE_REREAD_SECONDS:.0f} s"
        note_invalid(deps.metrics, InvalidRoute(fr.group, name, "ReadFailed", "(lease)", why))
    return out, [fr for fr in routes if fr.route.name in got]


def _default_timeout(deps: ProbeDeps) -> int:
    return int(deps.defaults.get("timeout_seconds") or ProbeRequest.model_fields["timeout_seconds"].default)


def _settings(deps: FleetPlanDeps, event: Mapping[str, Any]) -> ProbeRequest:
    """The run-wide probe settings (target, poll policy) from the deployment's defaults, validated
    as a request is (a placeholder route: the routes come from the registry)."""
    data = {k: v for k, v in deps.defaults.items() if k in ("target_seconds", "poll", "timeout_seconds")}
    data.update({k: v for k, v in event.items() if k == "run_id"})
    data["routes"] = [{"name": "placeholder", "source": {"bucket": "placeholder"}, "destinations": [{"bucket": "placeholder"}]}]
    return load_request(data, poll_function_timeout=deps.poll_function_timeout)


def fleet_plan(routes: Sequence[FleetRoute], deps: FleetPlanDeps, event: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The plan of one tick: due classes per route, caps, spread, inline or in the plan bucket."""
    event = event or {}
    routes = admit(routes, deps)  # the caps (max routes, monthly $) and each route's SLO target (fleet/caps.py)
    fleet, now = deps.fleet, deps.clock.now()
    settings = _settings(deps, event)
    tick_s = fleet.tick_seconds
    start = tick_start(now, tick_s)
    run_id = settings.run_id or new_run_id(now)
    leases, routes = route_leases(routes, deps)

    candidates: list[_Candidate] = []
    for fr in routes:
        lease = leases.get(fr.route.name)
        last = dict(lease.last_started) if lease else {}
        due = due_classes(fr.route.name, fr.classes, start, tick_s, last)
        if not due:
            continue
        # a class that never ran ranks first: a route deferred before its first run must not starve
        overdue = max((start - last[c.label] - c.every_seconds) if c.label in last else math.inf for c in due)
        held = bool(lease and lease.holder and lease.until is not None and lease.until >= now)
        candidates.append(_Candidate(fr, due, overdue, held, start_offset(fr.route.name, fleet.spread_seconds)))
    # Most overdue first (a deferred route leads the next tick), visibly held routes last.
    candidates.sort(key=lambda c: (c.held, -c.overdue, c.offset, c.fr.route.name))

    chosen: list[_Candidate] = []
    deferred: list[dict[str, Any]] = []
    probes_total = 0
    state_bytes = 0
    for c in candidates:
        # what the route adds to the state even when its probes are in the plan bucket: its name in
        # route_classes and in the lease's routes, its due classes
        # and in route_probes (its probe count: its last probe releases its lease)
        route_bytes = 3 * len(c.fr.route.name) + sum(len(x.label) + 3 for x in c.due) + 16
        if len(chosen) >= fleet.max_route_runs:
            reason = "FleetMaxRouteRuns"
        elif probes_total + c.probes > fleet.max_probes:
            reason = "FleetMaxProbes"
        elif state_bytes + route_bytes > STATE_ROUTE_BYTES:
            reason = "StateSize"  # lower FleetMaxRouteRuns: the rest run at the next ticks
        else:
            chosen.append(c)
            probes_total += c.probes
            state_bytes += route_bytes
            continue
        deferred.append({"route": c.fr.route.name, "classes": [x.label for x in c.due], "reason": reason})
    for d in deferred:
        deps.metrics.count(RUN_SKIPPED, dimensions={ROUTE: d["route"]})
    if deferred:
        log.warning("routes deferred to the next tick by the fleet caps", extra={
            "deferred": deferred, "max_route_runs": fleet.max_route_runs, "max_probes": fleet.max_probes, "run_id": run_id})

    elapsed = max(0.0, now - start)
    items: list[dict[str, Any]] = []
    for c in sorted(chosen, key=lambda c: (c.offset, c.fr.route.name)):
        wait = max(0, math.floor(c.offset - elapsed))
        for p in _route_probes(c.fr, c.due, run_id, now, settings):
            items.append({**p.dump(), "wait_seconds": wait})
    max_timeout = max((c.fr.timeout_seconds for c in chosen), default=0)
    concurrency = max(1, min(fleet.max_probes, sum(c.fr.max_concurrency for c in chosen) or 1))
    waves = math.ceil(len(items) / concurrency) if items else 0
    max_wait = max((i["wait_seconds"] for i in items), default=0)

    out: dict[str, Any] = {
        "run_id": run_id, "planned_at": now, "tick": tick_id(start), "tick_start": start,
        "max_concurrency": concurrency,
        # the run's worst case (probes in waves of max_concurrency, the spread, housekeeping): the
        # routes' leases expire this long (plus a margin) after BeginRouteRun
        "bound_seconds": float(max_wait + waves * (max_timeout + RECORD_BOUND_SECONDS + CLEANUP_BOUND_SECONDS) + HOUSEKEEPING_BOUND_SECONDS),
        "route_classes": {c.fr.route.name: [x.label for x in c.due] for c in chosen},
        "route_probes": {c.fr.route.name: c.probes for c in chosen},
        "planned_routes": len(chosen), "probe_count": len(items),
        "deferred": deferred[:DEFERRED_NAMED], "deferred_count": len(deferred),
        "routes": [c.fr.route.model_dump(mode="json", exclude_none=True) for c in chosen],
        "probes": items,
    }
    if _size(out) > INLINE_PLAN_BYTES:
        if deps.plans is None:
            raise ConfigError(f"the plan of {len(items)} probes ({_size(out) // 1024} KiB) does not fit in the state "
                              f"({INLINE_PLAN_BYTES // 1024} KiB) and no plan bucket is wired (REPLMON_FLEET plan_bucket, "
                              "the stack's PlanBucket)")
        out["plan"] = _as_dict(deps.plans.put_plan(plan_object_key(out["tick"], run_id), items))
        out["probes"] = []
        out["routes"] = []  # the probes carry their routes; Housekeeping sweeps inline plans' routes only
        if _size(out) > MAX_PLAN_BYTES:
            raise ConfigError(f"{len(chosen)} planned routes do not fit in the state even with the probes in the plan "
                              f"bucket; lower ExpertSettings fleet_max_route_runs")
    log.info("fleet plan", extra={"run_id": run_id, "tick": out["tick"], "routes": len(chosen), "probes": len(items),
                                  "deferred": len(deferred), "plan": out.get("plan")})
    return out


def _route_probes(fr: FleetRoute, due: Sequence[ProbeClass], run_id: str, now: float, settings: ProbeRequest) -> list[ProbeState]:
    """Trials in rounds (every due class once, then again), ids as probe/plan.py makes them."""
    poll: PollSettings = settings.poll
    out = []
    for trial in range(1, max(c.trials for c in due) + 1):
        for c in due:
            if trial <= c.trials:
                out.append(ProbeState(
                    probe_id=f"{run_id}-{fr.route.name}-{c.label}-t{trial}", run_id=run_id, planned_at=now, route=fr.route,
                    size_bytes=c.size_bytes, size_class=c.label, trial=trial, timeout_seconds=fr.timeout_seconds,
                    target_seconds=settings.target_seconds, poll_settings=poll))
    return out


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def _as_dict(ref: Any) -> dict[str, Any]:
    return {"bucket": ref.bucket, "key": ref.key, "items": ref.items}
