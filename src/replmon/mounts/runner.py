"""The fio runner: mount the target, lay out the files, run the preset (fio, and dd where the study
used it), upload everything to the results bucket, print EMF, always unmount, exit non-zero on
any failure. The container's entrypoint (runners/fio/Dockerfile) and the lab run this same code:

    REPLMON_FIO_TARGET='{"name": "std", "kind": "mountpoint", "bucket": "b", "mount_point": "/mnt/t"}' \\
    REPLMON_FIO_PRESET=mountpoint-xregion REPLMON_FIO_RESULTS=s3://results-bucket/fio-results/ \\
    python -m replmon.mounts.runner

Exit codes: 0 every step succeeded; 1 a step failed (results and run.json still uploaded when the
results bucket answers); 2 bad configuration (named in one line).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from replmon.core.keys import new_run_id
from replmon.mounts import knee as knee_mod
from replmon.mounts.dd import parse_dd
from replmon.mounts.document import RUN_FILE, fio_rows, results_prefix
from replmon.mounts.fioresult import FioResultError, parse_text
from replmon.mounts.presets import FioJob, LayoutFile, Plan, PresetError, expand
from replmon.mounts.targets import Mounted, Target, TargetError

LAYOUT_CHUNK = 8 * 1024 * 1024
LAYOUT_WRITERS = 4  # files written at once while laying out (each file keeps one writer)
FIO_TIMEOUT_GRACE_S = 600  # beyond the preset's own run times: a hung mount ends the run, not the task's lifetime
RUN_DIR = "replmon-fio"


class ResultSink(Protocol):
    def put(self, key: str, body: bytes) -> None: ...


class S3Sink:
    """Uploads to ``s3://bucket/prefix``; an endpoint URL for S3-compatible stores (the lab)."""

    def __init__(self, url: str, client: Any = None) -> None:
        if not url.startswith("s3://"):
            raise ValueError(f"results {url!r}: use s3://bucket/prefix/ or a local directory")
        self.bucket, _, self.prefix = url[5:].partition("/")
        if self.prefix and not self.prefix.endswith("/"):
            self.prefix += "/"
        if client is None:  # the runner is the container's entry point: its client comes from the composition root's policy
            from replmon.adapters import clients

            client = clients.client("s3", clients.UPLOADS, endpoint_url=os.environ.get("REPLMON_FIO_RESULTS_ENDPOINT"))
        self.client = client

    def put(self, key: str, body: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body)


class DirSink:
    def __init__(self, path: str) -> None:
        self.root = Path(path)

    @property
    def prefix(self) -> str:
        return ""

    def put(self, key: str, body: bytes) -> None:
        dest = self.root / key
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(body)


@dataclass
class RunResult:
    run: dict[str, Any]
    exit_code: int
    rows: list[Any] = field(default_factory=list)


def _version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def task_info() -> dict[str, Any]:
    """Where this ran: the ECS task's size and AZ from the task metadata endpoint (v4) inside ECS,
    else the host. Fargate does not document per-task network bandwidth: the size is the proxy."""
    uri = os.environ.get("ECS_CONTAINER_METADATA_URI_V4")
    info: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release()}
    if uri:
        try:
            with urllib.request.urlopen(uri + "/task", timeout=2) as r:  # link-local, inside the task only
                task = json.load(r)
            info.update({"launch_type": task.get("LaunchType"), "az": task.get("AvailabilityZone"),
                         "task_cpu": (task.get("Limits") or {}).get("CPU"), "task_memory_mib": (task.get("Limits") or {}).get("Memory"),
                         "task_arn": task.get("TaskARN")})
        except (OSError, ValueError) as exc:
            info["task_metadata_error"] = str(exc)
    return info


