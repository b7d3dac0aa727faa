"""Mount throughput presets (``presets.json``, the one place they are defined) expanded for one
target and one scale into the fio job file, the files to lay out first and the dd steps.

A target's semantics shape the jobs: Mountpoint for S3 writes a file once, sequentially from
offset 0, one writer per file, without fallocate, so a Mountpoint target never gets a random or
mixed write (the job is skipped, with the reason) and its writes get ``fallocate=none``,
``create_on_open=1`` and one pass instead of ``time_based`` (a time-based write wraps to offset 0,
an overwrite).

Read jobs' files are laid out by the runner under ``replmon-fio/layout/<preset>/<scale>/`` on
the target and kept there between runs (``Plan.layout_set``): ``per_job`` gives every thread of
every job its own file (``<job>.<thread>``), ``shared`` one file per thread shared by the read
jobs of one size (``f-<size>.<thread>``), ``per_file`` one fio section per file
(``<job>.<NNNNNNNN>``, as IOR -F names a rank's file), each file read by the job's ``numjobs``
threads at once: IOR -F run on several clients, where rank r of every client reads file r. A job
with ``pass_seconds`` runs in passes (IOR's stonewalled repetitions, -D): each pass reads from
offset 0 until its seconds are up (or the file ends), its sections one group; the runner runs
fio once per pass (``runner.run_fio``), back to back until the job's runtime is spent: one fio
holding every pass's jobs at once would hold 120 x 32 jobs' state (~1 GiB with fio 3.33, measured)
and spend seconds between passes walking it.

>>> r = expand("burst-read", "lustre", "full")
>>> [j] = r.jobs
>>> j.files[:2], j.options["numjobs"], j.options["runtime"], j.passes, j.seconds()
(('ior-read.00000000', 'ior-read.00000001'), '4', '60', 120, 7200)

>>> plan = expand("nfs-matrix", "mountpoint", "small")
>>> [s.job for s in plan.skipped]
['1M-randwrite', '32K-randwrite', '4K-randwrite']
>>> w = next(j for j in plan.jobs if j.name == "1M-write")
>>> w.options["fallocate"], w.options["create_on_open"], "time_based" in w.options
('none', '1', False)
>>> next(j for j in plan.jobs if j.name == "4K-read").options["runtime"]   # 600 s / 64
'9'
>>> x = expand("mountpoint-xregion", "mountpoint", "full")
>>> len(x.layout), x.layout[1].path, x.layout_set
(75, 'SEQ8M-Q128T8-500M-Read.0', 'mountpoint-xregion/full')
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from typing import Any

#: --scale names: sizes and run times are multiplied by these (floors below keep jobs meaningful).
SCALES: dict[str, float] = {"full": 1.0, "small": 1 / 64, "tiny": 1 / 1024}
MIN_RUNTIME_SECONDS = 2
#: Target kinds a runner can mount (replmon.mounts.targets) and whether they take random/overwriting writes.
TARGET_KINDS = ("mountpoint", "s3fs", "efs", "nfs", "lustre", "local")
SEQUENTIAL_WRITE_ONLY = frozenset({"mountpoint"})
LAYOUT_MODES = ("per_job", "shared", "per_file")
#: fio allocates at most this many jobs (threads) per run (FIO_MAX_JOBS, fio's os/os.h).
FIO_MAX_JOBS = 4096


class PresetError(ValueError):
    """A preset name, scale or target kind that does not exist, or a broken presets.json."""


@dataclass(frozen=True)
class FioJob:
    name: str
    options: dict[str, str]
    writes: bool
    reads_earlier_writes: bool = False  # reads files an earlier job wrote (no layout): needs its own fio
    reads_layout: bool = False  # reads files the runner laid out (fio's directory= is the layout set)
    times: str = ""  # what fio's figure for this job covers, when it is not plain I/O
    files: tuple[str, ...] = ()  # per_file: one section per file, each read by numjobs threads
    passes: int = 1  # the sections run this many times, each pass from offset 0 (IOR's -D repetitions)
    file_size: int = 0  # per_file: the laid-out file's size when it differs from what a pass reads (size)

    @property
    def threads(self) -> int:
        """fio threads of one pass: numjobs, times the sections of a per_file job."""
        return int(self.options.get("numjobs", "1")) * max(1, len(self.files))

    def seconds(self) -> int:
        """The most this job can run: its runtime per pass times the passes."""
        return int(self.options.get("runtime", "0")) * self.passes

    def buffer_bytes(self) -> int:
        """The I/O buffers fio fills for this job: per thread, one block per request in flight,
        no more requests than the file has blocks (a 500 MiB file read in 8 MiB blocks never has
        more than 63 in flight), times the threads. Time-based jobs wrap around: iodepth."""
        bs = fio_size(self.options.get("bs", "4k"))
        depth = int(self.options.get("iodepth", "1"))
        size = self.options.get("filesize") or self.options.get("size")
        if size and self.options.get("time_based") != "1":
            depth = min(depth, max(1, -(-int(size) // bs)))
        return self.threads * depth * bs


@dataclass(frozen=True)
class LayoutFile:
    path: str  # relative to the layout set's directory
    size: int


@dataclass(frozen=True)
class DdStep:
    name: str
    direction: str  # read | write
    bs: str
    count: int
    flag: str  # oflag=direct | iflag=direct
    repetition: int  # 1-based
    path: str  # the one file every repetition of the test uses

    def argv(self, directory: str) -> list[str]:
        """dd exactly as the study typed it: writes from /dev/urandom (nothing a cache or a
        compressor can shorten), reads to /dev/null."""
        target = f"{directory}/{self.path}"
        io = ["if=/dev/urandom", f"of={target}"] if self.direction == "write" else [f"if={target}", "of=/dev/null"]
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
    mount_flags: tuple[str, ...] = ()  # this preset's extra flags for the target (e.g. --allow-overwrite)

    @property
    def layout_set(self) -> str:
        """The layout's directory under replmon-fio/layout/: one per preset and scale."""
        return f"{self.preset}/{self.scale}"

    def jobfile(self, directory: str, layout_dir: str | None = None) -> str:
        """fio's job file: one section per job, each stonewalled (jobs run one after another; a
        stonewall also starts a new reporting group, so with group_reporting each job's threads
        are reported as one entry, aggregated by fio itself). Jobs that read the layout read it
        in ``layout_dir``; everything else happens in ``directory`` (the run's own)."""
        lines = ["; replmon preset " + self.preset + f" for a {self.target_kind} target at scale {self.scale}",
                 "[global]", f"directory={directory}", "group_reporting=1"]
        for job in self.jobs:
            if job.passes > 1:
                lines += ["", f"; {job.name}: {job.passes} passes, each from offset 0 (the runner runs fio once per pass)"]
            for n, name in enumerate(job.files or ("",)):
                lines += ["", f"[{job.name}]"] + (["stonewall"] if n == 0 else [])  # a job's sections: one group
                if job.reads_layout:
                    lines.append(f"directory={layout_dir or directory + '/layout'}")
                if name:
                    lines.append(f"filename={name}")
                lines += [f"{k}={v}" for k, v in job.options.items()]
        return "\n".join(lines) + "\n"

    def without(self, skipped: list[Skipped]) -> Plan:
        """The plan with ``skipped`` jobs removed (and their layout files, unless another job reads them)."""
        names = {s.job for s in skipped}
        jobs = tuple(j for j in self.jobs if j.name not in names)
        keep = {f.path for j in jobs for f in layout_of(j)} if jobs else set()
        return replace(self, jobs=jobs, layout=tuple(f for f in self.layout if f.path in keep),
                       skipped=(*self.skipped, *skipped))


