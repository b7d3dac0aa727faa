"""Bench results as one JSON document each, and everything rendered from it.

`replmon lab bench` and `replmon lab bench-mounts` measure and write only raw figures: every
probe's interval and HEAD counts, every repetition's seconds and MiB/s, the modelled HEAD counts,
plus the facts of the run asked of git, the OS and the binaries (never typed): the commit and
whether the checkout differed from it, the machine, its load average, tool versions, the date.
That JSON (docs/bench/<report>.json) is the single source: docs/BENCH.md, docs/BENCH-MOUNTS.md and
the summary blocks (BLOCK_FILES: the README and docs pages) are rendered from it here, by one renderer, and tests/test_docs.py
renders them again and compares byte for byte.

Figures that swing between runs (timings, throughput ratios) are measured in >= 3 repetitions
and rendered as min / median / max.

    python -m replmon.lab.benchreport          # re-render every report and summary block from its JSON

A new report (P6, bench-ingest) adds a ``report`` name, its raw figures and one entry in RENDERERS
and README_BLOCKS; the facts and the header are shared.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from statistics import mean, median
from typing import Any

from replmon.core.files import write_atomic
from replmon.core.sizes import format_size
from replmon.core.stats import percentile

ROOT = Path(__file__).resolve().parents[3]  # the checkout (the bench runs from one: `make bench`)
SCHEMA = "replmon.bench/1"
#: report name -> (its Markdown page under docs/, its block's name in the page of BLOCK_FILES)
PAGES = {"bench": ("BENCH.md", "bench"), "bench-mounts": ("BENCH-MOUNTS.md", "benchmounts"),
         "bench-stall": ("BENCH-STALL.md", "benchstall"), "bench-fleet": ("BENCH-FLEET.md", "benchfleet"),
         "bench-collector": ("BENCH-COLLECTOR.md", "benchcollector")}
#: report name -> the file (from the checkout's root) that carries its summary block: the README keeps
#: the detection time (its Limits); the rest sit beside the text they support.
BLOCK_FILES = {"bench": "docs/LAB.md", "bench-mounts": "docs/ARCHITECTURE.md", "bench-stall": "README.md",
               "bench-fleet": "docs/FLEET.md", "bench-collector": "docs/FLEET.md"}
Doc = dict[str, Any]


# ------------------------------------------------------------------------------------------ facts
def _ask(*cmd: str) -> str:
    """The first line a binary prints about itself, or why there is none."""
    try:
        r = subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"not available ({type(exc).__name__})"
    out = (r.stdout.strip() or r.stderr.strip()).splitlines()
    return out[0].strip() if out else f"no answer (exit {r.returncode})"


def commit() -> dict[str, Any]:
    """The commit the figures measured, asked of git, and whether the checkout differed from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30, check=True).stdout.strip()

    try:
        return {"sha": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"sha": None, "dirty": None}


