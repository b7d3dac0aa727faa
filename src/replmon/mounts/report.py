"""Each study's table rebuilt from stored results, next to the published figures in the same unit.

The input is what ingestion stored (replmon.mounts.ingest): per target, the rows and the run
item of its latest run. The same code serves `replmon fio report` (a deployed stack's table) and
`replmon lab fio` (the lab's DynamoDB Local). Comparisons the studies made are computed too:

- ``mountpoint-xregion``: the cross-region drop, 1 - cross / same-region per job and its mean
  (the study: about 70 %);
- ``express-vs-standard``: Express One Zone / Standard per dd test (the study: about 2x at
  100 MiB, 10x for 4 KiB writes, 4x for 4 KiB reads) and each cache's first read against its later
  ones;
- ``burst-*``: burst and sustained levels in MB/s (the study's unit), the burst's duration, and
  both as ratios to the file system's per-unit baseline (5.15x burst / 1.27x sustained for writes);
- ``nfs-matrix``: MiB/s and IOPS per bs x rw cell.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

from replmon.mounts import presets as presets_mod

MiB = 2**20
MB = 1e6


@dataclass
class TargetResult:
    target: str
    spec: dict[str, Any]  # the target as the runner recorded it
    run: dict[str, Any]  # the run item
    rows: dict[str, dict[str, Any]]  # row key (job/direction) -> item

    def bw(self, key: str, unit: float = MiB) -> float | None:
        item = self.rows.get(key)
        return None if item is None or item.get("error") else float(item["bw_bytes"]) / unit

    def job(self, job: str, unit: float = MiB) -> float | None:
        """The job's bandwidth (its one direction)."""
        hits = [k for k in self.rows if k.split("/")[0] == job]
        return self.bw(hits[0], unit) if hits else None


@dataclass
class Table:
    title: str
    rows: list[dict[str, Any]]
    note: str = ""


@dataclass
class StudyReport:
    preset: str
    reference: str
    tables: list[Table] = field(default_factory=list)
    comparisons: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"preset": self.preset, "reference": self.reference, "comparisons": self.comparisons,
                "tables": [{"title": t.title, "note": t.note, "rows": t.rows} for t in self.tables]}


def latest(items: list[dict[str, Any]], target: str) -> TargetResult | None:
    """The newest run in a partition's items (successful if any run succeeded), as a TargetResult."""
    runs = [i for i in items if str(i.get("at", "")).endswith("#run")]
    if not runs:
        return None
    ok = [r for r in runs if r.get("run_status") == "ok"] or runs
    run = max(ok, key=lambda r: r["at"])
    rows = {i["row"]: i for i in items if i.get("row") and i.get("run_id") == run["run_id"]}
    return TargetResult(target, json.loads(run.get("target") or "{}"), run, rows)


def versions_text(run: dict[str, Any]) -> str:
    """The versions a run recorded (its run item's ``versions``), one line: ``fio fio-3.33; mountpoint ...``."""
    got = json.loads(run.get("versions") or "null") or {}
    if not got:
        return " ".join(v for v in (run.get("fio_version"), run.get("mount_version")) if v) or "-"
    return "; ".join(f"{k} {v}" for k, v in sorted(got.items()) if v and k != "image")


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _region_of(result: TargetResult) -> str | None:
    az = (json.loads(result.run.get("task") or "{}") or {}).get("az")
    return az[:-1] if az else None


def infer_xregion(results: list[TargetResult]) -> tuple[TargetResult, TargetResult] | None:
    """(same-region, cross-region) Mountpoint targets: the bucket's region against the task's AZ."""
    same = [r for r in results if r.spec.get("kind") == "mountpoint" and r.spec.get("region") and r.spec.get("region") == _region_of(r)]
    far = [r for r in results if r.spec.get("kind") == "mountpoint" and r.spec.get("region") and _region_of(r)
           and r.spec.get("region") != _region_of(r)]
    return (same[0], far[0]) if len(same) == 1 and len(far) == 1 else None


