"""`make bench`: what the measurement costs and how exact it is, against ground truth, in the lab.
It writes the raw figures and the run's facts to docs/bench/bench.json; lab/benchreport.py renders
docs/BENCH.md and the README's bench block from that JSON. Timings are repeated
(P3 three times, P5 in five cold interpreters, P4 over every probe) and shown as min / median / max.

P1  HEADs per probe, compared at equal error bound. Measured: the adaptive poller and two fixed
    loops polling the *same* probes concurrently, each starting at the PUT's end with the same
    client: a 1 s loop (the fixed period that guarantees the adaptive bound max(1 s, 2 %) when
    the latency is not known in advance) and the published 0.5 s loop (a tighter 0.5 s bound).
    Modelled (stepping the policy): the same comparison at the published CRR latencies, with the
    fewest HEADs any schedule needs for the bound.
P2  Accuracy: is the ground truth inside [lo, hi]? Ground truth = an independent observer listing
    the destination every 10 ms: the moment the replica first appears in a listing.
P3  Time to create a probe (--compose-size) by server-side composition vs boto3 upload_file.
P4  Delay from the replica's appearance to the record being readable in the store.
P5  Cold start: each handler's import time from the Lambda layer, and the layer's size.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from replmon.core.files import write_atomic
from replmon.core.keys import probe_object_key
from replmon.core.record import ProbeRecord
from replmon.core.route import Endpoint, Route
from replmon.core.sizes import parse_size
from replmon.lab.lab import DEST_BUCKET, PREFIX, SOURCE_BUCKET, Lab, ReplicaObserver
from replmon.lab.servers import cache_dir
from replmon.local.execution import run_request
from replmon.probe.polling import PollPolicy
from replmon.probe.request import load_settings
from replmon.probe.upload import UploadSettings, upload_probe
from replmon.wiring import Deps

ROOT = Path(__file__).resolve().parents[3]  # the checkout (the bench runs from one: `make bench`)


# ------------------------------------------------------------------------------------------ modelled
def modelled_heads(latency: float, floor: float = 1.0, relative: float = 0.02) -> dict[str, int]:
    """HEADs each schedule sends until a HEAD after ``latency`` answers (HEADs answer instantly):
    the adaptive policy; the fewest any schedule needs for the same bound max(floor, relative*t)
    (send each HEAD as late as the bound allows); a 1 s and the published 0.5 s fixed loop."""
    policy = PollPolicy(floor, relative)

    def steps(next_at: Callable[[float], float]) -> int:
        t, n = 0.0, 1  # the first HEAD right after the PUT
        while t < latency:
            t = next_at(t)
            n += 1
        return n

    return {
        "adaptive": steps(lambda t: policy.next_head_at(t)),
        "fewest": steps(lambda t: t + policy.max_gap(t)),
        "loop_1s": steps(lambda t: t + 1.0),
        "loop_0.5s": steps(lambda t: t + 0.5),
    }


# ------------------------------------------------------------------------------------------ measured
@dataclass
class LoopResult:
    heads: int = 0
    lo: float | None = None  # last PENDING sent, seconds after the PUT end
    hi: float | None = None  # first final answer received
    unfinished: str | None = None  # why the loop could not finish


@dataclass
class FixedLoops:
    """Fixed-period HEAD loops started at a probe's PUT end, with the probe's own store (client
    settings); Cleanup of a key waits until they have finished (``wait``)."""

    periods: tuple[float, ...] = (1.0, 0.5)
    timeout: float = 120.0
    results: dict[str, dict[float, LoopResult]] = field(default_factory=dict)
    _threads: dict[str, list[threading.Thread]] = field(default_factory=dict)

    def start(self, store: Any, key: str, version: str | None, put_end: float) -> None:
        self.results[key] = {p: LoopResult() for p in self.periods}
        self._threads[key] = [threading.Thread(target=self._loop, args=(store, key, version, put_end, p), daemon=True)
                              for p in self.periods]
        for t in self._threads[key]:
            t.start()

    def _loop(self, store: Any, key: str, version: str | None, put_end: float, period: float) -> None:
        r = self.results[key][period]
        nxt = put_end
        while True:
            time.sleep(max(0.0, nxt - time.time()))
            sent = time.time()
            try:
                head = store.head(SOURCE_BUCKET, key, version)
            except Exception as exc:  # counted and shown, never dropped
                r.unfinished = f"{type(exc).__name__}"
                return
            r.heads += 1
            if head is not None and head.replication_status == "PENDING":
                r.lo = sent - put_end
                if sent - put_end > self.timeout:
                    r.unfinished = "timeout"
                    return
                nxt += period
                continue
            if head is None:
                r.unfinished = "object gone"
                return
            r.hi = time.time() - put_end
            return

    def wait(self, key: str) -> None:
        for t in self._threads.get(key, []):
            t.join(self.timeout + 10)


class HookedStore:
    """The source store, telling the fixed loops when a probe's PUT ended and holding Cleanup's
    deletes until they are done (so both methods see the same probes to the end). The loops HEAD
    with ``poller``: PollReplication's own store (its credentials and client settings)."""

    def __init__(self, inner: Any, loops: FixedLoops, role: str, poller: Any = None) -> None:
        self.inner, self.loops, self.role, self.poller = inner, loops, role, poller

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def put(self, bucket: str, key: str, body: bytes, metadata: dict[str, str]) -> Any:
        result = self.inner.put(bucket, key, body, metadata)
        if self.role == "upload" and key.startswith(PREFIX):
            self.loops.start(self.poller, key, result.version_id, time.time())
        return result

    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: Any) -> Any:
        result = self.inner.complete_multipart(bucket, key, upload_id, etags)
        if self.role == "upload" and key.startswith(PREFIX):
            self.loops.start(self.poller, key, result.version_id, time.time())
        return result

    def delete_all_versions(self, bucket: str, key: str) -> int:
        self.loops.wait(key)
        return int(self.inner.delete_all_versions(bucket, key))


