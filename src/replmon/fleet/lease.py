"""One run per route at a time (docs/design/fleet.md 5).

A run can outlast its schedule (a stalled route holds every probe to its timeout: hours at the
defaults), and each overlapping run would add its own PUTs, HEADs and in-flight large probes to
the route at exactly the wrong moment. So a run takes each route's lease before it probes it
(:func:`begin_run`, the state machine's BeginRouteRun) and gives it back after its Housekeeping
(:func:`end_run`, EndRouteRun) - or earlier, route by route: each probe's EndProbe (inside the
state machine's Map, after its Cleanup) adds the probe to the lease's set of ended probes, and the
route's last one releases the lease (:func:`end_probe`). So a stalled route holds only its own lease:
the routes that started with it run again at their next tick. The lease expires ``LEASE_MARGIN_SECONDS`` after the run's own
worst case (probe/plan.py ``worst_case_seconds``), so a run that dies frees its routes by itself.

A run that finds a route's lease held skips that route: the skip is written
(``<route>#runs`` / ``<run id>#skipped``, with the holder and its expiry) and counted
(``RunSkipped{Route}``) once, however often the step is retried - never silent.

Expiry alone would let a run that *overran* its worst case (throttled Lambdas, slow Map children)
lose its routes to the next tick while it still probes them. So an expired lease held by another
run is taken only once that run is known not to be running (``deps.executions``, Step Functions'
DescribeExecution on the holder's execution ARN); while it runs, the route is skipped as if the
lease stood. Where that cannot be told (no execution ARN, the call denied), expiry decides.

A holder known to have ended does not block the next run even before its lease expires: an
execution Step Functions reports SUCCEEDED, or failed and no longer redrivable (a failed one that can
be redriven runs again under the same ARN: its expiry decides, adapters/executions.py), or a local run (``replmon probe``, the lab: its lease
carries its host and pid, :func:`local_owner`) whose process is gone on this host. Its lease is
taken with a condition on that holder (``replacing``), so a holder that is in fact alive but whose
lease changed meanwhile is never displaced. ``replmon fleet release ROUTE`` ends a lease by hand
(:func:`release_by_hand`), recorded in ``<route>#runs``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from replmon.core.clock import Clock
from replmon.core.errors import StoreUnavailable
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
    counts = _probe_counts(deps, plan, names)
    owner = getattr(deps, "run_owner", None)  # a local run: its host and pid, so a later run can tell it ended
    held: list[str] = []
    skipped: list[dict[str, Any]] = []
    unleased: list[dict[str, Any]] = []
    try:
        overran, ended, unread = _standing(store, deps.executions, names, holder, now)
        for name in names:
            if name in unread:  # its lease item could not be read: not started this run, named; the others start
                unleased.append({"route": name, "error": unread[name][:200]})
                deps.metrics.count(RUN_SKIPPED, dimensions={ROUTE: name})
                log.error("route skipped: its lease could not be read", extra={"route": name, "error": unread[name][:500]})
                continue
            current = overran.get(name)
            if current is None:
                started = {c: started_at for c in fleet[name]} if fleet is not None else {}
                if ended.get(name):
                    log.warning("route's lease taken from a run that no longer runs", extra={"route": name, "held_by": ended[name]})
                try:
                    if store.acquire(name, holder, now, until, started, run=str(plan["run_id"]), probes=counts.get(name),
                                     replacing=ended.get(name), owner=owner) is not None:
                        held.append(name)
                        continue
                    current = store.leases([name]).get(name)
                except StoreUnavailable as exc:  # this route's item throttled or refused: only this route waits
                    unleased.append({"route": name, "error": str(exc)[:200]})
                    deps.metrics.count(RUN_SKIPPED, dimensions={ROUTE: name})
                    log.error("route skipped: its lease could not be taken", extra={"route": name, "error": str(exc)[:500]})
                    continue
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
    if unleased and not held and not skipped:  # the table, not a route: retried, then the run fails (ExecutionsFailed)
        raise StoreUnavailable(f"no route's lease could be taken: {unleased[0]['error']}")
    kept = set(held)
    plan["routes"] = [r for r in plan["routes"] if r["name"] in kept]
    if fleet is not None:
        plan["route_classes"] = {n: c for n, c in fleet.items() if n in kept}
    if "route_probes" in plan:
        plan["route_probes"] = {n: c for n, c in plan["route_probes"].items() if n in kept}
    if plan.get("plan"):  # the probes are in the plan bucket: the Map reads only the held routes' probes
        if skipped or unleased:
            plan["plan"] = _held_plan(deps, plan, kept, holder)
        plan["probe_count"] = int(plan["plan"]["items"])
    else:
        plan["probes"] = [p for p in plan["probes"] if p["route"]["name"] in kept]
        plan["probe_count"] = len(plan["probes"])
    plan["lease"] = {"holder": holder, "until": until, "routes": held}
    # Named up to SKIPPED_NAMED (the state stays bounded at any fleet size); each is recorded and counted.
    plan["skipped"] = skipped[:SKIPPED_NAMED]
    if unleased:  # counted RunSkipped too; named so the run says which routes its store refused
        plan["unleased"] = unleased[:SKIPPED_NAMED]
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


def _probe_counts(deps: LeaseDeps, plan: Mapping[str, Any], names: list[str]) -> dict[str, int]:
    """Each route's probe count in the plan: its last probe to end releases its lease (:func:`end_probe`)."""
    counted: dict[str, int] = dict(plan.get("route_probes") or {})  # a fleet plan carries them (fleet/planner.py)
    if not counted:
        probes = plan.get("probes") or []
        if not probes and plan.get("plan") and deps.plans is not None:  # in the plan bucket
            probes = deps.plans.get_plan(str(plan["plan"]["key"]))
        for p in probes:
            counted[p["route"]["name"]] = counted.get(p["route"]["name"], 0) + 1
    return {n: int(counted[n]) for n in names if n in counted}