def machine() -> dict[str, Any]:
    """This machine, asked of the OS."""
    def proc(path: str, key: str) -> str | None:
        try:
            return next((line.split(":", 1)[1].strip() for line in Path(path).read_text().splitlines() if line.startswith(key)), None)
        except OSError:
            return None

    mem = proc("/proc/meminfo", "MemTotal")
    return {"cores": os.cpu_count(), "cpu": proc("/proc/cpuinfo", "model name") or platform.processor() or None,
            "memory_gib": int(mem.split()[0]) // 1024 // 1024 if mem else None, "system": platform.system(),
            "kernel": platform.release(), "architecture": platform.machine(),
            "python": f"{platform.python_implementation()} {platform.python_version()}"}


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages: other work on the machine slows every timed figure."""
    return [round(x, 2) for x in os.getloadavg()]


def versions(*, mountpoint: Path | None = None) -> dict[str, str]:
    """Tool versions asked of the modules, the binaries and the installed files (never typed)."""
    import boto3
    import botocore

    from replmon.lab.servers import cache_dir

    out = {"python": platform.python_version(), "boto3": boto3.__version__, "botocore": botocore.__version__}
    out["minio-py"] = importlib.metadata.version("minio")  # the lab's set-up: users, policies, remote target
    for name in ("minio", "toxiproxy-server"):
        stamps = sorted(p.name.removeprefix(f".{name}-") for p in (cache_dir() / "bin").glob(f".{name}-*"))
        out[name] = f"{stamps[-1] if stamps else '?'} (installed; `--version`: {_ask(str(cache_dir() / 'bin' / name), '--version')})"
    ddb = sorted(p.parent.name.removeprefix("dynamodb-local-") for p in cache_dir().glob("dynamodb-local-*/DynamoDBLocal.jar"))
    out["dynamodb-local"] = f"{ddb[-1] if ddb else '?'} (installed jar; {_ask('java', '-version')})"
    if mountpoint is not None:  # the mount bench's tools (its caller names the lab's Mountpoint binary)
        out["fio"] = _ask("fio", "--version")
        out["s3fs"] = _ask("s3fs", "--version")
        lock = (ROOT / "tools" / "mountpoint-lab" / "Cargo.lock").read_text()
        crate = re.search(r'name = "mountpoint-s3-fs"\nversion = "([^"]+)"', lock)
        out["mountpoint"] = f"{_ask(str(mountpoint), '--version')} on mountpoint-s3-fs {crate.group(1) if crate else '?'} (Cargo.lock)"
    return out


def facts(command: str, *, mountpoint: Path | None = None) -> dict[str, Any]:
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit(), "machine": machine(),
            "load_average_start": load_average(), "versions": versions(mountpoint=mountpoint), "command": command}


def finish(doc: Doc, started: float, json_path: Path, output: Path | None, *, close_facts: bool = True) -> None:
    """Close the facts (unless ``close_facts`` is False: a kept earlier run's), write the JSON, then
    render the page and the README block from it (all atomic)."""
    import time

    if close_facts:
        doc["facts"]["load_average_end"] = load_average()
        doc["facts"]["took_s"] = round(time.time() - started)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    write_atomic(json_path, text.encode(), mode=0o644)
    doc = json.loads(text)  # render what the file holds (its key order), as the test and main() do
    if output is not None:
        write_atomic(output, render(doc).encode(), mode=0o644)
        readme = output.resolve().parent.parent / BLOCK_FILES[doc["report"]]
        name = PAGES[doc["report"]][1]
        if readme.exists() and f"<!-- {name}:start -->" in readme.read_text():
            write_atomic(readme, with_block(readme.read_text(), name, README_BLOCKS[doc["report"]](doc)).encode(), mode=0o644)


def json_path_for(output: Path | None, report: str) -> Path:
    """docs/BENCH.md -> docs/bench/bench.json (next to the page it renders)."""
    return (output.parent if output is not None else ROOT / "docs") / "bench" / f"{report}.json"


# ------------------------------------------------------------------------------------------ Markdown
def table(title: str, columns: list[str], rows: list[list[str]]) -> str:
    def cell(x: str) -> str:
        return x.replace("|", "\\|")  # a pipe inside a cell would end it

    lines = [f"**{cell(title)}**", "", "| " + " | ".join(map(cell, columns)) + " |",
             "| " + " | ".join("---" if i == 0 else "---:" for i in range(len(columns))) + " |"]
    lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def fmt(x: float | None, spec: str = ".3f") -> str:
    return "-" if x is None else format(x, spec)


def mmm(xs: list[float], spec: str = ".3f") -> list[str]:
    """min, median, max as three cells."""
    return [fmt(min(xs), spec), fmt(median(xs), spec), fmt(max(xs), spec)] if xs else ["-", "-", "-"]


def header(doc: Doc, title: str, note: str = "") -> list[str]:
    f = doc["facts"]
    m, c = f["machine"], f["commit"]
    la, lb = f["load_average_start"], f.get("load_average_end", ["?"] * 3)
    sha = "unknown (not run from a git checkout)" if c["sha"] is None else c["sha"] + (" with uncommitted changes" if c["dirty"] else "")
    return [f"# `make bench` figures{title}", "",
            f"Generated by `make bench` (`replmon lab {doc['report']}`) as docs/bench/{doc['report']}.json and rendered from it "
            f"(`python -m replmon.lab.benchreport`); do not edit by hand, run it again.{note}", "",
            f"- date: {f['date']}",
            f"- machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['system']} {m['kernel']} {m['architecture']}, "
            f"{m['python']}",
            f"- load average (1/5/15 min; other work shares the cores): {' / '.join(map(str, la))} at the start, "
            f"{' / '.join(map(str, lb))} at the end",
            "- versions: " + ", ".join(f"{k} {v}" for k, v in f["versions"].items()),
            f"- command: `{f['command']}`",
            f"- commit: {sha}"]


def _text(lines: list[str]) -> str:
    return "\n".join(lines).rstrip() + "\n"


# ------------------------------------------------------------------------------------------ BENCH.md
def _by_size(probes: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for p in probes:
        out.setdefault(p["size"], []).append(p)
    return dict(sorted(out.items()))


def p1_p2_tables(doc: Doc) -> tuple[list[list[str]], list[list[str]]]:
    rows, acc = [], []
    for run in doc["P1"]["runs"]:
        for size, probes in _by_size(run["probes"]).items():
            done = [p for p in probes if p["status"] == "COMPLETED"]
            loops = {period: [p["loops"][period] for p in done if period in p["loops"]] for period in ("1.0", "0.5")}
            fin = {k: [x for x in v if x["hi"] is not None] for k, v in loops.items()}
            inside = overlap = before = after = 0
            errors: list[float] = []
            tw: list[float] = []
            for p in done:
                if p["truth"] is None or p["lo"] is None or p["hi"] is None:
                    continue
                t_lo, t_hi = p["truth"]
                tw.append(t_hi - t_lo)
                if p["lo"] <= t_lo and t_hi <= p["hi"]:
                    inside += 1
                elif t_hi < p["lo"]:
                    before += 1
                elif p["hi"] < t_lo:
                    after += 1
                else:
                    overlap += 1
                errors.append(abs((p["mid"] or 0.0) - (t_lo + t_hi) / 2))
            n = len(done)
            rows.append([run["label"], format_size(size), f"{n}/{len(probes)}",
                         fmt(mean(p["mid"] or 0.0 for p in done) if done else None),
                         fmt(mean(p["heads"] for p in done) if done else None, ".1f"),
                         *(fmt(mean(x["heads"] for x in fin[k]) if fin[k] else None, ".1f") for k in ("1.0", "0.5")),
                         fmt(max(p["width"] or 0.0 for p in done) if done else None),
                         *(fmt(max(x["hi"] - (x["lo"] or 0.0) for x in fin[k]) if fin[k] else None) for k in ("1.0", "0.5")),
                         f"{len(loops['1.0']) - len(fin['1.0'])}/{len(loops['0.5']) - len(fin['0.5'])}"])
            acc.append([run["label"], format_size(size), str(n), f"{inside}/{n}", f"{overlap}/{n}", f"{before}/{n}", f"{after}/{n}",
                        fmt(percentile(errors, 50)), fmt(percentile(errors, 90)), fmt(max(errors) if errors else None),
                        fmt(max(tw) if tw else None)])
    return rows, acc


def render_bench(doc: Doc) -> str:
    a = doc["args"]
    out = header(doc, "", " Modelled figures say so.")
    out += [f"- lab: two MinIO servers on loopback, bucket replication limited to {a['bandwidth']}/s, DynamoDB Local; "
            "each function as its own least-privilege MinIO user; everything shares the machine's cores", "",
            "## P1 HEAD requests, at equal error bound", "",
            "The adaptive policy promises an interval no wider than max(floor, 2 % of the latency). For a latency "
            "not known in advance, the fixed loop that guarantees the same bound with the AWS-default 1 s floor is a "
            "1 s loop; the published method is a 0.5 s loop (a tighter 0.5 s bound). All three poll the same probes, "
            "each from the moment the PUT's answer arrived, with the same S3 client; Cleanup waits for the loops.", ""]
    rows, acc = p1_p2_tables(doc)
    out.append(table("P1 HEADs per probe (measured: the same probes, every method from the PUT's end, same client)",
                     ["policy", "size", "completed", "latency s (mean mid)", "HEADs adaptive", "HEADs 1 s loop", "HEADs 0.5 s loop",
                      "widest adaptive s", "widest 1 s loop s", "widest 0.5 s loop s", "unfinished 1 s / 0.5 s"], rows))
    out.append(table("P2 ground truth inside the measured interval (the replica's first appearance in a 10 ms destination listing)",
                     ["policy", "size", "probes", "truth inside [lo, hi]", "truth window overlaps", "truth before lo", "truth after hi",
                      "|mid - truth| p50 s", "p90 s", "max s", "observer window max s"], acc))
    out.append(table("P1 modelled (stepping the schedules, not timing replication): HEADs until the answer after the published CRR latencies",
                     ["latency", "adaptive bound", "HEADs adaptive", "fewest for that bound", "adaptive / fewest",
                      "1 s loop (same bound)", "1 s loop / adaptive", "0.5 s loop (0.5 s bound)", "0.5 s loop / adaptive"],
                     [[f"{m['latency']} s", f"{max(1.0, 0.02 * m['latency']):.1f} s", str(m["adaptive"]), str(m["fewest"]),
                       f"{m['adaptive'] / m['fewest']:.2f}", str(m["loop_1s"]), f"{m['loop_1s'] / m['adaptive']:.1f}",
                       str(m["loop_0.5s"]), f"{m['loop_0.5s'] / m['adaptive']:.1f}"] for m in doc["P1"]["modelled"]]))
    out += ["## P2 accuracy", "",
            "The observer lists the destination every 10 ms: the replica's first appearance in a listing lies in its "
            "window (the last listing sent without it, the first answered with it; the window's width is the observer's "
            "own resolution, larger when its thread waits for a core). *Inside* means that whole window lies in "
            "[lo, hi]; *overlaps* that it neither lies inside nor misses. The two are different events: [lo, hi] "
            "brackets the source's switch to COMPLETED, the observer sees the replica in a listing; where the latency "
            "is a few tens of milliseconds (1 MiB) the observer's window is wider than the latency itself and no "
            "containment can be shown either way.", "", "## P3 and P4", ""]
    p3 = doc["P3"]
    out.append(table(f"P3 creating a {p3['size']} probe on the source (seed already present), seconds over {len(p3['compose_s'])} "
                     "repetitions", ["method", "min s", "median s", "max s", "bytes through the client"],
                     [[f"server-side composition ({p3['parts']} parts)", *mmm(p3["compose_s"], ".2f"), format_size(p3["part_size"])],
                      ["boto3 upload_file", *mmm(p3["upload_file_s"], ".2f"), p3["size"]]]))
    p4 = [[run["label"], str(len(d)), *mmm(d)] for run in doc["P1"]["runs"]
          for d in [[p["stored_after_truth"] for p in run["probes"] if p["stored_after_truth"] is not None]]]
    out.append(table("P4 replica's first appearance -> record readable in the store (s, over the probes)",
                     ["policy", "probes", "min", "median", "max"], p4))
    p5 = doc["P5"]
    out += ["## P5 cold start", ""]
    out.append(table(f"P5 cold start = handler import time from the layer, ms: min / median / max of {p5['interpreters']} cold "
                     f"interpreters (bytecode cached) on this machine ({p5['architecture']}, Python {p5['python']}; Lambda runs "
                     "the arm64 layer on python3.13)",
                     ["function", "default min", "median", "max", "trace_aws_calls=true min", "median", "max"],
                     [[fn, *mmm(t["false"], ".0f"), *mmm(t["true"], ".0f")] for fn, t in sorted(p5["imports_ms"].items())]))
    out.append(table("P5 the Lambda layer (python3.13 arm64 wheels, as `sam build` makes it)",
                     ["layer", "zipped MiB", "unzipped MiB", "Lambda's limit (unzipped, all layers)"],
                     [["ReplmonLayer", f"{p5['layer_zipped'] / 2**20:.1f}", f"{p5['layer_unzipped'] / 2**20:.1f}", "250"]]))
    out.append(f"Left behind: {doc['left_behind']} probe objects/versions/uploads. Bench took {doc['facts']['took_s']} s.")
    return _text(out)


def readme_bench(doc: Doc) -> str:
    model = {m["latency"]: m for m in doc["P1"]["modelled"]}
    far, mid = model[1800], model[900]
    rows, acc = p1_p2_tables(doc)
    aws, lab = doc["P1"]["runs"][0]["label"], doc["P1"]["runs"][1]["label"]
    big = format_size(max(p["size"] for p in doc["P1"]["runs"][0]["probes"]))
    small = format_size(min(p["size"] for p in doc["P1"]["runs"][0]["probes"]))
    row = {(r[0], r[1]): r for r in rows}
    arow = {(r[0], r[1]): r for r in acc}
    a_big, l_big = row[(aws, big)], row[(lab, big)]
    lat_max = max(float(r[3]) for r in rows if r[3] != "-")
    def outside(r: list[str]) -> str:  # before lo + after hi: the only outcome that shows a wrong interval
        n = r[5].split("/")[1]
        return f"{int(r[5].split('/')[0]) + int(r[6].split('/')[0])}/{n}"

    inside = "; ".join(f"at {r[1]} {r[3]} inside, {r[4]} overlapping, {outside(r)} outside" for r in acc
                       if r[0] == aws and r[1] != small)
    p5 = doc["P5"]
    med = {k: [median(t[k]) for t in p5["imports_ms"].values()] for k in ("false", "true")}
    p3 = doc["P3"]
    return _text([
        f"Measured at commit {doc['facts']['commit']['sha'][:12]} on {doc['facts']['date']} "
        f"(load average {doc['facts']['load_average_start'][0]} on {doc['facts']['machine']['cores']} cores):", "",
        f"- **At equal bound** (modelled, stepping each schedule at the published CRR latencies; P1): for a 1800 s "
        f"replication the adaptive policy sends **{far['adaptive']}** HEADs for its {0.02 * 1800:.1f} s bound, "
        f"{far['adaptive'] / far['fewest']:.2f} times the fewest any schedule can send for that bound ({far['fewest']}). A 1 s "
        f"loop, the fixed loop that guarantees the same bound when the latency is not known in advance, sends "
        f"{far['loop_1s']} ({far['loop_1s'] / far['adaptive']:.1f} times as many); the published 0.5 s loop sends "
        f"{far['loop_0.5s']} ({far['loop_0.5s'] / far['adaptive']:.1f} times) for a tighter 0.5 s bound. At 900 s: "
        f"{mid['adaptive']} against {mid['loop_1s']} ({mid['loop_1s'] / mid['adaptive']:.1f} times).",
        f"- **Measured in the lab** (the same probes polled by all three methods from the PUT's end; latencies up to "
        f"{lat_max:.3f} s, where the adaptive policy with a 1 s floor *is* a 1 s loop): at {big} {a_big[4]} HEADs against "
        f"{a_big[5]} for a 1 s loop and {a_big[6]} for a 0.5 s loop; widest interval {a_big[7]} s. With the lab's 0.1 s "
        f"floor: {l_big[4]} HEADs, widest interval {l_big[7]} s.",
        f"- **Accuracy** (P2, with the AWS defaults): the replica's first appearance in a destination listing taken "
        f"every 10 ms, against [lo, hi]: {inside} (overlapping: the observer's window is wider than the interval, "
        f"so neither containment nor a miss can be shown); at {small} the observer's own window "
        f"({arow[(aws, small)][10]} s) is wider than the latency, so no containment can be shown either way.",
        f"- **Probe creation** (P3, {len(p3['compose_s'])} repetitions, min / median / max): a {p3['size']} probe by "
        f"server-side composition {' / '.join(mmm(p3['compose_s'], '.2f'))} s, by boto3 upload_file "
        f"{' / '.join(mmm(p3['upload_file_s'], '.2f'))} s.",
        f"- **Cold start** (P5: handler import time from the layer on this machine, {p5['architecture']}, Python "
        f"{p5['python']}, medians of {p5['interpreters']} cold interpreters): {min(med['false']):.0f} - "
        f"{max(med['false']):.0f} ms, {min(med['true']):.0f} - {max(med['true']):.0f} ms with ExpertSettings trace_aws_calls=true (the "
        f"X-Ray SDK); the arm64 layer is {p5['layer_zipped'] / 2**20:.1f} MiB zipped, {p5['layer_unzipped'] / 2**20:.1f} MiB "
        "unzipped."])


# ------------------------------------------------------------------------------------------ BENCH-MOUNTS.md
OVERHEAD_GOAL = 1.05


def m1_ratios(doc: Doc) -> list[float]:
    return [r["runner_s"] / r["bare_s"] for r in doc["M1"]["reps"]]


def m2_rows(doc: Doc) -> list[tuple[str, str, str, list[float], list[float], list[float]]]:
    """(preset, scale, job, Mountpoint MiB/s per rep, s3fs MiB/s per rep, ratio per rep), jobs both read in every rep."""
    out = []
    for key in doc["M2"]["reps"][0]:
        preset, scale = key.split("/")
        reps = [rep[key] for rep in doc["M2"]["reps"]]
        for job in reps[0]["mountpoint"]:
            if all(rep["s3fs"].get(job) and rep["mountpoint"].get(job) is not None for rep in reps):
                mp = [rep["mountpoint"][job] / 2**20 for rep in reps]
                s3 = [rep["s3fs"][job] / 2**20 for rep in reps]
                out.append((preset, scale, job, mp, s3, [a / b for a, b in zip(mp, s3, strict=True)]))
    return out


def m3_drops(doc: Doc) -> tuple[dict[str, list[float]], list[float]]:
    """Per job the drop 1 - (+RTT MiB/s) / (plain MiB/s) in each rep, and each rep's mean drop."""
    per_job: dict[str, list[float]] = {}
    means = []
    for rep in doc["M2"]["reps"]:
        runs = rep["mountpoint-xregion/small"]
        drops = {j: 1 - runs["mountpoint-xregion"][j] / a for j, a in runs["mountpoint"].items()
                 if a and runs["mountpoint-xregion"].get(j) is not None}
        for j, d in drops.items():
            per_job.setdefault(j, []).append(d)
        means.append(mean(drops.values()))
    return per_job, means


def render_mounts(doc: Doc) -> str:
    out = header(doc, ": mount baselines", "")
    out += ["- lab: one MinIO on loopback; FUSE mounts on this machine; everything shares its cores, so "
            "absolute MiB/s are this machine's, not AWS's", "", "## M1 runner overhead", ""]
    m1 = doc["M1"]
    reps = m1["reps"]
    ratios = m1_ratios(doc)
    out.append(table(f"M1 runner overhead: {m1['preset']} at scale {m1['scale']} on a local directory ({len(reps)} alternating "
                     "repetitions)", ["repetition", "runner s", "of which lay out s", "of which fio s", "bare fio s", "ratio"],
                     [[str(i + 1), f"{r['runner_s']:.2f}", f"{r['layout_s']:.2f}", f"{r['fio_s']:.2f}", f"{r['bare_s']:.2f}",
                       f"{x:.3f}"] for i, (r, x) in enumerate(zip(reps, ratios, strict=True))]
                     + [[stat, f"{f([r['runner_s'] for r in reps]):.2f}", f"{f([r['layout_s'] for r in reps]):.2f}",
                         f"{f([r['fio_s'] for r in reps]):.2f}", f"{f([r['bare_s'] for r in reps]):.2f}", f"{f(ratios):.3f}"]
                        for stat, f in (("min", min), ("median", median), ("max", max))]))
    med = median(ratios)
    out += [f"Runner / bare fio per repetition: min {min(ratios):.3f}x, median **{med:.3f}x**, max {max(ratios):.3f}x "
            f"(goal <= {OVERHEAD_GOAL}x on the median: {'met' if med <= OVERHEAD_GOAL else 'NOT met'}). The runner lays out "
            "read jobs' files itself, four files at once, each by one sequential writer (every target, Mountpoint included, "
            "can take such a file; it keeps them for the next run, but here each repetition starts without them, as bare "
            "fio does), and then starts fio once per group of jobs (a new fio only where a job reads what an earlier one "
            "wrote); bare fio runs the whole job file once and lays out its own files. The rest of the runner's time is "
            "parsing, the knee search, the upload to the sink and removing the files.", "",
            "## M2 Mountpoint vs s3fs, M3 the added round trip", ""]
    n = len(doc["M2"]["reps"])
    out.append(table(f"M2 reads, lab Mountpoint vs s3fs on the same MinIO bucket and machine (MiB/s: median of {n} repetitions; "
                     "ratio: min / median / max)",
                     ["preset", "scale", "job/direction", "Mountpoint", "s3fs", "ratio min", "ratio median", "ratio max"],
                     [[p, s, j, f"{median(mp):.1f}", f"{median(s3):.1f}", *mmm(r, ".2f")] for p, s, j, mp, s3, r in m2_rows(doc)]))
    out += ["Both are FUSE clients; they differ in what they keep. s3fs stages an open object in a local temporary "
            "file, filled by parallel ranged GETs, and serves repeated and random reads from it and the page cache; "
            "Mountpoint streams ranged GETs through its prefetcher and, in this build (no `--cache`), keeps no data of its "
            "own and answers each open without FOPEN_KEEP_CACHE, so the kernel drops the file's cached pages at every open. "
            "The single-thread sequential rows (`T1`, `seq_read`) are the closest to like for like. The ratios swing "
            "between repetitions (the min / max columns): read one as a range, not a constant.", ""]
    rtt = doc["M2"]["rtt_ms"]
    per_job, means = m3_drops(doc)
    plain = {j: [rep["mountpoint-xregion/small"]["mountpoint"][j] / 2**20 for rep in doc["M2"]["reps"]] for j in per_job}
    far = {j: [rep["mountpoint-xregion/small"]["mountpoint-xregion"][j] / 2**20 for rep in doc["M2"]["reps"]] for j in per_job}
    out.append(table(f"M3 Mountpoint with +{rtt} ms round trip (Toxiproxy, half each way) vs the plain mount (MiB/s: median of {n}; "
                     "drop: min / median / max)", ["job/direction", "plain", f"+{rtt} ms", "drop min", "drop median", "drop max"],
                     [[j, f"{median(plain[j]):.1f}", f"{median(far[j]):.1f}", *mmm(d, ".0%")] for j, d in per_job.items()]
                     + [["mean over the jobs", "", "", *mmm(means, ".0%")]]))
    out += [f"Study (R2): Ohio -> Tokyo about 70 % below Tokyo -> Tokyo on the same jobs; the lab's mean drop at +{rtt} ms is "
            f"{median(means):.0%} (median of {n} repetitions; {min(means):.0%} - {max(means):.0%}). Loopback has no bandwidth "
            "limit, so only the round trip differs.", "", f"Bench took {doc['facts']['took_s']} s."]
    return _text(out)


def readme_mounts(doc: Doc) -> str:
    m1, reps, ratios = doc["M1"], doc["M1"]["reps"], m1_ratios(doc)
    n = len(doc["M2"]["reps"])
    per_job, means = m3_drops(doc)
    drops = {j: median(d) for j, d in per_job.items()}
    t1 = [r for r in m2_rows(doc) if "Q128T1-" in r[2]]
    seq = next(r for r in m2_rows(doc) if r[2] == "seq_read/read")

    def rng(xs: list[float]) -> str:
        return " / ".join(mmm(xs, ".2f"))

    named = [j for j in drops if "Q128T1-500M" in j] + [j for j in drops if "Q128T16-500M" in j] or list(drops)[:2]
    return _text([
        f"Measured at commit {doc['facts']['commit']['sha'][:12]} on {doc['facts']['date']} "
        f"(load average {doc['facts']['load_average_start'][0]} on {doc['facts']['machine']['cores']} cores):", "",
        f"- **Runner overhead** (M1, `{m1['preset']}` at scale {m1['scale']} on a local directory, {len(reps)} alternating "
        f"repetitions, each starting without a layout): runner / bare fio with the same job file min {min(ratios):.3f}, "
        f"median **{median(ratios):.3f}**, max {max(ratios):.3f} times (goal {OVERHEAD_GOAL}x on the median, "
        f"{'met' if median(ratios) <= OVERHEAD_GOAL else 'NOT met'}; the runner lays out the read files four at a time in "
        f"{min(r['layout_s'] for r in reps):.2f} - {max(r['layout_s'] for r in reps):.2f} s).",
        f"- **Cross-region drop** (M3, Toxiproxy +{doc['M2']['rtt_ms']} ms round trip, about Ohio - Tokyo, half each way, on "
        f"the lab's Mountpoint; {n} repetitions): mean over the SEQ8M jobs at scale small min {min(means):.0%}, median "
        f"**{median(means):.0%}**, max {max(means):.0%} ("
        + ", ".join(f"{drops[j]:.0%} for {j.split('/')[0]}" for j in named)
        + ", medians), next to the study's ~70 % (R2); qualitative: loopback has no bandwidth limit.",
        f"- **Mountpoint vs s3fs** (M2, single-thread sequential reads on the same MinIO bucket, min / median / max of {n} "
        "repetitions): " + "; ".join(f"{r[2].split('/')[0]} {rng(r[5])}" for r in t1)
        + f"; `seq_read` {rng(seq[5])} (s3fs serves from its local staging file and the page cache; see the report for "
          "every job)."])


# ------------------------------------------------------------------------------------------ stall detection
def _mmm_periods(xs: list[float], period: float) -> list[str]:
    return [f"{x:.1f} s ({x / period:.1f} T)" for x in (min(xs), median(xs), max(xs))] if xs else ["-", "-", "-"]


def render_stall(doc: Doc) -> str:
    st = doc["stall"]
    T = st["lab_period_s"]
    reps = st["repetitions"]
    lines = header(doc, " - stall detection", " Lab figures are measured; the defaults' figures are simulated through "
                   "signals/stall.py and say so; cost is modelled.")
    lines += ["", f"The real Heartbeat function against the lab's MinIO pair (its own least-privilege user) and DynamoDB Local; "
              f"`HeartbeatSeconds` = {T} s and `StallFloorSeconds` = {st['lab_floor_s']} s in the lab (T = one heartbeat period); "
              f"the fault is Toxiproxy's `{reps[0]['fault'] if reps else '-'}` on the replication path. ALARM/OK: the template's "
              "`RouteStalledG00Alarm` (Metrics Insights, Period 60 s) evaluated by local/insights.py on the StallSeconds the function "
              f"emitted, lab time stretched by 60 / {T} (one lab period = one alarm minute). Recovery includes MinIO's own "
              "health check of the healed target.", ""]
    rows = [[str(i + 1), fmt(r["stalled_s"], ".1f"), fmt(r["alarm_s"], ".1f"), fmt(r["healthy_s"], ".1f"), fmt(r["alarm_ok_s"], ".1f"),
             str(r["before_fault_transitions"]), " / ".join(r["messages"]) or "-"] for i, r in enumerate(reps)]
    lines += [table("Each fault (seconds after the fault, then after healing)",
                    ["#", "STALLED", "ALARM", "HEALTHY", "OK", "stall points before the fault", "messages"], rows)]

    def col(key: str) -> list[float]:
        return [r[key] for r in reps if r[key] is not None]

    summary = [[name, f"{len(col(k))} of {len(reps)}", *_mmm_periods(col(k), T)] for name, k in
               (("fault -> STALLED", "stalled_s"), ("fault -> ALARM", "alarm_s"), ("heal -> HEALTHY", "healthy_s"), ("heal -> OK", "alarm_ok_s"))]
    lines += ["", table(f"Lab, min / median / max (T = {T} s)", ["", "seen", "min", "median", "max"], summary)]
    if len(col("stalled_s")) > 1 and max(col("stalled_s")) - min(col("stalled_s")) < 0.1 * T:
        lines += ["", f"These faults fell at nearly the same phase of the heartbeat schedule (STALLED spread "
                  f"{max(col('stalled_s')) - min(col('stalled_s')):.1f} s): they measure one point of the 2E .. 2E + T range; "
                  "the simulation below covers every phase."]
    d = st["simulated"]["defaults"]
    lines += ["", table(f"The deployed defaults, simulated (HeartbeatSeconds {d['period_s']} s, StallFloorSeconds {d['floor_s']} s; "
                        f"{len(d['stalled_s'])} faults at random phases; heartbeat latencies drawn from the lab's; the alarm at the first "
                        "Metrics Insights evaluation minute after the point, CloudWatch's ingestion delay not modelled: none is documented)",
                        ["", "min", "median", "max"],
                        [["fault -> STALLED", *mmm(d["stalled_s"], ".1f")], ["fault -> ALARM", *mmm(d["alarm_s"], ".1f")]])]
    lab_sim = st["simulated"]["lab"]["stalled_s"]
    lines += ["", f"The same simulation at the lab's cadence: fault -> STALLED {' / '.join(mmm(lab_sim, '.1f'))} s (min / median / max), "
              "to compare with the measured row above."]
    h, f30 = st["healthy"], st["simulated"]["false_alarms_30d"]
    lines += ["", table("False alarms", ["run", "heartbeats", "STALLED", "alarms"],
                        [[f"lab, healthy, {h['periods']} periods ({h['seconds']} s; as many heartbeats as {h['periods']} min at the defaults)",
                          str(h["heartbeats"]), str(h["stalled"]), str(h["alarms"])],
                         [f"simulated, {f30['days']:g} days at the defaults, the lab's latencies ({f30['confirmations']} confirmation heartbeats)",
                          str(f30["heartbeats"]), str(f30["stalled"]), "-"],
                         *([[f"simulated, {ht['days']:g} days at the defaults, a modelled heavy tail: 0.1 % of heartbeats late "
                             f"(log-normal, median 2 s, q0.999 = the 20 s floor; {ht['confirmations']} confirmation heartbeats)",
                             str(ht["heartbeats"]), str(ht["stalled"]), "-"]] if (ht := st["simulated"].get("false_alarms_30d_heavy_tail")) else [])])]
    lat = h["latency_s"]
    if lat:
        lines += ["", f"Lab heartbeat latency (hi, s) over the healthy run: min {min(lat):.3f}, median {median(lat):.3f}, max {max(lat):.3f} "
                  f"({len(lat)} completed)."]
    lines += render_detection(doc.get("detection"))
    c = st.get("cost")
    if c:
        lines += ["", f"Cost (modelled, `replmon cost --routes`, list prices of {c['as_of']}): heartbeats every {c['heartbeat_seconds']} s add "
                  f"${c['heartbeats_usd']:.2f} per route a month in S3, DynamoDB and logs, ${c['with_metric_and_alarm_usd']:.2f} with the "
                  f"StallSeconds metric and RouteStalled's share; the probe schedule ({c['probe_classes']}) costs ${c['probe_schedule_usd']:.2f} "
                  "per route a month beside it."]
    return _text(lines)


def render_detection(d: dict[str, Any] | None) -> list[str]:
    """The detection at each learned E (lab/stalldetect.py), with its own run's facts."""
    if not d:
        return []
    f, m = d["facts"], d["facts"]["machine"]
    la, lb = f["load_average_start"], f.get("load_average_end") or ["?"] * 3
    lines = ["", "## Detection at a learned expectation E (the deployed stack's wiring, time stepped)", "",
             f"- date: {f['date']}",
             f"- machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, {m['system']} {m['kernel']} {m['architecture']}, {m['python']}",
             f"- load average: {' / '.join(map(str, la))} at the start, {' / '.join(map(str, lb))} at the end; {f.get('took_s', '?')} s of real time",
             f"- command: `{f['command']}`", "",
             "local/stack.py's DeployedStack in moto: the Heartbeat function through its handler and the template's environment "
             f"(HeartbeatSeconds T = {d['period_s']} s), E learned by it from the route's 72 hour items (seeded with heartbeats whose "
             "q0.999 is E; E = 20 s is the StallFloorSeconds floor, nothing seeded), its StallSeconds EMF, the template's "
             f"`{d['alarm']}` evaluated each minute and the FleetPagesG00Rule EventBridge rule to the page topic. "
             f"Time is **{d['clock']}**: the figures are deployment seconds, not real ones. IAM: {d['iam']}. "
             "Each fault falls at a random point of the Heartbeat's minute; STALLED = the Heartbeat's evidence message, "
             "page = the contributor's ALARM on the page topic (EventBridge delivery is instant here; AWS documents no bound). "
             "Bound = T + 2 (E + 15 s) + 60 s (docs/SEMANTICS.md, Stalls). STALLED may come before 2E: the probe schedule "
             "(every 5 minutes here) leaves a probe in flight when replication stops, and a late probe and a late heartbeat "
             "stall a route (signals/stall.py).", ""]
    rows = []
    for run in d["runs"]:
        reps = run["reps"]
        stalled = [r["stalled_s"] for r in reps if r["stalled_s"] is not None]
        paged = [r["page_s"] for r in reps if r["page_s"] is not None]
        within = sum(1 for r in reps if r["page_s"] is not None and r["page_s"] <= run["bound_s"])
        rows.append([f"{run['expect_s']:g}", f"{fmt(run['learned_expect_s'], 'g')} ({run['learned_basis'] or '-'})", str(len(reps)),
                     " / ".join(mmm(stalled, ".1f")), " / ".join(mmm(paged, ".1f")), f"{run['bound_s']:g}",
                     f"{within} of {len(reps)}", " / ".join(str(r["pages"]) for r in reps),
                     " / ".join(fmt(r["ok_after_heal_s"], ".0f") for r in reps)])
    lines += [table("Fault -> STALLED and -> page (s; min / median / max)",
                    ["E (s)", "learned E (basis)", "faults", "fault -> STALLED", "fault -> page", "bound", "paged within bound",
                     "pages per fault", "heal -> OK (s)"], rows)]
    return lines


def readme_stall(doc: Doc) -> str:
    st = doc["stall"]
    T = st["lab_period_s"]
    reps = st["repetitions"]
    d = st["simulated"]["defaults"]
    stalled = [r["stalled_s"] for r in reps if r["stalled_s"] is not None]
    alarm = [r["alarm_s"] for r in reps if r["alarm_s"] is not None]
    h, f30 = st["healthy"], st["simulated"]["false_alarms_30d"]
    out = [f"Measured {doc['facts']['date']} in the lab (docs/BENCH-STALL.md; T = {T} s there): fault -> STALLED "
           f"{' / '.join(mmm(stalled, '.1f'))} s, -> RouteStalled ALARM {' / '.join(mmm(alarm, '.1f'))} s (min / median / max of "
           f"{len(reps)} `{reps[0]['fault'] if reps else '-'}` faults); simulated at the defaults (60 s, 20 s floor): STALLED "
           f"{' / '.join(mmm(d['stalled_s'], '.0f'))} s, ALARM {' / '.join(mmm(d['alarm_s'], '.0f'))} s after the fault. False alarms: "
           f"{h['stalled']} in a healthy lab run of {h['heartbeats']} heartbeats, {f30['stalled']} in {f30['days']:g} simulated days."]
    # No cost here: the README's cost block is `replmon cost` now; a bench's modelled cost is of its day (docs/BENCH-STALL.md).
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ the lab fleet
def render_fleet(doc: Doc) -> str:
    from replmon.lab.fleetlab import named_only
    from replmon.lab.stallbench import ALARM

    lines = header(doc, " - the lab fleet", " Measured in the lab.")
    if "heartbeat_scale" in doc:
        lines += heartbeat_scale_lines(doc["heartbeat_scale"])
    if "fleet" not in doc:
        return _text(lines)
    fl = doc["fleet"]
    reps = fl["repetitions"]
    T = fl["period_s"]
    kept = doc.get("fleet_facts")
    lines += ["", "## Detection in the lab fleet (time-scaled: see below)", ""]
    if kept and kept.get("date") != doc["facts"]["date"]:
        lines += [f"Measured {kept['date']} by `{kept['command']}` (commit {(kept['commit'].get('sha') or '?')[:7]}, "
                  f"{kept['machine']['cores']} cores, load average {' / '.join(map(str, kept['load_average_start']))} at the start); "
                  "kept from that run (this run measured no fault).", ""]
    not_in = [x for x in fl["survey"] if x["reason"] != "OK" or not x["bucket"].startswith("app-")]
    lines += ["", f"{fl['routes']} replicated bucket pairs on the lab's MinIO pair, found by the inventory's `survey_account` (lab/fleetlab.py), "
              "each replicating through its own Toxiproxy listener; the real Heartbeat function puts and polls a heartbeat on every route "
              f"each period (one invocation for the group, as the member account's prober; `HeartbeatSeconds` = {T} s, `StallFloorSeconds` = "
              f"{fl['floor_s']} s); each fault is Toxiproxy's `{reps[0]['fault'] if reps else '-'}` on one route's listener, drawn at random. "
              f"ALARM / OK: the template's `{ALARM}` (Metrics Insights, `GROUP BY Route`, Period 60 s) evaluated by local/insights.py "
              f"on the StallSeconds the function emitted, lab time stretched by 60 / {T} (one lab period = one alarm minute).", "",
              "Buckets the inventory read that are not in the fleet: "
              + "; ".join(f"`{x['bucket']}` {x['reason']}" for x in not_in) + ".", "",
              table("Each fault (seconds after the fault, then after healing)",
                    ["#", "faulted route", "contributors", "STALLED", "ALARM", "routes in ALARM", "other routes stalled", "HEALTHY", "OK",
                     "left behind", "passed"],
                    [[str(i + 1), r["faulted_route"], str(r["contributors"]), fmt(r["stalled_s"], ".1f"), fmt(r["alarm_s"], ".1f"),
                      ", ".join(r["in_alarm"]) or "none", ", ".join(r["other_routes_stalled"]) or "none", fmt(r["healthy_s"], ".1f"),
                      fmt(r["alarm_ok_s"], ".1f"), str(sum(len(v) for v in r["left_behind"].values())), "yes" if named_only(r) else "NO"]
                     for i, r in enumerate(reps)]),
              "", "Passed: every route a contributor; nothing stalled or in ALARM before the fault; the faulted route STALLED, in ALARM "
              "and both recovered after healing; no other contributor in ALARM and no other route stalled; the Heartbeat raised or "
              "answered no error and counted no failed HEAD, PUT or delete; nothing left under the probe prefix of any fleet bucket "
              "(lab/fleetlab.py `named_only`)."]
    return _text(lines)


def heartbeat_scale_lines(h: Mapping[str, Any]) -> list[str]:
    from replmon.local.template import load_template

    memory = int(load_template()["Resources"]["HeartbeatFunction"]["Properties"]["MemorySize"])
    rows = h["invocations"]
    worst = max(r["wall_s"] for r in rows)
    return ["", "## A full group: the Heartbeat at its cap", "",
            f"The Heartbeat handler (one invocation, `{{\"group\": \"g00\"}}`, as its schedule sends it every minute) over {h['routes']} "
            f"registry routes in one group (lab/heartbeatscale.py): each route the lab's MinIO pair under its own name, so its own "
            f"heartbeat key, with real replication; {h['workers']} routes at a time (probe/heartbeat.py); `HeartbeatSeconds` = "
            f"{h['heartbeat_seconds']} s. The cap on heartbeat routes in a group is {h['group_cap']} (fleet/caps.py), against the "
            f"work deadline of {h['work_seconds']:.0f} s.", "",
            table("Each invocation", ["#", "wall s", "CPU s (this process)", "routes served", "heartbeats pending at the end", "errors",
                                      "stall phases"],
                  [[str(r["invocation"]), f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}", str(r["routes_served"]), str(r["pending_at_end"]),
                    str(r["errors"]), ", ".join(f"{k} {v}" for k, v in sorted(r["phases"].items()))] for r in rows]), "",
            f"Slowest invocation: {worst:.1f} s wall here ({'within' if worst <= h['work_seconds'] else 'PAST'} the "
            f"{h['work_seconds']:.0f} s deadline), on this host's shared cores (the load average above): the servers (MinIO, DynamoDB "
            f"Local) and the function share them. The function's own CPU: {rows[-1]['cpu_s']:.1f} s a steady invocation "
            f"({rows[-1]['cpu_s'] / max(1, rows[-1]['routes_served']) * 1000:.0f} ms a route), {rows[0]['cpu_s']:.1f} s the first (a cold "
            f"start: every route's state and expectation loaded). On Lambda CPU comes with memory (1,769 MB = one vCPU): at the "
            f"template's {memory} MB the steady invocation's CPU takes {rows[-1]['cpu_s'] * 1769 / memory:.1f} s "
            f"({'within' if rows[-1]['cpu_s'] * 1769 / memory <= h['work_seconds'] else 'PAST'} the deadline; modelled from the measured "
            "CPU seconds, not measured on Lambda). These are the figures `replmon cost` prices the Heartbeat's invocations with "
            "(cost/fleet.py `heartbeat_invocation_line`)."]


