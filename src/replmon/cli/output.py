"""One output schema for every command that measures: `probe`, `lab run` and `report` (and
`lab chaos`) write the same envelope and the same summary and route shapes
(docs/output.schema.json, described in docs/SEMANTICS.md "Output").

Keys are snake_case with the unit in the name (``_seconds``, ``_bytes``, ``_share`` for a
fraction 0..1, ``_percent`` for 0..100, ``_at`` for an ISO 8601 UTC time); numbers are JSON
numbers; a value that does not exist is ``null``, never 0. CSV has the summaries' keys as its
header, one row per route and size class.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from replmon import __version__
from replmon.core.keys import iso_ms
from replmon.core.record import ProbeRecord
from replmon.core.stats import SizeSummary
from replmon.signals.verdict import RouteJudgement, overall, within

SCHEMA_VERSION = 1
#: Summary keys in CSV column order (the CSV of probe, lab run and report).
SUMMARY_KEYS = (
    "route", "size_class", "size_bytes", "probes", "completed", "failed", "stuck", "errors", "percentile_samples",
    "p50_seconds", "p90_seconds", "p99_seconds", "max_seconds", "small_sample_percentiles", "judged_probes",
    "within_target_probes", "within_target_share", "mib_per_second", "heads_per_probe", "widest_interval_seconds",
    "bound_min_seconds", "bound_max_seconds", "bound_met_probes",
)


def _r(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


def within_counts(records: Sequence[ProbeRecord], target_seconds: float) -> dict[tuple[str, str], tuple[int, int]]:
    """(route, size class) -> (probes within ``target_seconds``, judged probes)."""
    out: dict[tuple[str, str], tuple[int, int]] = {}
    for r in records:
        if r.status.judged:
            ok, n = out.get((r.route, r.size_class), (0, 0))
            out[(r.route, r.size_class)] = (ok + within(r, target_seconds), n + 1)
    return out


def summary_json(s: SizeSummary, counts: Mapping[tuple[str, str], tuple[int, int]]) -> dict[str, Any]:
    from replmon.cli.render import small

    ok, judged = counts.get((s.route, s.size_class), (0, 0))
    n = s.completed
    return {
        "route": s.route, "size_class": s.size_class, "size_bytes": s.size_bytes, "probes": s.probes, "completed": s.completed,
        "failed": s.failed, "stuck": s.stuck, "errors": s.errors, "percentile_samples": n,
        "p50_seconds": _r(s.p50), "p90_seconds": _r(s.p90), "p99_seconds": _r(s.p99), "max_seconds": _r(s.max),
        "small_sample_percentiles": [f"p{q}" for q in (50, 90, 99) if small(q, n) and n > 0],
        "judged_probes": judged, "within_target_probes": ok, "within_target_share": _r(ok / judged) if judged else None,
        "mib_per_second": _r(s.mib_per_s, 3), "heads_per_probe": _r(s.heads_per_probe, 3), "widest_interval_seconds": _r(s.max_width),
        "bound_min_seconds": _r(s.min_bound), "bound_max_seconds": _r(s.max_bound), "bound_met_probes": s.bound_met,
    }


def record_json(r: ProbeRecord, target_seconds: float) -> dict[str, Any]:
    return {
        "probe_id": r.probe_id, "run_id": r.run_id, "route": r.route, "size_class": r.size_class, "size_bytes": r.size_bytes,
        "trial": r.trial, "status": str(r.status), "planned_at": iso_ms(r.planned_at),
        "put_end_at": None if r.put_end is None else iso_ms(r.put_end),
        "latency_lo_seconds": _r(r.latency_lo), "latency_hi_seconds": _r(r.latency_hi), "latency_mid_seconds": _r(r.latency_mid),
        "interval_width_seconds": _r(r.width), "bound_seconds": _r(r.bound_seconds), "bound_met": r.bound_met,
        "within_target": within(r, target_seconds), "head_count": r.head_count, "put_seconds": _r(r.put_seconds),
        "upload_method": r.upload_method, "failure_reason": r.failure_reason,
        "destinations": [dict(d) for d in r.destinations],  # probe/state.py DestinationCheck: bucket, status, size_match...
    }


def envelope(command: str, verdicts: Sequence[RouteJudgement], exit_code: int, target_seconds: float, **fields: Any) -> dict[str, Any]:
    """What every measuring command's JSON starts with; ``fields`` are the command's own."""
    return {
        "schema_version": SCHEMA_VERSION, "replmon_version": __version__, "command": command, "generated_at": iso_ms(time.time()),
        "exit_code": exit_code, "verdict": str(overall(verdicts)), "target_seconds": target_seconds,
        "routes": [v.to_json() for v in verdicts], **fields,
    }
