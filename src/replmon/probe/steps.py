"""The probe's steps, each what one Lambda function does: the state machine's JSON in, the next
state's JSON out, with its dependencies (:class:`ProbeDeps`) passed in, e.g.
``upload_step(event, deps)`` where the handler's ``deps`` comes from the composition root
(:mod:`replmon.wiring`: from the environment in Lambda, the lab's or a test's otherwise).

replmon's own state is validated with pydantic directly: Powertools Parser would add nothing for
a JSON document without an envelope, and its import costs ~50 ms of every cold start. Parser
does the envelope work where AWS's event shapes arrive (S3 and SQS events).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

from replmon.core.clock import Clock
from replmon.core.errors import StoreUnavailable
from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import new_run_id, record_sort_key
from replmon.core.measured import measured_routes, require_registry
from replmon.core.ports import LatencyTable, MetricsSink, ObjectStores, RecordSpool, RegistryStore
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.route import Endpoint
from replmon.core.telemetry import ROUTE
from replmon.probe.latency_report import ReportRequest, build_report
from replmon.probe.plan import plan_output
from replmon.probe.poll import poll_replication, start_polling
from replmon.probe.polling import earliest_completion
from replmon.probe.request import load_request
from replmon.probe.results import to_record
from replmon.probe.state import ProbeState
from replmon.probe.upload import UploadSettings, probe_key, upload_probe
from replmon.signals.arrivals import apply_arrivals
from replmon.signals.health import route_health
from replmon.signals.inflight import clear_in_flight, mark_in_flight
from replmon.signals.rollup import store_record
from replmon.signals.slo import SloSpec

log = logging.getLogger("replmon")

HISTORY_DAYS = 7
HISTORY_LIMIT = 50


class ProbeDeps(Protocol):
    """What the probe's steps need from outside (the composition root's ``Deps`` has it)."""

    stores: ObjectStores
    store: LatencyTable
    metrics: MetricsSink
    clock: Clock
    upload: UploadSettings
    retention_days: int
    defaults: dict[str, Any]  # REPLMON_DEFAULTS: the deployment's request defaults (sizes, trials...; never routes)
    spool: RecordSpool | None
    poll_function_timeout: float
    event_skew: float
    slo: SloSpec
    rpo_window: float


def plan_step(event: Mapping[str, Any], deps: ProbeDeps) -> dict[str, Any]:
    """PlanProbes: the Lambda edge of a request: validate the input (over the deployment's
    defaults) and expand it into one state per probe."""
    request = load_request(event, deps.defaults, poll_function_timeout=deps.poll_function_timeout)
    now = deps.clock.now()
    return plan_output(request, request.run_id or new_run_id(now), now)


def upload_step(event: Mapping[str, Any], deps: ProbeDeps) -> dict[str, Any]:
    state = ProbeState.model_validate(event)
    out = upload_probe(state, deps.stores(state.route.source), deps.clock, deps.upload)
    if out.upload is not None:
        # The RPO counts the age of probes in flight; RecordResult removes the marker (TTL: the timeout).
        try:
            mark_in_flight(deps.store, state.route.name, record_sort_key(state.run_id, state.probe_id),
                           out.upload.put_end, out.upload.put_end + state.timeout_seconds + 3600)
        except Exception as exc:  # the probe still measures; the RPO misses this probe while it flies
            log.warning("in-flight marker not written", extra={"error": f"{type(exc).__name__}: {exc}", "probe_id": state.probe_id})
    return out.dump()


def history_start(state: ProbeState, deps: ProbeDeps) -> tuple[float, str | None]:
    """Seconds after the PUT before which completion is implausible, from the route's history.
    The lookup is optional: if the store cannot answer, polling starts at 0 (never an ERROR)."""
    if not state.poll_settings.use_history:
        return 0.0, None
    now = deps.clock.now()
    try:
        recent = deps.store.query(state.route.name, now - HISTORY_DAYS * 86_400, now, newest_first=True, limit=HISTORY_LIMIT)
    except Exception as exc:  # the store is down: the probe still measures, from the start
        log.warning("history lookup failed; polling from the start", extra={"error": f"{type(exc).__name__}: {exc}"})
        return 0.0, f"history unavailable ({type(exc).__name__}); polled from the start"
    pairs = [(r.size_bytes, r.latency_lo) for r in recent if r.status is ProbeStatus.COMPLETED and r.latency_lo]
    return earliest_completion(state.size_bytes, pairs), None


def poll_step(event: Mapping[str, Any], deps: ProbeDeps) -> dict[str, Any]:
    state = ProbeState.model_validate(event)
    if state.poll is None:
        not_before, note = history_start(state, deps)
        state = start_polling(state, not_before)
        assert state.poll is not None
        state.poll.history_note = note
    return poll_replication(state, deps.stores, deps.clock).dump()


def record_step(event: Mapping[str, Any], deps: ProbeDeps, interrupted: str | None = None) -> dict[str, Any]:
    """Store the record once; if the store is unavailable, spool it for a later run to replay.

    Metrics are published by whichever write first holds the record durably (the store, or the
    spool), so a retry or a replay never counts a probe twice.
    """
    deps.clock.check()  # an interrupted local run records its probes itself (local/execution.py)
    state = ProbeState.model_validate(event)
    record = to_record(state, deps.retention_days, interrupted)
    try:
        wrote = store_record(deps.store, record, deps.clock.now(), threshold_seconds=deps.slo.threshold_seconds,
                             period_days=deps.slo.period_days)
        state.recorded = "stored" if wrote else "duplicate"
    except StoreUnavailable as exc:
        if deps.spool is None:
            raise
        deps.spool.spool(record)  # if this fails too, the state machine retries, then Cleanup counts RecordLost
        log.warning("latency store unavailable; record spooled", extra={"error": str(exc), "probe_id": record.probe_id})
        state.recorded, state.spooled_because, wrote = "spooled", f"{exc}"[:300] or type(exc).__name__, True
        deps.metrics.count("RecordSpooled", dimensions={ROUTE: record.route})
    if wrote:
        deps.metrics.publish(record)
    if state.recorded in ("stored", "duplicate"):
        after_record(record, deps, clear_marker=state.recorded == "duplicate")
    return state.dump()


def after_record(record: ProbeRecord, deps: ProbeDeps, clear_marker: bool = False) -> None:
    """Narrow the interval with replica events that came first. The record's transaction removed
    the probe's in-flight marker (signals/rollup.py record_ops); a duplicate's was cancelled, so
    ``clear_marker`` deletes it here (the first write's transaction will have, but a write from
    before markers were removed that way may not). Both are refinements: a failure is logged, the
    record stands."""
    try:
        note = apply_arrivals(deps.store, deps.metrics, record, deps.event_skew, deps.slo, deps.clock.now())
        if note:
            log.info("replica events applied", extra={"probe_id": record.probe_id, "result": note})
        if clear_marker:
            clear_in_flight(deps.store, record.route, record.sort_key)
    except Exception as exc:
        log.warning("replica events not applied", extra={"error": f"{type(exc).__name__}: {exc}", "probe_id": record.probe_id})


def clean_probe(state: ProbeState, deps: ProbeDeps) -> tuple[dict[str, int], list[str]]:
    """Delete every version of the probe and abort its incomplete multipart uploads on the source
    and on each replica: what each side removed, and each side that failed (counted as
    CleanupFailed and logged with the probe, never silent; the housekeeping sweep removes what is
    left once the probe has expired)."""
    key = probe_key(state)
    cleaned: dict[str, int] = {}
    failures: list[str] = []
    sides: list[tuple[str, Endpoint]] = [("source", state.route.source), *[(f"destination:{d.bucket}", d) for d in state.route.destinations]]
    for name, endpoint in sides:
        store = deps.stores(endpoint)
        try:
            cleaned[name] = store.delete_all_versions(endpoint.bucket, key)
            aborted = store.abort_uploads(endpoint.bucket, key)
            if aborted:
                cleaned[f"{name}:uploads"] = aborted
        except Exception as exc:  # a dead or hung side: count it and move on
            failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:200]}")
    if failures:
        deps.metrics.count("CleanupFailed", len(failures), dimensions={ROUTE: state.route.name})
        log.warning("cleanup incomplete", extra={"failures": failures, "probe_id": state.probe_id, "route": state.route.name,
                                                 "run_id": state.run_id})
    return cleaned, failures


def cleanup_step(event: Mapping[str, Any], deps: ProbeDeps) -> dict[str, Any]:
    """Cleanup (:func:`clean_probe`); its result is one child's entry in the Map's result array, so
    it stays small whatever failed: counts per side (bounded by the route's destinations) and how
    many sides failed; the failures' text goes to the log, never into the execution's state."""
    deps.clock.check()
    state = ProbeState.model_validate(event)
    cleaned, failures = clean_probe(state, deps)
    if state.record_error:
        deps.metrics.count("RecordLost", dimensions={ROUTE: state.route.name})
        log.error("record lost: neither stored nor spooled", extra={"error": state.record_error, "probe_id": state.probe_id})
    return {"probe_id": state.probe_id, "status": state.poll.status if state.poll else ProbeStatus.ERROR,
            "recorded": state.recorded or "lost", "cleaned": cleaned, "cleanup_failed": len(failures)}


class ReportDeps(ProbeDeps, Protocol):
    registry: RegistryStore | None  # the routes a report without ``routes`` covers
    fleet: FleetSettings


def report_step(event: Mapping[str, Any] | None, deps: ReportDeps) -> dict[str, Any]:
    """Report: latency statistics per route and size class, then each route's RPO and SLO; without
    ``routes``, every route the registry measures (core/measured.py)."""
    req = ReportRequest.model_validate(event or {})
    if not req.routes:
        registry = require_registry(deps.registry, "Report")
        req.routes = [spec.name for spec in measured_routes(registry, deps.fleet.groups)]
    now = deps.clock.now()
    health, unreadable, errors = [], [], []
    for r in req.routes:  # a route whose reads fail (throttled, denied) is named; the others are reported
        try:
            health.append(route_health(deps.store, r, now, deps.slo, deps.rpo_window).to_json(deps.slo))
        except Exception as exc:
            unreadable.append({"route": r, "error": f"{type(exc).__name__}: {exc}"})
            errors.append(exc)
    if errors and not health:  # no route answered: the store, not a route
        raise errors[0]
    if unreadable:
        log.warning("routes not reported: their reads failed", extra={"routes": unreadable})
        req = req.model_copy(update={"routes": [h["route"] for h in health]})
    out = build_report(deps.store, req, now)
    out["health"] = health
    out["unreadable"] = unreadable
    return out
