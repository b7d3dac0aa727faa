"""A runner's result set in the results bucket, and the rows a baseline is kept on.

``<prefix><target>/<preset>/<run_id>/`` holds ``fio/NN-<first job>.json`` (fio's own output,
untouched; one per fio invocation, see runner.fio_groups), ``job.fio``,
``bw/*.log`` (bandwidth logs, when the preset writes them) and ``run.json`` - written last, so
its ObjectCreated event means the set is complete. ``run.json`` carries the metadata (target and
mount options, fio and mount versions, task size, AZ, start/end), the dd results, the knees and
what the preset skipped for this target.

>>> results_prefix("fio-results/", "std", "nfs-matrix", "20261122T140000Z-ab12cd")
'fio-results/std/nfs-matrix/20261122T140000Z-ab12cd/'
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from replmon.mounts.fioresult import FioResultError, JobResult

RUN_FILE = "run.json"


def results_prefix(prefix: str, target: str, preset: str, run_id: str) -> str:
    return f"{prefix}{target}/{preset}/{run_id}/"


@dataclass(frozen=True)
class Row:
    """One baseline series point: a fio job and direction, or a dd test (median of its repetitions)."""

    job: str
    direction: str
    bw_bytes: float
    iops: float | None
    runtime_s: float
    clat_p50_s: float | None
    clat_p99_s: float | None
    clat_p999_s: float | None
    error: int
    tool: str  # fio | dd

    @property
    def key(self) -> str:
        return f"{self.job}/{self.direction}"


def fio_rows(results: list[JobResult]) -> list[Row]:
    """One row per job and direction. fio without group_reporting lists each thread of a job
    separately: their bandwidths and IOPS add up exactly (as fio's own group aggregate), their
    percentiles do not, so those rows carry none (runner job files set group_reporting=1).
    The aggregate is fio's: all threads' bytes (and I/Os) over the longest thread's runtime."""
    by: dict[tuple[str, int, str], list[JobResult]] = {}
    for r in results:
        by.setdefault((r.job, r.group, r.direction), []).append(r)
    rows = []
    for (job, _group, direction), rs in by.items():
        one = rs[0] if len(rs) == 1 else None
        runtime = max(r.runtime_s for r in rs)
        bw = one.bw_bytes if one else (sum(r.io_bytes for r in rs) / runtime if runtime else 0.0)
        iops = one.iops if one else (sum(r.iops * r.runtime_s for r in rs) / runtime if runtime else 0.0)
        rows.append(Row(job, direction, bw, iops, runtime,
                        one.clat_p50_s if one else None, one.clat_p99_s if one else None, one.clat_p999_s if one else None,
                        max(r.error for r in rs), "fio"))
    return rows


def dd_rows(dd: list[dict[str, Any]]) -> list[Row]:
    """dd repetitions -> one row per test: the median bandwidth, as the study tabulated them."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in dd:
        by.setdefault((f"dd-{d['name']}", d["direction"]), []).append(d)
    return [Row(name, direction, statistics.median(x["bw_bytes"] for x in reps), None,
                sum(x["seconds"] for x in reps), None, None, None, sum(1 for x in reps if x.get("error")), "dd")
            for (name, direction), reps in by.items()]


def check_run(run: dict[str, Any], source: str = RUN_FILE) -> dict[str, Any]:
    """The fields ingestion relies on, each named if missing."""
    for key, kind in (("run_id", str), ("preset", str), ("status", str), ("start", float), ("end", float), ("target", dict)):
        value = run.get(key)
        if not isinstance(value, kind) and not (kind is float and isinstance(value, int)):
            raise FioResultError(f"{source}: {key!r} missing or not a {kind.__name__} (written by the replmon fio runner)")
    if not isinstance(run["target"].get("name"), str):
        raise FioResultError(f"{source}: target.name missing")
    return run
