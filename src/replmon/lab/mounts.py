"""`replmon lab fio`: a preset through the real runner against the lab's MinIO, on
- ``mountpoint``: a mount binary built on Mountpoint for S3's own crates (tools/mountpoint-lab),
  path-style to MinIO - Mountpoint's real prefetcher, upload path and (``mountpoint-cache``) its
  local disk cache;
- ``mountpoint-xregion``: the same, through a Toxiproxy listener adding ``rtt_ms`` of round trip
  (half each way) - the cross-region study's drop, on loopback;
- ``mountpoint-credits``: the same through a Toxiproxy listener that, ``throttle_after`` seconds
  into the run, caps every connection to ``throttle_mibps`` (Toxiproxy's bandwidth toxic is per
  connection): burst credits running out, as in the FSx for Lustre study, for the knee;
- ``s3fs``: s3fs-fuse (Debian) on the same bucket;
- ``local``: a directory on the lab's disk (the studies' EBS row).
Results go to a results bucket on the same MinIO, then through the ingest code into the lab's
DynamoDB Local, exactly as IngestFioResults stores them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replmon.adapters.metrics import NullMetrics
from replmon.lab.servers import LabError, cache_dir
from replmon.mounts import knee as knee_mod
from replmon.mounts import presets as presets_mod
from replmon.mounts.document import RUN_FILE, Row
from replmon.mounts.fioresult import FioResultError
from replmon.mounts.ingest import Ingested, ingest_run, load_run, rows_of
from replmon.mounts.runner import RunResult, S3Sink, run
from replmon.mounts.targets import Target, is_mounted

LAB_TARGETS = ("mountpoint", "mountpoint-cache", "mountpoint-xregion", "mountpoint-credits", "s3fs", "local")
FIO_BUCKET = "replmon-fio"
RESULTS_BUCKET = "replmon-fio-results"
RESULTS_PREFIX = "fio-results/"
XREGION_PROXY = "fio-xregion"
CREDITS_PROXY = "fio-credits"


def default_targets(preset: str) -> list[str]:
    """Every lab target; the throttled one only for the preset that looks for a knee."""
    return [t for t in LAB_TARGETS if t != "mountpoint-credits" or preset == "burst-vs-baseline"]


def mountpoint_binary() -> Path:
    path = Path(os.environ.get("REPLMON_MOUNTPOINT_BIN") or cache_dir() / "cargo-target" / "release" / "replmon-mountpoint")
    if not os.access(path, os.X_OK):
        raise LabError(f"{path}: the lab's Mountpoint build is missing; run `make lab-deps` (cargo, ~5-8 min once)")
    return path


@dataclass
class TargetRun:
    target: str
    result: RunResult
    ingested: Ingested | None
    rows: list[Row] = field(default_factory=list)
    bw_logs: dict[str, str] = field(default_factory=dict)


def _lab_target(lab: Any, name: str, mnt: Path, endpoint: str) -> Target:
    access, secret = lab.keys
    if name == "local":
        return Target.from_json({"name": name, "kind": "local", "mount_point": str(mnt / "local")})
    if name == "s3fs":
        return Target.from_json({"name": name, "kind": "s3fs", "bucket": FIO_BUCKET, "endpoint_url": endpoint,
                                 "mount_point": str(mnt / name), "env": {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}})
    cache = {"cache": str(mnt / "mp-cache")} if name == "mountpoint-cache" else {}
    return Target.from_json({"name": name, "kind": "mountpoint", "bucket": FIO_BUCKET, "endpoint_url": endpoint, "region": "us-east-1",
                             "mount_point": str(mnt / name), "binary": str(mountpoint_binary()), **cache,
                             "env": {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}})


def run_lab_fio(lab: Any, preset: str, scale: str, targets: list[str], *, rtt_ms: int = 50, throttle_after: float = 5.0,
                throttle_mibps: int = 8, progress: Callable[[str], None] = lambda _: None) -> list[TargetRun]:
    unknown = [t for t in targets if t not in LAB_TARGETS]
    if unknown:
        raise LabError(f"--target {unknown[0]!r}: use any of {', '.join(LAB_TARGETS)}")
    presets_mod.raw(preset)
    s3 = lab.s3("destination")
    for bucket in (FIO_BUCKET, RESULTS_BUCKET):
        with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
            s3.create_bucket(Bucket=bucket)
    mnt = Path(lab.root).resolve() / "mnt"
    dst = lab.servers["destination"]
    out: list[TargetRun] = []
    store = lab.store()
    for name in targets:
        endpoint = dst.url
        if name == "mountpoint-xregion":
            port = lab.toxiproxy.proxy(XREGION_PROXY, dst.port)
            for stream in ("upstream", "downstream"):  # half the round trip each way
                lab.toxiproxy.toxic(XREGION_PROXY, f"rtt-{stream}", "latency", stream, latency=rtt_ms // 2, jitter=0)
            endpoint = f"http://127.0.0.1:{port}"
        throttle = None
        if name == "mountpoint-credits":
            endpoint = f"http://127.0.0.1:{lab.toxiproxy.proxy(CREDITS_PROXY, dst.port)}"

            def run_out_of_credits() -> None:
                for stream in ("upstream", "downstream"):  # writes' bodies go up, reads' come down
                    lab.toxiproxy.toxic(CREDITS_PROXY, f"credits-{stream}", "bandwidth", stream, rate=throttle_mibps * 1024)

            throttle = threading.Timer(throttle_after, run_out_of_credits)
        target = _lab_target(lab, name, mnt, endpoint)
        progress(f"{name}: {preset} at scale {scale}")
        try:
            if throttle:
                throttle.start()
            result = run(target, preset, scale, S3Sink(f"s3://{RESULTS_BUCKET}/{RESULTS_PREFIX}", s3), workdir=str(lab.root))
        finally:
            if throttle:
                throttle.cancel()
                throttle.join()
            if name in ("mountpoint-xregion", "mountpoint-credits"):
                lab.toxiproxy.remove(XREGION_PROXY if name == "mountpoint-xregion" else CREDITS_PROXY)
            shutil.rmtree(mnt / "mp-cache", ignore_errors=True)
        if is_mounted(target.mount_point):
            raise LabError(f"{target.mount_point} is still mounted after the run")
        base = f"{RESULTS_PREFIX}{name}/{preset}/{result.run['run_id']}/"

        def read(key: str, base: str = base) -> str:
            return str(s3.get_object(Bucket=RESULTS_BUCKET, Key=base + key)["Body"].read().decode())

        try:  # what IngestFioResults does with the run.json event
            stored = load_run(read(RUN_FILE))
            rows = rows_of(stored, read)
        except FioResultError as exc:
            raise LabError(f"{name}: the results would be rejected by ingestion: {exc}") from exc
        ingested = ingest_run(stored, rows, store, NullMetrics())
        logs = {}
        for obj in s3.list_objects_v2(Bucket=RESULTS_BUCKET, Prefix=base + "bw/").get("Contents", []):
            logs[obj["Key"].rsplit("/", 1)[-1]] = str(s3.get_object(Bucket=RESULTS_BUCKET, Key=obj["Key"])["Body"].read().decode())
        out.append(TargetRun(name, result, ingested, rows, logs))
        progress(f"{name}: {result.run['status']} in {result.run['wall_s']:.1f} s"
                 + (f" ({'; '.join(result.run['errors'])[:300]})" if result.run["errors"] else ""))
    return out


def study_table(preset: str, runs: list[TargetRun]) -> tuple[list[dict[str, Any]], str]:
    """Rows in the shape of the study the preset reproduces, MiB/s; its published figures as a row."""
    spec = presets_mod.raw(preset)
    pub = spec.get("published", {})
    if "matrix" in spec:  # rows x columns, e.g. file x threads (section 2) or bs x rw (section 5)
        row_key, col_key = pub["row"], pub["column"]
        env = presets_mod.matrix_cells(spec)
        cols = [str(c) for c in spec["matrix"][col_key]]
        rows = []
        for r in runs:
            for value in spec["matrix"][row_key]:
                row: dict[str, Any] = {"target": r.target, row_key: value}
                for c in cols:
                    hit = [x for x in r.rows if env.get(x.job, {}).get(row_key) == str(value) and env[x.job].get(col_key) == c]
                    row[c] = f"{sum(x.bw_bytes for x in hit) / 2**20:.1f}" if hit else "skipped"
                rows.append(row)
        for value in spec["matrix"][row_key]:
            rows.append({"target": "published", row_key: value, **{c: pub["values"][str(value)].get(c, "-") for c in cols}})
        return rows, f"MiB/s; published: {pub['condition']} (docs/REFERENCES.md {spec['reference']})"
    if preset == "burst-vs-baseline":
        rows = []
        for r in runs:
            for direction, k in (r.result.run.get("knees") or {}).items():
                rows.append({"target": r.target, **knee_mod.table_row(direction, k)})
        return rows, f"published (MB/s): {pub['values']} - {pub['condition']}"
    jobs = list(dict.fromkeys(x.key for r in runs for x in r.rows))
    rows = [{"target": r.target, **{j: next((f"{x.bw_bytes / 2**20:.2f}" for x in r.rows if x.key == j), "skipped") for j in jobs}}
            for r in runs]
    dd = " (dd: median of the repetitions)" if spec.get("dd") else ""
    return rows, f"MiB/s{dd}; published: {pub.get('values', 'no figures tabulated')} (docs/REFERENCES.md {spec['reference']})"


def xregion_drop(runs: list[TargetRun]) -> dict[str, Any] | None:
    """The Toxiproxy run's throughput relative to the plain run, per job: the shape of the study's drop."""
    by = {r.target: {x.key: x.bw_bytes for x in r.rows} for r in runs}
    if "mountpoint" not in by or "mountpoint-xregion" not in by:
        return None
    drops = {k: 1 - by["mountpoint-xregion"][k] / v for k, v in by["mountpoint"].items() if v and k in by["mountpoint-xregion"]}
    return {"per_job": drops, "mean": sum(drops.values()) / len(drops) if drops else None}


def charts(preset: str, runs: list[TargetRun], path: Path) -> Path:
    """§5: a bs x rw heat map per target; §4: bandwidth over time with the knee; §2: MiB/s vs threads."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = presets_mod.raw(preset)
    env = presets_mod.matrix_cells(spec) if "matrix" in spec else {}
    fig, axes = plt.subplots(1, max(1, len(runs)), figsize=(5 * max(1, len(runs)), 4), squeeze=False)
    for ax, r in zip(axes[0], runs, strict=False):
        ax.set_title(f"{r.target}: {preset}")
        if preset == "nfs-matrix":
            bss, rws = spec["matrix"]["bs"], spec["matrix"]["rw"]
            grid = [[next((x.bw_bytes / 2**20 for x in r.rows if env.get(x.job) == {"bs": b, "rw": w}), float("nan")) for w in rws]
                    for b in bss]
            im = ax.imshow(grid, cmap="viridis")
            ax.set_xticks(range(len(rws)), rws)
            ax.set_yticks(range(len(bss)), bss)
            for i, cells in enumerate(grid):
                for j, mib in enumerate(cells):
                    skipped = mib != mib  # NaN: the target cannot run the job (e.g. Mountpoint's randwrite)
                    ax.text(j, i, "skipped" if skipped else f"{mib:.0f}", ha="center", va="center", color="k" if skipped else "w")
            fig.colorbar(im, ax=ax, label="MiB/s")
        elif preset == "burst-vs-baseline":
            samples = [s for name, text in sorted(r.bw_logs.items()) for s in knee_mod.read_bw_log(text, name)]
            for direction in ("write", "read"):
                t, v = knee_mod.per_second(samples, direction)
                if not v:
                    continue
                ax.plot(t, [x / 2**20 for x in v], label=direction)
                k = (r.result.run.get("knees") or {}).get(direction, {}).get("knee")
                if k:
                    ax.axvline(k["at_s"], ls="--", color="k")
            ax.set_xlabel("s")
            ax.set_ylabel("MiB/s")
            ax.legend()
        elif "matrix" in spec and "threads" in spec["matrix"]:
            for f in spec["matrix"]["file"]:
                pts = sorted((int(env[x.job]["threads"]), x.bw_bytes / 2**20) for x in r.rows if env.get(x.job, {}).get("file") == f)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f)
            ax.set_xlabel("threads")
            ax.set_ylabel("MiB/s")
            ax.legend(title="file")
        else:
            ax.barh([x.key for x in r.rows], [x.bw_bytes / 2**20 for x in r.rows])
            ax.set_xlabel("MiB/s")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def summary(runs: list[TargetRun]) -> list[dict[str, Any]]:
    return [{"target": r.target, "status": r.result.run["status"], "wall s": round(r.result.run["wall_s"], 1),
             "stored": r.ingested.stored if r.ingested else 0,
             "verdicts": json.dumps(sorted({v.verdict if v else "error" for _, v in r.ingested.verdicts})) if r.ingested else "-"}
            for r in runs]
