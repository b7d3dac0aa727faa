"""The probe steps with their dependencies wired in: what the Lambda handlers and the lab call.

Each step takes the state machine's JSON and returns the next state's JSON, e.g.
``upload_step(event, Deps.from_env())`` in Lambda, or with the lab's stores and clock.

replmon's own state is validated with pydantic directly: Powertools Parser would add nothing for
a JSON document without an envelope, and its import costs ~50 ms of every cold start. Parser
does the envelope work where AWS's event shapes arrive (S3 and SQS events).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from replmon.core.clock import Clock, WallClock
from replmon.core.defaults import DEFAULTS
from replmon.core.ports import LatencyStore, MetricsSink, ObjectStore, RecordSpool, StoreUnavailable
from replmon.core.record import ProbeStatus
from replmon.core.telemetry import ROUTE
from replmon.probe.plan import new_run_id, plan_output
from replmon.probe.poll import poll_replication, start_polling
from replmon.probe.polling import earliest_completion
from replmon.probe.request import Endpoint, Route, load_request
from replmon.probe.results import to_record
from replmon.probe.state import ProbeState
from replmon.probe.upload import UploadSettings, probe_key, run_started, upload_probe
from replmon.signals.slo import SloSpec

log = logging.getLogger("replmon")

HISTORY_DAYS = 7
HISTORY_LIMIT = 50
#: Records Housekeeping replays per run (each a conditional put).
REPLAY_LIMIT = 200
#: Probe objects older than the longest a probe can live (the largest timeout_seconds, 1 day,
#: plus an hour) belong to no run in flight: the sweep removes them (a STUCK probe's late replica).
SWEEP_AGE_SECONDS = 86_400 + 3600


@dataclass
class Deps:
    stores: Callable[[Endpoint], ObjectStore]
    latency_store: LatencyStore
    metrics: MetricsSink
    clock: Clock = field(default_factory=WallClock)
    upload: UploadSettings = field(default_factory=UploadSettings)
    retention_days: int = DEFAULTS.retention_days
    defaults: dict[str, Any] = field(default_factory=dict)
    spool: RecordSpool | None = None
    poll_function_timeout: float = DEFAULTS.poll_function_timeout_seconds
    event_skew: float = DEFAULTS.event_clock_skew_seconds
    slo: SloSpec = field(default_factory=SloSpec)
    rpo_window: float = DEFAULTS.rpo_window_seconds
    cloudwatch: Any = None  # the collector's GetMetricData client (None: RTC metrics not read)

    @property
    def routes(self) -> list[Route]:
        """The deployment's routes (REPLMON_DEFAULTS): passive signals map onto them."""
        return [Route.model_validate(r) for r in self.defaults.get("routes", [])]

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Deps:
        """Lambda (and lab) configuration comes from the environment, never from code changes:
        REPLMON_TABLE, REPLMON_DYNAMODB_ENDPOINT, REPLMON_DEFAULTS (JSON), REPLMON_RETENTION_DAYS,
        REPLMON_SPOOL_QUEUE_URL, REPLMON_POLL_FUNCTION_TIMEOUT, REPLMON_METRICS (emf|none),
        REPLMON_COMPOSE_THRESHOLD, REPLMON_SLO (JSON: threshold_seconds, target_percent, period_days,
        probe_interval_minutes), REPLMON_EVENT_CLOCK_SKEW, REPLMON_READ_RTC (true: a CloudWatch client)."""
        from replmon.adapters.dynamodb import DynamoLatencyStore
        from replmon.adapters.metrics import EmfMetrics, NullMetrics
        from replmon.adapters.s3 import s3_stores
        from replmon.adapters.spool import SqsSpool
        from replmon.core.sizes import parse_size

        upload = UploadSettings()
        if env.get("REPLMON_COMPOSE_THRESHOLD"):
            upload = UploadSettings(compose_threshold=parse_size(env["REPLMON_COMPOSE_THRESHOLD"]))
        return cls(
            stores=s3_stores,
            latency_store=DynamoLatencyStore(env["REPLMON_TABLE"], endpoint_url=env.get("REPLMON_DYNAMODB_ENDPOINT") or None),
            metrics=NullMetrics() if env.get("REPLMON_METRICS", "emf") == "none" else EmfMetrics(),
            upload=upload,
            retention_days=int(env.get("REPLMON_RETENTION_DAYS", str(DEFAULTS.retention_days))),
            defaults=json.loads(env.get("REPLMON_DEFAULTS") or "{}"),
            spool=SqsSpool(env["REPLMON_SPOOL_QUEUE_URL"]) if env.get("REPLMON_SPOOL_QUEUE_URL") else None,
            poll_function_timeout=float(env.get("REPLMON_POLL_FUNCTION_TIMEOUT", DEFAULTS.poll_function_timeout_seconds)),
            event_skew=float(env.get("REPLMON_EVENT_CLOCK_SKEW", DEFAULTS.event_clock_skew_seconds)),
            slo=slo_spec(json.loads(env.get("REPLMON_SLO") or "{}")),
            cloudwatch=_cloudwatch() if env.get("REPLMON_READ_RTC", "false").lower() == "true" else None,
        )


