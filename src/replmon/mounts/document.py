"""A runner's result set in the results bucket, and the rows a baseline is kept on.

``<prefix><target>/<preset>/<run_id>/`` holds ``fio/NN-<first job>.json`` (fio's own output,
untouched; one per fio invocation, see runner.fio_groups; a job in passes has one per pass,
``fio/NN-<job>-pPPP.json``), ``job.fio``, ``bw/*.log`` (bandwidth logs, when the preset writes
them; a pass's prefixed ``pPPP-``) and ``run.json`` - written last, so
its ObjectCreated event means the set is complete. ``run.json`` carries the metadata (target and
mount options as asked and as the kernel mounted them, fio and mount versions, task size, AZ,
start/end), the dd repetitions, the knees, the file system's own CloudWatch series for the run
window (``service_metrics``) and what the preset skipped for this target. A task that ran
several targets writes ``tasks/<task id>.json`` at its end, listing its runs.

The same rows come out of ``replmon fio parse``, ingestion and the lab: :func:`fio_rows` is
the one reading of fio's JSON into rows.

>>> results_prefix("fio-results/", "std", "nfs-matrix", "20261122T140000Z-ab12cd")
'fio-results/std/nfs-matrix/20261122T140000Z-ab12cd/'
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from replmon.mounts.fioresult import FioResultError, JobResult

RUN_FILE = "run.json"
GROUPS_PER_OUTPUT = 1_000_000  # output n's group g is n * this + g (fio numbers groups from 0 in every output)
TASKS_DIR = "tasks/"


def results_prefix(prefix: str, target: str, preset: str, run_id: str) -> str:
    return f"{prefix}{target}/{preset}/{run_id}/"


def task_key(prefix: str, task_id: str) -> str:
    return f"{prefix}{TASKS_DIR}{task_id}.json"


@dataclass(frozen=True)
class Row:
    """One baseline series point: a fio job group and direction, or a dd test's first repetition
    or the median of its others."""

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
    lat_p50_s: float | None = None  # total latency (submission + completion); fio with lat_percentiles=1, dd: its seconds
    lat_p99_s: float | None = None
    lat_p999_s: float | None = None
    io_bytes: int = 0
    entries: int = 1  # fio entries (threads without group_reporting, clients) added up into this row
    repetitions: tuple[float, ...] = field(default=())  # dd: every repetition's bytes/s, in order

    @property
    def key(self) -> str:
        return f"{self.job}/{self.direction}"

    def latency(self, which: str) -> float | None:
        """Total latency where fio measured it, else completion latency (what SEMANTICS.md calls latency)."""
        total = getattr(self, f"lat_{which}_s")
        return total if total is not None else getattr(self, f"clat_{which}_s", None)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "key": self.key, "repetitions": list(self.repetitions)}


def fio_rows(results: list[JobResult]) -> list[Row]:
    """One row per job and direction: what ingestion stores and `replmon fio parse` prints.
    Entries of one group (threads without group_reporting; clients of ``fio --client``) add up
    as fio's own group aggregate does: all bytes and I/Os over the longest runtime. Groups of one
    job name are its passes (a preset's ``pass_seconds``: stonewalled groups, one after another):
    their bytes and runtimes add up. Percentiles do not add up, so a row of several entries
    carries none (the runner's job files set group_reporting=1: one entry per group, fio's own
    percentiles).

    >>> from replmon.mounts.fioresult import JobResult
    >>> def r(group, mib, s): return JobResult("p", group, "read", mib * 2**20 / s, 0.0, s, mib * 2**20, *[None] * 7, 0)
    >>> [row] = fio_rows([r(0, 600, 60.0), r(1, 300, 60.0)])   # two 60 s passes
    >>> row.runtime_s, row.bw_bytes / 2**20, row.entries
    (120.0, 7.5, 2)
    """
    by: dict[tuple[str, str], dict[int, list[JobResult]]] = {}
    for r in results:
        by.setdefault((r.job, r.direction), {}).setdefault(r.group, []).append(r)
    rows = []
    for (job, direction), groups in by.items():
        rs = [r for g in groups.values() for r in g]
        one = rs[0] if len(rs) == 1 else None
        runtime = sum(max(r.runtime_s for r in g) for g in groups.values())
        bw = one.bw_bytes if one else (sum(r.io_bytes for r in rs) / runtime if runtime else 0.0)
        iops = one.iops if one else (sum(r.iops * r.runtime_s for r in rs) / runtime if runtime else 0.0)
        rows.append(Row(job, direction, bw, iops, runtime,
                        one.clat_p50_s if one else None, one.clat_p99_s if one else None, one.clat_p999_s if one else None,
                        max(r.error for r in rs), "fio",
                        lat_p50_s=one.lat_p50_s if one else None, lat_p99_s=one.lat_p99_s if one else None,
                        lat_p999_s=one.lat_p999_s if one else None, io_bytes=sum(r.io_bytes for r in rs), entries=len(rs)))
    return rows


def output_rows(outputs: list[list[JobResult]]) -> list[Row]:
    """The rows of a run's fio outputs (one per fio invocation): groups are numbered per output,
    so each output's are kept apart, and a job run once per pass (several outputs) adds up to one
    row (:func:`fio_rows`)."""
    return fio_rows([replace(r, group=r.group + n * GROUPS_PER_OUTPUT) for n, out in enumerate(outputs) for r in out])


def dd_rows(dd: list[dict[str, Any]]) -> list[Row]:
    """dd repetitions -> two rows per test: ``dd-<test>-first`` (the first repetition: a cache's
    fill, a cold read) and ``dd-<test>`` (the median of the others: warm). Every repetition's
    bytes/s is kept on the second row. A dd of one block (4 KiB) is one request: its seconds are
    that request's latency (first: the one value; others: median as p50, the largest as p99 -
    nine samples have no finer tail)."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in dd:
        by.setdefault((d["name"], d["direction"]), []).append(d)
    rows = []
    for (name, direction), reps in by.items():
        reps = sorted(reps, key=lambda x: int(x["repetition"]))
        every = tuple(float(x["bw_bytes"]) for x in reps)
        parts = ((f"dd-{name}-first", reps[:1]), (f"dd-{name}", reps[1:]))
        for job, part in parts:
            good = [x for x in part if not x.get("error")]
            errors = len(part) - len(good)
            if not good:
                rows.append(Row(job, direction, 0.0, None, 0.0, None, None, None, max(errors, 1), "dd", repetitions=every))
                continue
            secs = [float(x["seconds"]) for x in good]
            rows.append(Row(job, direction, statistics.median(float(x["bw_bytes"]) for x in good), None, sum(secs), None, None, None,
                            errors, "dd", lat_p50_s=statistics.median(secs), lat_p99_s=max(secs),
                            io_bytes=sum(int(x["bytes"]) for x in good), entries=len(good),
                            repetitions=every if len(part) > 1 else ()))
    return rows


def check_run(run: dict[str, Any], source: str = RUN_FILE) -> dict[str, Any]:
    """The fields ingestion relies on, each named if missing."""
    for key, kind in (("run_id", str), ("preset", str), ("status", str), ("start", float), ("end", float), ("target", dict)):
        value = run.get(key)
        if not isinstance(value, kind) and not (kind is float and isinstance(value, int)):
            raise FioResultError(f"{source}: {key!r} missing or not a {kind.__name__} (written by the replmon fio runner)")
    if not isinstance(run["target"].get("name"), str):
        raise FioResultError(f"{source}: target.name missing")
    return run