def lay_out(plan: Plan, run_dir: Path) -> None:
    """Write the files read jobs need, each sequentially from offset 0 by one writer (every target,
    Mountpoint included, can hold such a file), several files at once: on S3 mounts one file's
    upload is bounded per object, and the layout is time the task pays without measuring anything."""
    block = memoryview(os.urandom(1024 * 1024) * (LAYOUT_CHUNK // (1024 * 1024)))

    def write(f: LayoutFile) -> None:
        with open(run_dir / f.path, "wb") as out:
            left = f.size
            while left > 0:
                n = min(left, len(block))
                out.write(block[:n])
                left -= n

    for parent in {(run_dir / f.path).parent for f in plan.layout}:
        parent.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=LAYOUT_WRITERS) as pool:
        list(pool.map(write, plan.layout))  # list(): the first writer's error is raised here


def fio_groups(plan: Plan) -> list[list[FioJob]]:
    """The jobs split into fio invocations. fio lays out every job's files before running any
    (create_serialize): a job reading files an earlier job writes would find them created empty
    and that job's write would then be an overwrite (which Mountpoint refuses), so such a job
    starts a new fio. Everything else runs in one fio, as a bare fio would run the job file:
    each fio start costs ~0.3 s (measured in `make bench`, M1)."""
    groups: list[list[FioJob]] = []
    for job in plan.jobs:
        if not groups or job.reads_earlier_writes:
            groups.append([])
        groups[-1].append(job)
    return groups


def run_fio(plan: Plan, run_dir: Path, work: Path) -> list[tuple[str, int, str]]:
    """fio once per group (``--section`` for each job in it), in order, each writing its JSON to
    work/fio/NN-firstjob.json and its bandwidth logs to work/. Returns (file, exit code, stderr tail)."""
    jobfile = work / "job.fio"
    jobfile.write_text(plan.jobfile(str(run_dir)))
    (work / "fio").mkdir(exist_ok=True)
    out = []
    for n, group in enumerate(fio_groups(plan), 1):
        name = f"fio/{n:02d}-{group[0].name}.json"
        budget = sum(int(j.options.get("runtime", "0")) for j in group) + FIO_TIMEOUT_GRACE_S * len(group)
        sections = [f"--section={j.name}" for j in group]
        proc = subprocess.run(["fio", "--output-format=json", f"--output={work / name}", *sections, str(jobfile)],
                              cwd=work, capture_output=True, text=True, timeout=budget)
        out.append((name, proc.returncode, proc.stderr[-2000:]))
    return out


def run_dd(plan: Plan, run_dir: Path) -> list[dict[str, Any]]:
    out = []
    for step in plan.dd:
        proc = subprocess.run(step.argv(str(run_dir)), capture_output=True, text=True, timeout=FIO_TIMEOUT_GRACE_S)
        row: dict[str, Any] = {"name": step.name, "direction": step.direction, "repetition": step.repetition}
        try:
            if proc.returncode:
                raise FioResultError(f"dd exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
            r = parse_dd(proc.stderr)
            row.update(bytes=r.bytes, seconds=r.seconds, bw_bytes=r.bw_bytes)
        except FioResultError as exc:
            row.update(error=str(exc), bytes=0, seconds=0.0, bw_bytes=0.0)
        out.append(row)
    return out


def knees(work: Path) -> dict[str, Any]:
    """Knee per bandwidth log direction, all jobs' logs summed (log_unix_epoch lines them up)."""
    samples = []
    for log in sorted(work.glob("*_bw.*.log")):
        samples += knee_mod.read_bw_log(log.read_text(), log.name)
    return knee_mod.by_direction(samples)


def run(target: Target, preset: str, scale: str, sink: ResultSink, *, workdir: str | None = None,
        emit: Callable[[str, float, dict[str, str]], None] | None = None, run_id: str | None = None) -> RunResult:
    """One preset on one target; never raises for a failed step (it is recorded and exit code 1)."""
    plan = expand(preset, target.kind, scale)
    run_id = run_id or new_run_id()
    errors: list[str] = []
    start = time.time()
    work = Path(tempfile.mkdtemp(prefix="replmon-fio-", dir=workdir)).resolve()
    run_doc: dict[str, Any] = {
        "run_id": run_id, "preset": preset, "scale": scale, "target": target.describe(), "start": start,
        "fio_version": _version(["fio", "--version"]),
        "mount_version": _version([target.mount_argv()[0], "--version"]) if target.kind in ("mountpoint", "s3fs") else None,  # type: ignore[index]
        "task": task_info(), "skipped": [s.__dict__ for s in plan.skipped], "adjusted": [s.__dict__ for s in plan.adjusted],
    }
    fio_texts: dict[str, str] = {}
    rows = []
    try:
        mount = Mounted(target, str(work / "mount.log"))
        try:
            with mount:
                run_dir = Path(target.mount_point) / RUN_DIR / run_id
                try:
                    run_dir.mkdir(parents=True)
                    t0 = time.time()
                    lay_out(plan, run_dir)
                    run_doc["layout_s"] = time.time() - t0
                    t0 = time.time()
                    fio_runs = run_fio(plan, run_dir, work)
                    run_doc["fio_s"] = time.time() - t0
                    for name, code, stderr in fio_runs:
                        if (work / name).exists():
                            fio_texts[name] = (work / name).read_text()
                        if code:
                            errors.append(f"{name}: fio exited {code}: {stderr.strip()[-500:]}")
                        elif name not in fio_texts:
                            errors.append(f"{name}: fio wrote no JSON result")
                    if plan.dd:
                        run_doc["dd"] = run_dd(plan, run_dir)
                        errors += [f"dd {d['name']} #{d['repetition']}: {d['error']}" for d in run_doc["dd"] if d.get("error")]
                finally:
                    shutil.rmtree(run_dir, ignore_errors=True)  # Mountpoint: needs --allow-delete (set by Target)
                    if run_dir.exists():
                        errors.append(f"could not remove {run_dir}")
                    with contextlib.suppress(OSError):  # leave the target as found; another run may still hold it
                        run_dir.parent.rmdir()
        except (TargetError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        if mount.unmount_error:
            errors.append(mount.unmount_error)
        for name, text in fio_texts.items():
            try:
                parsed = parse_text(text, name)
                rows += fio_rows(parsed)
                errors += [f"fio job {r.job}: error {r.error}" for r in parsed if r.error]
            except FioResultError as exc:
                errors.append(str(exc))
        run_doc["fio_outputs"] = sorted(fio_texts)
        try:
            run_doc["knees"] = knees(work)
        except FioResultError as exc:
            errors.append(str(exc))
        run_doc.update(end=time.time(), errors=errors, status="failed" if errors else "ok")
        run_doc["wall_s"] = run_doc["end"] - start
        prefix = results_prefix("", target.name, preset, run_id)
        try:
            for name, text in fio_texts.items():
                sink.put(prefix + name, text.encode())
            if (work / "job.fio").exists():
                sink.put(prefix + "job.fio", (work / "job.fio").read_bytes())
            for log in sorted(work.glob("*_bw.*.log")):
                sink.put(prefix + "bw/" + log.name, log.read_bytes())
            sink.put(prefix + RUN_FILE, json.dumps(run_doc, indent=1).encode())  # last: its event means complete
        except Exception as exc:
            errors.append(f"upload: {type(exc).__name__}: {exc}")
            run_doc["status"] = "failed"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if emit is not None:
        dims = {"Target": target.name, "Preset": preset}
        emit("FioRunFailed", 1.0 if errors else 0.0, dims)
        for r in rows:
            emit("FioBandwidth", r.bw_bytes, {**dims, "Job": r.key})
    return RunResult(run_doc, 1 if errors else 0, rows)


def _emf(metric: str, value: float, dims: dict[str, str]) -> None:
    from replmon.adapters.metrics import EmfMetrics

    EmfMetrics(os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Replmon")).count(metric, value, dims)


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    try:
        raw = env.get("REPLMON_FIO_TARGET") or ""
        if raw.startswith("@"):
            raw = Path(raw[1:]).read_text()
        if not raw:
            raise TargetError("REPLMON_FIO_TARGET: set it to the target's JSON (or @file)")
        target = Target.from_json(json.loads(raw))
        preset = env.get("REPLMON_FIO_PRESET") or ""
        scale = env.get("REPLMON_FIO_SCALE", "full")
        expand(preset, target.kind, scale)  # fail fast on a bad name
        results = env.get("REPLMON_FIO_RESULTS") or ""
        if not results:
            raise TargetError("REPLMON_FIO_RESULTS: set it to s3://bucket/prefix/ (the stack's results bucket)")
        sink: ResultSink = S3Sink(results) if results.startswith("s3://") else DirSink(results)
    except (TargetError, PresetError, ValueError, OSError) as exc:
        print(f"replmon fio runner: {exc}", file=sys.stderr)
        return 2
    result = run(target, preset, scale, sink, emit=_emf)
    status = result.run["status"]
    print(json.dumps({"run_id": result.run["run_id"], "status": status, "errors": result.run["errors"],
                      "jobs": [{"job": r.key, "MiB/s": round(r.bw_bytes / 2**20, 2)} for r in result.rows]}))
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
