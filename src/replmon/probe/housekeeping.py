"""Housekeeping (once per run, before its probes): replay records the spool holds into the store,
and sweep probe objects and uploads older than any probe in flight off every side of the run's
routes. The state machine catches a failure and goes on: both only tidy up after earlier runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replmon.core.errors import StoreUnavailable
from replmon.core.ports import TransactAdd
from replmon.core.record import ProbeRecord
from replmon.core.route import Route
from replmon.probe.steps import ProbeDeps, after_record, log
from replmon.probe.upload import run_started
from replmon.signals.rollup import record_ops, store_record

#: Records Housekeeping replays per run (each a conditional put).
REPLAY_LIMIT = 200
#: Probe objects older than the longest a probe can live (the largest timeout_seconds, 1 day,
#: plus an hour) belong to no run in flight: the sweep removes them (a STUCK probe's late replica).
SWEEP_AGE_SECONDS = 86_400 + 3600


#: DynamoDB's answers that refuse the record itself, not the store being down: retrying cannot help.
REFUSED_CODES = frozenset({"ValidationException", "SerializationException", "ItemCollectionSizeLimitExceededException"})
#: A cancelled TransactWriteItems names each action's reason, in the order of its actions: these
#: refuse what that action writes ("an item size becomes too large (larger than 400 KB) ... or a
#: similar validation error occurs because of changes made by the transaction", "a user error, such
#: as an invalid data format"), where ThrottlingError, TransactionConflict or
#: ProvisionedThroughputExceeded mean "not now" (TransactionCanceledException).
REFUSED_REASONS = frozenset({"ValidationError", "ItemCollectionSizeLimitExceeded"})
#: The record's own put is the transaction's first action (signals/rollup.py ``record_ops``); the
#: others update items many records share (the hour item, the period cache), then the probe's own
#: in-flight marker's delete, last.
RECORD_ACTION = 0


def refused_actions(exc: BaseException) -> list[int]:
    """The indices of the actions a cancelled transaction refused for what they write."""
    response = getattr(exc.__cause__, "response", None) or {}
    return [i for i, r in enumerate(response.get("CancellationReasons") or [])
            if isinstance(r, dict) and str(r.get("Code")) in REFUSED_REASONS]


def refused_record(exc: BaseException) -> bool:
    """Did the store refuse this record for what it holds (StoreUnavailable caused by a validation
    error, or a transaction cancelled for one at the record's own put), rather than being down or
    busy, or refusing a shared item the transaction also updates (:func:`refused_actions`)?"""
    response = getattr(exc.__cause__, "response", None) or {}
    if response.get("Error", {}).get("Code") in REFUSED_CODES:
        return True
    return RECORD_ACTION in refused_actions(exc)


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
            elif shared := refused_actions(exc):
                # Refused for an item other records share (an hour item grown past 400 KB): the record
                # itself is good, so it is not quarantined; it stays spooled (replayed again) and the item is named.
                out.setdefault("kept", []).append(_kept_line(record, shared, exc, deps))
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
        after_record(record, deps, clear_marker=not wrote)  # as RecordResult would have: replica events (the marker went with the record)
    out["quarantined"] = list(getattr(deps.spool, "quarantined", []))[seen:]
    if out.get("kept"):
        log.error("spooled records kept: the store refused an item their transaction also updates", extra={"kept": out["kept"]})
    if out["replayed"]:
        deps.metrics.count("SpoolReplayed", out["replayed"])
    if out["quarantined"]:
        log.warning("spool entries quarantined", extra={"quarantined": out["quarantined"]})
        deps.metrics.count("RecordQuarantined", len(out["quarantined"]))
    return out


def _kept_line(record: ProbeRecord, shared: list[int], exc: BaseException, deps: ProbeDeps) -> str:
    """One line naming the shared item(s) the store refused, for a record kept in the spool."""
    ops = record_ops(record, deps.clock.now(), period_days=deps.slo.period_days, threshold_seconds=deps.slo.threshold_seconds)
    items = []
    for i in shared:
        op = ops[i] if i < len(ops) else None
        items.append(f"{op.pk} {op.sk}" if isinstance(op, TransactAdd) else f"action {i}")
    return (f"{record.route}/{record.sort_key}: kept in the spool for replay; the store refused the item its "
            f"transaction also updates: {', '.join(items)} ({' '.join(str(exc).split())[:200]}; an item larger than "
            "400 KB refuses every record of that hour until it is trimmed)")


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