def holder_ended(lease: Lease, executions: ExecutionStatus | None) -> bool | None:
    """Whether ``lease``'s holder has ended: True when known to have ended (a local run, ``owner``
    host and pid, whose process is gone on this host; an execution that can never run again),
    False when it runs, None when it cannot be told (another machine's local run, a local pid alive but
    its start time unknown, no answer)."""
    host, pid = lease.owner.get("host"), lease.owner.get("pid")
    if host and pid:
        if host != socket.gethostname() or not pid.isdigit():
            return None  # another machine's run: its expiry decides
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # another user's live process has the pid: its start time (/proc/<pid>/stat is world-readable) tells
        # A live pid that started at another time names another process (the pid reused). Where that
        # cannot be told (a lease written without ``started``, no /proc, the process gone meanwhile),
        # None: the lease's expiry decides, so a reused pid never holds a route past it.
        started, now_started = lease.owner.get("started"), process_started(int(pid))
        if not started or now_started is None:
            return None
        return now_started != started
    if executions is None or not lease.holder:
        return None
    running = executions.running(lease.holder)
    return None if running is None else not running


def local_owner() -> dict[str, str]:
    """A local run's identity on its lease (local/execution.py): this host and process, and the
    process's start time where the system tells it (so a reused pid is not taken for the run)."""
    owner = {"host": socket.gethostname(), "pid": str(os.getpid())}
    started = process_started(os.getpid())
    if started:
        owner["started"] = started
    return owner


def process_started(pid: int) -> str | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22, Linux's
    proc(5)); None where there is no /proc or the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def _standing(store: LeaseStore, executions: ExecutionStatus | None, names: list[str], holder: str,
              now: float) -> tuple[dict[str, Lease], dict[str, str], dict[str, str]]:
    """Other runs' leases on ``names``: those that expired while their run still runs (skipped as
    held), those whose holder ended (taken although unexpired: ``replacing``), and the routes whose
    lease item could not be read (BatchGetItem's keys left unprocessed after the adapter's retries,
    ``LeaseStore.read_leases``: only those routes wait; nothing read at all is the table, raised).
    One BatchGetItem, then at most one DescribeExecution per other holder (a run holds many routes)."""
    if not names:
        return {}, {}, {}
    ended_by: dict[str, bool | None] = {}
    overran: dict[str, Lease] = {}
    ended: dict[str, str] = {}
    read = store.read_leases(names)
    for name, lease in read.leases.items():
        if not lease.holder or lease.holder == holder:
            continue
        if lease.holder not in ended_by:
            ended_by[lease.holder] = holder_ended(lease, executions)
        if ended_by[lease.holder] is True:
            ended[name] = lease.holder
        elif ended_by[lease.holder] is False and lease.until is not None and lease.until < now:
            overran[name] = lease  # expired, and its run still runs: skipped as if held
    return overran, ended, dict(read.unread)


