"""Mount baselines on real code: a preset through the real runner on the lab's Mountpoint build
(Mountpoint for S3's own crates), on s3fs and on a local directory, against the lab's MinIO; the
results go through the ingest code into DynamoDB Local and nothing stays mounted.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replmon.lab.lab import Lab
from replmon.lab.mounts import RESULTS_BUCKET, run_lab_fio, study_table, xregion_drop
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
        # Every job of the preset ran and read bytes; each is stored once, with its metadata.
        assert {x.job for x in r.rows} == {j.name for j in plan.jobs}, r.target
        assert all(x.bw_bytes > 0 and x.error == 0 for x in r.rows), r.target
        assert r.ingested is not None and r.ingested.stored == len(r.rows)
        items = store.partition_items(partition(r.target, "mountpoint-xregion", "tiny"))
        rows = [i for i in items if "row" in i]
        assert {i["job"] for i in rows} == {x.job for x in r.rows}
        assert {i["run_id"] for i in items} == {r.result.run["run_id"]}
        [run_item] = [i for i in items if "row" not in i]  # the run's own item: status, errors, metadata
        assert run_item["run_status"] == "ok" and run_item["rows"] == len(r.rows) and run_item["errors"] == []
        # One run is no baseline: the verdict says so rather than passing.
        assert {v.verdict for _, v in r.ingested.verdicts if v} == {"no-baseline"}
    # The FUSE runs record the mount binary's version, every run fio's.
    assert runs[0].result.run["mount_version"] and runs[2].result.run["mount_version"]
    assert all(r.result.run["fio_version"].startswith("fio-") for r in runs)
    rows, caption = study_table("mountpoint-xregion", runs)
    assert {r["target"] for r in rows} == {*targets, "published"} and "R2" in caption
    assert not any(p.name.startswith("replmon-fio") for p in Path(runs[-1].result.run["target"]["mount_point"]).iterdir())


def test_toxiproxy_round_trip_lowers_mountpoint_throughput_and_the_cli_reports_it(lab: Lab, tmp_path: Path) -> None:
    runs = run_lab_fio(lab, "mountpoint-xregion", "tiny", ["mountpoint", "mountpoint-xregion"], rtt_ms=40)
    drop = xregion_drop(runs)
    assert drop is not None and drop["mean"] is not None
    # 40 ms per request against loopback: every job is slower through the proxy (the study's shape).
    assert all(d > 0 for d in drop["per_job"].values()), drop
    assert "fio-xregion" not in (lab.toxiproxy._call("GET", "/proxies") or {})  # the proxy is gone after the run
    # Results objects are in the lab's results bucket: the run document last, after every fio file.
    keys = [o["Key"] for o in lab.s3("destination").list_objects_v2(Bucket=RESULTS_BUCKET)["Contents"]]
    assert sum(k.endswith("/run.json") for k in keys) >= 2


def test_lab_fio_cli_on_local_prints_the_study_table_and_writes_the_chart(tmp_path: Path) -> None:
    import json

    res = subprocess.run([sys.executable, "-m", "replmon.cli", "lab", "fio", "--preset", "nfs-matrix", "--scale", "tiny", "--target", "local",
                          "--dir", str(tmp_path / "lab"), "--format", "json"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["runs"][0]["status"] == "ok" and Path(doc["chart"]).stat().st_size > 1000
    bss = {r["bs"] for r in doc["table"] if r["target"] == "local"}
    assert bss == {"1M", "32K", "4K"}
