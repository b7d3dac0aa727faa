"""The fio runner: for each target of its list, in order, mount it, lay out (or reuse) the read
files, run the preset (fio, and dd where the study used it), collect the file system's own
metrics for the run window, upload everything to the results bucket, print EMF, always unmount;
exit non-zero on any failure. The container's entrypoint (runners/fio/Dockerfile) and the lab
run this same code:

    REPLMON_FIO_TARGETS='[{"name": "std", "kind": "mountpoint", "bucket": "b", "mount_point": "/mnt/t",
                           "preset": "mountpoint-xregion"}]' \\
    REPLMON_FIO_RESULTS=s3://results-bucket/fio-results/ python -m replmon.mounts.runner

Targets run one after another, never two at once: a task measures one thing at a time, and with
``REPLMON_FIO_LOCK`` (a file on the host, bind-mounted) a second task on the same instance finds
the lock held and fails at once, recorded, instead of measuring next to the first.

Exit codes: 0 every run succeeded; 1 a run failed (its results and run.json still uploaded when
the results bucket answers); 2 bad configuration (named in one line).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from replmon.core.keys import new_run_id
from replmon.core.ports import MetricReader
from replmon.mounts import knee as knee_mod
from replmon.mounts import layout as layout_mod
from replmon.mounts import service as service_mod
from replmon.mounts.dd import parse_dd
from replmon.mounts.document import RUN_FILE, output_rows, results_prefix, task_key
from replmon.mounts.fioresult import FioResultError, parse_text
from replmon.mounts.memory import memory_limit, mountpoint_memory_target, preflight
from replmon.mounts.presets import SCALES, FioJob, Plan, PresetError, expand
from replmon.mounts.presets import raw as raw_spec
from replmon.mounts.targets import Mounted, Target, TargetError, mounted_options, nfs_negotiated

LAYOUT_CHUNK = layout_mod.CHUNK
FIO_TIMEOUT_GRACE_S = 600  # beyond the preset's own run times: a hung mount ends the run, not the task's lifetime
RUN_DIR = "replmon-fio"
LAYOUT_DIR = "layout"
#: The end of the mount's own log kept with a failed run.
MOUNT_LOG_TAIL = 256 * 1024
METRICS_SETTLE_S = 300  # CloudWatch publishes a minute's sum a few minutes later


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
        """``<root>/<key>``, written whole or not at all; a key (built from target and preset names)
        that would leave the root is refused (:class:`~replmon.core.names.PathEscape`)."""
        from replmon.core.files import write_atomic
        from replmon.core.names import contained

        dest = contained(self.root, *key.split("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(dest, body, mode=0o644)


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


def _help(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired):
        return ""


def task_info() -> dict[str, Any]:
    """Where this ran: the ECS task's size and AZ from the task metadata endpoint (v4) inside ECS,
    else the host; on ECS on EC2 the host's instance type (``REPLMON_FIO_INSTANCE_TYPE``, set by
    the template on the EC2 task only: tasks cannot reach the instance metadata; dropped when the
    task metadata says FARGATE). Fargate does not document per-task network bandwidth: the size is
    the proxy."""
    uri = os.environ.get("ECS_CONTAINER_METADATA_URI_V4")
    info: dict[str, Any] = {"host": platform.node(), "cpus": os.cpu_count(), "kernel": platform.release(), "arch": platform.machine()}
    if os.environ.get("REPLMON_FIO_INSTANCE_TYPE"):
        info["instance_type"] = os.environ["REPLMON_FIO_INSTANCE_TYPE"]
    if uri:
        try:
            with urllib.request.urlopen(uri + "/task", timeout=2) as r:  # link-local, inside the task only
                task = json.load(r)
            info.update({"launch_type": task.get("LaunchType"), "az": task.get("AvailabilityZone"),
                         "task_cpu": (task.get("Limits") or {}).get("CPU"), "task_memory_mib": (task.get("Limits") or {}).get("Memory"),
                         "task_arn": task.get("TaskARN")})
        except (OSError, ValueError) as exc:
            info["task_metadata_error"] = str(exc)
    if info.get("launch_type") == "FARGATE":  # not on the EC2 host the variable names
        info.pop("instance_type", None)
    return info


def task_id(info: dict[str, Any]) -> str:
    """The ECS task's id (the last part of its ARN: what its STOPPED event names), else host-pid."""
    arn = info.get("task_arn")
    return str(arn).rsplit("/", 1)[-1] if arn else f"{info['host']}-{os.getpid()}"


