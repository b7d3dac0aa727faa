"""A runner's result set into the store, each row judged against its baselines.

Items live in the partition ``fio#<target>#<preset>#<scale>`` (a tiny lab run never becomes a
full run's baseline), sort key ``<start>#<run_id>#<job>/<direction>``, so a baseline is one
key-range query of the earlier runs. Each run also gets one item ``<start>#<run_id>#run`` (its
status, errors, metadata and the file system's own metrics for the run window), so a failed run
is in the store even when it measured nothing. Every item is a conditional put: a redelivered
event stores nothing twice and publishes no metric twice. Rows with a fio/dd error, and every
row of a failed run, are stored and counted, never used as a baseline.

What is judged depends on what the preset is about (:func:`measures`):
- a throughput preset: the row's bytes/s;
- a burst preset (``"burst": true``): the **sustained level** and the **burst duration** from the
  knee, each with its own baseline - not the whole-run average, which depends on the credits the
  file system started with;
- a latency preset (``"latency": true``): also total-latency p50 and p99 of its 4 KiB rows (lower is
  better).
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
from replmon.mounts import presets as presets_mod
from replmon.mounts.document import RUN_FILE, Row, check_run, dd_rows, output_rows
from replmon.mounts.fioresult import FioResultError, json_object, parse_text

HISTORY_DAYS = 90
#: measure -> higher is better
MEASURES: dict[str, bool] = {"bw_bytes": True, "sustained_bytes": True, "burst_s": True, "lat_p50_s": False, "lat_p99_s": False}
VERDICT_ORDER = ("regression", "no-baseline", "ok")


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
    verdicts: list[tuple[Row, bl.Verdict | None]] = field(default_factory=list)  # each row's worst verdict
    judged: list[tuple[Row, dict[str, bl.Verdict]]] = field(default_factory=list)  # each row's verdict per measure
    stored: int = 0  # rows
    run_stored: bool = False


def partition(target: str, preset: str, scale: str) -> str:
    return f"fio#{target}#{preset}#{scale}"


def rows_of(run: dict[str, Any], read: Callable[[str], str]) -> list[Row]:
    """The rows of a run: every fio output it lists (``read(name)`` gives its text), then dd.
    A successful run's outputs must all parse (one that does not is a broken result set: the
    message is rejected). A failed run's unreadable outputs are already among its ``errors``
    (the runner parsed them first): its readable rows are kept, the rest is in the run item."""
    outputs = []
    for name in run.get("fio_outputs", []):
        try:
            outputs.append(parse_text(read(name), name))
        except FioResultError:
            if run.get("status") != "failed":
                raise
    return output_rows(outputs) + dd_rows(run.get("dd", []))


def latency_jobs(spec: dict[str, Any]) -> set[str]:
    """A latency preset's one-block rows: dd tests and fio jobs of 4 KiB blocks."""
    if not spec.get("latency"):
        return set()
    small = {f"dd-{d['name']}{s}" for d in spec.get("dd", []) if presets_mod.fio_size(d["bs"]) <= 4096 for s in ("", "-first")}
    return small | {j["name"] for j in spec.get("jobs", []) if presets_mod.fio_size(j["options"].get("bs", "4k")) <= 4096}


def measures(row: Row, spec: dict[str, Any], knees: dict[str, Any]) -> dict[str, float]:
    """The values of ``row`` that are judged, by what the preset is about (see the module docstring)."""
    if row.error:
        return {}
    out: dict[str, float] = {}
    if spec.get("burst"):
        knee = (knees.get(row.direction) or {}).get("knee")
        if knee:
            out.update(sustained_bytes=float(knee["sustained"]), burst_s=float(knee["decline_start_s"]))
        else:  # no knee: one level all run long (no burst, or one that outlasted the run): that level
            out["sustained_bytes"] = row.bw_bytes
    else:
        out["bw_bytes"] = row.bw_bytes
    if row.job in latency_jobs(spec):
        for which in ("p50", "p99"):
            v = row.latency(which)
            if v is not None:
                out[f"lat_{which}_s"] = v
    return out


def worst(verdicts: dict[str, bl.Verdict]) -> bl.Verdict | None:
    if not verdicts:
        return None
    return min(verdicts.values(), key=lambda v: VERDICT_ORDER.index(v.verdict))


def _verdict_json(v: bl.Verdict) -> dict[str, Any]:
    return {"verdict": v.verdict, "value": v.value, "median": v.baseline.median, "spread": v.baseline.spread,
            "runs": v.baseline.runs, "change": v.change, "reason": v.reason}


def _service_summary(run: dict[str, Any]) -> dict[str, Any]:
    """Each file-system metric of the run window: its mean and peak (bytes/s) over the periods that
    overlap the run (a datapoint stamped T covers [T, T + period))."""
    out = {}
    svc = run.get("service_metrics") or {}
    period = float(svc.get("period_s", 60))
    for name, series in svc.get("series", {}).items():
        inside = [v for t, v in series if t + period > run["start"] and t <= run["end"]]
        if inside:
            out[name] = {"mean": sum(inside) / len(inside), "max": max(inside), "points": len(inside)}
    return out