def _cloudwatch() -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("cloudwatch", config=Config(retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=3, read_timeout=10))


def slo_spec(raw: Mapping[str, Any]) -> SloSpec:
    """The SLO from REPLMON_SLO (the template's parameters); each field defaults to defaults.json."""
    target = float(raw["target_percent"]) / 100 if "target_percent" in raw else float(raw.get("target", DEFAULTS.slo_target))
    return SloSpec(threshold_seconds=float(raw.get("threshold_seconds", DEFAULTS.target_seconds)), target=target,
                   period_days=int(raw.get("period_days", DEFAULTS.slo_period_days)),
                   probe_interval_seconds=60 * float(raw.get("probe_interval_minutes", DEFAULTS.schedule_rate_minutes)))


def plan_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    request = load_request(event, deps.defaults, poll_function_timeout=deps.poll_function_timeout)
    now = deps.clock.now()
    return plan_output(request, request.run_id or new_run_id(now), now)


def upload_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    state = ProbeState.model_validate(event)
    out = upload_probe(state, deps.stores(state.route.source), deps.clock, deps.upload)
    if out.upload is not None:
        # The RPO counts the age of probes in flight; RecordResult removes the marker (TTL: the timeout).
        from replmon.core.keys import record_sort_key
        from replmon.signals.ingest import mark_in_flight

        try:
            mark_in_flight(deps.latency_store, state.route.name, record_sort_key(state.run_id, state.probe_id),
                           out.upload.put_end, out.upload.put_end + state.timeout_seconds + 3600)
        except Exception as exc:  # the probe still measures; the RPO misses this probe while it flies
            log.warning("in-flight marker not written", extra={"error": f"{type(exc).__name__}: {exc}", "probe_id": state.probe_id})
    return out.dump()


def history_start(state: ProbeState, deps: Deps) -> tuple[float, str | None]:
    """Seconds after the PUT before which completion is implausible, from the route's history.
    The lookup is optional: if the store cannot answer, polling starts at 0 (never an ERROR)."""
    if not state.poll_settings.use_history:
        return 0.0, None
    now = deps.clock.now()
    try:
        recent = deps.latency_store.query(state.route.name, now - HISTORY_DAYS * 86_400, now, newest_first=True, limit=HISTORY_LIMIT)
    except Exception as exc:  # the store is down: the probe still measures, from the start
        log.warning("history lookup failed; polling from the start", extra={"error": f"{type(exc).__name__}: {exc}"})
        return 0.0, f"history unavailable ({type(exc).__name__}); polled from the start"
    pairs = [(r.size_bytes, r.latency_lo) for r in recent if r.status is ProbeStatus.COMPLETED and r.latency_lo]
    return earliest_completion(state.size_bytes, pairs), None


def poll_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    state = ProbeState.model_validate(event)
    if state.poll is None:
        not_before, note = history_start(state, deps)
        state = start_polling(state, not_before)
        assert state.poll is not None
        state.poll.history_note = note
    return poll_replication(state, deps.stores, deps.clock).dump()


def record_step(event: dict[str, Any], deps: Deps, interrupted: str | None = None) -> dict[str, Any]:
    """Store the record once; if the store is unavailable, spool it for a later run to replay.

    Metrics are published by whichever write first holds the record durably (the store, or the
    spool), so a retry or a replay never counts a probe twice.
    """
    deps.clock.check()  # an interrupted local run records its probes itself (local/runner.py)
    state = ProbeState.model_validate(event)
    record = to_record(state, deps.retention_days, interrupted)
    try:
        wrote = deps.latency_store.put_once(record)
        state.recorded = "stored" if wrote else "duplicate"
    except StoreUnavailable as exc:
        if deps.spool is None:
            raise
        deps.spool.spool(record)  # if this fails too, the state machine retries, then Cleanup counts RecordLost
        log.warning("latency store unavailable; record spooled", extra={"error": str(exc), "probe_id": record.probe_id})
        state.recorded, wrote = "spooled", True
        deps.metrics.count("RecordSpooled", dimensions={ROUTE: record.route})
    if wrote:
        deps.metrics.publish(record)
    if state.recorded in ("stored", "duplicate"):
        _after_record(record, deps)
    return state.dump()


