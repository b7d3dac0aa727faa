"""One run per route at a time (issue 19.3, fleet-design.md 3.3).

A run can outlast its schedule (a stalled route holds every probe to its timeout: hours at the
defaults), and each overlapping run would add its own PUTs, HEADs and in-flight large probes to
the route at exactly the wrong moment. So a run takes each route's lease before it probes it
(:func:`begin_run`, the state machine's BeginRouteRun) and gives it back after its Housekeeping
(:func:`end_run`, EndRouteRun). The lease expires ``LEASE_MARGIN_SECONDS`` after the run's own
worst case (probe/plan.py ``worst_case_seconds``), so a run that dies frees its routes by itself.

A run that finds a route's lease held skips that route: the skip is written
(``<route>#runs`` / ``<run id>#skipped``, with the holder and its expiry) and counted
(``RunSkipped{Route}``) once, however often the step is retried - never silent.

Expiry alone would let a run that *overran* its worst case (throttled Lambdas, slow Map children)
lose its routes to the next tick while it still probes them. So an expired lease held by another
run is taken only once that run is known not to be running (``deps.executions``, Step Functions'
DescribeExecution on the holder's execution ARN); while it runs, the route is skipped as if the
lease stood. Where that cannot be told (no execution ARN, the call denied), expiry decides.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from replmon.core.clock import Clock
from replmon.core.keys import plan_object_key
from replmon.core.ports import ExecutionStatus, Lease, LeaseStore, MetricsSink, PlanStore
from replmon.core.telemetry import ROUTE

log = logging.getLogger("replmon")

#: How long after its worst case a dead run's lease still holds its routes: covers the state
#: machine's own scheduling delays and Lambda retries beyond the steps' bounds.
LEASE_MARGIN_SECONDS = 600.0
RUN_SKIPPED = "RunSkipped"
#: How many skipped routes BeginRouteRun's output names (all are recorded in <route>#runs and counted).
SKIPPED_NAMED = 100


class LeaseDeps(Protocol):
    leases: LeaseStore | None
    metrics: MetricsSink
    clock: Clock
    executions: ExecutionStatus | None
    plans: PlanStore | None


def _store(deps: LeaseDeps) -> LeaseStore:
    if deps.leases is None:
        raise RuntimeError("no lease store wired (wiring.Deps.leases): runs cannot take their routes' leases")
    return deps.leases


def begin_run(event: Mapping[str, Any], deps: LeaseDeps) -> dict[str, Any]:
    """BeginRouteRun: ``{"plan": <PlanProbes' output>, "execution": <execution id>}`` in; the plan
    with only the routes (and their probes) this run now holds, plus ``lease`` (holder, until,
    routes), ``skipped`` (route, held_by, until) and ``probe_count`` out.

    The holder is the execution, so a retried BeginRouteRun takes the same leases again
    (``holder = :run`` in the condition) and finds its skips already recorded.
    """
    plan = dict(event["plan"])
    holder = str(event.get("execution") or plan["run_id"])
    # A fleet plan (fleet/planner.py) names each route's due classes: the lease records the tick's
    # start as their ls_<class> (the due rule's clock), only for a route that really starts.
    fleet: dict[str, list[str]] | None = plan.get("route_classes")
    names = list(fleet) if fleet is not None else [r["name"] for r in plan["routes"]]
    started_at = float(plan.get("tick_start") or 0.0)
    store, now = _store(deps), deps.clock.now()
    until = now + float(plan["bound_seconds"]) + LEASE_MARGIN_SECONDS
    held: list[str] = []
    skipped: list[dict[str, Any]] = []
    try:
        overran = _overrunning(store, deps.executions, names, holder, now)
        for name in names:
            current = overran.get(name)
            if current is None:
                started = {c: started_at for c in fleet[name]} if fleet is not None else {}
                if store.acquire(name, holder, now, until, started) is not None:
                    held.append(name)
                    continue
                current = store.leases([name]).get(name)
            held_by = (current.holder if current else None) or "unknown"
            held_until = (current.until if current else None) or 0.0
            classes = (sorted(fleet[name]) if fleet is not None
                       else sorted({p["size_class"] for p in plan["probes"] if p["route"]["name"] == name}))
            if store.record_skip(name, plan["run_id"], held_by, held_until, classes):
                deps.metrics.count(RUN_SKIPPED, dimensions={ROUTE: name})
            log.warning("route skipped: its previous run " + ("outlasted its lease and still runs" if name in overran
                                                               else "still holds the lease"),
                        extra={"route": name, "held_by": held_by, "until": held_until, "run_id": plan["run_id"]})
            skipped.append({"route": name, "held_by": held_by, "until": held_until})
    except Exception:
        for name in held:  # best effort: else they expire at ``until``
            try:
                store.release(name, holder, now)
            except Exception as exc:
                log.warning("lease not released after a failed begin", extra={"route": name, "error": f"{type(exc).__name__}: {exc}"})
        raise
    kept = set(held)
    plan["routes"] = [r for r in plan["routes"] if r["name"] in kept]
    if fleet is not None:
        plan["route_classes"] = {n: c for n, c in fleet.items() if n in kept}
    if plan.get("plan"):  # the probes are in the plan bucket: the Map reads only the held routes' probes
        if skipped:
            plan["plan"] = _held_plan(deps, plan, kept, holder)
        plan["probe_count"] = int(plan["plan"]["items"])
    else:
        plan["probes"] = [p for p in plan["probes"] if p["route"]["name"] in kept]
        plan["probe_count"] = len(plan["probes"])
    plan["lease"] = {"holder": holder, "until": until, "routes": held}
    # Named up to SKIPPED_NAMED (the state stays bounded at any fleet size); each is recorded and counted.
    plan["skipped"] = skipped[:SKIPPED_NAMED]
    if len(skipped) > SKIPPED_NAMED:
        plan["skipped_count"] = len(skipped)
    return plan


def _held_plan(deps: LeaseDeps, plan: Mapping[str, Any], kept: set[str], holder: str) -> dict[str, Any]:
    """The plan object without the skipped routes' probes, written beside the planned one (a
    retried BeginRouteRun writes the same object again)."""
    if deps.plans is None:
        raise RuntimeError("no plan store wired (wiring.Deps.plans): the plan in the plan bucket cannot be narrowed to the held routes")
    items = [p for p in deps.plans.get_plan(str(plan["plan"]["key"])) if p["route"]["name"] in kept]
    suffix = holder.rsplit(":", 1)[-1][-40:]
    ref = deps.plans.put_plan(plan_object_key(str(plan["tick"]), f"{plan['run_id']}-held-{suffix}"), items)
    return {"bucket": ref.bucket, "key": ref.key, "items": ref.items}


def _overrunning(store: LeaseStore, executions: ExecutionStatus | None, names: list[str], holder: str,
                 now: float) -> dict[str, Lease]:
    """The routes whose lease expired while another run holding it still runs (one BatchGetItem,
    then one DescribeExecution per other run holding an expired lease: a run holds many routes)."""
    if executions is None or not names:
        return {}
    asked: dict[str, bool | None] = {}
    out: dict[str, Lease] = {}
    for name, lease in store.leases(names).items():
        if lease.holder and lease.holder != holder and lease.until is not None and lease.until < now:
            if lease.holder not in asked:
                asked[lease.holder] = executions.running(lease.holder)
            if asked[lease.holder] is True:
                out[name] = lease
    return out


def end_run(event: Mapping[str, Any], deps: LeaseDeps) -> dict[str, Any]:
    """EndRouteRun: ``{"holder", "routes"}`` in; each lease this run still holds is released.
    A lease that is no longer this run's (it expired and another run took it) is left alone."""
    store, now = _store(deps), deps.clock.now()
    released: list[str] = []
    lost: list[str] = []
    for name in event.get("routes") or []:
        (released if store.release(name, str(event["holder"]), now) else lost).append(name)
    if lost:
        log.warning("leases no longer held at the end of the run (expired: the run outlasted its bound)",
                    extra={"routes": lost, "holder": event["holder"]})
    return {"released": released, "not_held": lost}