def readme_fleet(doc: Doc) -> str:
    from replmon.lab.fleetlab import named_only

    if "fleet" not in doc:
        h = doc["heartbeat_scale"]
        return (f"Measured {doc['facts']['date']} (docs/BENCH-FLEET.md): the Heartbeat over {h['routes']} routes in one group, "
                f"{max(r['wall_s'] for r in h['invocations']):.1f} s an invocation at most (deadline {h['work_seconds']:.0f} s).\n")
    fl = doc["fleet"]
    reps = fl["repetitions"]
    def col(key: str) -> str:
        return " / ".join(mmm([r[key] for r in reps if r[key] is not None], ".1f"))

    return (f"Measured {doc['facts']['date']} (docs/BENCH-FLEET.md, commit {doc['facts']['commit']['sha'][:7]}): in a lab fleet of "
            f"{fl['routes']} routes with heartbeats every {fl['period_s']} s, the fleet alarm named the faulted route and no other in "
            f"{sum(1 for r in reps if named_only(r))} of {len(reps)} `{reps[0]['fault'] if reps else '-'}` faults: STALLED {col('stalled_s')} s "
            f"and ALARM {col('alarm_s')} s after the fault, OK {col('alarm_ok_s')} s after healing (min / median / max).\n")


# ------------------------------------------------------------------------------------------ the collector
def render_collector(doc: Doc) -> str:
    c = doc["collector"]
    g = c["goal"]
    lines = header(doc, " - the collector at N routes", " Measured; CloudWatch is a stand-in that counts calls (see below).")
    lines += ["", f"The CollectSignals handler with the environment template.yaml gives it (lab/collectorbench.py "
              f"`function_environment`: DynamoDB Local and the lab's table in place of the stack's) over {c['routes']:,} registry routes, "
              f"{c['workers']} routes read at a time (signals/collector.py). Loaded: {c['loaded']['what']} "
              f"({c['loaded']['items']:,} items, {c['loaded']['items_per_route']} a route, in {c['loaded']['seconds']} s). "
              "Items read: DynamoDB's own `ScannedCount` of every Query and one per GetItem that found its item, per route by "
              "partition key. GetMetricData: a stand-in answers every query with no points (an idle route).",
              "", "Phases: *steady* (the period cache current); *late* (a record written 3 days late on every route: its counts ride on "
              "the period item, no rebuild); *cold* (every route's period cache deleted: each folds its "
              f"{c['catch_up_hours']} oldest hour items a run, and publishes its period attainment once caught up).",
              "", table("Per collector run (CPU s: the handler's process, the client side of every call)",
                        ["phase", "wall s", "CPU s", "routes", "DynamoDB calls", "items read", "items per route (max / mean)",
                         "GetMetricData calls", "queries"],
                        [[r["phase"], f"{r['wall_s']:.3f}", fmt(r.get("cpu_s"), ".1f"), str(r["routes_evaluated"]), str(r["dynamodb_calls"]), str(r["items_read"]),
                          f"{r['items_read_per_route']['max']} / {r['items_read_per_route']['mean']}", str(r["get_metric_data_calls"]),
                          str(r["metric_queries"])] for r in c["runs"]])]
    worst_wall = max(r["wall_s"] for r in c["runs"])
    worst_items = max(r["items_read_per_route"]["max"] for r in c["runs"])
    met = worst_wall <= g["wall_s"] and worst_items <= g["items_read_per_route"] and c["routes"] >= g["routes"]
    lines += ["", f"Goal at {g['routes']:,} routes: at most {g['wall_s']} s and {g['items_read_per_route']} items read per route, "
              f"steady and cold. Measured at {c['routes']:,} routes: at most {worst_wall:.1f} s and {worst_items} items read by any "
              f"route in any phase ({'within' if met else 'NOT within'} the goal; the function's timeout is {c['function_timeout_s']} s). "
              "The wall time is DynamoDB Local on this host's shared cores, not DynamoDB from Lambda."]
    return _text(lines)


