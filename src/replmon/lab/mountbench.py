"""`make bench`, mount baselines: what the runner costs and what the lab's mounts deliver. It writes the
raw figures to docs/bench/bench-mounts.json; lab/benchreport.py renders docs/BENCH-MOUNTS.md and the
README's block from it. Every figure is measured in ``--reps`` (>= 3) repetitions: min / median / max.

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
from typing import Any

from rich.console import Console

from replmon.lab.lab import Lab
from replmon.lab.mounts import TargetRun, mountpoint_binary, run_lab_fio
from replmon.mounts.presets import expand
from replmon.mounts.runner import DirSink, run
from replmon.mounts.targets import Target


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


def m1(root: Path, preset: str, scale: str, reps: int) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(reps):  # the order alternates too: whichever goes first meets the disk as the last one left it
        if i % 2:
            bare = _bare_fio(preset, scale, root)
            (wall, lay, fio) = _runner(preset, scale, root)
        else:
            (wall, lay, fio) = _runner(preset, scale, root)
            bare = _bare_fio(preset, scale, root)
        out.append({"runner_first": not i % 2, "runner_s": wall, "layout_s": lay, "fio_s": fio, "bare_s": bare})
    shutil.rmtree(root / "results", ignore_errors=True)
    return {"preset": preset, "scale": scale, "reps": out}


def _by_job(run: TargetRun) -> dict[str, float]:
    return {x.key: x.bw_bytes for x in run.rows if x.direction == "read"}


def m2_m3(lab: Lab, rtt_ms: int, reps: int, console: Console) -> dict[str, Any]:
    """Every read job's bytes/s per target, ``reps`` times over: Mountpoint and s3fs on both presets,
    and Mountpoint behind Toxiproxy's +``rtt_ms`` on the cross-region one."""
    def say(m: str) -> None:
        console.print(m, highlight=False)

    out = []
    for i in range(reps):
        rep: dict[str, dict[str, dict[str, float]]] = {}
        for preset, scale in (("mountpoint-parity", "tiny"), ("mountpoint-xregion", "small")):
            say(f"M2/M3 repetition {i + 1}/{reps}: {preset} at scale {scale}")
            targets = ["mountpoint", "s3fs"] + (["mountpoint-xregion"] if preset == "mountpoint-xregion" else [])
            runs = {r.target: r for r in run_lab_fio(lab, preset, scale, targets, rtt_ms=rtt_ms, progress=say)}
            failed = [f"{t}: {r.result.run['errors']}" for t, r in runs.items() if r.result.exit_code]
            if failed:
                raise RuntimeError("; ".join(failed))
            rep[f"{preset}/{scale}"] = {t: _by_job(r) for t, r in runs.items()}
        out.append(rep)
    return {"rtt_ms": rtt_ms, "reps": out}


def run_mount_bench(console: Console, lab_dir: Path, output: Path | None, *, reps: int = 3, rtt_ms: int = 145,
                    overhead_preset: str = "mountpoint-parity", overhead_scale: str = "tiny") -> None:
    """M1-M3 into docs/bench/bench-mounts.json, then docs/BENCH-MOUNTS.md and the README's block rendered from it."""
    from replmon.lab import benchreport

    started = time.time()
    doc: dict[str, Any] = {"schema": benchreport.SCHEMA, "report": "bench-mounts",
                           "facts": benchreport.facts(f"replmon lab bench-mounts --reps {reps} --rtt-ms {rtt_ms}",
                                                    mountpoint=mountpoint_binary())}
    console.print(f"M1: runner vs bare fio, {reps} alternating repetitions")
    doc["M1"] = m1(Path(lab_dir).resolve() / "overhead", overhead_preset, overhead_scale, reps)
    with Lab(lab_dir / "lab", events=False, least_privilege=False) as lab:
        doc["M2"] = m2_m3(lab, rtt_ms, reps, console)
    json_path = benchreport.json_path_for(output, "bench-mounts")
    benchreport.finish(doc, started, json_path, output)
    console.print(f"wrote {json_path}" + (f" and {output}" if output is not None else ""))
