"""fio's JSON output (``--output-format=json`` or ``json+``) read exactly as fio reports it.

One row per job (or per group with ``group_reporting``) and direction, in named units: fio's
``bw_bytes`` (bytes/s; older fio only has ``bw`` in KiB/s, multiplied by 1024), ``iops``,
``runtime`` (ms -> s), ``io_bytes``, completion-latency percentiles from ``clat_ns`` (ns -> s) and,
with ``lat_percentiles=1``, total-latency percentiles from ``lat_ns``; ``error`` is fio's per-job
error number. A direction is reported when the job's ``rw`` covers it (read for read/randread,
both for rw/randrw, ...), so a write job that wrote nothing is a row with 0 bytes/s, not absent.

Output from ``fio --client`` (several hosts) lists its entries under ``client_stats``, one per
job and client (``hostname``, ``port``), plus an ``All clients`` entry that fio sums over every
group at once; the per-client entries are read (``client`` names the host) and the aggregate is
left out (document.fio_rows adds clients up per job, as it adds threads).

Malformed or truncated output raises :class:`FioResultError` naming the field; nothing is read
as zero that fio did not write as zero. Text after a complete JSON object (fio's own warnings or a
normal-format summary) is not an error: the object is read and the text left.

>>> doc = {"fio version": "fio-3.33", "jobs": [{"jobname": "r", "groupid": 0, "error": 0,
...   "job options": {"rw": "read", "bs": "1M"},
...   "read": {"io_bytes": 1048576, "bw_bytes": 524288, "bw": 512, "iops": 0.5, "runtime": 2000,
...            "clat_ns": {"mean": 1.5e6, "percentile": {"50.000000": 1400000, "99.000000": 2000000}}}}]}
>>> [row] = parse(doc)
>>> row.job, row.direction, row.bw_bytes, row.runtime_s, row.clat_p50_s, row.clat_p999_s
('r', 'read', 524288.0, 2.0, 0.0014, None)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

DIRECTIONS = ("read", "write", "trim")
#: fio's rw values -> the directions they do I/O in (fio's HOWTO, "rw").
RW_DIRECTIONS: dict[str, tuple[str, ...]] = {
    "read": ("read",), "randread": ("read",), "write": ("write",), "randwrite": ("write",),
    "rw": ("read", "write"), "readwrite": ("read", "write"), "randrw": ("read", "write"),
    "trim": ("trim",), "randtrim": ("trim",), "trimwrite": ("trim", "write"), "randtrimwrite": ("trim", "write"),
}
PERCENTILES = {"p50": "50.000000", "p99": "99.000000", "p999": "99.900000"}


class FioResultError(ValueError):
    """fio output that cannot be read: says which field and how to get a good one."""


@dataclass(frozen=True)
class JobResult:
    job: str
    group: int
    direction: str
    bw_bytes: float  # bytes/s
    iops: float
    runtime_s: float
    io_bytes: int
    clat_mean_s: float | None
    clat_p50_s: float | None
    clat_p99_s: float | None
    clat_p999_s: float | None
    lat_p50_s: float | None  # only with lat_percentiles=1
    lat_p99_s: float | None
    lat_p999_s: float | None
    error: int
    client: str | None = None  # host:port of a fio --client entry


    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def mib_s(self) -> float:
        return self.bw_bytes / 1024**2


def loads(text: str, source: str = "fio output") -> dict[str, Any]:
    """The JSON document in fio's output. fio prints warnings ("fio: ...") or a blank line before
    the JSON in some versions and modes: text before the first line that starts with '{' is
    skipped; text after the object's closing brace is left (``--output-format=json,normal``)."""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("{")), None)
    if start is None:
        raise FioResultError(f"{source}: no JSON object; run fio with --output-format=json (or json+)")
    body = "".join(lines[start:])
    try:
        doc, _end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError:
        return json_object(body, source, "fio's JSON object")  # names the error (a truncated object)
    if not isinstance(doc, dict):
        raise FioResultError(f"{source}: the top level must be fio's JSON object")
    return doc