def _ran_label(spec: dict[str, Any], results: list[TargetResult], row_key: str, value: str) -> str:
    """A matrix row's label as it ran: at a smaller scale R2's 500M/1G/3G files shrink (to 8M at
    tiny scale), so the label says what ran: ``500M (ran 8M)``."""
    if row_key != "file":
        return value
    scales = {str(r.run.get("scale")) for r in results if r.run.get("scale") and r.run.get("scale") != "full"}
    if len(scales) != 1:
        return value
    job = next(j for j, c in presets_mod.matrix_cells(spec).items() if c[row_key] == value)
    ran = next(j for j in presets_mod.expand(spec["_name"], "mountpoint", scales.pop()).jobs if j.name == job)
    return f"{value} (ran {_size_label(int(ran.options['size']))})"


def _size_label(n: int) -> str:
    """Bytes in fio's size syntax: 8388608 -> '8M'."""
    for unit, div in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def host_notes(preset: str, results: list[TargetResult]) -> list[str]:
    """For each run on an EC2 host whose network cannot carry some of the study's published cells:
    the ceiling, next to the cells it caps (those cells measure the client, not the file system)."""
    from replmon.mounts import hosts

    notes = []
    for r in results:
        host = (json.loads(r.run.get("task") or "{}") or {}).get("instance_type")
        if host in hosts.HOSTS:
            capped = hosts.over(preset, host)
            if capped:
                notes.append(f"{r.target} ran on a {host}: {hosts.HOSTS[host].network_gbps:g} Gbps = {hosts.ceiling_mib_s(host):,.0f} MiB/s, "
                             "below the study's " + ", ".join(f"{c} ({g:g} Gbps)" for c, g in capped)
                             + ": those cells measure the client here, not the file system")
    return notes


def _matrix(spec: dict[str, Any], results: list[TargetResult], report: StudyReport, iops: bool) -> None:
    pub = spec["published"]
    row_key, col_key = pub["row"], pub["column"]
    cells = presets_mod.matrix_cells(spec)
    cols = [str(c) for c in spec["matrix"][col_key]]
    by_cell = {(c[row_key], c[col_key]): job for job, c in cells.items()}
    labels = {str(v): _ran_label(spec, results, row_key, str(v)) for v in spec["matrix"][row_key]}
    notes = host_notes(spec["_name"], results)
    for metric, unit_name, published in (("bw", "MiB/s", pub["values"]), *((("iops", "IOPS", pub["iops"]),) if iops else ())):
        rows = []
        for r in results:
            for value in spec["matrix"][row_key]:
                row: dict[str, Any] = {"target": r.target, row_key: labels[str(value)]}
                for c in cols:
                    hits = [i for k, i in r.rows.items() if k.split("/")[0] == by_cell.get((str(value), c)) and not i.get("error")]
                    if not hits:
                        row[c] = "skipped"
                    elif metric == "bw":
                        row[c] = _fmt(sum(float(i["bw_bytes"]) for i in hits) / MiB)
                    else:
                        row[c] = _fmt(sum(float(i.get("iops") or 0) for i in hits), 0)
                rows.append(row)
        for value in spec["matrix"][row_key]:
            rows.append({"target": "published", row_key: value, **{c: published[str(value)].get(c, "-") for c in cols}})
        report.tables.append(Table(f"{spec['reference']} {unit_name}", rows, "; ".join([f"published: {pub['condition']}", *notes])))


def _xregion(results: list[TargetResult], report: StudyReport, pair: tuple[TargetResult, TargetResult] | None, spec: dict[str, Any]) -> None:
    pair = pair or infer_xregion(results)
    if pair is None:
        report.comparisons["cross_region_drop"] = None
        report.tables.append(Table("cross-region drop", [], "needs one same-region and one cross-region Mountpoint target"))
        return
    same, far = pair
    drops = {}
    for job in presets_mod.matrix_cells(spec):
        a, b = same.job(job), far.job(job)
        if a and b is not None:
            drops[job] = 1 - b / a
    mean = statistics.fmean(drops.values()) if drops else None
    report.comparisons["cross_region_drop"] = {"same_region": same.target, "cross_region": far.target, "per_job": drops, "mean": mean,
                                               "published": spec["published"].get("cross_region_drop")}
    report.tables.append(Table(f"cross-region drop: {far.target} vs {same.target}",
                               [{"job": j, f"{same.target} MiB/s": _fmt(same.job(j)), f"{far.target} MiB/s": _fmt(far.job(j)),
                                 "drop": f"{d:.0%}"} for j, d in drops.items()]
                               + [{"job": "mean", "drop": f"{mean:.0%}" if mean is not None else "-"},
                                  {"job": "published", "drop": f"{spec['published'].get('cross_region_drop', 0):.0%}"}]))


