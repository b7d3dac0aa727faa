"""`make bench`, mount baselines: what the runner costs and what the lab's mounts deliver. It writes
docs/BENCH-MOUNTS.md itself (date, machine, versions, every table).

M1  Runner overhead: wall time of a preset through the runner (mount, lay out, fio per group of
    jobs, parse, knee, upload to a directory sink) vs bare fio running the same job file once (fio
    lays out its own files), on a local directory; repetitions alternate (and which goes first),
    each after a sync so neither pays for the other's writeback. Goal: <= 1.05x.
M2  Mountpoint (the lab's build on Mountpoint's own crates) vs s3fs, every read job, on the same
    MinIO bucket and machine, per job, as a ratio.
M3  The same Mountpoint behind Toxiproxy's added round trip: the drop vs the plain mount per job,
    next to the cross-region study's ~70 % (docs/REFERENCES.md R2).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from statistics import median

from rich.console import Console

from replmon.core.files import write_atomic
from replmon.lab.bench import Report, header, versions
from replmon.lab.lab import Lab
from replmon.lab.mounts import TargetRun, run_lab_fio, xregion_drop
from replmon.mounts.presets import expand
from replmon.mounts.runner import DirSink, run
from replmon.mounts.targets import Target

OVERHEAD_GOAL = 1.05


def _bare_fio(preset: str, scale: str, root: Path) -> float:
    """The runner's job file, run by fio alone in a fresh directory (it lays out its own files)."""
    d = Path(tempfile.mkdtemp(prefix="bare-", dir=root))
    try:
        (d / "job.fio").write_text(expand(preset, "local", scale).jobfile(str(d / "data"), str(d / "data")))
        (d / "data").mkdir()
        os.sync()  # neither side inherits the other's dirty pages (writeback would land in its time)
        t0 = time.perf_counter()
        subprocess.run(["fio", "--output-format=json", f"--output={d / 'out.json'}", str(d / "job.fio")], check=True,
                       capture_output=True, timeout=3600)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _runner(preset: str, scale: str, root: Path) -> tuple[float, float, float]:
    target = Target.from_json({"name": "bench-local", "kind": "local", "mount_point": str(root / "local")})
    # The runner keeps its layout between runs; bare fio lays its files out every time: start the
    # runner without one too, so both sides write the same files (like for like).
    shutil.rmtree(root / "local" / "replmon-fio" / "layout", ignore_errors=True)
    (root / "local").mkdir(parents=True, exist_ok=True)
    os.sync()
    t0 = time.perf_counter()
    res = run(target, preset, scale, DirSink(str(root / "results")), workdir=str(root))
    wall = time.perf_counter() - t0
    if res.exit_code:
        raise RuntimeError(f"runner failed: {res.run['errors']}")
    return wall, res.run["layout_s"], res.run["fio_s"]


