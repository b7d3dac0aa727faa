"""Lambda entry point of IngestEvents: S3 event notifications from SQS, with partial batch failures.

Each event is filed under its registry route (signals/event_ingest.py ``route_for_event``); one that
maps to none is kept and counted as UnmappedEvent. The whole batch is ingested at once (signals/event_ingest.py ``ingest``): its events are counted
with one ``ADD`` per (route, hour) and transaction behind their dedupe markers, which a per-message
processor could not group. The answer names the messages to retry (``ReportBatchItemFailures``,
"Using Lambda with Amazon SQS"): a malformed message (one log line saying why), one whose write failed, or
one with an event that maps to no route while a registry group is unread (the route may be in it); after
the queue's maxReceiveCount it waits in the DLQ. The rest of the batch is acknowledged.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from replmon import wiring
from replmon.core.measured import measured_read, require_registry
from replmon.core.ports import MetricsSink
from replmon.core.registry import InvalidRoute, note_invalid
from replmon.core.route import Route
from replmon.entry.runtime import logger, trace_aws_calls, tracer
from replmon.signals.event_ingest import IngestDeps, IngestPlan, ingest, plan_ingest
from replmon.signals.s3events import parse_sqs_message

#: How long an execution environment reuses the registry's routes: a backlog's batches do not each
#: re-read every group (a 4,000-route registry is megabytes); a route the inventory adds maps events
#: within this long (until then they are kept and counted as UnmappedEvent, never lost).
ROUTES_TTL_SECONDS = 60.0
_routes: weakref.WeakKeyDictionary[Any, tuple[float, list[Route]]] = weakref.WeakKeyDictionary()


def registry_routes(registry: Any, groups: list[str], now: float,
                    metrics: MetricsSink | None = None) -> tuple[list[Route], list[InvalidRoute]]:
    """The routes an event can belong to: the registry's measured routes (every RouteGroup, modes
    probe and passive; core/measured.py), as buckets and rules (no roles), cached per registry; and
    the groups whose read failed (``ReadFailed``, counted on ``metrics`` as InvalidRoute): while
    there are any, an event that maps to no route is retried, not filed as unmapped."""
    cached = _routes.get(registry)
    if cached is not None and 0 <= now - cached[0] < ROUTES_TTL_SECONDS:
        return cached[1], []
    read = measured_read(registry, groups)  # one bad item or unreadable group costs only itself (core/registry.py)
    unread = [bad for bad in read.invalid if bad.reason == "ReadFailed" and bad.field == "(query)"]  # RegistryRead.unread
    for bad in read.invalid:
        if bad in unread and metrics is not None:  # this function's own read failed: counted here
            note_invalid(metrics, bad)
        else:  # an invalid item: PlanProbes counts it (InvalidRoute); its events are kept as UnmappedEvent
            logger.warning("registry item not mapped: " + bad.line(), extra={"route": bad.name, "field": bad.field})
    routes = [spec.to_route(None) for spec in read.routes]
    if not unread:  # a group unread is read again by the next batch, not cached for a minute
        _routes[registry] = (now, routes)
    return routes, unread


def ingest_deps(function_name: str) -> IngestDeps:
    """The function's wiring, with the routes of the registry (:func:`registry_routes`)."""
    d = wiring.for_function(function_name)
    registry = require_registry(d.registry, "IngestEvents")
    routes, unread = registry_routes(registry, d.fleet.groups, d.clock.now(), d.metrics)
    return IngestDeps(d.store, d.metrics, routes, d.retention_days, d.event_skew, d.clock.now, d.slo,
                      unread_groups=[bad.group for bad in unread])


def handle_batch(event: Mapping[str, Any], function_name: str = "") -> dict[str, Any]:
    """Lambda's SQS event -> ``{"batchItemFailures": [{"itemIdentifier": message id}, ...]}``."""
    d = ingest_deps(function_name)
    failed: list[str] = []
    plans: list[IngestPlan] = []
    owners: list[str] = []
    for message in event.get("Records", []):
        mid = str(message.get("messageId", "")) if isinstance(message, Mapping) else ""
        parsed = parse_sqs_message(message, f"message {mid}")
        bad = [p for p in parsed if p.error]
        if bad:
            d.metrics.count("EventsRejected", len(bad))
            reason = "; ".join(f"{p.position}: {p.error}" for p in bad)
            logger.warning("event record rejected", extra={"message_id": mid, "reason": reason})
            failed.append(mid)
            continue
        flagged = [p for p in parsed if p.signal is not None and p.signal.flags]
        if flagged:  # counted all the same; the fields that did not read are kept as sent and named here
            d.metrics.count("EventsFlagged", len(flagged))
            logger.warning("event record fields kept as sent", extra={
                "message_id": mid, "flags": [f for p in flagged for f in (p.signal.flags if p.signal else ())]})
        for p in parsed:
            plans.append(plan_ingest(p, d.routes, d.prefixes))
            owners.append(mid)
    result = ingest(plans, d)
    retry = {owners[i] for i in result.failed}
    if retry:  # the store is down, or a registry group unread: those messages are retried, then wait in the DLQ
        logger.warning("event records not stored; SQS will retry them", extra={
            "message_ids": sorted(retry), "reasons": sorted({result.notes[i] for i in result.failed})})
    notes: dict[str, int] = {}
    for n in result.notes:
        notes[n] = notes.get(n, 0) + 1
    logger.info("event records taken", extra={"messages": len(event.get("Records", [])), "results": notes})
    order = [str(m.get("messageId", "")) for m in event.get("Records", []) if isinstance(m, Mapping)]
    return {"batchItemFailures": [{"itemIdentifier": m} for m in order if m in retry or m in failed]}


def _handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return handle_batch(event, getattr(context, "function_name", ""))


handler: Any = _handler
if trace_aws_calls():
    handler = tracer().capture_lambda_handler(capture_response=False)(handler)
handler = logger.inject_lambda_context(clear_state=True)(handler)