def json_object(text: str, source: str, what: str = "a JSON object") -> dict[str, Any]:
    """``text`` as a JSON object, or a FioResultError naming ``source``: never a partial result."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FioResultError(f"{source}: not valid JSON ({exc.msg} at line {exc.lineno}): truncated? re-run it") from exc
    if not isinstance(doc, dict):
        raise FioResultError(f"{source}: the top level must be {what}")
    return doc


def _num(d: dict[str, Any], key: str, where: str) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FioResultError(f"{where}.{key}: missing or not a number (fio writes it in every JSON result)")
    return float(v)


def _pct(lat: Any, which: str) -> float | None:
    if not isinstance(lat, dict):
        return None
    table = lat.get("percentile")
    if not isinstance(table, dict) or PERCENTILES[which] not in table:
        return None
    return float(table[PERCENTILES[which]]) / 1e9


def _directions(job: dict[str, Any], doc: dict[str, Any], where: str) -> tuple[str, ...]:
    """The directions a job does I/O in, from its rw. fio --client leaves "job options" out of
    every client entry but the first job's (seen with fio 3.33): without an rw anywhere, the
    directions that moved bytes are the job's (read if none did, fio's default rw)."""
    rw = (job.get("job options") or {}).get("rw") or (doc.get("global options") or {}).get("rw")
    if rw is None and "job options" not in job:
        moved = tuple(d for d in DIRECTIONS if isinstance(job.get(d), dict) and job[d].get("io_bytes"))
        return moved or ("read",)
    rw = rw or "read"  # fio's default
    if rw not in RW_DIRECTIONS:
        raise FioResultError(f"{where}['job options'].rw: {rw!r} is not one of fio's rw values")
    return RW_DIRECTIONS[str(rw)]


ALL_CLIENTS = "All clients"


def parse(doc: dict[str, Any]) -> list[JobResult]:
    key = "jobs" if "jobs" in doc or "client_stats" not in doc else "client_stats"
    jobs = doc.get(key)
    if not isinstance(jobs, list) or not jobs:
        raise FioResultError("jobs: missing or empty; a fio JSON result lists its jobs under 'jobs' ('client_stats' with --client)")
    rows: list[JobResult] = []
    for i, job in enumerate(jobs):
        where = f"{key}[{i}]"
        if not isinstance(job, dict) or not isinstance(job.get("jobname"), str):
            raise FioResultError(f"{where}.jobname: missing; not a fio job entry")
        if key == "client_stats" and job["jobname"] == ALL_CLIENTS:
            continue  # fio's sum over every client *and* every group: not one job's figure
        client = f"{job.get('hostname')}:{job.get('port')}" if key == "client_stats" else None
        for direction in _directions(job, doc, where):
            d = job.get(direction)
            w = f"{where}.{direction}"
            if not isinstance(d, dict):
                raise FioResultError(f"{w}: missing; fio writes read, write and trim for every job")
            bw = float(d["bw_bytes"]) if isinstance(d.get("bw_bytes"), int | float) else _num(d, "bw", w) * 1024
            clat, lat = d.get("clat_ns"), d.get("lat_ns")
            rows.append(JobResult(
                job=job["jobname"], group=int(job.get("groupid", 0)), direction=direction,
                bw_bytes=bw, iops=_num(d, "iops", w), runtime_s=_num(d, "runtime", w) / 1000, io_bytes=int(_num(d, "io_bytes", w)),
                clat_mean_s=float(clat["mean"]) / 1e9 if isinstance(clat, dict) and "mean" in clat else None,
                clat_p50_s=_pct(clat, "p50"), clat_p99_s=_pct(clat, "p99"), clat_p999_s=_pct(clat, "p999"),
                lat_p50_s=_pct(lat, "p50"), lat_p99_s=_pct(lat, "p99"), lat_p999_s=_pct(lat, "p999"),
                error=int(job.get("error", 0)), client=client,
            ))
    return rows


def parse_text(text: str, source: str = "fio output") -> list[JobResult]:
    return parse(loads(text, source))
