"""A runner's result set into the latency store, each job judged against its baseline.

Items live in the partition ``fio#<target>#<preset>#<scale>`` (a tiny lab run never becomes a
full run's baseline), sort key ``<start>#<run_id>#<job>/<direction>``, so a baseline is one
key-range query of the earlier runs. Each run also gets one item ``<start>#<run_id>#run`` (its
status, errors and metadata), so a failed run is in the store even when it measured nothing.
Every item is a conditional put: a redelivered event stores nothing twice and publishes no metric
twice. Rows with a fio/dd error, and every row of a failed run, are stored and counted, never
used as a baseline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replmon.core.keys import iso_ms
from replmon.core.ports import FioStore, MetricsSink
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE
from replmon.mounts import baseline as bl
from replmon.mounts.document import RUN_FILE, Row, check_run, dd_rows, fio_rows
from replmon.mounts.fioresult import FioResultError, json_object, parse_text

HISTORY_DAYS = 90


@dataclass(frozen=True)
class Policy:
    """Baseline and regression settings (template parameters FioBaselineRuns, FioRegressionDropPercent)."""

    min_runs: int = bl.MIN_RUNS
    window: int = bl.WINDOW_RUNS
    drop: float = bl.DROP
    k: float = bl.K_SPREADS
    retention_days: int = 400


@dataclass
class Ingested:
    run_id: str
    partition: str
    verdicts: list[tuple[Row, bl.Verdict | None]] = field(default_factory=list)
    stored: int = 0  # rows
    run_stored: bool = False


def partition(target: str, preset: str, scale: str) -> str:
    return f"fio#{target}#{preset}#{scale}"


def rows_of(run: dict[str, Any], read: Callable[[str], str]) -> list[Row]:
    """The rows of a run: every fio output it lists (``read(name)`` gives its text), then dd.
    A successful run's outputs must all parse (one that does not is a broken result set: the
    message is rejected). A failed run's unreadable outputs are already among its ``errors``
    (the runner parsed them first): its readable rows are kept, the rest is in the run item."""
    rows: list[Row] = []
    for name in run.get("fio_outputs", []):
        try:
            rows += fio_rows(parse_text(read(name), name))
        except FioResultError:
            if run.get("status") != "failed":
                raise
    return rows + dd_rows(run.get("dd", []))


def ingest_run(run: dict[str, Any], rows: list[Row], store: FioStore, metrics: MetricsSink, policy: Policy = Policy()) -> Ingested:
    check_run(run)
    target, preset, scale = run["target"]["name"], run["preset"], run.get("scale", "full")
    pk = partition(target, preset, scale)
    start = float(run["start"])
    history: dict[str, list[tuple[str, float]]] = {}
    for earlier_item in store.items(pk, start - HISTORY_DAYS * 86_400, start - 0.001):
        if earlier_item.get("row") and not earlier_item.get("error") and earlier_item.get("run_status") == "ok":
            history.setdefault(earlier_item["row"], []).append((earlier_item[SORT_KEY], float(earlier_item["bw_bytes"])))
    out = Ingested(run["run_id"], pk)
    counts = {"FioRegression": 0, "FioNoBaseline": 0, "FioJobErrors": 0}
    expires = int(start + policy.retention_days * 86_400)
    for row in rows:
        verdict = None
        if row.error:
            counts["FioJobErrors"] += 1
        else:
            earlier = [bw for _, bw in sorted(history.get(row.key, []))]
            verdict = bl.judge(row.bw_bytes, bl.baseline(earlier, policy.window), drop=policy.drop, k=policy.k, min_runs=policy.min_runs)
        item: dict[str, Any] = {
            PARTITION_KEY: pk, SORT_KEY: f"{iso_ms(start)}#{run['run_id']}#{row.key}", TTL_ATTRIBUTE: expires,
            "row": row.key, "job": row.job, "direction": row.direction, "tool": row.tool, "run_id": run["run_id"],
            "run_status": run["status"], "bw_bytes": row.bw_bytes, "iops": row.iops, "runtime_s": row.runtime_s,
            "clat_p50_s": row.clat_p50_s, "clat_p99_s": row.clat_p99_s, "clat_p999_s": row.clat_p999_s, "error": row.error,
            "target": json.dumps(run["target"], sort_keys=True), "fio_version": run.get("fio_version"),
            "mount_version": run.get("mount_version"), "task": json.dumps(run.get("task", {}), sort_keys=True),
            "start": start, "end": run["end"],
        }
        if verdict is not None:
            item.update(verdict=verdict.verdict, baseline_median=verdict.baseline.median, baseline_spread=verdict.baseline.spread,
                        baseline_runs=verdict.baseline.runs, change=verdict.change, reason=verdict.reason)
        knee = (run.get("knees") or {}).get(row.direction)
        if knee and knee.get("knee"):
            item.update(burst_bytes=knee["knee"]["burst"], sustained_bytes=knee["knee"]["sustained"], knee_at_s=knee["knee"]["at_s"])
        if store.put_item_once(item):
            out.stored += 1
            if verdict is not None and verdict.verdict == "regression":
                counts["FioRegression"] += 1
            if verdict is not None and verdict.verdict == "no-baseline":
                counts["FioNoBaseline"] += 1
        out.verdicts.append((row, verdict))
    out.run_stored = store.put_item_once({
        PARTITION_KEY: pk, SORT_KEY: f"{iso_ms(start)}#{run['run_id']}#run", TTL_ATTRIBUTE: expires, "run_id": run["run_id"],
        "run_status": run["status"], "errors": [e[:1000] for e in run.get("errors", [])][:50], "rows": len(rows),
        "skipped": json.dumps(run.get("skipped", [])), "target": json.dumps(run["target"], sort_keys=True),
        "fio_version": run.get("fio_version"), "mount_version": run.get("mount_version"),
        "task": json.dumps(run.get("task", {}), sort_keys=True), "start": start, "end": run["end"], "wall_s": run.get("wall_s")})
    if out.stored:  # a redelivery (nothing new) publishes nothing
        for metric, n in counts.items():
            metrics.count(metric, n, {"Target": target, "Preset": preset})
    return out


def load_run(text: str, source: str = RUN_FILE) -> dict[str, Any]:
    return check_run(json_object(text, source, "the runner's run document"), source)