def layout_of(job: FioJob) -> list[LayoutFile]:
    """The layout files one job reads (from its options: filename_format, numjobs, nrfiles)."""
    if not job.reads_layout:
        return []
    if job.files:
        return [LayoutFile(f, job.file_size or int(job.options["size"])) for f in job.files]
    fmt = job.options["filename_format"]
    size = int(job.options.get("filesize") or job.options["size"])
    threads, files = int(job.options.get("numjobs", "1")), int(job.options.get("nrfiles", "1"))
    return [LayoutFile(fmt.replace("$jobnum", str(t)).replace("$filenum", str(f)), size)
            for t in range(threads) for f in range(files)]


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
                opts[key] = str(fio_size(opts[key]) if fixed else _scaled_size(opts[key], factor, bs))
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
        mode = job.get("layout")
        if mode is not None and mode not in LAYOUT_MODES:
            raise PresetError(f"{name}: job {job['name']}: layout {mode!r} must be one of {', '.join(LAYOUT_MODES)}")
        passes, file_size = 1, 0
        files: tuple[str, ...] = ()
        if job.get("pass_seconds"):
            if opts.get("time_based") not in (None, "0"):
                raise PresetError(f"{name}: job {job['name']}: pass_seconds needs a pass that ends (no time_based)")
            total = int(opts.get("runtime", job["pass_seconds"]))
            length = min(int(job["pass_seconds"]), total)
            passes, opts["runtime"] = max(1, round(total / length)), str(length)
        if mode == "per_file" and not writes:
            files = tuple(f"{job['name']}.{n:08d}" for n in range(int(job.get("files", 1))))
            file_size = _scaled_size(job["file_size"], factor, bs) if "file_size" in job else 0
        elif mode and not writes:
            size = opts.get("filesize") or opts["size"]
            many = opts.get("nrfiles") not in (None, "1")
            stem = job["name"] if mode == "per_job" else f"f-{size}"
            opts["filename_format"] = stem + (".$jobnum.$filenum" if many else ".$jobnum")
        elif writes and "filename_format" not in opts:
            opts["filename_format"] = f"w-{job['name']}.$jobnum.$filenum"  # a file per writer
        fio_job = FioJob(job["name"], opts, writes, reads_earlier_writes=not writes and not mode,
                         reads_layout=bool(mode) and not writes, times=job.get("times", ""),
                         files=files, passes=passes, file_size=file_size)
        for f in layout_of(fio_job):
            layout[f.path] = f
        jobs.append(fio_job)
    threads = sum(j.threads for j in jobs)
    if threads > FIO_MAX_JOBS:
        raise PresetError(f"{name}: {threads} fio threads in one run (numjobs x sections); fio runs at most {FIO_MAX_JOBS}")
    dd = tuple(DdStep(d["name"], d["direction"], d["bs"], int(d["count"]), d["flag"], rep, d["path"])
               for d in spec.get("dd", []) for rep in range(1, int(spec.get("repetitions", 1)) + 1))
    flags = tuple(spec.get("mount_flags", {}).get(target_kind, ()))
    return Plan(name, target_kind, scale, tuple(jobs), tuple(layout.values()), dd, tuple(skipped), tuple(adjusted), flags)
