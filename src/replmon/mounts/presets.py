"""Mount throughput presets (``presets.json``, the one place they are defined) expanded for one
target and one scale into the fio job file, the files to lay out first and the dd steps.

A target's semantics shape the jobs: Mountpoint for S3 writes a file once, sequentially from
offset 0, one writer per file, without fallocate, so a Mountpoint target never gets a random or
mixed write (the job is skipped, with the reason) and its writes get ``fallocate=none``,
``create_on_open=1`` and one pass instead of ``time_based`` (a time-based write wraps to offset 0,
an overwrite).

>>> plan = expand("nfs-matrix", "mountpoint", "small")
>>> [s.job for s in plan.skipped]
['1M-randwrite', '32K-randwrite', '4K-randwrite']
>>> w = next(j for j in plan.jobs if j.name == "1M-write")
>>> w.options["fallocate"], w.options["create_on_open"], "time_based" in w.options
('none', '1', False)
>>> next(j for j in plan.jobs if j.name == "4K-read").options["runtime"]   # 600 s / 64
'9'
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

#: --scale names: sizes and run times are multiplied by these (floors below keep jobs meaningful).
SCALES: dict[str, float] = {"full": 1.0, "small": 1 / 64, "tiny": 1 / 1024}
MIN_RUNTIME_SECONDS = 2
#: Target kinds a runner can mount (replmon.mounts.targets) and whether they take random/overwriting writes.
TARGET_KINDS = ("mountpoint", "s3fs", "efs", "nfs", "lustre", "local")
SEQUENTIAL_WRITE_ONLY = frozenset({"mountpoint"})


class PresetError(ValueError):
    """A preset name, scale or target kind that does not exist, or a broken presets.json."""


@dataclass(frozen=True)
class FioJob:
    name: str
    options: dict[str, str]
    writes: bool
    reads_earlier_writes: bool = False  # reads files an earlier job wrote (no layout): needs its own fio


@dataclass(frozen=True)
class LayoutFile:
    path: str  # relative to the run directory
    size: int


@dataclass(frozen=True)
class DdStep:
    name: str
    direction: str  # read | write
    bs: str
    count: int
    flag: str  # oflag=direct | iflag=direct
    repetition: int

    def argv(self, directory: str) -> list[str]:
        path = f"{directory}/dd-{self.name.split('-', 1)[1]}.{self.repetition}"
        io = ["if=/dev/zero", f"of={path}"] if self.direction == "write" else [f"if={path}", "of=/dev/null"]
        return ["dd", *io, f"bs={self.bs}", f"count={self.count}", self.flag]


@dataclass(frozen=True)
class Skipped:
    job: str
    reason: str


@dataclass(frozen=True)
class Plan:
    preset: str
    target_kind: str
    scale: str
    jobs: tuple[FioJob, ...]
    layout: tuple[LayoutFile, ...]
    dd: tuple[DdStep, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    adjusted: tuple[Skipped, ...] = field(default=())  # jobs changed for the target, with why

    def jobfile(self, directory: str) -> str:
        """fio's job file: one section per job, each stonewalled (jobs run one after another; a
        stonewall also starts a new reporting group, so with group_reporting each job's threads
        are reported as one entry, aggregated by fio itself)."""
        lines = ["; replmon preset " + self.preset + f" for a {self.target_kind} target at scale {self.scale}",
                 "[global]", f"directory={directory}", "group_reporting=1"]
        for job in self.jobs:
            lines += ["", f"[{job.name}]", "stonewall", *(f"{k}={v}" for k, v in job.options.items())]
        return "\n".join(lines) + "\n"


@cache
def _raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files("replmon.mounts").joinpath("presets.json").read_text())
    return {k: v for k, v in data.items() if not k.startswith("_")}


def names() -> list[str]:
    return sorted(_raw())


def raw(name: str) -> dict[str, Any]:
    try:
        return dict(_raw()[name])
    except KeyError:
        raise PresetError(f"unknown preset {name!r}: use one of {', '.join(names())}") from None


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def fio_size(text: str) -> int:
    """fio's size syntax with its default kb_base=1024: '500M' -> 524288000, '4k' -> 4096.

    >>> fio_size("3G"), fio_size("100k"), fio_size("1MiB")
    (3221225472, 102400, 1048576)
    """
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not m:
        raise PresetError(f"size {text!r}: use fio's syntax, e.g. 4k, 8M, 1G")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def _jobs_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The preset's jobs, with a matrix expanded in row-major order."""
    if "matrix" not in spec:
        return [dict(j) for j in spec.get("jobs", [])]
    keys = list(spec["matrix"])
    out = []
    for values in itertools.product(*(spec["matrix"][k] for k in keys)):
        env = {k: str(v) for k, v in zip(keys, values, strict=True)}
        text = json.dumps(spec["job"])
        for k, v in env.items():
            text = text.replace("{" + k + "}", v)
        job = json.loads(text)
        job["matrix"] = env
        out.append(job)
    return out