def m1(report: Report, root: Path, preset: str, scale: str, reps: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    runs = []
    for i in range(reps):  # the order alternates too: whichever goes first meets the disk as the last one left it
        if i % 2:
            bare = _bare_fio(preset, scale, root)
            runs.append((_runner(preset, scale, root), bare))
        else:
            runs.append((_runner(preset, scale, root), _bare_fio(preset, scale, root)))
    shutil.rmtree(root / "results", ignore_errors=True)
    r, b = median(x[0][0] for x in runs), median(x[1] for x in runs)
    report.table(f"M1 runner overhead: {preset} at scale {scale} on a local directory ({reps} alternating repetitions)",
                 ["repetition", "runner s", "of which lay out s", "of which fio s", "bare fio s", "ratio"],
                 [[str(i + 1), f"{w:.2f}", f"{lay:.2f}", f"{f:.2f}", f"{y:.2f}", f"{w / y:.3f}"] for i, ((w, lay, f), y) in enumerate(runs)]
                 + [["median", f"{r:.2f}", "", "", f"{b:.2f}", f"{r / b:.3f}"]])
    report.text(f"Runner / bare fio (medians): **{r / b:.3f}x** (goal <= {OVERHEAD_GOAL}x: "
                f"{'met' if r / b <= OVERHEAD_GOAL else 'NOT met'}). The runner lays out read jobs' files itself, four "
                "files at once, each by one sequential writer (every target, Mountpoint included, can take such a file; "
                "it keeps them for the next run, but here each repetition starts without them, as bare fio does), "
                "and then starts fio once per group "
                "of jobs (a new fio only where a job reads what an earlier one wrote); bare fio runs the whole job file "
                "once and lays out its own files. The rest of the runner's time is parsing, the knee search, the upload "
                "to the sink and removing the files.")
    report.text()


def _by_job(run: TargetRun) -> dict[str, float]:
    return {x.key: x.bw_bytes for x in run.rows if x.direction == "read"}


def m2_m3(report: Report, lab: Lab, rtt_ms: int, console: Console) -> None:
    def say(m: str) -> None:
        console.print(m, highlight=False)

    rows = []
    xregion = None
    for preset, scale in (("mountpoint-parity", "tiny"), ("mountpoint-xregion", "small")):
        targets = ["mountpoint", "s3fs"] + (["mountpoint-xregion"] if preset == "mountpoint-xregion" else [])
        runs = {r.target: r for r in run_lab_fio(lab, preset, scale, targets, rtt_ms=rtt_ms, progress=say)}
        failed = [f"{t}: {r.result.run['errors']}" for t, r in runs.items() if r.result.exit_code]
        if failed:
            raise RuntimeError("; ".join(failed))
        mp, s3fs = _by_job(runs["mountpoint"]), _by_job(runs["s3fs"])
        rows += [[preset, scale, job, f"{mp[job] / 2**20:.1f}", f"{s3fs[job] / 2**20:.1f}", f"{mp[job] / s3fs[job]:.2f}"]
                 for job in mp if s3fs.get(job)]
        if preset == "mountpoint-xregion":
            xregion = (runs, xregion_drop(list(runs.values())))
    report.table("M2 reads, lab Mountpoint vs s3fs on the same MinIO bucket and machine (MiB/s)",
                 ["preset", "scale", "job/direction", "Mountpoint", "s3fs", "Mountpoint / s3fs"], rows)
    report.text("Both are FUSE clients; they differ in what they keep. s3fs stages an open object in a local temporary "
                "file, filled by parallel ranged GETs, and serves repeated and random reads from it and the page cache; "
                "Mountpoint streams ranged GETs through its prefetcher and, in this build (mountpoint-s3-fs 0.11, no "
                "`--cache`), keeps no data of its own and answers each open without FOPEN_KEEP_CACHE, so the kernel drops "
                "the file's cached pages at every open. The single-thread sequential rows (`T1`, `seq_read`) are the "
                "closest to like for like.")
    report.text()
    assert xregion is not None
    runs, drop = xregion
    if drop is None or drop["mean"] is None:
        raise RuntimeError("M3: no comparable jobs between mountpoint and mountpoint-xregion")
    plain, far = _by_job(runs["mountpoint"]), _by_job(runs["mountpoint-xregion"])
    report.table(f"M3 Mountpoint with +{rtt_ms} ms round trip (Toxiproxy, half each way) vs the plain mount (MiB/s)",
                 ["job/direction", "plain", f"+{rtt_ms} ms", "drop"],
                 [[f"{k}/read", f"{plain[k + '/read'] / 2**20:.1f}", f"{far[k + '/read'] / 2**20:.1f}", f"{d:.0%}"] for k, d in drop["per_job"].items()]
                 + [["mean", "", "", f"{drop['mean']:.0%}"]])
    report.text(f"Study (R2): Ohio -> Tokyo about 70 % below Tokyo -> Tokyo on the same jobs; the lab's mean drop at "
                f"+{rtt_ms} ms is {drop['mean']:.0%}. Loopback has no bandwidth limit, so only the round trip differs.")
    report.text()


def run_mount_bench(console: Console, lab_dir: Path, output: Path | None, *, reps: int = 4, rtt_ms: int = 145,
                    overhead_preset: str = "mountpoint-parity", overhead_scale: str = "tiny") -> None:
    started = time.time()
    report = Report(console)
    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    header(report, ": mount baselines", "bench-mounts",
           ", ".join(f"{k} {v}" for k, v in versions().items() if k != "dynamodb-local")
           + f", {fio}, mountpoint-s3-fs 0.11.0 (tools/mountpoint-lab), s3fs (Debian)",
           f"replmon lab bench-mounts --reps {reps} --rtt-ms {rtt_ms}")
    report.text("- lab: one MinIO on loopback; FUSE mounts on this machine; everything shares its 2 cores, so "
                "absolute MiB/s are this machine's, not AWS's")
    report.text()
    report.text("## M1 runner overhead")
    report.text()
    m1(report, Path(lab_dir).resolve() / "overhead", overhead_preset, overhead_scale, reps)
    with Lab(lab_dir / "lab", events=False, least_privilege=False) as lab:
        report.text("## M2 Mountpoint vs s3fs, M3 the added round trip")
        report.text()
        m2_m3(report, lab, rtt_ms, console)
    report.text(f"Bench took {time.time() - started:.0f} s.")
    if output is not None:
        write_atomic(output, report.markdown().encode(), mode=0o644)
        console.print(f"wrote {output}")