class S3Stat:
    """An S3 mount's view: HeadObject of the file's key (size and ETag), ``key_prefix`` being the
    key of the layout directory (the mount's --prefix plus the path under the mount)."""

    def __init__(self, client: Any, bucket: str, key_prefix: str) -> None:
        self.client, self.bucket, self.key_prefix = client, bucket, key_prefix

    def __call__(self, path: str) -> tuple[int, str] | None:
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.key_prefix + path)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return int(head["ContentLength"]), f"etag:{head['ETag']}"


def layout_stat(target: Target, plan: Plan, layout_dir: Path) -> layout_mod.Stat:
    """On an S3 mount, a layout file is its object (size and ETag); elsewhere a file (size and mtime)."""
    if target.kind in ("mountpoint", "s3fs") and target.bucket:
        from replmon.adapters import clients

        access, secret = target.env.get("AWS_ACCESS_KEY_ID"), target.env.get("AWS_SECRET_ACCESS_KEY")
        s3 = clients.client("s3", clients.CONTROL, region=target.region, endpoint_url=target.endpoint_url,
                            keys=(access, secret) if access and secret else None)
        key = f"{target.prefix}{RUN_DIR}/{LAYOUT_DIR}/{plan.layout_set}/"
        return S3Stat(s3, str(target.bucket), key)
    return layout_mod.FileStat(layout_dir)


def fio_groups(plan: Plan) -> list[list[FioJob]]:
    """The jobs split into fio invocations. fio lays out every job's files before running any
    (create_serialize): a job reading files an earlier job writes would find them created empty
    and that job's write would then be an overwrite (which Mountpoint refuses), so such a job
    starts a new fio. Everything else runs in one fio, as a bare fio would run the job file:
    each fio start costs ~0.3 s (measured in `make bench`, M1)."""
    groups: list[list[FioJob]] = []
    for job in plan.jobs:
        if not groups or job.reads_earlier_writes or job.passes > 1 or groups[-1][-1].passes > 1:  # passes: a fio each
            groups.append([])
        groups[-1].append(job)
    return groups


def run_fio(plan: Plan, run_dir: Path, work: Path, layout_dir: Path) -> list[tuple[str, int, str]]:
    """fio once per group (``--section`` for each job in it), in order, each writing its JSON to
    work/fio/NN-firstjob.json and its bandwidth logs to work/. A job in passes (IOR's stonewalled
    repetitions) is a group of its own run once per pass, back to back: fio/NN-job-pPPP.json and
    logs named pPPP-<log> (its passes add up to one row: document.output_rows). Returns (file,
    exit code, stderr tail); a failed pass ends its job."""
    jobfile = work / "job.fio"
    jobfile.write_text(plan.jobfile(str(run_dir), str(layout_dir)))
    (work / "fio").mkdir(exist_ok=True)
    out = []
    for n, group in enumerate(fio_groups(plan), 1):
        budget = sum(int(j.options.get("runtime", "0")) for j in group) + FIO_TIMEOUT_GRACE_S * len(group)
        sections = [f"--section={j.name}" for j in group]
        passes = group[0].passes
        for k in range(1, passes + 1):
            name = f"fio/{n:02d}-{group[0].name}" + (f"-p{k:03d}" if passes > 1 else "") + ".json"
            cwd = work if passes == 1 else work / f"p{k:03d}"
            cwd.mkdir(exist_ok=True)
            proc = subprocess.run(["fio", "--output-format=json", f"--output={work / name}", *sections, str(jobfile)],
                                  cwd=cwd, capture_output=True, text=True, timeout=budget)
            out.append((name, proc.returncode, proc.stderr[-2000:]))
            if cwd != work:  # fio names a log after the job and thread: the pass keeps them apart
                for log in cwd.glob("*_bw.*.log"):
                    log.rename(work / f"{cwd.name}-{log.name}")
            if proc.returncode:
                break
    return out