def end_run(event: Mapping[str, Any], deps: LeaseDeps) -> dict[str, Any]:
    """EndRouteRun: ``{"holder", "routes", "run_id"}`` in; each lease this run still holds is released
    (a route whose last probe released it already counts as released). A lease that is no longer
    this run's (it expired and another run took it) is left alone.

    ``{"route": {"name"}, "run_id", "probe_id"}`` in (the Map's EndProbe, after each probe's Cleanup):
    :func:`end_probe`."""
    if "probe_id" in event:
        return end_probe(event, deps)
    store, now = _store(deps), deps.clock.now()
    run = str(event["run_id"]) if event.get("run_id") else None
    released: list[str] = []
    lost: list[str] = []
    failed: list[str] = []
    for name in event.get("routes") or []:  # every route tried: one that cannot be released holds no other
        try:
            (released if store.release(name, str(event["holder"]), now, run=run) else lost).append(name)
        except Exception as exc:
            failed.append(f"lease of route {name} not released: {' '.join(str(exc).split())[:300]}")
    if lost:
        log.warning("leases no longer held at the end of the run (a later run took them: released when their probes "
                    "ended, or expired because the run outlasted its bound)",
                    extra={"routes": lost, "holder": event["holder"]})
    if failed:  # retried by the state machine (a retry releases the rest: `run` matches what is released already)
        log.error("leases not released at the end of the run: the next run takes them once this execution has ended",
                  extra={"errors": failed, "holder": event["holder"]})
        raise StoreUnavailable("; ".join(failed)[:1000])
    return {"released": released, "not_held": lost}


def end_probe(event: Mapping[str, Any], deps: LeaseDeps) -> dict[str, Any]:
    """One probe of a route-run ended (its Cleanup ran, or failed): the route's lease is released
    when its last probe ends, so a stalled route holds only its own lease, not the run's other routes'.
    Idempotent (a retried call adds the same probe id to the lease's set of ended probes)."""
    route, run = str(event["route"]["name"]), str(event["run_id"])
    released = _store(deps).end_probe(route, run, str(event["probe_id"]), deps.clock.now())
    if released:
        log.info("route's lease released: its probes ended", extra={"route": route, "run_id": run})
    return {"route": route, "released": bool(released), "held": released is False}


def release_by_hand(store: LeaseStore, route: str, by: str, now: float) -> Lease | None:
    """``replmon fleet release ROUTE``: end the route's lease whoever holds it, and keep the record
    (``<route>#runs`` / ``<time>#released``: the holder, its expiry, who released it). The release is
    conditional on the holder just read, so a run that took the lease meanwhile keeps it. Returns the
    lease that was ended, None when the route held none."""
    lease = store.leases([route]).get(route)
    if lease is None or not lease.holder:
        return None
    if not store.release(route, lease.holder, now):
        return None  # released or taken between the read and the write: nothing ended by hand
    log.warning("route's lease ended by hand", extra={"route": route, "held_by": lease.holder, "until": lease.until, "by": by})
    try:
        store.record_release(route, lease.holder, lease.until, by, now)
    except Exception as exc:
        raise ReleaseNotRecorded(lease, exc) from exc
    return lease


class ReleaseNotRecorded(RuntimeError):
    """The lease was ended by hand, but its record (``<route>#runs``) could not be written."""

    def __init__(self, lease: Lease, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.lease, self.cause = lease, cause