class StoreWatcher:
    """Notes when each record first becomes readable in the store (for P4)."""

    def __init__(self, lab: Lab, route: str, period: float = 0.02) -> None:
        self.store, self.route, self.period = lab.store(), route, period
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._since = time.time() - 60

    def _run(self) -> None:
        while not self._stop.is_set():
            for r in self.store.query(self.route, self._since, time.time() + 60):
                self.seen.setdefault(r.probe_id, time.time())
            time.sleep(self.period)

    def __enter__(self) -> StoreWatcher:
        threading.Thread(target=self._run, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()


def _key(rec: ProbeRecord) -> str:
    return probe_object_key(PREFIX, rec.run_id, rec.route, rec.probe_id)


@dataclass
class PolicyRun:
    label: str
    floor: float
    records: list[ProbeRecord]
    truth: dict[str, tuple[float, float]]
    loops: FixedLoops
    stored: dict[str, float]


def measure(lab: Lab, label: str, floor: float, sizes: str, trials: int) -> PolicyRun:
    loops = FixedLoops()
    base = lab.function_deps()
    route = Route.model_validate(lab.route("bench"))
    poller = base["PollReplication"].stores(route.source)

    def wired(fn: str, d: Deps) -> Deps:
        role = {"UploadProbe": "upload", "Cleanup": "cleanup"}.get(fn)
        if role is None:
            return d
        inner = d.stores

        def stores(ep: Endpoint) -> Any:  # HookedStore forwards the rest of ObjectStore
            store = inner(ep)
            return HookedStore(store, loops, role, poller) if ep.bucket == SOURCE_BUCKET else store

        return dataclasses.replace(d, stores=stores)

    request = load_settings({"sizes": sizes, "trials": trials, "max_concurrency": 1, "timeout_seconds": 600,
                             "poll": {"floor_seconds": floor, "use_history": False}}).for_routes([lab.route("bench")])
    with ReplicaObserver(lab, PREFIX) as truth, StoreWatcher(lab, "bench") as watch:
        res = run_request(request, lab.deps(), function_deps={fn: wired(fn, d) for fn, d in base.items()})
        time.sleep(0.5)
    return PolicyRun(label, floor, res.records, dict(truth.seen), loops, dict(watch.seen))


# ------------------------------------------------------------------------------------------ report
class Report:
    """Markdown for docs/BENCH.md, and the same tables on the console."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.lines: list[str] = []

    def text(self, s: str = "") -> None:
        self.lines.append(s)

    def table(self, title: str, columns: list[str], rows: list[list[str]]) -> None:
        def cell(x: str) -> str:
            return x.replace("|", "\\|")  # a pipe inside a cell would end it

        self.text(f"**{cell(title)}**")
        self.text()
        self.text("| " + " | ".join(map(cell, columns)) + " |")
        self.text("| " + " | ".join("---" if i == 0 else "---:" for i in range(len(columns))) + " |")
        for r in rows:
            self.text("| " + " | ".join(map(cell, r)) + " |")
        self.text()
        from rich.table import Table

        t = Table(title=title, title_justify="left")
        for c in columns:
            t.add_column(c)
        for r in rows:
            t.add_row(*r)
        self.console.print(t)

    def markdown(self) -> str:
        return "\n".join(self.lines).rstrip() + "\n"


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def versions() -> dict[str, str]:
    import boto3
    import botocore

    out = {"python": platform.python_version(), "boto3": boto3.__version__, "botocore": botocore.__version__}
    stamps = sorted(p.name for p in (cache_dir() / "bin").glob(".minio-*"))
    out["minio"] = stamps[-1].removeprefix(".minio-") if stamps else "?"
    out["minio-py"] = importlib.metadata.version("minio")  # the lab's set-up (admin API), mc's successor
    out["dynamodb-local"] = "2.5.4"
    return out


def machine() -> str:
    mem = next((int(line.split()[1]) // 1024 // 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), 0)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "?")
    return f"{os.cpu_count()} cores ({cpu}), {mem} GiB, {platform.system()} {platform.release()} {platform.machine()}"


def probes_json(run: PolicyRun) -> list[dict[str, Any]]:
    """Each probe's raw figures, seconds after its PUT's end: the interval, HEADs, the fixed loops'
    answers, the observer's window (ground truth) and when the record became readable (P1, P2, P4)."""
    out = []
    for r in run.records:
        seen = run.truth.get(_key(r))
        truth = [seen[0] - r.put_end, seen[1] - r.put_end] if seen and r.put_end is not None else None
        stored = run.stored[r.probe_id] - seen[1] if seen and r.probe_id in run.stored else None
        out.append({"size": r.size_bytes, "trial": r.trial, "status": r.status.value, "lo": r.latency_lo, "hi": r.latency_hi,
                    "mid": r.latency_mid, "width": r.width, "heads": r.head_count, "truth": truth, "stored_after_truth": stored,
                    "loops": {str(p): {"heads": x.heads, "lo": x.lo, "hi": x.hi, "unfinished": x.unfinished}
                              for p, x in run.loops.results.get(_key(r), {}).items()}})
    return out


def modelled() -> list[dict[str, int]]:
    return [{"latency": lat, **modelled_heads(lat)} for lat in (20, 60, 180, 240, 900, 1800)]


def measure_p3(lab: Lab, compose_size: str, lab_dir: Path, reps: int = 3) -> dict[str, Any]:
    """A probe of ``compose_size`` made by server-side composition and by boto3 upload_file, ``reps`` times each."""
    size = parse_size(compose_size)
    route = Route.model_validate({  # outside the replicated prefix: P3 times creation only
        "name": "bench-p3", "prefix": "replmon-bench/",
        "source": {"bucket": SOURCE_BUCKET, "endpoint_url": lab.servers["source"].url},
        "destinations": [{"bucket": DEST_BUCKET, "endpoint_url": lab.servers["destination"].url}],
    })
    from replmon.core.clock import WallClock
    from replmon.probe.state import ProbeState

    store = lab.deps().stores(route.source)
    state = ProbeState(probe_id="p3-compose", run_id="bench", planned_at=time.time(), route=route, size_bytes=size,
                       size_class=compose_size, trial=1, timeout_seconds=3600, target_seconds=900)
    upload_probe(state.model_copy(update={"probe_id": "p3-seed-warmup", "size_bytes": 300 * 2**20}), store, WallClock())
    compose_s, plain_s, parts = [], [], 0
    plain_file = lab_dir / "p3-upload-file.bin"
    try:  # the file is the probe's size (GiBs): gone whether the upload worked or not
        with plain_file.open("wb") as fh:
            for _ in range(size // (64 * 2**20)):
                fh.write(os.urandom(64 * 2**20))
            fh.write(os.urandom(size % (64 * 2**20)))
        s3 = lab.s3("source")
        for i in range(reps):
            composed = upload_probe(state.model_copy(update={"probe_id": f"p3-compose-{i}"}), store, WallClock(), UploadSettings()).upload
            assert composed is not None
            compose_s.append(composed.put_end - composed.put_start)
            parts = composed.parts
            store.delete_all_versions(SOURCE_BUCKET, _p3_key(route, state, f"p3-compose-{i}"))
            t0 = time.time()
            s3.upload_file(str(plain_file), SOURCE_BUCKET, "replmon-bench/bench/p3-upload-file")
            plain_s.append(time.time() - t0)
            store.delete_all_versions(SOURCE_BUCKET, "replmon-bench/bench/p3-upload-file")
    finally:
        plain_file.unlink(missing_ok=True)
    for key in (_p3_key(route, state, "p3-seed-warmup"), "replmon-bench/bench/p3-upload-file"):
        store.delete_all_versions(SOURCE_BUCKET, key)
    return {"size": compose_size, "parts": parts, "part_size": UploadSettings().part_size, "compose_s": compose_s, "upload_file_s": plain_s}


def _p3_key(route: Route, state: Any, probe_id: str) -> str:
    return probe_object_key(route.prefix, state.run_id, route.name, probe_id)


def measure_p5(samples: int = 9) -> dict[str, Any]:
    """Each handler's import time from a layer built by the layer's Makefile for this machine, with a
    clean sys.path, in ``samples`` cold interpreters; and the arm64 layer `sam build` makes, zipped and unzipped."""
    functions = sorted(p.stem for p in (ROOT / "functions").glob("*.py"))
    out: dict[str, Any] = {"interpreters": samples, "architecture": platform.machine(), "python": platform.python_version(),
                           "imports_ms": {}}
    with tempfile.TemporaryDirectory() as tmp:
        host = Path(tmp) / "host"
        subprocess.run(["make", "-s", "-C", str(ROOT / "layers" / "replmon"), "build-ReplmonLayer", f"ARTIFACTS_DIR={host}",
                        "PIP_TARGET=", f"PYTHON={sys.executable}", f"REPLMON_SRC={ROOT / 'src'}"], check=True, capture_output=True)
        for fn in functions:
            times = {}
            for trace in ("false", "true"):
                env = {"LAMBDA_TASK_ROOT": "/var/task", "AWS_LAMBDA_FUNCTION_NAME": fn, "AWS_REGION": "us-east-1",
                       "POWERTOOLS_SERVICE_NAME": "replmon", "REPLMON_TRACE_AWS_CALLS": trace, "PATH": os.environ["PATH"]}
                code = (f"import sys,time; sys.path[:0]=[{str(host / 'python')!r},{str(ROOT / 'functions')!r}]\n"
                        f"t=time.perf_counter(); import {fn}; print((time.perf_counter()-t)*1000)")
                times[trace] = [round(float(subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True,
                                                           env=env, check=True).stdout), 2) for _ in range(samples)]
            out["imports_ms"][fn] = times
        arm = Path(tmp) / "arm64"
        subprocess.run(["make", "-s", "-C", str(ROOT / "layers" / "replmon"), "build-ReplmonLayer", f"ARTIFACTS_DIR={arm}",
                        f"PYTHON={sys.executable}", f"REPLMON_SRC={ROOT / 'src'}"], check=True, capture_output=True)
        out["layer_unzipped"] = sum(f.stat().st_size for f in arm.rglob("*") if f.is_file())
        archive = Path(tmp) / "layer.zip"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for f in arm.rglob("*"):
                if f.is_file():
                    z.write(f, f.relative_to(arm))
        out["layer_zipped"] = archive.stat().st_size
    return out


def header(report: Report, title: str, subcommand: str, versions_line: str, command: str, note: str = "") -> None:
    """What every generated bench report starts with: what made it, when, where, with what."""
    report.text(f"# `make bench` figures{title}")
    report.text()
    report.text(f"Generated by `make bench` (`replmon lab {subcommand}`); do not edit by hand, run it again.{note}")
    report.text()
    report.text(f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    report.text(f"- machine: {machine()}")
    report.text(f"- versions: {versions_line}")
    report.text(f"- command: `{command}`")
    report.text(f"- commit: {measured_commit()}")


def measured_commit() -> str:
    """The commit the figures measured, asked of git, and whether the checkout differed from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30, check=True).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown (not run from a git checkout)"
    return sha + (" with uncommitted changes" if dirty else "")


def run_bench(console: Console, trials: int, sizes: str, compose_size: str, lab_dir: Path, output: Path | None = None,
              p3_reps: int = 3, p5_interpreters: int = 5) -> None:
    """Measure P1-P5 into docs/bench/bench.json, then render docs/BENCH.md and the README's bench block from it."""
    from replmon.lab import benchreport

    started = time.time()
    command = f"replmon lab bench --trials {trials} --sizes {sizes} --compose-size {compose_size}"
    doc: dict[str, Any] = {"schema": benchreport.SCHEMA, "report": "bench", "facts": benchreport.facts(command),
                           "args": {"trials": trials, "sizes": sizes, "compose_size": compose_size, "p3_reps": p3_reps,
                                    "p5_interpreters": p5_interpreters}}
    with Lab(lab_dir) as lab:
        doc["args"]["bandwidth"] = lab.bandwidth
        console.print("P1/P2/P4: the two poll policies")
        runs = [measure(lab, label, floor, sizes, trials) for label, floor in (("AWS default: 1 s, 2 %", 1.0), ("lab: 0.1 s, 2 %", 0.1))]
        doc["P1"] = {"runs": [{"label": r.label, "floor": r.floor, "probes": probes_json(r)} for r in runs], "modelled": modelled()}
        console.print(f"P3: {compose_size} by composition and by upload_file, {p3_reps} times each")
        doc["P3"] = measure_p3(lab, compose_size, Path(lab.root), p3_reps)
        left = lab.leftovers()
    console.print("P5: cold start")
    doc["P5"] = measure_p5(p5_interpreters)
    doc["left_behind"] = sum(map(len, left.values()))
    json_path = benchreport.json_path_for(output, "bench")
    benchreport.finish(doc, started, json_path, output)
    console.print(f"wrote {json_path}" + (f" and {output}" if output is not None else ""))


# ------------------------------------------------------------------------------ P6 event ingestion
EVENT_KINDS = ("replication_missed_threshold.json", "replication_after_threshold.json", "replication_failed.json")


def synthetic_events(n: int, start: float, route_bucket: str = SOURCE_BUCKET) -> list[dict[str, Any]]:
    """``n`` S3 replication event notifications on one route within an hour of ``start`` (the
    repository's sample events with their key, time and sequencer varied), the kinds a backlog brings."""
    import json as _json

    from replmon.core.keys import iso_ms

    samples = [_json.loads((ROOT / "events" / "s3" / name).read_text()) for name in EVENT_KINDS]
    out = []
    for i in range(n):
        doc = _json.loads(_json.dumps(samples[0 if i % 10 < 6 else 1 if i % 10 < 9 else 2]))
        rec = doc["Records"][0]
        rec["s3"]["bucket"]["name"] = route_bucket
        rec["s3"]["object"]["key"] = f"backlog/{i:07d}.bin"
        rec["s3"]["object"]["sequencer"] = f"{i:018X}"
        rec["eventTime"] = iso_ms(start + (i * 3400.0 / n))  # inside the hour the collector then reads
        out.append(doc)
    return out


def p6_ingest(report: Report, store: Any, deps: Deps, ingest_events: int, hour_events: int, concurrency: int) -> None:
    """Events/s through the real IngestEvents handler into DynamoDB Local from ``concurrency``
    workers (the mapping's MaximumConcurrency) in SQS batches of the mapping's BatchSize; the
    modelled first throttle per partition key (signals/ingest_budget.py); then the rest of a
    ``hour_events``-event hour through the same ingest code and the collector's read of it."""
    import json as _json
    from concurrent.futures import ThreadPoolExecutor

    from replmon import wiring
    from replmon.core.measured import measured_routes
    from replmon.entry.runtime import logger
    from replmon.local.aslrun import LambdaContext, load_handler
    from replmon.signals.event_ingest import IngestDeps, ingest, plan_ingest
    from replmon.signals.health import event_counts, route_health
    from replmon.signals.ingest_budget import BATCH_SIZE, PARTITION_WCU, first_throttle, key_rates
    from replmon.signals.s3events import parse_payload
    from replmon.signals.slo import SloSpec

    logger.setLevel("WARNING")  # as deployed (POWERTOOLS_LOG_LEVEL): one INFO line per batch would dominate
    now = time.time()
    start = now - 3500
    docs = synthetic_events(hour_events, start)
    handler = load_handler("IngestEvents")
    batches = [docs[i:min(i + BATCH_SIZE, ingest_events)] for i in range(0, ingest_events, BATCH_SIZE)]

    def one_batch(batch: list[dict[str, Any]]) -> int:
        event = {"Records": [{"messageId": f"m{id(d)}", "receiptHandle": "h", "body": _json.dumps(d), "attributes": {},
                              "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                              "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:events", "awsRegion": "us-east-1"} for d in batch]}
        out = handler(event, LambdaContext("IngestEvents"))
        return len(out.get("batchItemFailures", []))

    with wiring.injected({"IngestEvents": deps}):
        t0 = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            failures = sum(pool.map(one_batch, batches))
        ingest_s = time.perf_counter() - t0
    ingested = sum(len(b) for b in batches)
    rate = ingested / ingest_s
    # The routes as the handler read them: the registry's (core/measured.py)
    assert deps.registry is not None
    routes = [spec.to_route(None) for spec in measured_routes(deps.registry, deps.fleet.groups)]
    route = routes[0].name
    # The rest of the hour: the same ingest code (parse, plan, count behind markers), batches of
    # BatchSize from `concurrency` threads, without the SQS envelope; not part of the rate above.
    ideps = IngestDeps(store, deps.metrics, routes, deps.retention_days, deps.event_skew, slo=deps.slo)
    rest = docs[ingested:]

    def load(chunk: list[dict[str, Any]]) -> int:
        parsed = parse_payload({"Records": [d["Records"][0] for d in chunk]})
        return len(ingest([plan_ingest(p, ideps.routes, ideps.prefixes) for p in parsed], ideps, time.time()).failed)

    t1 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        load_failures = sum(pool.map(load, [rest[i:i + BATCH_SIZE] for i in range(0, len(rest), BATCH_SIZE)]))
    load_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    health = route_health(store, route, time.time(), SloSpec(), 3600.0)
    collect_s = time.perf_counter() - t2
    t3 = time.perf_counter()
    counts = event_counts(store, route, time.time(), 3600.0)
    counts_s = time.perf_counter() - t3
    hour_items = len(store.roll_items(route, "h#", "h#~"))
    measured = key_rates(max(rate, 1.0), "backlog")
    key, units = measured.hottest
    report.table(
        f"P6 event ingestion into DynamoDB Local (measured; {concurrency} concurrent IngestEvents = EventsMaxConcurrency, "
        f"SQS batches of {BATCH_SIZE} = the mapping's BatchSize, the real handler)",
        ["events", "wall s", "events/s", "batch item failures (would go to the DLQ after 5 receives)"],
        [[f"{ingested:,}", f"{ingest_s:.1f}", f"{rate:,.0f}", str(failures)]])
    report.text("DynamoDB Local never throttles, so the first throttle on AWS is modelled (signals/ingest_budget.py): one second "
                "of a backlog on one route replayed through the real batch builder and sharding functions, each transactional "
                f"action costing 2 x ceil(item KB) write units (TransactWriteItems), the hour item at its fullest; limit {PARTITION_WCU:,} "
                "write units/s per partition key (DynamoDB's partition key best practices). Before this layout every event was one ~1 KB write to the route's "
                f"one key `<route>#events`: a throttle at ~{PARTITION_WCU:,} events/s.")
    report.text()
    report.table(
        "P6 first throttle on AWS per route (modelled)",
        ["mix of kinds", "route's events/s before a key throttles", "hottest key at the measured rate (units/s)"],
        [["backlog (60 % missed threshold, 30 % after threshold, 10 % failed)", f"{first_throttle('backlog'):,}",
          f"{units:,} (`{key}`)"],
         ["worst (every event a failure: kept as an item too)", f"{first_throttle('worst'):,}",
          f"{key_rates(max(rate, 1.0), 'worst').hottest[1]:,}"]])
    report.table(
        f"P6 the collector's read of one route with a {hour_events:,}-event hour (measured)",
        ["events in the hour", "events counted in the 1 h window", "route_health s (counters + probes + RTC)",
         "event counts s", "hour items", "load s (the ingest code, batches of 100, not timed above)", "load failures"],
        [[f"{hour_events:,}", f"{sum(counts.values()):,}", f"{collect_s:.3f}", f"{counts_s:.3f}", str(hour_items),
          f"{load_s:.0f}", str(load_failures)]])
    assert sum(health.events.values()) == sum(counts.values())


def run_ingest_bench(console: Console, lab_dir: Path, output: Path | None, ingest_events: int = 10_000,
                     hour_events: int = 100_000, concurrency: int | None = None) -> None:
    """P6 with DynamoDB Local only (no MinIO): writes docs/BENCH-INGEST.md."""
    import shutil

    from replmon import wiring
    from replmon.adapters import clients
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.core.defaults import DEFAULTS
    from replmon.fleet.stack_route import spec_of_route, upsert_stack_route
    from replmon.lab.lab import TABLE, claim_directory
    from replmon.lab.servers import dynamodb_local
    from replmon.local.tables import ensure_table
    from replmon.local.template import TEMPLATE

    concurrency = concurrency or DEFAULTS.events_max_concurrency
    started = time.time()
    report = Report(console)
    header(report, " - event ingestion (P6)", "bench-ingest", ", ".join(f"{k} {v}" for k, v in versions().items()),
           f"replmon lab bench-ingest --events {ingest_events} --hour-events {hour_events}", " Modelled figures say so.")
    load = os.getloadavg()[0]
    report.text(f"- lab: DynamoDB Local 2.5.4 on loopback, sharing the machine's cores with the handler threads "
                f"(1-minute load average at the start: {load:.1f} on {os.cpu_count()} cores; other work on the machine slows every figure)")
    report.text()
    root = Path(lab_dir)
    lock = claim_directory(root)  # the lab's directory, never another's: only its own dynamodb/ is emptied
    for folder in ("dynamodb", "tmp"):  # each bench starts from an empty table (and what a killed one left goes)
        shutil.rmtree(root / folder, ignore_errors=True)
    server = dynamodb_local(root / "dynamodb", root / "logs")
    server.start()
    try:
        server.wait_ready()
        client = clients.dynamodb(clients.STORE, endpoint_url=server.url, keys=("lab", "lab"))
        ensure_table(client, TABLE, TEMPLATE)
        store = DynamoLatencyStore(TABLE, client)
        route = Route.model_validate({"name": "backlog", "source": {"bucket": SOURCE_BUCKET}, "destinations": [{"bucket": DEST_BUCKET}]})
        deps = wiring.local_deps(table=TABLE, dynamodb_endpoint=server.url, table_keys=("lab", "lab"), keys=("lab", "lab"))
        assert deps.registry is not None  # the route as the stack writes its own (fleet/stack_route.py)
        upsert_stack_route(deps.registry, spec_of_route(route, groups=deps.fleet.route_groups))
        p6_ingest(report, store, deps, ingest_events, hour_events, concurrency)
    finally:
        server.stop()
        lock.close()
    report.text(f"Bench took {time.time() - started:.0f} s.")
    if output is not None:
        write_atomic(output, report.markdown().encode(), mode=0o644)
        console.print(f"wrote {output}")
