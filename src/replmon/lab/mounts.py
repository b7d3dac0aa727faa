"""`replmon lab fio`: a preset through the real runner against the lab's MinIO, on
- ``mountpoint``: a mount binary built on Mountpoint for S3's own crates (tools/mountpoint-lab),
  path-style to MinIO - Mountpoint's real prefetcher, upload path and (``mountpoint-cache``) its
  local disk cache;
- ``mountpoint-xregion``: the same, through a Toxiproxy listener adding ``rtt_ms`` of round trip
  (half each way; 145 ms by default, about Ohio - Tokyo, the cross-region study's pair) - the
  study's drop on loopback: qualitative, since a real inter-region path also differs in bandwidth,
  loss and S3's own behaviour, and loopback has no bandwidth limit at all;
- ``mountpoint-credits``: the same through a loopback proxy whose total rate, over all its
  connections, is one budget (replmon.lab.credits: a file system's burst credits are one budget
  for all its clients; Toxiproxy's bandwidth toxic caps each connection, so the level moved with
  the number of connections the client opened). It runs at ``burst_mibps`` (20 MiB/s) while its
  credit balance lasts and at ``throttle_mibps`` (3 MiB/s; a steeper fall than the study's
  604/149 = 4.05: see BURST_MIBPS) after (replmon.lab.credits.BurstCredits: earned at the
  baseline, spent at the rate used, as EFS documents its burst credits, counted from the start of
  the measured I/O, the runner's ``on_io_start``, after mounting and laying out; the fall is one-way). The balance holds ``throttle_after`` seconds at
  the full burst: 40 % of the preset's run time at the scale by default
  (:func:`default_throttle_after`: 45 s of burst-write's 112 s at small scale), so the knee
  detector sees a burst, the fall and the sustained level; a client that stalls in the burst
  keeps its credits, and the fall comes that much later. The mount uploads 5 MiB parts (below);
  the proxy's own byte counter per second is the run's file-system series (``service_knees``,
  as R4 read FSx's DataWriteBytes): fio's log times writes as the mount accepts them, a part at a
  time, and shows the fall as clumps;
- ``s3fs``: s3fs-fuse (Debian) on the same bucket;
- ``local``: a directory on the lab's disk (the studies' EBS row).
Results go to a results bucket on the same MinIO, then through the ingest code into the lab's
DynamoDB Local, exactly as IngestFioResults stores them; the study's table and chart are then
rebuilt from that store by the same code as `replmon fio report` (replmon.mounts.report).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replmon.adapters.metrics import NullMetrics
from replmon.core.files import write_atomic
from replmon.lab.credits import METER_NAMESPACE, BurstCredits, CreditProxy
from replmon.lab.servers import LabError, cache_dir
from replmon.mounts import presets as presets_mod
from replmon.mounts.charts import chart
from replmon.mounts.document import RUN_FILE, Row
from replmon.mounts.fioresult import FioResultError
from replmon.mounts.ingest import Ingested, ingest_run, load_run, partition, rows_of
from replmon.mounts.report import StudyReport, TargetResult, study_report
from replmon.mounts.runner import RunResult, S3Sink, run
from replmon.mounts.targets import Target, is_mounted

LAB_TARGETS = ("mountpoint", "mountpoint-cache", "mountpoint-xregion", "mountpoint-credits", "s3fs", "local")
FIO_BUCKET = "replmon-fio"
RESULTS_BUCKET = "replmon-fio-results"
RESULTS_PREFIX = "fio-results/"
XREGION_PROXY = "fio-xregion"
#: The cross-region study's pair, Ohio (us-east-2) - Tokyo (ap-northeast-1): a round trip of about 145 ms.
STUDY_RTT_MS = 145


#: mountpoint-credits' total rate during the burst and after it, both far under what this machine's
#: plain mount writes (about 150 MB/s). Steeper than the study's fall (604/149 MB/s = 4.05): the
#: mount completes writes a whole part at a time, so the slow phase's series is a few clumps a
#: second, and at 20/3 the fall stands clear of that noise at the resolution the detector reads.
BURST_MIBPS = 20
SUSTAINED_MIBPS = 3
#: Its part size:
#: S3's smallest part, 5 MiB (Mountpoint's memory limit in the lab build, 512 MiB, refuses 32 files'
#: larger parts with ENOMEM). At the burst rate the parts in flight take over 5 s each: the CRT
#: under Mountpoint times out and re-sends an UploadPart that runs long against its recent ones
#: unless its first ten averaged over 5 s, and with that watchdog on, the fall to a quarter made
#: every part "late" until the retries ran out as EIO in fio.
CREDITS_PART_SIZE = 5 * 2**20
#: The CRT plans for Mountpoint's default 10 Gbit/s (some 30 connections). Planning for 40 (about a
#: hundred) made the parts slower still, but on a loaded machine fio then hit EIO in 2 of 3 runs.
CREDITS_THROUGHPUT_GBPS = 10
#: The burst the lab's throttle leaves: this share of the preset's run time at the scale, at least MIN_BURST_S.
BURST_SHARE = 0.4
MIN_BURST_S = 3.0


def default_throttle_after(preset: str, scale: str) -> float:
    """Seconds of full-rate burst the lab's credit balance holds: 40 % of the preset's longest job at ``scale`` (the
    rest is the fall and the sustained level), at least MIN_BURST_S (the knee detector needs
    three samples of each level, at the resolution it reads the log at).

    >>> default_throttle_after("burst-write", "small"), default_throttle_after("burst-write", "tiny")
    (45.0, 3.0)
    """
    plan = presets_mod.expand(preset, "mountpoint", scale)
    longest = max((j.seconds() for j in plan.jobs), default=0)
    return max(MIN_BURST_S, float(round(longest * BURST_SHARE)))


def default_targets(preset: str) -> list[str]:
    """Every lab target; the throttled one only for the preset that looks for a knee."""
    return [t for t in LAB_TARGETS if t != "mountpoint-credits" or presets_mod.raw(preset).get("burst")]


#: The checkout's installer (absent from an installed wheel): the mount lab's parts on first use.
LAB_DEPS = Path(__file__).resolve().parents[3] / "scripts" / "lab-deps.sh"


def install_mount_lab() -> bool:
    """fio, s3fs and the lab's Mountpoint build, installed on the mount lab's first use (so that
    `make demo` does not build them); False when there is no checkout to install from."""
    import subprocess
    import sys

    if not LAB_DEPS.is_file():
        return False
    print("the mount lab's parts are missing: scripts/lab-deps.sh mounts (fio and s3fs from apt; the lab's "
          "Mountpoint with cargo, ~5-8 min once)", file=sys.stderr, flush=True)
    return subprocess.run(["bash", str(LAB_DEPS), "mounts"], stdout=subprocess.DEVNULL, timeout=3600).returncode == 0


def mountpoint_binary() -> Path:
    path = Path(os.environ.get("REPLMON_MOUNTPOINT_BIN") or cache_dir() / "cargo-target" / "release" / "replmon-mountpoint")
    if not os.access(path, os.X_OK) and not os.environ.get("REPLMON_MOUNTPOINT_BIN"):
        install_mount_lab()
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
    stored: TargetResult | None = None  # what the store holds for this run (the report's input)
    throttled_at: float | None = None  # mountpoint-credits: when its credits ran out and the rate fell (Unix s; fio's logs use Unix ms)
    mount_log: str = ""  # the tail of the mount's own log, kept when the run failed


def _lab_target(lab: Any, name: str, mnt: Path, endpoint: str) -> Target:
    access, secret = lab.keys
    if name == "local":
        return Target.from_json({"name": name, "kind": "local", "mount_point": str(mnt / "local")})
    if name == "s3fs":
        return Target.from_json({"name": name, "kind": "s3fs", "bucket": FIO_BUCKET, "endpoint_url": endpoint,
                                 "mount_point": str(mnt / name), "env": {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}})
    extra: dict[str, Any] = {"cache": str(mnt / "mp-cache")} if name == "mountpoint-cache" else {}
    if name == "mountpoint-credits":  # long parts: see CREDITS_PART_SIZE
        extra["options"] = [f"--part-size={CREDITS_PART_SIZE}", f"--throughput-gbps={CREDITS_THROUGHPUT_GBPS}"]
    return Target.from_json({"name": name, "kind": "mountpoint", "bucket": FIO_BUCKET, "endpoint_url": endpoint, "region": "us-east-1",
                             "mount_point": str(mnt / name), "binary": str(mountpoint_binary()), **extra,
                             "env": {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}})


def run_lab_fio(lab: Any, preset: str, scale: str, targets: list[str], *, rtt_ms: int = STUDY_RTT_MS, throttle_after: float | None = None,
                throttle_mibps: int = SUSTAINED_MIBPS, burst_mibps: int = BURST_MIBPS, progress: Callable[[str], None] = lambda _: None) -> list[TargetRun]:
    """``throttle_after``: the seconds mountpoint-credits' credit balance holds at the full burst,
    from the start of the measured I/O (default :func:`default_throttle_after`); ``throttle_mibps``:
    the total rate once it ran out (the baseline its credits are earned at);
    ``burst_mibps``: the total rate before (the burst rate, as a file system's burst
    throughput is a rate of its own: the lab machine's own rate would wander with its page cache
    and its other work)."""
    unknown = [t for t in targets if t not in LAB_TARGETS]
    if unknown:
        raise LabError(f"--mount {unknown[0]!r}: use any of {', '.join(LAB_TARGETS)}")
    presets_mod.raw(preset)
    after = default_throttle_after(preset, scale) if throttle_after is None else throttle_after
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
        budget, credits = None, None
        if name == "mountpoint-credits":
            budget = BurstCredits(burst_mibps * 2**20, throttle_mibps * 2**20, after)
            credits = CreditProxy(dst.port, budget).__enter__()
            endpoint = f"http://127.0.0.1:{credits.port}"
            progress(f"{name}: {burst_mibps} MiB/s in all while its credits last ({after:g} s at that rate from the start of the "
                     f"measured I/O; earned at {throttle_mibps} MiB/s, spent at the rate used), then {throttle_mibps} MiB/s")
        try:  # the credits are counted from the measured I/O on, not while mounting and laying out
            target = _lab_target(lab, name, mnt, endpoint)
            progress(f"{name}: {preset} at scale {scale}")
            # mountpoint-credits: the proxy's own byte counter is the file system's series (read at once, to the second)
            result = run(target, preset, scale, S3Sink(f"s3://{RESULTS_BUCKET}/{RESULTS_PREFIX}", s3), workdir=str(lab.root),
                         on_io_start=budget.arm if budget else None, metric_reader=credits.meter if credits else None,
                         metric_source=(METER_NAMESPACE, f"credit-proxy:{credits.port}", 1) if credits else None,
                         settle_s=0.0 if credits else None)
        finally:
            if credits:
                credits.close()
            if name == "mountpoint-xregion":
                lab.toxiproxy.remove(XREGION_PROXY)
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
        items = [i for i in store.partition_items(partition(name, preset, scale)) if i.get("run_id") == stored["run_id"]]
        run_item = next(i for i in items if str(i["at"]).endswith("#run"))
        stored_result = TargetResult(name, stored["target"], run_item, {i["row"]: i for i in items if i.get("row")})
        mount_log = ""
        if result.run["errors"]:
            with contextlib.suppress(s3.exceptions.NoSuchKey):
                mount_log = s3.get_object(Bucket=RESULTS_BUCKET, Key=base + "mount.log")["Body"].read().decode(errors="replace")
        out.append(TargetRun(name, result, ingested, rows, logs, stored_result, budget.exhausted_unix if budget else None, mount_log))
        if (at := fell_s(out[-1])) is not None:
            progress(f"{name}: its credits ran out {at:.1f} s into fio's log")
        progress(f"{name}: {result.run['status']} in {result.run['wall_s']:.1f} s"
                 + (f" ({'; '.join(result.run['errors'])[:300]})" if result.run["errors"] else ""))
    return out


def fell_s(run: TargetRun) -> float | None:
    """When mountpoint-credits' credits ran out and its rate fell, in the seconds the knee is read
    in (from the first second fio logged a write): the knee's true place. A full balance earns
    nothing while fio starts (processes, files opened through FUSE), so this is about
    ``throttle_after`` for a client at the full burst, later for a slower one or one that stalled."""
    from replmon.mounts.knee import read_bw_log

    starts = [int(t) for name, text in run.bw_logs.items() for t, _, _, _ in read_bw_log(text, name)]  # one direction a preset
    return run.throttled_at - min(starts) if run.throttled_at is not None and starts else None


def fell_on_meter(run: TargetRun, direction: str = "write") -> float | None:
    """When mountpoint-credits' rate fell, in the seconds of the proxy's own series (the file
    system's series the runner stored: ``service_knees``), counted from its first point."""
    entry = (run.result.run.get("service_knees") or {}).get(direction) or {}
    return run.throttled_at - entry["first_s"] if run.throttled_at is not None and entry.get("first_s") is not None else None


def report(preset: str, runs: list[TargetRun]) -> StudyReport:
    """The study's tables from the lab's store, as `replmon fio report` builds them from AWS."""
    results = [r.stored for r in runs if r.stored is not None]
    by = {r.target: r for r in results}
    pair = (by["mountpoint"], by["mountpoint-xregion"]) if {"mountpoint", "mountpoint-xregion"} <= set(by) else None
    return study_report(preset, results, xregion_pair=pair)


def xregion_drop(runs: list[TargetRun]) -> dict[str, Any] | None:
    """The Toxiproxy run's throughput relative to the plain run, per job: the shape of the study's drop."""
    got = report("mountpoint-xregion", runs).comparisons.get("cross_region_drop")
    return {"per_job": got["per_job"], "mean": got["mean"]} if got else None


def charts(preset: str, runs: list[TargetRun], path: Path) -> Path:
    return chart(preset, [r.stored for r in runs if r.stored is not None], path, {r.target: r.bw_logs for r in runs})


def summary(runs: list[TargetRun]) -> list[dict[str, Any]]:
    """A row per target; mountpoint-credits' adds when its credits ran out, in seconds of fio's log."""
    credits = any(r.target == "mountpoint-credits" for r in runs)
    return [{"target": r.target, "status": r.result.run["status"], "wall s": round(r.result.run["wall_s"], 1),
             "stored": r.ingested.stored if r.ingested else 0,
             "verdicts": json.dumps(sorted({v.verdict if v else "error" for _, v in r.ingested.verdicts})) if r.ingested else "-",
             **({"credits ran out s": None if (at := fell_s(r)) is None else round(at, 1)} if credits else {})}
            for r in runs]


def _ran_out(run: TargetRun) -> str:
    """mountpoint-credits: when its credits ran out, in fio's and the file system's seconds (the knee's true place)."""
    if run.target != "mountpoint-credits":
        return ""
    wrote = bool(((run.result.run.get("bw_series") or {}).get("write") or {}).get("t"))  # fio's direction is the preset's
    at, meter = fell_s(run), fell_on_meter(run, "write" if wrote else "read")
    if at is None:
        return " (its credits lasted the whole run)"
    return f" (its credits ran out {at:.1f} s into fio's log" + (f", {meter:.1f} s into the file system's series)" if meter is not None else ")")


def markdown_section(preset: str, scale: str, rep: StudyReport, runs: list[TargetRun], command: str) -> str:
    """One preset's lab run as Markdown: what ran it, when, where, and the report's tables."""
    import subprocess
    from datetime import UTC, datetime

    from replmon.lab.bench import machine

    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    ran = {k: v for r in runs for k, v in (r.result.run.get("versions") or {}).items() if v and k != "kernel"}  # what each run recorded
    versions = "; ".join(f"{k} {v}" for k, v in sorted(ran.items())) or fio
    lines = [f"## {preset} at scale {scale} ({rep.reference})", "",
             f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}; machine: {machine()}",
             f"- versions (as the runs recorded them): {versions} (mountpoint: tools/mountpoint-lab on Mountpoint's crates); "
             f"command: `{command}`",
             "- runs: " + "; ".join(f"{r.target} {r.result.run['status']} in {r.result.run['wall_s']:.0f} s" + _ran_out(r) for r in runs), ""]
    for t in rep.tables:
        if not t.rows:
            continue
        cols = list(dict.fromkeys(k for row in t.rows for k in row))
        lines += [f"**{t.title}**", "", "| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
        lines += ["| " + " | ".join(str(row.get(c, "")).replace("|", "/") for c in cols) + " |" for row in t.rows]
        lines += (["", f"{t.note}"] if t.note else []) + [""]
    drop = rep.comparisons.get("cross_region_drop")
    if drop and drop.get("mean") is not None:
        lines += [f"Mean drop of {drop['cross_region']} against {drop['same_region']}: **{drop['mean']:.0%}** (the study: ~70 %; "
                  "qualitative - the lab adds only a round trip, on loopback with no bandwidth limit).", ""]
    return "\n".join(lines)


def write_markdown(path: Path, preset: str, section: str) -> Path:
    """Replace (or add) this preset's section in the generated report; other presets' stay."""
    start, end = f"<!-- lab-fio:{preset}:start -->", f"<!-- lab-fio:{preset}:end -->"
    head = ("# `replmon lab fio` runs: each preset at small scale in the lab\n\nGenerated by `replmon lab fio --markdown "
            f"{path.name}`; do not edit by hand, run it again. Loopback figures on one machine: the shape of each study (threads "
            "help, a round trip cuts throughput, a cache's first read is slow, a throttle makes a knee), not AWS's numbers.\n")
    text = path.read_text() if path.exists() else head
    block = f"{start}\n{section}\n{end}"
    if start in text:
        text = text[: text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    return write_atomic(path, text.encode(), mode=0o644)