def is_express(r: TargetResult) -> bool:
    return r.spec.get("kind") == "mountpoint" and str(r.spec.get("bucket", "")).endswith("--x-s3")


def is_plain_standard(r: TargetResult) -> bool:
    return r.spec.get("kind") == "mountpoint" and not is_express(r) and not r.spec.get("cache") and not r.spec.get("cache_xz")


def _express(spec: dict[str, Any], results: list[TargetResult], report: StudyReport) -> None:
    tests = [d["name"] for d in spec["dd"]]
    rows = []
    for r in results:
        for t in tests:
            key = next((k for k in r.rows if k.startswith(f"dd-{t}/")), None)
            first = next((k for k in r.rows if k.startswith(f"dd-{t}-first/")), None)
            reps = (r.rows.get(key) or {}).get("repetitions") or [] if key else []
            rows.append({"target": r.target, "test": t, "1st MiB/s": _fmt(r.bw(first) if first else None, 2),
                         "2nd-10th median MiB/s": _fmt(r.bw(key) if key else None, 2),
                         "every repetition MiB/s": " ".join(f"{x / MiB:.1f}" for x in reps) or "-"})
    report.tables.append(Table(f"{spec['reference']} dd (the study's four tests, ten repetitions each)", rows,
                               "first repetition and the median of the other nine"))
    fio_rows = [{"target": r.target, "job": j["name"], "MiB/s": _fmt(r.job(j["name"]), 2), "times": j.get("times", "")}
                for r in results for j in spec.get("jobs", [])]
    report.tables.append(Table("fio rows (not in the study)", fio_rows, "each fio figure covers what 'times' says"))
    express = [r for r in results if is_express(r)]
    standard = [r for r in results if is_plain_standard(r)]
    ratios: dict[str, Any] = {}
    if express and standard:
        e, s = express[0], standard[0]
        for t in tests:
            k = next((k for k in e.rows if k.startswith(f"dd-{t}/")), None)
            ks = next((k for k in s.rows if k.startswith(f"dd-{t}/")), None)
            a, b = (e.bw(k) if k else None), (s.bw(ks) if ks else None)
            ratios[t] = {"express": e.target, "standard": s.target, "ratio": (a / b) if a is not None and b else None,
                         "published": spec["published"]["values"].get(f"express/standard {t}")}
        report.tables.append(Table(f"Express One Zone / Standard: {e.target} / {s.target}",
                                   [{"test": t, "ratio": _fmt(v["ratio"], 2), "published": v["published"]}
                                    for t, v in ratios.items()]))
    report.comparisons["express_standard"] = ratios or None
    caches = {}
    for r in results:
        if r.spec.get("cache") or r.spec.get("cache_xz"):
            for t in tests:
                if t.startswith("read"):
                    k = next((k for k in r.rows if k.startswith(f"dd-{t}/")), None)
                    f = next((k for k in r.rows if k.startswith(f"dd-{t}-first/")), None)
                    if k and f and r.bw(f):
                        caches[f"{r.target} {t}"] = (r.bw(k) or 0) / (r.bw(f) or 1)
    report.comparisons["cache_warm_over_first"] = caches or None