def _after_record(record: Any, deps: Deps) -> None:
    """Narrow the interval with replica events that came first; the probe is no longer in flight.
    Both are refinements: a failure is logged, the record stands."""
    from replmon.signals.ingest import apply_arrivals, clear_in_flight

    try:
        note = apply_arrivals(deps.latency_store, deps.metrics, record, deps.event_skew)
        if note:
            log.info("replica events applied", extra={"probe_id": record.probe_id, "result": note})
        clear_in_flight(deps.latency_store, record.route, record.sort_key)
    except Exception as exc:
        log.warning("replica events not applied", extra={"error": f"{type(exc).__name__}: {exc}", "probe_id": record.probe_id})


def cleanup_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    """Delete every version of the probe and abort its incomplete multipart uploads on the
    source and on each replica. A side that fails is counted (CleanupFailed), never silent;
    the housekeeping sweep removes what is left once the probe has expired."""
    deps.clock.check()
    state = ProbeState.model_validate(event)
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
        log.warning("cleanup incomplete", extra={"failures": failures, "probe_id": state.probe_id})
    if state.record_error:
        deps.metrics.count("RecordLost", dimensions={ROUTE: state.route.name})
        log.error("record lost: neither stored nor spooled", extra={"error": state.record_error, "probe_id": state.probe_id})
    # The Map's result per probe stays small: the record holds the details.
    return {"probe_id": state.probe_id, "status": state.poll.status if state.poll else "ERROR",
            "recorded": state.recorded or "lost", "cleaned": cleaned, "cleanup_failures": failures}


def replay_spool(deps: Deps, limit: int = REPLAY_LIMIT) -> dict[str, int]:
    """Write spooled records to the store (same key, conditional put); ack each that is held."""
    out = {"replayed": 0, "duplicates": 0, "left": 0}
    if deps.spool is None:
        return out
    for handle, record in deps.spool.drain(limit):
        try:
            wrote = deps.latency_store.put_once(record)
        except StoreUnavailable:
            out["left"] += 1  # still down: it stays spooled for the next run
            continue
        out["replayed" if wrote else "duplicates"] += 1
        deps.spool.ack(handle)
        _after_record(record, deps)  # as RecordResult would have: replica events, the in-flight marker
    if out["replayed"]:
        deps.metrics.count("SpoolReplayed", out["replayed"])
    return out


def sweep(state_routes: list[Route], deps: Deps, age_seconds: float = SWEEP_AGE_SECONDS,
          failures: list[str] | None = None) -> int:
    """Remove probe objects (every version) and multipart uploads older than ``age_seconds`` on
    every side of the given routes: leftovers of failed cleanups and late replicas of STUCK probes.
    A side that does not answer is skipped (and named in ``failures``); the others are swept."""
    now = deps.clock.now()
    removed = 0
    for route in state_routes:
        for endpoint in [route.source, *route.destinations]:
            store = deps.stores(endpoint)
            try:
                old = [v for v in store.list_versions(endpoint.bucket, route.prefix)
                       if (t := run_started(v.key, route.prefix)) is not None and now - t > age_seconds]
                removed += store.delete_versions(endpoint.bucket, old)
                for u in store.list_uploads(endpoint.bucket, route.prefix):
                    if now - u.initiated > age_seconds:
                        store.abort_multipart(endpoint.bucket, u.key, u.upload_id)
                        removed += 1
            except Exception as exc:
                if failures is None:
                    raise
                failures.append(f"{endpoint.bucket}: {type(exc).__name__}: {str(exc)[:200]}")
    if removed:
        deps.metrics.count("ProbeObjectsSwept", removed)
    return removed


def housekeeping_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    """Before a run's probes: replay the spool, sweep expired probe objects of the run's routes
    (``{"routes": [...]}``, from PlanProbes). The state machine catches a failure and goes on."""
    routes = [Route.model_validate(r) for r in event.get("routes", [])]
    failures: list[str] = []
    out: dict[str, Any] = {"spool": replay_spool(deps), "swept": sweep(routes, deps, failures=failures)}
    if failures:
        out["sweep_failures"] = failures
    return out


def report_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    from replmon.probe.report import ReportRequest, build_report
    from replmon.signals.ingest import route_health

    req = ReportRequest.model_validate(event or {})
    if not req.routes:
        req.routes = [r["name"] for r in deps.defaults.get("routes", [])]
    now = deps.clock.now()
    out = build_report(deps.latency_store, req, now)
    out["health"] = [route_health(deps.latency_store, r, now, deps.slo, deps.rpo_window).to_json(deps.slo) for r in req.routes]
    return out


def collect_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    """Scheduled: RTC metrics in, RPO / SLO / burn rates out, for every route of the deployment."""
    from replmon.signals.ingest import collect

    health = collect(deps.routes, deps.latency_store, deps.cloudwatch, deps.metrics, deps.clock.now(), deps.slo,
                     deps.rpo_window, deps.retention_days)
    return {"routes": [h.to_json(deps.slo) for h in health]}