def readme_collector(doc: Doc) -> str:
    c = doc["collector"]
    runs = {r["phase"]: r for r in c["runs"]}
    return (f"Measured {doc['facts']['date']} (docs/BENCH-COLLECTOR.md, commit {doc['facts']['commit']['sha'][:7]}): the CollectSignals "
            f"handler over {c['routes']:,} routes, steady {c['steady_wall_s'][1]:.1f} s (median of {c['repeats']}), after a late write "
            f"{runs['late']['wall_s']:.1f} s, cold {runs['cold']['wall_s']:.1f} s; at most "
            f"{max(r['items_read_per_route']['max'] for r in c['runs'])} items read per route.\n")


# ------------------------------------------------------------------------------------------ one entry point
RENDERERS: dict[str, Callable[[Doc], str]] = {"bench": render_bench, "bench-mounts": render_mounts, "bench-stall": render_stall,
                                             "bench-fleet": render_fleet, "bench-collector": render_collector}
README_BLOCKS: dict[str, Callable[[Doc], str]] = {"bench": readme_bench, "bench-mounts": readme_mounts, "bench-stall": readme_stall,
                                                  "bench-fleet": readme_fleet, "bench-collector": readme_collector}


def render(doc: Doc) -> str:
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} document: {doc.get('schema')!r}")
    return RENDERERS[doc["report"]](doc)


def block(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    if not m:
        raise ValueError(f"no {name} block")
    return m.group(1)


def with_block(text: str, name: str, body: str) -> str:
    block(text, name)
    return re.sub(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", lambda m: m.group(1) + body + m.group(2), text, flags=re.S)


def load(report: str, root: Path = ROOT) -> Doc:
    doc: Doc = json.loads((root / "docs" / "bench" / f"{report}.json").read_text())
    return doc


def main(root: Path = ROOT) -> None:
    """Re-render every bench page and summary block (BLOCK_FILES) from its JSON (after a merge, or a renderer change)."""
    for report, (page, name) in PAGES.items():
        path = root / "docs" / "bench" / f"{report}.json"
        if not path.exists():
            continue
        doc = load(report, root)
        write_atomic(root / "docs" / page, render(doc).encode(), mode=0o644)
        target = root / BLOCK_FILES[report]
        write_atomic(target, with_block(target.read_text(), name, README_BLOCKS[report](doc)).encode(), mode=0o644)
        print(f"rendered docs/{page} and {BLOCK_FILES[report]}'s {name} block from docs/bench/{report}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