def ingest_run(run: dict[str, Any], rows: list[Row], store: FioStore, metrics: MetricsSink, policy: Policy = Policy()) -> Ingested:
    check_run(run)
    target, preset, scale = run["target"]["name"], run["preset"], run.get("scale", "full")
    try:
        spec = presets_mod.raw(preset)
    except presets_mod.PresetError:
        spec = {}  # a preset this version does not know: its rows are still stored and judged on throughput
    pk = partition(target, preset, scale)
    start = float(run["start"])
    history: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for earlier in store.items(pk, start - HISTORY_DAYS * 86_400, start - 0.001):
        if earlier.get("row") and not earlier.get("error") and earlier.get("run_status") == "ok":
            values = earlier.get("measures") or {"bw_bytes": earlier["bw_bytes"]}
            for name, value in values.items():
                history.setdefault((earlier["row"], name), []).append((earlier[SORT_KEY], float(value)))
    out = Ingested(run["run_id"], pk)
    counts = {"FioRegression": 0, "FioNoBaseline": 0, "FioJobErrors": 0}
    expires = int(start + policy.retention_days * 86_400)
    knees = run.get("knees") or {}
    for row in rows:
        values = measures(row, spec, knees)
        judged: dict[str, bl.Verdict] = {}
        if row.error:
            counts["FioJobErrors"] += 1
        for name, value in values.items():
            past = [v for _, v in sorted(history.get((row.key, name), []))]
            judged[name] = bl.judge(value, bl.baseline(past, policy.window), drop=policy.drop, k=policy.k,
                                    min_runs=policy.min_runs, higher_is_better=MEASURES[name])
        verdict = worst(judged)
        item: dict[str, Any] = {
            PARTITION_KEY: pk, SORT_KEY: f"{iso_ms(start)}#{run['run_id']}#{row.key}", TTL_ATTRIBUTE: expires,
            "row": row.key, "job": row.job, "direction": row.direction, "tool": row.tool, "run_id": run["run_id"],
            "run_status": run["status"], "bw_bytes": row.bw_bytes, "iops": row.iops, "runtime_s": row.runtime_s, "io_bytes": row.io_bytes,
            "clat_p50_s": row.clat_p50_s, "clat_p99_s": row.clat_p99_s, "clat_p999_s": row.clat_p999_s,
            "lat_p50_s": row.lat_p50_s, "lat_p99_s": row.lat_p99_s, "lat_p999_s": row.lat_p999_s, "entries": row.entries,
            "repetitions": list(row.repetitions) or None, "error": row.error, "measures": values or None,
            "target": json.dumps(run["target"], sort_keys=True), "fio_version": run.get("fio_version"),
            "mount_version": run.get("mount_version"), "task": json.dumps(run.get("task", {}), sort_keys=True),
            "start": start, "end": run["end"],
        }
        if verdict is not None:
            item.update(verdict=verdict.verdict, verdicts={n: _verdict_json(v) for n, v in judged.items()},
                        baseline_median=verdict.baseline.median, baseline_spread=verdict.baseline.spread,
                        baseline_runs=verdict.baseline.runs, change=verdict.change, reason=verdict.reason)
        knee = (knees.get(row.direction) or {}).get("knee")
        if knee:
            item.update(burst_bytes=knee["burst"], sustained_bytes=knee["sustained"], knee_at_s=knee["at_s"],
                        burst_s=knee["decline_start_s"], decline_end_s=knee["decline_end_s"])
        if store.put_item_once(item):
            out.stored += 1
            if verdict is not None and verdict.verdict == "regression":
                counts["FioRegression"] += 1
            if verdict is not None and verdict.verdict == "no-baseline":
                counts["FioNoBaseline"] += 1
        out.verdicts.append((row, verdict))
        out.judged.append((row, judged))
    out.run_stored = store.put_item_once({
        PARTITION_KEY: pk, SORT_KEY: f"{iso_ms(start)}#{run['run_id']}#run", TTL_ATTRIBUTE: expires, "run_id": run["run_id"],
        "run_status": run["status"], "errors": [e[:1000] for e in run.get("errors", [])][:50], "rows": len(rows),
        "skipped": json.dumps(run.get("skipped", [])), "target": json.dumps(run["target"], sort_keys=True),
        "fio_version": run.get("fio_version"), "mount_version": run.get("mount_version"),
        "mount_options": run.get("mount_options"), "nfs": json.dumps(run.get("nfs")) if run.get("nfs") else None,
        "service": json.dumps({"summary": _service_summary(run), "knees": run.get("service_knees"),
                               "before": (run.get("service_metrics") or {}).get("before"),
                               "series": (run.get("service_metrics") or {}).get("series"),
                               "period_s": (run.get("service_metrics") or {}).get("period_s")}) if run.get("service_metrics") else None,
        "baseline_mb_s": run.get("baseline_mb_s"), "scale": scale, "fio_start": run.get("fio_start"),
        # kept with the result: the versions that ran, the Lustre layout, the bandwidth over time (the chart's)
        "versions": json.dumps(run["versions"], sort_keys=True) if run.get("versions") else None,
        "lustre_stripe": json.dumps(run["lustre_stripe"]) if run.get("lustre_stripe") else None,
        "bw_series": json.dumps(run["bw_series"], separators=(",", ":")) if run.get("bw_series") else None,
        "knees": json.dumps(knees) if knees else None,
        "task": json.dumps(run.get("task", {}), sort_keys=True), "start": start, "end": run["end"], "wall_s": run.get("wall_s")})
    if out.stored:  # a redelivery (nothing new) publishes nothing
        for metric, n in counts.items():
            metrics.count(metric, n, {"Target": target, "Preset": preset})
    return out


def load_run(text: str, source: str = RUN_FILE) -> dict[str, Any]:
    return check_run(json_object(text, source, "the runner's run document"), source)