def matrix_cells(spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Job name -> its matrix cell (e.g. {"bs": "4k", "rw": "read"}) for a matrix preset."""
    return {j["name"]: j["matrix"] for j in _jobs_of(spec) if "matrix" in j}


def _scaled_size(text: str, factor: float, bs: int) -> int:
    size = fio_size(text)
    if factor == 1.0:
        return size
    return max(bs, int(size * factor) // bs * bs)


def expand(name: str, target_kind: str, scale: str = "full") -> Plan:
    """The jobs of preset ``name`` for a ``target_kind`` target at ``scale``."""
    spec = raw(name)
    if target_kind not in TARGET_KINDS:
        raise PresetError(f"target kind {target_kind!r}: use one of {', '.join(TARGET_KINDS)}")
    if scale not in SCALES:
        raise PresetError(f"scale {scale!r}: use one of {', '.join(SCALES)}")
    factor = SCALES[scale]
    jobs: list[FioJob] = []
    layout: dict[str, LayoutFile] = {}
    skipped: list[Skipped] = []
    adjusted: list[Skipped] = []
    for job in _jobs_of(spec):
        opts: dict[str, str] = {**spec.get("global", {}), **job["options"]}
        bs = fio_size(opts.get("bs", "4k"))
        fixed = bool(spec.get("fixed_sizes") or job.get("fixed_sizes"))
        for key in ("size", "filesize"):
            if key in opts:
                opts[key] = str(opts[key] if fixed else _scaled_size(opts[key], factor, bs))
                if fixed:
                    opts[key] = str(fio_size(opts[key]))
        if "runtime" in opts and factor != 1.0:
            opts["runtime"] = str(max(MIN_RUNTIME_SECONDS, round(int(opts["runtime"]) * factor)))
        if "write_bw_log" in opts:  # one log name per job: fio names a log after it, not after the section
            opts["write_bw_log"] = job["name"]
        rw = opts.get("rw", "read")
        writes = "write" in rw or rw in ("rw", "readwrite", "trimwrite")
        if target_kind in SEQUENTIAL_WRITE_ONLY and writes:
            if rw != "write":
                skipped.append(Skipped(job["name"], f"{target_kind}: rw={rw} writes randomly or into an existing file; "
                                                    "Mountpoint writes a file once, sequentially from offset 0"))
                continue
            opts.update({"fallocate": "none", "create_on_open": "1", "ramp_time": "0"})
            if opts.get("iodepth", "1") != "1":  # queued writes reach FUSE out of order: Mountpoint fails them
                adjusted.append(Skipped(job["name"], f"iodepth {opts['iodepth']} -> 1: Mountpoint takes writes strictly in order"))
                opts["iodepth"] = "1"
            if opts.pop("time_based", "0") not in ("0", ""):
                adjusted.append(Skipped(job["name"], "one pass of size, capped by runtime: a time-based write would wrap "
                                                     "to offset 0 (an overwrite Mountpoint refuses)"))
        if opts.get("time_based") == "0":
            opts.pop("time_based")
        if job.get("layout") and not writes:
            size = opts.get("filesize") or opts["size"]
            if opts.get("nrfiles") not in (None, "1"):  # many small files: lay out each
                stem = f"layout/{job['name']}"
                opts["filename_format"] = stem + ".$filenum"
                for n in range(int(opts["nrfiles"])):
                    layout[f"{stem}.{n}"] = LayoutFile(f"{stem}.{n}", int(size))
            elif job.get("shared_file"):  # every thread reads the one file
                path = f"layout/f-{size}"
                opts["filename"] = path
                layout[path] = LayoutFile(path, int(size))
            else:  # one file per thread (fio's default), shared by jobs of the same size
                opts["filename_format"] = f"layout/f-{size}.$jobnum"
                for n in range(int(opts.get("numjobs", "1"))):
                    layout[f"layout/f-{size}.{n}"] = LayoutFile(f"layout/f-{size}.{n}", int(size))
        elif writes and "filename_format" not in opts:
            opts["filename_format"] = f"w-{job['name']}.$jobnum.$filenum"  # a file per writer
        jobs.append(FioJob(job["name"], opts, writes, reads_earlier_writes=not writes and not job.get("layout")))
    dd = tuple(DdStep(d["name"], d["direction"], d["bs"], int(d["count"]), d["flag"], rep)
               for rep in range(int(spec.get("repetitions", 1))) for d in spec.get("dd", []))
    return Plan(name, target_kind, scale, tuple(jobs), tuple(layout.values()), dd, tuple(skipped), tuple(adjusted))