def _burst(spec: dict[str, Any], results: list[TargetResult], report: StudyReport) -> None:
    """Burst, knee and sustained level per row, from fio's logs and from the file system's own
    series. Without a knee a row still has a level (one level all run long: the burst outlasted
    the run, or there was none): it is printed as the sustained level, which is what ingestion
    judges, with "no knee"."""
    pub = spec["published"]
    rows = []
    out = {}
    for r in results:
        baseline = r.run.get("baseline_mb_s")
        service = json.loads(r.run.get("service") or "null") or {}
        for key, item in r.rows.items():
            judged = (item.get("measures") or {}).get("sustained_bytes")
            level = float(judged) if judged is not None else (float(item["bw_bytes"]) if not item.get("error") else None)
            fio_sustained = item.get("sustained_bytes")  # 0 is a level (writes held to nothing), not a missing one
            views = [("fio", item.get("burst_bytes"), level if fio_sustained is None else fio_sustained, item.get("burst_s"), item.get("knee_at_s"),
                      item.get("decline_end_s"), item.get("burst_bytes") is not None)]
            entry = (service.get("knees") or {}).get(item["direction"]) or {}
            sk = entry.get("knee")
            if sk:
                views.append((f"file system ({entry.get('metric')})", sk["burst"], sk["sustained"], sk["decline_start_s"], sk["at_s"],
                              sk["decline_end_s"], True))
            elif entry.get("metric"):
                mean = ((service.get("summary") or {}).get(entry["metric"]) or {}).get("mean")
                views.append((f"file system ({entry['metric']})", None, mean, None, None, None, False))
            for source, burst, sustained, burst_s, at_s, end_s, has_knee in views:
                row = {"target": r.target, "row": key, "source": source,
                       "burst MB/s": _fmt(burst / MB if burst is not None else None), "burst s": _fmt(burst_s, 0),
                       "knee at s": _fmt(at_s, 0) if has_knee else "no knee", "decline ends s": _fmt(end_s, 0),
                       "sustained MB/s": _fmt(sustained / MB if sustained is not None else None)
                       + ("" if has_knee or sustained is None else " (one level)"),
                       "burst/baseline": _fmt(burst / MB / baseline if burst is not None and baseline else None, 2),
                       "sustained/baseline": _fmt(sustained / MB / baseline if sustained is not None and baseline else None, 2)}
                rows.append(row)
                out[f"{r.target} {key} {source}"] = {k: v for k, v in row.items() if k not in ("target", "row", "source")}
    rows.append({"target": "published", "row": "-", "source": spec["study"][:40], "burst MB/s": pub["values"]["burst"],
                 "sustained MB/s": pub["values"]["sustained"], "burst/baseline": pub["values"]["burst/baseline"],
                 "sustained/baseline": pub["values"]["sustained/baseline"]})
    notes = host_notes(spec["_name"], results)
    report.tables.append(Table(f"{spec['reference']} burst vs sustained (MB/s = 10^6 B/s, the study's unit)", rows,
                               "; ".join([f"per-unit baseline: the target's per_unit_mb_s x storage_gib / 1024 (published: "
                                          f"{pub['baseline_mb_s']} MB/s); no knee: the run's one level, as judged", *notes])))
    report.comparisons["burst"] = out or None


def _jobs(spec: dict[str, Any], results: list[TargetResult], report: StudyReport) -> None:
    keys = list(dict.fromkeys(k for r in results for k in r.rows))
    report.tables.append(Table(f"{spec['reference']} MiB/s", [{"target": r.target, **{k: _fmt(r.bw(k), 2) if k in r.rows else "skipped"
                                                                                     for k in keys}} for r in results]))


def study_report(preset: str, results: list[TargetResult], *, xregion_pair: tuple[TargetResult, TargetResult] | None = None) -> StudyReport:
    spec = {**presets_mod.raw(preset), "_name": preset}
    report = StudyReport(preset, spec["reference"])
    if preset == "mountpoint-xregion":
        _matrix(spec, results, report, iops=True)
        _xregion(results, report, xregion_pair, spec)
    elif preset == "nfs-matrix":
        _matrix(spec, results, report, iops=True)
    elif preset == "express-vs-standard":
        _express(spec, results, report)
    elif spec.get("burst"):
        _burst(spec, results, report)
    else:
        _jobs(spec, results, report)
    skipped = [{"target": r.target, "job": s["job"], "reason": s["reason"]} for r in results
               for s in json.loads(r.run.get("skipped") or "[]")]
    if skipped:
        report.tables.append(Table("skipped", skipped))
    report.tables.append(Table("runs", [{"target": r.target, "run": r.run["run_id"], "status": r.run.get("run_status"),
                                         "mount": r.run.get("mount_options") or "-", "nfs": r.run.get("nfs") or "-",
                                         "versions": versions_text(r.run)} for r in results]))
    return report
