"""Mount baselines on real code: presets through the real runner on the lab's Mountpoint build
(Mountpoint for S3's own crates), on s3fs and on a local directory, against the lab's MinIO; the
results go through the ingest code into DynamoDB Local, the study's report is rebuilt from there
(`replmon fio report` against the lab's table), and nothing stays mounted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replmon.lab.lab import TABLE, Lab
from replmon.lab.mounts import (
    BURST_MIBPS,
    RESULTS_BUCKET,
    SUSTAINED_MIBPS,
    TargetRun,
    default_throttle_after,
    fell_on_meter,
    fell_s,
    report,
    run_lab_fio,
    xregion_drop,
)
from replmon.mounts import presets
from replmon.mounts.ingest import partition
from replmon.mounts.targets import is_mounted

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with Lab(tmp_path_factory.mktemp("mounts") / "lab", events=False, least_privilege=False) as running:
        yield running
    assert all(not s.running for s in running.servers.values())


def test_a_preset_on_mountpoint_s3fs_and_local_completes_stores_and_unmounts(lab: Lab) -> None:
    targets = ["mountpoint", "mountpoint-cache", "s3fs", "local"]
    runs = run_lab_fio(lab, "mountpoint-xregion", "tiny", targets)
    assert [r.target for r in runs] == targets
    plan = presets.expand("mountpoint-xregion", "mountpoint", "tiny")
    store = lab.store()
    for r in runs:
        assert r.result.exit_code == 0 and r.result.run["status"] == "ok", (r.target, r.result.run["errors"])
        assert not is_mounted(r.result.run["target"]["mount_point"]), r.target
        assert {x.job for x in r.rows} == {j.name for j in plan.jobs}, r.target
        assert all(x.bw_bytes > 0 and x.error == 0 for x in r.rows), r.target
        # each thread read its own file once: T16 read 16 files
        assert {x.io_bytes for x in r.rows if x.job.startswith("SEQ8M-Q128T16-")} == {16 * 8 * 2**20}, r.target
        assert r.ingested is not None and r.ingested.stored == len(r.rows)
        items = store.partition_items(partition(r.target, "mountpoint-xregion", "tiny"))
        assert {i["run_id"] for i in items} == {r.result.run["run_id"]}
        [run_item] = [i for i in items if "row" not in i]
        assert run_item["run_status"] == "ok" and run_item["rows"] == len(r.rows) and run_item["errors"] == []
        assert {v.verdict for _, v in r.ingested.verdicts if v} == {"no-baseline"}
    # The Mountpoint targets share the bucket's replmon-fio/ prefix: the layout the first wrote, the second reuses
    # (size and ETag match); s3fs mounts the bucket's root, so it keeps its own.
    assert runs[0].result.run["layout"]["written"] == 75 and runs[1].result.run["layout"]["reused"] == 75
    assert runs[0].result.run["target"]["prefix"] == "replmon-fio/" and runs[2].result.run["layout"]["written"] == 75
    assert runs[0].result.run["mount_version"] and runs[2].result.run["mount_version"]
    rep = report("mountpoint-xregion", runs)
    rows = rep.tables[0].rows
    assert {r["target"] for r in rows} == {*targets, "published"} and rep.reference == "R2"


def test_toxiproxy_round_trip_lowers_mountpoint_throughput_and_the_report_reads_the_store(lab: Lab) -> None:
    runs = run_lab_fio(lab, "mountpoint-xregion", "tiny", ["mountpoint", "mountpoint-xregion"], rtt_ms=40)
    drop = xregion_drop(runs)
    assert drop is not None and drop["mean"] is not None
    # 40 ms per request against loopback: one thread waits for every round trip (T1 always slower); with
    # 8 or 16 threads the files are so small at tiny scale that the 2-core machine's noise can win a job.
    assert all(d > 0.3 for j, d in drop["per_job"].items() if "Q128T1-" in j) and drop["mean"] > 0.2, drop
    assert "fio-xregion" not in (lab.toxiproxy._call("GET", "/proxies") or {})  # the proxy is gone after the run
    keys = [o["Key"] for o in lab.s3("destination").list_objects_v2(Bucket=RESULTS_BUCKET)["Contents"]]
    assert sum(k.endswith("/run.json") for k in keys) >= 2
    # replmon fio report against the lab's table: the same rows, the drop, and what a Tokyo bucket would bill for them.
    r = subprocess.run([sys.executable, "-m", "replmon.cli", "fio", "report", "--preset", "mountpoint-xregion", "--scale", "tiny",
                        "--table", TABLE, "--dynamodb-endpoint", lab.servers["dynamodb"].url.rstrip("/"), "--mount", "mountpoint",
                        "--mount", "mountpoint-xregion", "--same-region-mount", "mountpoint", "--cross-region-mount", "mountpoint-xregion",
                        "--bucket-region", "ap-northeast-1", "--region", "us-east-1", "--format", "json"],
                       capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "AWS_ACCESS_KEY_ID": "lab",
                                                                          "AWS_SECRET_ACCESS_KEY": "lab"})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["comparisons"]["cross_region_drop"]["mean"] == pytest.approx(drop["mean"])
    assert doc["comparisons"]["cross_region_cost"]["read_gib"] > 0


def test_dd_rewrites_one_path_on_mountpoint_with_allow_overwrite(lab: Lab) -> None:
    """Mountpoint modifies an existing file only with --allow-overwrite and only when it is opened
    with O_TRUNC (doc/SEMANTICS.md, "Writes"), which dd does: the study's ten writes to one path work
    through the lab's Mountpoint (Mountpoint's own file-system crate), and the reads of that path too."""
    [r] = run_lab_fio(lab, "express-vs-standard", "tiny", ["mountpoint"])
    assert r.result.exit_code == 0, r.result.run["errors"]
    assert "--allow-overwrite" in r.result.run["target"]["options"]
    dd = r.result.run["dd"]
    assert len(dd) == 40 and not [d for d in dd if d.get("error")]
    assert {(d["name"], d["bytes"]) for d in dd} == {("write-100MiB", 100 * 2**20), ("read-100MiB", 100 * 2**20),
                                                    ("write-4KiB", 4096), ("read-4KiB", 4096)}
    stored = r.stored
    assert stored is not None and {k.split("/")[0] for k in stored.rows} >= {"dd-read-4KiB-first", "dd-read-4KiB"}


def test_lab_fio_cli_on_local_prints_the_study_tables_and_writes_the_chart(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "replmon.cli", "lab", "fio", "--preset", "nfs-matrix", "--scale", "tiny", "--mount", "local",
                          "--dir", str(tmp_path / "lab"), "--format", "json", "--markdown", str(tmp_path / "LAB.md")],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["runs"][0]["status"] == "ok" and Path(doc["chart_files"][0]).stat().st_size > 1000
    titles = [t["title"] for t in doc["tables"]]
    assert titles[:2] == ["R5 MiB/s", "R5 IOPS"]
    iops = doc["tables"][1]["rows"]
    assert {r["bs"] for r in iops if r["target"] == "local"} == {"1M", "32K", "4K"}
    assert {"target": "published", "bs": "4K", "read": 47600, "randread": 50100, "write": 15000, "randwrite": 15300} in iops
    md = (tmp_path / "LAB.md").read_text()
    assert "<!-- lab-fio:nfs-matrix:start -->" in md and "machine:" in md and "R5 IOPS" in md


def knee_where_the_credits_ran_out(r: TargetRun, after: float) -> str | None:
    """None when the file system's own series (the credit proxy's byte counter, stored as the run's
    service series) shows the knee where the lab's credits ran out; else what was wrong.

    The tolerance is the series' resolution, not a tuned slack: the fall lies inside one bin (part
    burst, part sustained), which the detector's running median counts either way, so the knee is
    that bin's start or the next one's: fell - resolution < at_s <= fell + resolution. The segments'
    bounds (decline start and end) count that bin on their own, so they bracket the knee within
    one bin too."""
    if r.result.exit_code:
        return f"the run failed: {r.result.run['errors']}; the mount's log ends: {r.mount_log[-3000:]}"
    fell, fio_fell = fell_on_meter(r), fell_s(r)
    # The credits hold `after` seconds at the full burst, counted from on_io_start (a full balance
    # earns nothing while fio starts), so they cannot run out before; a client slower than the
    # burst, or one that stalled, runs them out later. The fall must leave the sustained level
    # room to be measured: at least 20 s of fio's run time.
    runtime = max(j.seconds() for j in presets.expand("burst-write", "mountpoint", "small").jobs)
    if fell is None or fio_fell is None or not after - 2 <= fio_fell <= runtime - 20:
        return f"the credits ran out at {fio_fell} s of fio's log, not between {after - 2:g} s and {runtime - 20:g} s"
    entry = r.result.run["service_knees"]["write"]
    knee, res = entry["knee"], entry["resolution_s"]
    if knee is None:
        return f"no knee in the proxy's series: {entry}"
    if not (fell - res < knee["at_s"] <= fell + res and knee["decline_start_s"] - res <= knee["at_s"] <= knee["decline_end_s"] + res):
        series = [round(v / 2**20, 1) for t, v in r.result.run["service_metrics"]["series"]["DataWriteBytes"] if t >= entry["first_s"]]
        return f"knee {knee} at resolution {res} s, the credits ran out at {fell:.1f} s of the proxy's series (MiB/s): {series}"
    # what a token bucket lets through is at most its rate (plus one CHUNK of depth): the levels are the caps, or less
    if not (knee["burst"] <= 1.05 * BURST_MIBPS * 2**20 and knee["sustained"] <= 1.05 * SUSTAINED_MIBPS * 2**20):
        return f"levels above the caps: {knee}"
    # and the client did burst: well above the baseline, or a slow client, not the credits, set the level before the fall
    if knee["burst"] < 0.5 * BURST_MIBPS * 2**20:
        return f"the burst {knee['burst'] / 2**20:.1f} MiB/s is under half the cap ({BURST_MIBPS} MiB/s): the client never burst"
    return None


@pytest.mark.knee
def test_the_throttled_mount_shows_burst_write_s_knee_where_its_credits_run_out(lab: Lab) -> None:
    """`replmon lab fio --preset burst-write --scale small` on mountpoint-credits: 20 MiB/s in all
    while its credits last (45 s at that rate from the start of the measured I/O: 40 % of the run
    time, 112 s; earned at 3 MiB/s, spent at the rate used, as a file system's are), 3 MiB/s
    after. The file system's own series (the credit proxy's bytes per second, as R4 read FSx's
    DataWriteBytes) shows the burst, the fall and the sustained level with the knee in the second
    the credits ran out (a client that stalled in the burst moves that second, and the knee with it);
    it goes through ingestion like CloudWatch's, and the report prints it beside fio's row, which
    always has a level (its knee, or its one level: fio times writes as the mount accepts them, a
    5 MiB part at a time once one is uploaded, so its slow phase is clumps a part wide)."""
    after = default_throttle_after("burst-write", "small")
    assert after == 45.0
    [r] = run_lab_fio(lab, "burst-write", "small", ["mountpoint-credits"])
    assert (why := knee_where_the_credits_ran_out(r, after)) is None, why
    knee = r.result.run["service_knees"]["write"]["knee"]
    assert r.result.run["bw_series"]["write"]["t"] and r.result.run["versions"]["mountpoint"]
    rows = {x["source"]: x for x in report("burst-write", [r]).tables[0].rows if x["target"] == "mountpoint-credits"}
    assert rows["file system (DataWriteBytes)"]["knee at s"] == f"{knee['at_s']:.0f}"
    assert rows["fio"]["sustained MB/s"] not in ("-", ""), rows["fio"]
