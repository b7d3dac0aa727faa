"""Housekeeping (once per run, before its probes): replay records the spool holds into the store,
and sweep probe objects and uploads older than any probe in flight off every side of the run's
routes. The state machine catches a failure and goes on: both only tidy up after earlier runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replmon.core.errors import StoreUnavailable
from replmon.core.route import Route
from replmon.probe.steps import ProbeDeps, after_record, log
from replmon.probe.upload import run_started
from replmon.signals.rollup import store_record

#: Records Housekeeping replays per run (each a conditional put).
REPLAY_LIMIT = 200
#: Probe objects older than the longest a probe can live (the largest timeout_seconds, 1 day,
#: plus an hour) belong to no run in flight: the sweep removes them (a STUCK probe's late replica).
SWEEP_AGE_SECONDS = 86_400 + 3600


#: DynamoDB's answers that refuse the record itself, not the store being down: retrying cannot help.
REFUSED_CODES = frozenset({"ValidationException", "SerializationException", "ItemCollectionSizeLimitExceededException"})
#: A cancelled TransactWriteItems names each action's reason: these refuse what the record holds
#: ("an item size becomes too large (larger than 400 KB) ... or a similar validation error", "a user
#: error, such as an invalid data format"), where ThrottlingError, TransactionConflict or
#: ProvisionedThroughputExceeded mean "not now" (TransactionCanceledException).
REFUSED_REASONS = frozenset({"ValidationError", "ItemCollectionSizeLimitExceeded"})


def refused_record(exc: BaseException) -> bool:
    """Did the store refuse this record for what it holds (StoreUnavailable caused by a validation
    error, or a transaction cancelled for one), rather than being down or busy?"""
    response = getattr(exc.__cause__, "response", None) or {}
    if response.get("Error", {}).get("Code") in REFUSED_CODES:
        return True
    reasons = {str(r.get("Code")) for r in response.get("CancellationReasons") or [] if isinstance(r, dict)}
    return bool(reasons & REFUSED_REASONS)


def replay_spool(deps: ProbeDeps, limit: int = REPLAY_LIMIT) -> dict[str, Any]:
    """Write spooled records to the store (same key, conditional put); ack each that is held. An
    entry that cannot be read (the spool quarantines it as it drains) or that the store refuses as
    malformed is quarantined with its reason, and replay goes on past it (``quarantined``: one
    line each, counted as RecordQuarantined); a store that is down ends the replay, every record left
    spooled for the next run."""
    out: dict[str, Any] = {"replayed": 0, "duplicates": 0, "left": 0, "quarantined": []}
    if deps.spool is None:
        return out
    seen = len(getattr(deps.spool, "quarantined", []))
    for handle, record in deps.spool.drain(limit):
        try:
            wrote = store_record(deps.store, record, deps.clock.now(), threshold_seconds=deps.slo.threshold_seconds,
                                 period_days=deps.slo.period_days)
        except StoreUnavailable as exc:
            if refused_record(exc):
                deps.spool.quarantine(handle, f"the store refused it: {' '.join(str(exc).split())[:300]}")
            else:  # still down: this and the rest stay spooled for the next run; receiving them now would
                out["left"] += 1  # only count their receives toward the queue's redrive to quarantine
                break
            continue
        except Exception as exc:  # a value the store cannot hold (ValueError, decimal.Inexact...), or what no one
            # foresaw: set aside with its reason rather than met again at every run with everything behind it
            deps.spool.quarantine(handle, f"not storable: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
            continue
        out["replayed" if wrote else "duplicates"] += 1
        deps.spool.ack(handle)
        after_record(record, deps)  # as RecordResult would have: replica events, the in-flight marker
    out["quarantined"] = list(getattr(deps.spool, "quarantined", []))[seen:]
    if out["replayed"]:
        deps.metrics.count("SpoolReplayed", out["replayed"])
    if out["quarantined"]:
        log.warning("spool entries quarantined", extra={"quarantined": out["quarantined"]})
        deps.metrics.count("RecordQuarantined", len(out["quarantined"]))
    return out


def sweep(routes: list[Route], deps: ProbeDeps, age_seconds: float = SWEEP_AGE_SECONDS,
          failures: list[str] | None = None) -> int:
    """Remove probe objects (every version) and multipart uploads older than ``age_seconds`` on
    every side of the given routes: leftovers of failed cleanups and late replicas of STUCK probes.
    A side that does not answer is skipped (and named in ``failures``); the others are swept."""
    now = deps.clock.now()
    removed = 0
    for route in routes:
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


def housekeeping_step(event: Mapping[str, Any], deps: ProbeDeps) -> dict[str, Any]:
    """Before a run's probes: replay the spool, sweep expired probe objects of the run's routes
    (``{"routes": [...]}``, from PlanProbes)."""
    routes = [Route.model_validate(r) for r in event.get("routes", [])]
    failures: list[str] = []
    out: dict[str, Any] = {"spool": replay_spool(deps), "swept": sweep(routes, deps, failures=failures)}
    if failures:
        out["sweep_failures"] = failures
    return out
