"""The probe steps with their dependencies wired in: what the Lambda handlers and the lab call.

Each step takes the state machine's JSON and returns the next state's JSON, e.g.
``upload_step(event, Deps.from_env())`` in Lambda, or with the lab's stores and clock.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.utilities.parser import parse

from replmon.clock import Clock, WallClock
from replmon.config import Endpoint, load_request
from replmon.plan import new_run_id, plan_output
from replmon.poller import poll_replication, start_polling
from replmon.polling import earliest_completion
from replmon.ports import LatencyStore, MetricsSink, ObjectStore
from replmon.record import ProbeStatus
from replmon.results import to_record
from replmon.state import ProbeState
from replmon.upload import UploadSettings, probe_key, upload_probe

HISTORY_DAYS = 7
HISTORY_LIMIT = 50


@dataclass
class Deps:
    stores: Callable[[Endpoint], ObjectStore]
    latency_store: LatencyStore
    metrics: MetricsSink
    clock: Clock = field(default_factory=WallClock)
    upload: UploadSettings = field(default_factory=UploadSettings)
    retention_days: int = 90
    defaults: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: os._Environ[str] | dict[str, str] = os.environ) -> Deps:
        """Lambda (and lab) configuration comes from the environment, never from code changes:
        REPLMON_TABLE, REPLMON_DYNAMODB_ENDPOINT, REPLMON_DEFAULTS (JSON), REPLMON_RETENTION_DAYS,
        REPLMON_METRICS (emf|none), REPLMON_COMPOSE_THRESHOLD."""
        from replmon.adapters.dynamodb import DynamoLatencyStore
        from replmon.adapters.metrics import EmfMetrics, NullMetrics
        from replmon.adapters.s3 import s3_stores
        from replmon.sizes import parse_size

        upload = UploadSettings()
        if env.get("REPLMON_COMPOSE_THRESHOLD"):
            upload = UploadSettings(compose_threshold=parse_size(env["REPLMON_COMPOSE_THRESHOLD"]))
        return cls(
            stores=s3_stores,
            latency_store=DynamoLatencyStore(env["REPLMON_TABLE"], endpoint_url=env.get("REPLMON_DYNAMODB_ENDPOINT") or None),
            metrics=NullMetrics() if env.get("REPLMON_METRICS", "emf") == "none" else EmfMetrics(),
            upload=upload,
            retention_days=int(env.get("REPLMON_RETENTION_DAYS", "90")),
            defaults=json.loads(env.get("REPLMON_DEFAULTS") or "{}"),
        )


def plan_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    request = load_request(event, deps.defaults)
    return plan_output(request, request.run_id or new_run_id(deps.clock.now()))


def upload_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    state = parse(event=event, model=ProbeState)
    return upload_probe(state, deps.stores(state.route.source), deps.clock, deps.upload).dump()


def poll_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    state = parse(event=event, model=ProbeState)
    if state.poll is None:
        not_before = 0.0
        if state.poll_settings.use_history:
            now = deps.clock.now()
            recent = deps.latency_store.query(
                state.route.name, now - HISTORY_DAYS * 86_400, now, newest_first=True, limit=HISTORY_LIMIT
            )
            not_before = earliest_completion(
                state.size_bytes,
                [(r.size_bytes, r.latency_lo) for r in recent if r.status is ProbeStatus.COMPLETED and r.latency_lo],
            )
        state = start_polling(state, not_before)
    return poll_replication(state, deps.stores, deps.clock).dump()


def record_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    state = parse(event=event, model=ProbeState)
    record = to_record(state, deps.clock.now(), deps.retention_days)
    state.recorded = deps.latency_store.put_once(record)
    if state.recorded:  # metrics only with the first write: a retry must not count a probe twice
        deps.metrics.publish(record)
    return state.dump()


def cleanup_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    """Delete every version of the probe on the source and on each replica."""
    state = parse(event=event, model=ProbeState)
    key = probe_key(state)
    cleaned = {"source": deps.stores(state.route.source).delete_all_versions(state.route.source.bucket, key)}
    for dest in state.route.destinations:
        cleaned[f"destination:{dest.bucket}"] = deps.stores(dest).delete_all_versions(dest.bucket, key)
    state.cleaned = cleaned
    # The Map's result per probe stays small: the record holds the details.
    return {"probe_id": state.probe_id, "status": state.poll.status if state.poll else "ERROR", "recorded": state.recorded, "cleaned": cleaned}


def report_step(event: dict[str, Any], deps: Deps) -> dict[str, Any]:
    from replmon.report import ReportRequest, build_report

    req = parse(event=event or {}, model=ReportRequest)
    if not req.routes:
        req.routes = [r["name"] for r in deps.defaults.get("routes", [])]
    return build_report(deps.latency_store, req, deps.clock.now())