def run_dd(plan: Plan, run_dir: Path) -> list[dict[str, Any]]:
    """Each dd test's repetitions, in the study's order, on its one path."""
    out = []
    for step in plan.dd:
        t0 = time.time()
        proc = subprocess.run(step.argv(str(run_dir)), capture_output=True, text=True, timeout=FIO_TIMEOUT_GRACE_S)
        row: dict[str, Any] = {"name": step.name, "direction": step.direction, "repetition": step.repetition, "path": step.path,
                               "at": t0}
        try:
            if proc.returncode:
                raise FioResultError(f"dd exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
            r = parse_dd(proc.stderr)
            row.update(bytes=r.bytes, seconds=r.seconds, bw_bytes=r.bw_bytes)
        except FioResultError as exc:
            row.update(error=str(exc), bytes=0, seconds=0.0, bw_bytes=0.0)
        out.append(row)
    return out


def versions(target: Target) -> dict[str, str | None]:
    """The versions that ran, recorded with every result: fio, the mount client (mount-s3, s3fs;
    the Lustre client's user space and kernel module; the NFS utilities), the kernel and replmon.
    None where a tool is absent (a kind that does not use it)."""
    from importlib.metadata import PackageNotFoundError, version

    argv0 = target.mount_argv()
    out: dict[str, str | None] = {"fio": _version(["fio", "--version"]), "kernel": platform.release()}
    try:
        out["replmon"] = version("replmon")
    except PackageNotFoundError:
        out["replmon"] = None
    if argv0 and target.kind in ("mountpoint", "s3fs"):
        out[target.kind] = _version([argv0[0], "--version"])
    if target.kind == "lustre":
        out["lustre_client"] = _version(["lfs", "--version"])
        module = Path("/sys/fs/lustre/version")  # the host's kernel module (the container mounts with the host's kernel)
        out["lustre_module"] = module.read_text().strip() if module.is_file() else None
    if target.kind == "nfs":
        out["nfs_utils"] = _version(["mount.nfs", "-V"])
    image = os.environ.get("REPLMON_FIO_IMAGE_VERSIONS", "/opt/replmon/versions.txt")  # what the image installed (Dockerfile)
    if Path(image).is_file():
        out["image"] = " ".join(Path(image).read_text().split())
    return out


def _bytes(size: str | int) -> int:
    """An lfs stripe size ("1M", "64K", 1048576) in bytes."""
    text = str(size).strip().upper()
    unit = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(text[:-1] if unit > 1 else text) * unit


def file_stripe(text: str) -> tuple[int, int] | None:
    """(count, size) from ``lfs getstripe -c -S FILE``: labelled ("stripe_count: 1" ...) or, when
    lfs prints bare values, the count then the size. None when neither is there.

    >>> file_stripe("stripe_count:  1\\nstripe_size:   1048576"), file_stripe("4\\n4194304"), file_stripe("")
    ((1, 1048576), (4, 4194304), None)
    """
    count, size = re.search(r"stripe_count:\s*(-?\d+)", text), re.search(r"stripe_size:\s*(\d+)", text)
    if count and size:
        return int(count[1]), int(size[1])
    bare = re.findall(r"^\s*(-?\d+)\s*$", text, re.MULTILINE)
    return (int(bare[0]), int(bare[1])) if len(bare) >= 2 else None


def lustre_stripe(spec: dict[str, Any], dirs: dict[str, Path], run: Callable[..., Any] = subprocess.run,
                  files: tuple[Path, ...] | list[Path] = ()) -> dict[str, Any]:
    """Sets the preset's Lustre layout (``lustre_stripe``: count and size; R4 ran with stripe count
    1, stripe size 1 MiB, the file system's default then) on the directories the preset's files
    are made in, before they are made (``lfs setstripe`` on a directory applies to files added to it
    afterwards; ``lfs getstripe -d`` shows the directory's own: Lustre wiki, "Configuring Lustre
    File Striping"), and reads back what each directory has: run.json records both.
    A file already laid out by an earlier run keeps the layout it was made with, whatever its
    directory says now: each of ``files`` that exists is read back (``lfs getstripe -c -S``) and,
    when it differs, removed so the layout step writes it again under the directory's layout
    (recorded as ``relaid``). Raises OSError when lfs fails."""
    want = spec["lustre_stripe"]
    got: dict[str, Any] = {"asked": want}

    def lfs(argv: list[str]) -> str:
        proc = run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode:
            raise OSError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
        return str(proc.stdout)

    for label, d in dirs.items():
        d.mkdir(parents=True, exist_ok=True)
        lfs(["lfs", "setstripe", "-c", str(want["count"]), "-S", str(want["size"]), str(d)])
        got[label] = lfs(["lfs", "getstripe", "-d", str(d)]).strip()
    asked = (int(want["count"]), _bytes(want["size"]))
    relaid: list[str] = []
    for f in files:
        if not f.exists():
            continue
        if file_stripe(lfs(["lfs", "getstripe", "-c", "-S", str(f)])) != asked:
            f.unlink()
            relaid.append(f.name)
    if files:
        got["relaid"] = relaid
    return got


#: At most this many points per direction of the bandwidth series kept with a result (its chart):
#: a 2 h log at one second is averaged over 4 s bins; the knee is found on the full log.
SERIES_POINTS = 2000


def bw_series(work: Path) -> dict[str, dict[str, Any]]:
    """Each direction's summed bandwidth over time (bytes/s per second from the first sample, as
    the knee detector reads it), averaged into at most SERIES_POINTS bins: what `fio report
    --charts` draws for a burst preset (throughput over time, the study's graph)."""
    samples: list[knee_mod.Sample] = []
    for log in sorted(work.glob("*_bw.*.log")):
        samples += knee_mod.read_bw_log(log.read_text(), log.name)
    out = {}
    for direction in ("write", "read"):
        t, v = knee_mod.per_second(samples, direction)
        if not v:
            continue
        step = max(1, -(-len(v) // SERIES_POINTS))
        out[direction] = {"step_s": step, "t": [t[i] for i in range(0, len(v), step)],
                          "bytes_s": [round(sum(v[i:i + step]) / len(v[i:i + step])) for i in range(0, len(v), step)]}
    return out


def knees(work: Path) -> dict[str, Any]:
    """Knee per bandwidth log direction: each job's log averaged per second, the logs summed."""
    samples: list[knee_mod.Sample] = []
    for log in sorted(work.glob("*_bw.*.log")):
        samples += knee_mod.read_bw_log(log.read_text(), log.name)
    return knee_mod.by_direction(samples)


def _metric_reader() -> MetricReader:
    """The task's Region's CloudWatch (the file systems it measures publish there)."""
    from replmon.adapters import clients
    from replmon.adapters.cloudwatch import CloudWatchReader

    return CloudWatchReader(clients.client("cloudwatch", clients.STORE))


def run(target: Target, preset: str, scale: str, sink: ResultSink, *, workdir: str | None = None,
        emit: Callable[[str, float, dict[str, str]], None] | None = None, run_id: str | None = None,
        memory: tuple[int, str] | None = None, metric_reader: MetricReader | None = None, settle_s: float | None = None,
        on_io_start: Callable[[], None] | None = None, metric_source: tuple[str, str, int] | None = None) -> RunResult:
    """One preset on one target; never raises for a failed step (it is recorded and exit code 1).
    ``memory`` is (bytes, source) for the preflight (the container's cgroup by default);
    ``metric_reader`` reads the file system's metrics (CloudWatch, built when the target has a file system id);
    ``on_io_start`` is called once, mounted and laid out, right before the measured I/O (fio's
    first job) starts: the lab arms its throttle there; ``metric_source`` is (namespace, file system
    id, period s) of the file system's own series where the target is not one the runner knows
    (the lab's credit proxy meters its bytes to the second, read through ``metric_reader``)."""
    plan = expand(preset, target.kind, scale)
    info = task_info()
    limit, source = memory or memory_limit(task_memory_mib=info.get("task_memory_mib"))
    plan = preflight(plan, limit, source)
    target = target.with_flags(plan.mount_flags)
    memory_doc: dict[str, Any] = {"limit_bytes": limit, "source": source}
    if target.kind == "mountpoint" and "--memory-target" not in target.options:
        argv = target.mount_argv() or ["mount-s3"]
        flags = mountpoint_memory_target(limit, _help([argv[0], "--help"]))
        target = replace(target, options=(*target.options, *flags))
        memory_doc["mountpoint_memory_target_mib"] = int(flags[1]) if flags else None  # None: Mountpoint's default, 95 %
    run_id = run_id or new_run_id()
    errors: list[str] = []
    start = time.time()
    work = Path(tempfile.mkdtemp(prefix="replmon-fio-", dir=workdir)).resolve()
    argv0 = target.mount_argv()
    run_doc: dict[str, Any] = {
        "run_id": run_id, "preset": preset, "scale": scale, "target": target.describe(), "start": start,
        "fio_version": _version(["fio", "--version"]),
        "mount_version": _version([argv0[0], "--version"]) if argv0 and target.kind in ("mountpoint", "s3fs") else None,
        "versions": versions(target),
        "task": info, "memory": memory_doc,
        "skipped": [s.__dict__ for s in plan.skipped], "adjusted": [s.__dict__ for s in plan.adjusted],
        "baseline_mb_s": target.baseline_mb_s(),
    }
    fio_texts: dict[str, str] = {}
    rows = []
    try:
        mount = Mounted(target, str(work / "mount.log"))
        try:
            with mount:
                got = mounted_options(target.mount_point)
                if got:
                    run_doc["mount_options"] = f"{got[0]} {got[1]}"
                    if got[0].startswith("nfs"):
                        run_doc["nfs"] = nfs_negotiated(got[1])
                root = Path(target.mount_point) / RUN_DIR
                run_dir = root / run_id
                layout_dir = root / LAYOUT_DIR / plan.layout_set
                try:
                    run_dir.mkdir(parents=True)
                    spec = raw_spec(preset)
                    if target.kind == "lustre" and spec.get("lustre_stripe"):
                        run_doc["lustre_stripe"] = lustre_stripe(spec, {"run_dir": run_dir, **({"layout_dir": layout_dir} if plan.layout else {})},
                                                                files=[layout_dir / f.path for f in plan.layout])
                    if plan.layout:
                        run_doc["layout"] = layout_mod.ensure(plan.layout, layout_dir, layout_stat(target, plan, layout_dir)).to_json()
                    run_doc["layout_s"] = run_doc.get("layout", {}).get("seconds", 0.0)
                    if on_io_start is not None:
                        on_io_start()
                    run_doc["fio_start"] = time.time()
                    fio_runs = run_fio(plan, run_dir, work, layout_dir) if plan.jobs else []
                    run_doc["fio_s"] = time.time() - run_doc["fio_start"]
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
                    shutil.rmtree(run_dir, ignore_errors=True)  # Mountpoint: needs --allow-delete (set by Target); the layout stays
                    if run_dir.exists():
                        errors.append(f"could not remove {run_dir}")
        except (TargetError, OSError, subprocess.SubprocessError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        if mount.unmount_error:
            errors.append(mount.unmount_error)
        outputs = []
        for name, text in fio_texts.items():
            try:
                parsed = parse_text(text, name)
                outputs.append(parsed)
                errors += [f"fio job {r.job}: error {r.error}" for r in parsed if r.error]
            except FioResultError as exc:
                errors.append(str(exc))
        rows += output_rows(outputs)
        run_doc["fio_outputs"] = sorted(fio_texts)
        try:
            run_doc["knees"] = knees(work)
            run_doc["bw_series"] = bw_series(work)
        except FioResultError as exc:
            errors.append(str(exc))
        except Exception as exc:  # a knee that cannot be found is recorded, never the end of the run's results
            errors.append(f"knee: {type(exc).__name__}: {exc}")
        run_doc["end"] = time.time()
        namespace, fs_id, period = metric_source or (target.metrics_namespace(), target.file_system_id, service_mod.PERIOD_S)
        if namespace and fs_id:
            try:
                time.sleep(METRICS_SETTLE_S if settle_s is None else settle_s)
                collected = service_mod.collect(metric_reader or _metric_reader(), namespace, fs_id,
                                                run_doc.get("fio_start", start), run_doc["end"], period=period)
                run_doc["service_metrics"] = collected
                run_doc["service_knees"] = service_mod.knees(collected, run_doc.get("fio_start", start), run_doc["end"])
            except Exception as exc:  # context for most presets: a failure to read them is recorded
                run_doc["service_metrics_error"] = f"{type(exc).__name__}: {exc}"
            if raw_spec(preset).get("burst"):  # a burst preset's own measurement (R4 read the file system's series): required
                missing = service_mod.missing(run_doc.get("service_metrics"), plan, run_doc.get("fio_start", start), run_doc["end"])
                if missing or "service_metrics_error" in run_doc:
                    errors.append(f"service metrics of {fs_id} ({namespace}): "
                                  f"{run_doc.get('service_metrics_error') or 'no ' + ', '.join(missing) + ' in the run window'}; a burst "
                                  "preset is judged on them: give the task cloudwatch:GetMetricData and its Region (AWS_REGION)")
        run_doc.update(errors=errors, status="failed" if errors else "ok")
        run_doc["wall_s"] = time.time() - start
        prefix = results_prefix("", target.name, preset, run_id)
        try:
            for name, text in fio_texts.items():
                sink.put(prefix + name, text.encode())
            if (work / "job.fio").exists():
                sink.put(prefix + "job.fio", (work / "job.fio").read_bytes())
            for log in sorted(work.glob("*_bw.*.log")):
                sink.put(prefix + "bw/" + log.name, log.read_bytes())
            if errors and (work / "mount.log").is_file():  # what the mount said when a step failed (an EIO's cause), its tail
                sink.put(prefix + "mount.log", (work / "mount.log").read_bytes()[-MOUNT_LOG_TAIL:])
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


class HostBusy(Exception):
    """Another runner holds this host's lock."""


@contextlib.contextmanager
def host_lock(path: str | None) -> Iterator[None]:
    """An exclusive, non-blocking flock on ``path`` for the task's whole life (released when the
    process ends, however it ends). Two EC2 targets never measure at once on one instance."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            raise HostBusy(f"another fio runner holds {path} on this host ({f.read().strip() or 'no owner recorded'}); "
                           "this task measured nothing: runs overlap, so lengthen the schedule's period") from None
        f.truncate(0)
        f.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
        f.flush()
        yield


def _emf(metric: str, value: float, dims: dict[str, str]) -> None:
    from replmon.adapters.metrics import EmfMetrics

    EmfMetrics(os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Replmon")).count(metric, value, dims)


def load_targets(env: dict[str, str]) -> list[Target]:
    """REPLMON_FIO_TARGETS (a JSON list, or @file), each naming its preset; or one
    REPLMON_FIO_TARGET with REPLMON_FIO_PRESET. Every entry is checked before anything runs."""
    raw = env.get("REPLMON_FIO_TARGETS") or ""
    single = env.get("REPLMON_FIO_TARGET") or ""
    if raw.startswith("@"):
        raw = Path(raw[1:]).read_text()
    if single.startswith("@"):
        single = Path(single[1:]).read_text()
    if not raw and not single:
        raise TargetError("REPLMON_FIO_TARGETS: set it to a JSON list of targets (or REPLMON_FIO_TARGET to one)")
    try:
        entries = json.loads(raw) if raw else [json.loads(single)]
    except ValueError as exc:
        raise TargetError(f"REPLMON_FIO_TARGETS: not JSON ({exc})") from None
    if not isinstance(entries, list) or not entries:
        raise TargetError("REPLMON_FIO_TARGETS: must be a non-empty JSON list of target objects")
    targets = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise TargetError(f"REPLMON_FIO_TARGETS[{i}]: must be a JSON object")
        if not entry.get("preset") and env.get("REPLMON_FIO_PRESET"):
            entry = {**entry, "preset": env["REPLMON_FIO_PRESET"]}
        t = Target.from_json(entry)
        if not t.preset:
            raise TargetError(f"target {t.name}: \"preset\" is required (replmon fio presets lists them)")
        scale = t.scale or env.get("REPLMON_FIO_SCALE", "full")
        if scale not in SCALES:
            raise TargetError(f"target {t.name}: scale {scale!r} must be one of {', '.join(SCALES)}")
        expand(t.preset, t.kind, scale)  # a bad preset fails now, not hours into the task
        targets.append(t)
    burst_on: dict[str, str] = {}
    for t in targets:
        if not raw_spec(str(t.preset)).get("burst"):
            continue
        if t.kind in ("lustre", "efs") and not t.file_system_id:
            raise TargetError(f"target {t.name}: preset {t.preset} is judged on the file system's own CloudWatch series: "
                              "set \"file_system_id\" (fs-...)")
        fs = t.file_system_id or t.source or t.bucket or t.name
        if fs in burst_on:  # R4 gave each phase a new file system: the second would start on credits the first spent
            raise TargetError(f"targets {burst_on[fs]} and {t.name}: two burst presets on {fs} in one schedule; the second "
                              "would start on the credits the first spent (R4 used a new file system per phase): give each "
                              "burst preset its own schedule (a day apart) or its own file system")
        burst_on[fs] = t.name
    names = [t.name for t in targets]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TargetError(f"REPLMON_FIO_TARGETS: target names must be unique (they key the results): {', '.join(dup)}")
    allowed = {b for b in env.get("REPLMON_FIO_BUCKETS", "").split(",") if b}
    if allowed:
        for t in targets:
            for b in (t.bucket, t.cache_xz):
                if t.kind == "mountpoint" and b and b not in allowed:
                    raise TargetError(f"target {t.name}: bucket {b} is not in the stack's MountpointBuckets parameter "
                                      f"({', '.join(sorted(allowed))}); the task role may use only those: add it there")
    return targets


def main(argv: list[str] | None = None) -> int:
    env = dict(os.environ)
    try:
        targets = load_targets(env)
        results = env.get("REPLMON_FIO_RESULTS") or ""
        if not results:
            raise TargetError("REPLMON_FIO_RESULTS: set it to s3://bucket/prefix/ (the stack's results bucket)")
        sink: ResultSink = S3Sink(results) if results.startswith("s3://") else DirSink(results)
    except (TargetError, PresetError, ValueError, OSError) as exc:
        print(f"replmon fio runner: {exc}", file=sys.stderr)
        return 2
    info = task_info()
    summary: dict[str, Any] = {"task": info, "task_id": task_id(info), "start": time.time(), "runs": []}
    code = 0
    try:
        with host_lock(env.get("REPLMON_FIO_LOCK")):
            for t in targets:
                scale = t.scale or env.get("REPLMON_FIO_SCALE", "full")
                result = run(t, str(t.preset), scale, sink, emit=_emf)
                summary["runs"].append({"target": t.name, "preset": t.preset, "scale": scale, "run_id": result.run["run_id"],
                                        "status": result.run["status"], "errors": result.run["errors"][:5]})
                print(json.dumps({"target": t.name, "run_id": result.run["run_id"], "status": result.run["status"],
                                  "errors": result.run["errors"],
                                  "jobs": [{"job": r.key, "MiB/s": round(r.bw_bytes / 2**20, 2)} for r in result.rows]}))
                code = max(code, result.exit_code)
    except HostBusy as exc:
        summary["error"] = str(exc)
        for t in targets:
            _emf("FioRunFailed", 1.0, {"Target": t.name, "Preset": str(t.preset)})
        print(f"replmon fio runner: {exc}", file=sys.stderr)
        code = 1
    summary.update(end=time.time(), status="failed" if code else "ok")
    try:  # the task's own record, last: a STOPPED task without it never got this far (FioTaskStopped counts it)
        sink.put(task_key("", summary["task_id"]), json.dumps(summary, indent=1).encode())
    except Exception as exc:
        print(f"replmon fio runner: upload of the task summary failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    return code


if __name__ == "__main__":
    raise SystemExit(main())
