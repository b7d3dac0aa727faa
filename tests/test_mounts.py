"""Mount baselines: presets as the studies ran them, the memory preflight, the kept layout, the
runner (targets in order, a host lock, dd on one path), fio parsing against real fio runs (and
fio --client), ingestion's measures, the study reports, costs and ECS task events.

Only the tests that run fio need it (``needs_fio``); the rest run anywhere."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replmon.mounts import baseline as bl
from replmon.mounts import knee as knee_mod
from replmon.mounts import presets as p
from replmon.mounts.document import RUN_FILE, Row, dd_rows, fio_rows
from replmon.mounts.fioresult import FioResultError, parse, parse_text
from replmon.mounts.runner import DirSink, HostBusy, host_lock, load_targets, main, run
from replmon.mounts.targets import Target, TargetError, is_mounted, mounted_options, nfs_negotiated
from tests import fioruns

ROOT = Path(__file__).resolve().parents[1]
FIO = shutil.which("fio")
needs_fio = pytest.mark.skipif(FIO is None, reason="fio is installed by `make lab-deps` (apt); make test installs it")


def fio(tmp: Path, *args: str, fmt: str = "json") -> str:
    assert FIO is not None
    out = subprocess.run([FIO, f"--directory={tmp}", f"--output-format={fmt}", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


# ------------------------------------------------------------------------------------ presets as the studies ran
def test_r2_every_thread_of_every_job_reads_its_own_file() -> None:
    """The study's log: "Starting 25 processes" and 25 "Laying out IO file" lines per file size:
    T1, T8 and T16 each read their own files (T8 never re-reads T1's)."""
    x = p.expand("mountpoint-xregion", "mountpoint", "full")
    assert [j.name for j in x.jobs] == [f"SEQ8M-Q128T{t}-{f}-Read" for f in ("500M", "1G", "3G") for t in (1, 8, 16)]
    for j in x.jobs:
        assert {k: j.options[k] for k in ("rw", "bs", "iodepth", "ioengine")} == {"rw": "read", "bs": "8M", "iodepth": "128", "ioengine": "libaio"}
        assert "time_based" not in j.options and "direct" not in j.options  # one pass, buffered: fio 3.28's defaults, as the study
        assert j.options["filename_format"] == f"{j.name}.$jobnum" and j.reads_layout
    per_size: dict[int, int] = {}
    for f in x.layout:
        per_size[f.size] = per_size.get(f.size, 0) + 1
    assert per_size == {500 * 2**20: 25, 2**30: 25, 3 * 2**30: 25}
    assert len({f.path for f in x.layout}) == 75
    assert sum(f.size for f in x.layout) == 25 * (500 * 2**20 + 2**30 + 3 * 2**30)  # 112.2 GiB


def test_r3_dd_runs_each_test_ten_times_on_one_path_in_the_studys_order() -> None:
    e = p.expand("express-vs-standard", "mountpoint", "full")
    assert [(d.name, d.repetition) for d in e.dd[:11]] == [("write-100MiB", i) for i in range(1, 11)] + [("read-100MiB", 1)]
    assert [d.name for d in e.dd[::10]] == ["write-100MiB", "read-100MiB", "write-4KiB", "read-4KiB"]
    assert {d.path for d in e.dd if "100MiB" in d.name} == {"100M_data"} and {d.path for d in e.dd if "4KiB" in d.name} == {"4k_data"}
    assert e.dd[0].argv("/m") == ["dd", "if=/dev/urandom", "of=/m/100M_data", "bs=1M", "count=100", "oflag=direct"]
    assert e.dd[10].argv("/m") == ["dd", "if=/m/100M_data", "of=/dev/null", "bs=1M", "count=100", "iflag=direct"]
    assert e.dd[20].argv("/m") == ["dd", "if=/dev/urandom", "of=/m/4k_data", "bs=4k", "count=1", "oflag=direct"]
    assert e.mount_flags == ("--allow-overwrite",) and p.expand("express-vs-standard", "s3fs").mount_flags == ()
    assert all(j.times for j in e.jobs)  # the fio rows say what they time


def test_r4_burst_write_drives_32_writers_each_on_its_own_file_for_two_hours() -> None:
    """R4's write: ``mpirun --npernode 8 ior --posix.odirect -t 1m -b 1m -s 16384 -w -i 100 -F -D 0``
    on each of 4 clients, each client its own -o: 32 files of 16 GiB, one writer each."""
    plan = p.expand("burst-write", "lustre", "full")
    [job] = plan.jobs
    o = job.options
    assert (o["rw"], o["bs"], o["direct"], o["ioengine"], o["numjobs"], o["time_based"], o["runtime"]) == ("write", "1M", "1", "psync", "32", "1", "7200")
    assert o["write_bw_log"] == job.name and o["log_avg_msec"] == "1000" and o["log_unix_epoch"] == "1"
    assert o["size"] == str(16 * 2**30)  # IOR -b 1m -s 16384: 16 GiB per task
    for name in ("burst-write", "burst-read", "burst-cache-read"):
        assert p.raw(name)["burst"] and p.raw(name)["published"]["baseline_mb_s"] == 117


def _sections(jobfile: str) -> list[dict[str, str]]:
    """The job file's sections after [global], each as {option: value} (``stonewall`` -> "")."""
    out: list[dict[str, str]] = []
    for line in jobfile.splitlines():
        if line.startswith("[") and line != "[global]":
            out.append({"[name]": line.strip("[]")})
        elif out and line and not line.startswith(";"):
            k, _, v = line.partition("=")
            out[-1][k] = v
    return out


def test_r4_burst_read_is_iors_read_8_files_of_8_gib_4_readers_each_in_60_s_passes_from_offset_0() -> None:
    """R4's read, run on each of 4 clients: ``mpirun --npernode 8 ior --posix.odirect -t 1m -b 1m
    -s 8192 -g -r -i 10000 -F -k -D 60 -o /fsx/ior.bin``. hpc/ior src/ior.c: with -F a task opens
    ``"%s.%08d"`` of its rank (GetTestFileName), so rank r of every client reads the same file: 8
    files of 8 GiB, 4 readers each; every repetition opens the file and reads from offset 0
    (TestIoSys, WriteOrRead) until ``-D 60`` s have passed (the stonewall), then closes it. The
    generated job file is one pass: 8 sections (one file each, numjobs=4: a study client per
    reader), one group, runtime=60 without time_based (the pass ends at 60 s or at the file's
    end, as IOR's); the runner runs it 120 times in 2 h."""
    plan = p.expand("burst-read", "lustre", "full")
    [job] = plan.jobs
    text = plan.jobfile("/run", "/layout")
    sections = _sections(text)
    assert len(sections) == 8 and job.passes == 120 and job.seconds() == 7200 and "; ior-read: 120 passes" in text
    files = [f"ior-read.{r:08d}" for r in range(8)]
    for n, sec in enumerate(sections):
        assert sec["[name]"] == "ior-read" and sec["filename"] == files[n] and sec["directory"] == "/layout"
        assert ("stonewall" in sec) == (n == 0)  # a pass's 8 sections start together, after what ran before
        assert (sec["numjobs"], sec["size"], sec["runtime"], sec["bs"], sec["direct"], sec["ioengine"], sec["rw"]) == \
            ("4", str(8 * 2**30), "60", "1M", "1", "psync", "read")
        assert "time_based" not in sec and "filename_format" not in sec and "loops" not in sec
    assert [(f.path, f.size) for f in plan.layout] == [(f, 8 * 2**30) for f in files]  # 64 GiB, 12x the 5.28 GiB cache
    assert job.threads == 32 and job.buffer_bytes() == 32 * 2**20
    small = p.expand("burst-read", "lustre", "small").jobs[0]
    assert (small.passes, small.options["runtime"]) == (2, "60")  # a pass stays 60 s; --scale shortens the run
    assert (p.expand("burst-read", "lustre", "tiny").jobs[0].passes, p.expand("burst-read", "lustre", "tiny").jobs[0].options["runtime"]) == (1, "7")


def test_r4_cache_read_rereads_the_first_mib_of_8_files_4_readers_each_reopening_every_repetition() -> None:
    """R4's cache read: ``ior --posix.odirect -t 1m -b 1m -g -r -i 2000000 -F -k -D 0 -z`` with
    no -s: hpc/ior src/ior.c's defaults set ``segmentCount = 1``, so each repetition reads one 1 MiB
    block (offset 0: GetOffsetArrayRandom of a 1 MiB file has one offset) of the rank's 675 MiB
    file, opened and closed every repetition. fio: per file one section of 4 readers, size=1M,
    loops=2000000 (fio reopens a job's file every loop), capped by runtime; no time_based (which
    would keep the file open and wrap)."""
    plan = p.expand("burst-cache-read", "lustre", "full")
    assert len(plan.jobs) == 1 and plan.jobs[0].passes == 1
    sections = _sections(plan.jobfile("/run", "/layout"))
    files = [f"ior-cache-read.{r:08d}" for r in range(8)]
    assert [s["filename"] for s in sections] == files and ["stonewall" in s for s in sections] == [True] + [False] * 7
    for sec in sections:
        assert (sec["numjobs"], sec["size"], sec["loops"], sec["runtime"], sec["bs"], sec["direct"], sec["rw"]) == \
            ("4", str(2**20), "2000000", "7200", "1M", "1", "read")
        assert "time_based" not in sec
    assert [(f.path, f.size) for f in plan.layout] == [(f, 675 * 2**20) for f in files]  # the study's 8 x 675 MiB
    assert len(files) * int(sections[0]["size"]) == 8 * 2**20  # the working set the study read: 8 MiB
    assert "c6in.8xlarge" in p.raw("burst-cache-read")["differs"]  # 3170 MB/s is 25.4 Gbps: more than an m5n.8xlarge


def test_r4_differs_names_what_fio_cannot_do_as_ior_did() -> None:
    read, cache = p.raw("burst-read")["differs"], p.raw("burst-cache-read")["differs"]
    assert "same 64 GiB and 32 readers" not in read and "4 readers per file" in read and "barrier" in read
    assert "barrier" in cache and "a59e98d" in cache


@needs_fio
def test_the_runner_runs_fio_once_per_pass_and_the_passes_add_up_to_one_row(tmp_path: Path) -> None:
    """The runner runs the generated job file once per pass (each from offset 0: every reader of
    every file reads its 1 MiB again), every section's 4 readers read one file, the logs of each
    pass are kept apart, and the passes add up to one row (bytes over the passes' summed runtimes)."""
    from dataclasses import replace

    from replmon.mounts import layout
    from replmon.mounts.document import output_rows
    from replmon.mounts.runner import fio_groups, run_fio

    plan = p.expand("burst-read", "local", "tiny")
    job = replace(plan.jobs[0], passes=2, options={**plan.jobs[0].options, "runtime": "1", "size": str(2**20)})
    plan = replace(plan, jobs=(job,), layout=tuple(p.LayoutFile(f.path, 2**20) for f in plan.layout))
    assert len(fio_groups(plan)) == 1
    lay, run_dir = tmp_path / "layout", tmp_path / "run"
    run_dir.mkdir()
    layout.ensure(plan.layout, lay, layout.FileStat(lay))
    runs = run_fio(plan, run_dir, tmp_path, lay)
    assert [(name, code) for name, code, _ in runs] == [("fio/01-ior-read-p001.json", 0), ("fio/01-ior-read-p002.json", 0)]
    outputs = [parse_text((tmp_path / name).read_text()) for name, _, _ in runs]
    assert [[(r.job, r.group, r.io_bytes) for r in out] for out in outputs] == [[("ior-read", 0, 32 * 2**20)]] * 2  # 8 files x 4 readers x 1 MiB
    [row] = output_rows(outputs)
    assert row.io_bytes == 64 * 2**20 and row.runtime_s == pytest.approx(sum(o[0].runtime_s for o in outputs)) and row.entries == 2
    logs = sorted(x.name for x in tmp_path.glob("*_bw.*.log"))
    assert len(logs) == 2 * 32 and logs[0].startswith("p001-ior-read_bw.") and logs[-1].startswith("p002-")
    assert "p002-ior-read_bw.1.log" in logs and not list(tmp_path.glob("p00*/*.log"))  # knees() and the upload read work/*_bw.*.log


def test_r5_nfs_matrix_options_are_the_studys() -> None:
    n = p.expand("nfs-matrix", "nfs", "full")
    assert [j.name for j in n.jobs] == [f"{b}-{w}" for b in ("1M", "32K", "4K") for w in ("read", "randread", "write", "randwrite")]
    for j in n.jobs:
        assert {k: j.options[k] for k in ("numjobs", "size", "iodepth", "ioengine", "direct", "verify", "time_based", "runtime", "group_reporting")} == \
            {"numjobs": "32", "size": str(2**30), "iodepth": "64", "ioengine": "libaio", "direct": "1", "verify": "0", "time_based": "1",
             "runtime": "600", "group_reporting": "1"}
    pub = p.raw("nfs-matrix")["published"]
    assert pub["values"]["4K"]["read"] == 186 and pub["iops"]["4K"]["read"] == 47600 and pub["iops"]["32K"]["randwrite"] == 16800


@pytest.mark.parametrize("name", p.names())
def test_every_preset_says_how_it_differs_and_cites_its_study(name: str) -> None:
    spec = p.raw(name)
    assert spec["differs"] and spec["description"]
    assert f"## {spec['reference']}. " in (ROOT / "docs" / "REFERENCES.md").read_text()


@pytest.mark.parametrize("name", p.names())
def test_mountpoint_targets_never_get_random_or_overwriting_writes(name: str) -> None:
    plan = p.expand(name, "mountpoint", "small")
    for j in plan.jobs:
        if j.writes:
            assert j.options["rw"] == "write", j.name
            assert (j.options["fallocate"], j.options["create_on_open"], j.options.get("iodepth", "1")) == ("none", "1", "1")
            assert "time_based" not in j.options
    assert all(s.reason.startswith("mountpoint:") for s in plan.skipped)
    for kind in p.TARGET_KINDS:
        for scale in p.SCALES:
            assert p.expand(name, kind, scale).jobs


def test_scale_shrinks_sizes_and_run_times_with_floors() -> None:
    small = p.expand("nfs-matrix", "local", "small")
    assert int(small.jobs[0].options["size"]) == 2**30 // 64 and small.jobs[0].options["runtime"] == "9"
    assert all(int(j.options.get("runtime", "2")) >= p.MIN_RUNTIME_SECONDS for j in p.expand("mountpoint-parity", "local", "tiny").jobs)
    with pytest.raises(p.PresetError, match="scale 'huge'"):
        p.expand("nfs-matrix", "local", "huge")
    with pytest.raises(p.PresetError, match="unknown preset"):
        p.expand("nope", "local")


def test_one_fio_per_preset_unless_a_job_reads_what_an_earlier_one_wrote() -> None:
    from replmon.mounts.runner import fio_groups

    express = fio_groups(p.expand("express-vs-standard", "mountpoint", "tiny"))
    assert [g[0].reads_earlier_writes for g in express] == [False, True, True] and sum(map(len, express)) == 4
    for name in ("nfs-matrix", "mountpoint-xregion", "mountpoint-parity", "burst-read"):
        assert len(fio_groups(p.expand(name, "local", "tiny"))) == 1, name


# ------------------------------------------------------------------------------------ memory preflight
def test_memory_preflight_skips_what_would_not_fit_and_says_why(tmp_path: Path) -> None:
    from replmon.mounts.memory import memory_limit, preflight

    (tmp_path / "v2").write_text("17179869184\n")
    (tmp_path / "v1").write_text("9223372036854771712\n")  # cgroup v1's "no limit"
    (tmp_path / "meminfo").write_text("MemTotal:       24000000 kB\n")
    assert memory_limit((str(tmp_path / "v2"),), str(tmp_path / "meminfo")) == (16 * 2**30, str(tmp_path / "v2"))
    assert memory_limit((str(tmp_path / "v1"), str(tmp_path / "none")), str(tmp_path / "meminfo"))[0] == 24000000 * 1024
    plan = preflight(p.expand("mountpoint-xregion", "mountpoint", "full"), 16 * 2**30, "the cgroup")
    assert [s.job for s in plan.skipped] == ["SEQ8M-Q128T16-1G-Read", "SEQ8M-Q128T16-3G-Read"]
    assert "16.0 GiB of buffers (16 threads x 1024 MiB in flight)" in plan.skipped[0].reason and "12.0 GiB" in plan.skipped[0].reason
    assert len(plan.jobs) == 7 and not [f for f in plan.layout if "T16-3G" in f.path]  # nor is its layout written
    assert p.expand("mountpoint-xregion", "mountpoint", "full").jobs[2].buffer_bytes() == 16 * 63 * 8 * 2**20  # 500 MiB: 63 blocks


# ------------------------------------------------------------------------------------ targets
def test_mount_options_match_the_studies() -> None:
    nfs = Target.from_json({"name": "n", "kind": "nfs", "source": "h:/e"})
    assert nfs.mount_argv() == ["mount", "-t", "nfs", "-o", "nconnect=16", "h:/e", "/mnt/replmon/n"]
    own = Target.from_json({"name": "n", "kind": "nfs", "source": "h:/e", "options": "nfsvers=4.1,nconnect=8"})
    assert own.mount_argv()[4] == "nfsvers=4.1,nconnect=8"
    lustre = Target.from_json({"name": "l", "kind": "lustre", "source": "fs.fsx@tcp:/m"})
    assert lustre.mount_argv()[:5] == ["mount", "-t", "lustre", "-o", "noatime,flock"]
    with pytest.raises(TargetError, match="NFS options"):
        Target.from_json({"name": "l", "kind": "lustre", "source": "fs@tcp:/m", "options": ["nconnect=16"]})
    mp = Target.from_json({"name": "m", "kind": "mountpoint", "bucket": "b"}).with_flags(("--allow-overwrite",))
    assert mp.mount_argv()[-1] == "--allow-overwrite" and mp.mount_point == "/mnt/replmon/m"
    assert Target.from_json({"name": "l", "kind": "lustre", "source": "x@tcp:/m", "file_system_id": "fs-1", "per_unit_mb_s": 50,
                             "storage_gib": 2400}).baseline_mb_s() == pytest.approx(117.1875)
    with pytest.raises(TargetError, match="mount_point"):
        Target.from_json({"name": "d", "kind": "local"})


def test_the_mounted_options_are_read_back_from_the_kernel(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    mounts.write_text("10.0.0.5:/e /mnt/replmon/nfs nfs4 rw,relatime,vers=4.1,rsize=1048576,nconnect=16,proto=tcp 0 0\n"
                      "fs@tcp:/m /mnt/replmon/l lustre rw,flock,noatime 0 0\n")
    fstype, opts = mounted_options("/mnt/replmon/nfs", str(mounts)) or ("", "")
    assert fstype == "nfs4" and nfs_negotiated(opts) == {"vers": "4.1", "nconnect": 16}
    assert nfs_negotiated("rw,vers=3") == {"vers": "3", "nconnect": 1}  # Linux omits nconnect when it is 1
    assert mounted_options("/nowhere", str(mounts)) is None


def test_runner_configuration_errors_name_the_field(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    local = {"name": "d", "kind": "local", "mount_point": "/m"}
    for env, msg in (({}, "REPLMON_FIO_TARGETS"),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{"name": "n", "kind": "nfs"}])}, 'nfs needs "source"'),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{**local, "preset": "x"}])}, "unknown preset"),
                     ({"REPLMON_FIO_TARGETS": json.dumps([local])}, '"preset" is required'),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{**local, "preset": "nfs-matrix"}] * 2)}, "unique"),
                     ({"REPLMON_FIO_TARGETS": "{"}, "not JSON"),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{"name": "m", "kind": "mountpoint", "bucket": "b", "prefix": "runs",
                                                           "preset": "nfs-matrix"}])}, 'must end with "/"'),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{"name": "l", "kind": "lustre", "source": "fs@tcp:/m", "preset": "burst-read"}])},
                      '"file_system_id"'),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{"name": f"l{i}", "kind": "lustre", "source": "fs@tcp:/m", "file_system_id": "fs-1",
                                                           "preset": name} for i, name in enumerate(("burst-write", "burst-read"))])},
                      "two burst presets on fs-1 in one schedule"),
                     ({"REPLMON_FIO_TARGETS": json.dumps([{**local, "preset": "nfs-matrix"}])}, "REPLMON_FIO_RESULTS")):
        for k in ("REPLMON_FIO_TARGETS", "REPLMON_FIO_TARGET", "REPLMON_FIO_PRESET", "REPLMON_FIO_RESULTS"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert main() == 2
        assert msg in capsys.readouterr().err
    with pytest.raises(TargetError, match="unknown field"):
        Target.from_json({"name": "d", "kind": "local", "mount_point": "/m", "colour": "red"})
    with pytest.raises(TargetError, match="Mountpoint options"):
        Target.from_json({"name": "d", "kind": "s3fs", "bucket": "b", "mount_point": "/m", "cache": "/c"})
    legacy = load_targets({"REPLMON_FIO_TARGET": json.dumps(local), "REPLMON_FIO_PRESET": "nfs-matrix"})
    assert legacy[0].preset == "nfs-matrix"


def test_two_runners_on_one_host_never_measure_at_once(tmp_path: Path) -> None:
    lock = str(tmp_path / "lock")
    with host_lock(lock):
        with pytest.raises(HostBusy, match="another fio runner holds"), host_lock(lock):
            pass
        code = subprocess.run([sys.executable, "-c", f"import fcntl; f=open({lock!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)"],
                              capture_output=True, timeout=30).returncode
        assert code != 0  # another process is refused too
    with open(lock, "a") as f:  # released when the holder is done
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)


# ------------------------------------------------------------------------------------ the kept layout
def test_layout_is_reused_while_size_and_fingerprint_match(tmp_path: Path) -> None:
    from replmon.mounts.layout import MANIFEST, FileStat, ensure
    from replmon.mounts.presets import LayoutFile

    files = (LayoutFile("a.0", 3 * 2**20), LayoutFile("a.1", 10 * 2**20))  # several chunks for the second
    d = tmp_path / "set"
    first = ensure(files, d, FileStat(d))
    assert (first.written, first.reused, first.bytes_written) == (2, 0, 13 * 2**20)
    assert ensure(files, d, FileStat(d)).reused == 2
    (d / "a.1").write_bytes(b"x" * 10)  # replaced by someone: another size
    os.utime(d / "a.0", ns=(1, 1))  # touched: another fingerprint
    again = ensure(files, d, FileStat(d))
    assert (again.written, again.reused) == (2, 0) and (d / "a.1").stat().st_size == 10 * 2**20
    assert set(json.loads((d / MANIFEST).read_text())) == {"a.0", "a.1"}


def test_layout_on_s3_is_checked_by_size_and_etag() -> None:
    import boto3
    from moto import mock_aws

    from replmon.mounts.runner import S3Stat

    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="layout-bucket")
        s3.put_object(Bucket="layout-bucket", Key="p/replmon-fio/layout/x/small/f.0", Body=b"a" * 100)
        stat = S3Stat(s3, "layout-bucket", "p/replmon-fio/layout/x/small/")
        size, etag = stat("f.0") or (0, "")
        assert size == 100 and etag.startswith("etag:")
        s3.put_object(Bucket="layout-bucket", Key="p/replmon-fio/layout/x/small/f.0", Body=b"b" * 100)  # same size, other content
        replaced = stat("f.0")
        assert replaced is not None and replaced[0] == 100 and replaced[1] != etag
        assert stat("missing") is None


# ------------------------------------------------------------------------------------ parsing
def test_json_followed_by_text_is_read_and_a_truncated_object_is_not() -> None:
    doc = {"jobs": [{"jobname": "r", "job options": {"rw": "read"},
                     "read": {"bw_bytes": 1024, "iops": 1.0, "runtime": 1000, "io_bytes": 1024}}]}
    text = "fio: warning\n\n" + json.dumps(doc, indent=1) + "\n\nRun status group 0 (all jobs):\n   READ: bw=1KiB/s\n"
    assert parse_text(text)[0].bw_bytes == 1024
    with pytest.raises(FioResultError, match="not valid JSON"):
        parse_text(json.dumps(doc)[:-10])


def test_client_stats_are_read_per_client_and_the_all_clients_sum_left_out() -> None:
    """fio --client lists each job per client under client_stats, plus an "All clients" entry summing
    every group (seen from fio 3.33 on loopback: tests below run it)."""
    def entry(name: str, group: int, host: str, port: int, rbytes: int, wbytes: int) -> dict[str, Any]:
        d = {"jobname": name, "groupid": group, "error": 0, "hostname": host, "port": port, "job options": {"rw": "read" if rbytes else "write"}}
        for direction, b in (("read", rbytes), ("write", wbytes)):
            d[direction] = {"io_bytes": b, "bw_bytes": b, "iops": b / 65536, "runtime": 1000}
        return d

    doc = {"client_stats": [entry("a", 0, "h1", 1, 2**20, 0), entry("a", 0, "h2", 2, 2**20, 0), entry("b", 1, "h1", 1, 0, 2**19),
                            entry("All clients", 1, "h1", 1, 2 * 2**20, 2**19)]}
    rows = fio_rows(parse(doc))
    assert [(r.job, r.direction, r.bw_bytes, r.entries) for r in rows] == [("a", "read", 2.0 * 2**20, 2), ("b", "write", 2.0**19, 1)]


# ------------------------------------------------------------------------------------ ingestion measures
class MemStore:
    def __init__(self) -> None:
        self.stored: dict[tuple[str, str], dict[str, Any]] = {}

    def put_item_once(self, item: dict[str, Any]) -> bool:
        key = (item["route"], item["at"])
        if key in self.stored:
            return False
        self.stored[key] = json.loads(json.dumps(item))
        return True

    def items_of(self, pk: str) -> list[dict[str, Any]]:
        return [v for (k, _), v in sorted(self.stored.items()) if k == pk]

    def items(self, pk: str, start: float, end: float) -> list[dict[str, Any]]:
        return [v for v in self.items_of(pk) if start <= v["start"] <= end]


def _run(preset: str, n: int, **extra: Any) -> dict[str, Any]:
    return {"run_id": f"r{n}", "preset": preset, "scale": "full", "status": "ok", "start": 1.8e9 + n * 86400, "end": 1.8e9 + n * 86400 + 60,
            "target": {"name": "t", "kind": "lustre"}, **extra}


def test_burst_runs_are_judged_on_sustained_level_and_burst_duration_not_the_average() -> None:
    from replmon.adapters.metrics import NullMetrics
    from replmon.mounts.ingest import ingest_run

    store = MemStore()
    row = Row("ior-write", "write", 300e6, 300.0, 7200.0, None, None, None, 0, "fio")
    for n in range(6):
        knee = {"burst": 600e6, "sustained": 150e6, "at_s": 900.0, "decline_start_s": 900.0 if n < 5 else 300.0,
                "decline_end_s": 950.0, "sigma": 1e6, "segments": 2}
        # the last run averages far higher (it started with fuller credits): the average is not what is judged
        got = ingest_run(_run("burst-write", n, knees={"write": {"samples": 7200, "knee": knee}}),
                         [row if n < 5 else Row(**{**row.__dict__, "bw_bytes": 900e6})], store, NullMetrics())  # type: ignore[arg-type]
    [(_, judged)] = got.judged
    assert set(judged) == {"sustained_bytes", "burst_s"}
    assert judged["sustained_bytes"].verdict == "ok" and judged["burst_s"].verdict == "regression"  # a burst three times shorter
    last = store.items_of("fio#t#burst-write#full")[-2]
    assert last["verdict"] == "regression" and last["measures"] == {"sustained_bytes": 150e6, "burst_s": 300.0}


def test_latency_rows_are_judged_where_the_preset_is_about_latency() -> None:
    from replmon.adapters.metrics import NullMetrics
    from replmon.mounts.ingest import ingest_run, latency_jobs

    assert latency_jobs(p.raw("express-vs-standard")) == {"dd-write-4KiB", "dd-write-4KiB-first", "dd-read-4KiB", "dd-read-4KiB-first",
                                                          "fio-write-4KiB", "fio-read-4KiB"}
    assert latency_jobs(p.raw("nfs-matrix")) == set()
    store = MemStore()
    for n in range(6):
        lat = 0.002 if n < 5 else 0.006
        rows = dd_rows([{"name": "read-4KiB", "direction": "read", "repetition": i, "bytes": 4096, "seconds": lat, "bw_bytes": 4096 / lat}
                        for i in range(1, 11)])
        got = ingest_run(_run("express-vs-standard", n), rows, store, NullMetrics())  # type: ignore[arg-type]
    judged = dict((r.job, j) for r, j in got.judged)
    assert set(judged["dd-read-4KiB"]) == {"bw_bytes", "lat_p50_s", "lat_p99_s"}
    assert judged["dd-read-4KiB"]["lat_p99_s"].verdict == "regression" and judged["dd-read-4KiB-first"]["lat_p50_s"].verdict == "regression"


def test_dd_rows_keep_the_first_repetition_and_the_median_of_the_rest() -> None:
    reps = [{"name": "read-100MiB", "direction": "read", "repetition": i, "bytes": 100 * 2**20, "seconds": s, "bw_bytes": 100 * 2**20 / s}
            for i, s in enumerate([2.0, 0.5, 0.4, 0.5, 0.6, 0.5, 0.5, 0.4, 0.5, 0.5], 1)]
    first, rest = dd_rows(reps)
    assert (first.job, first.bw_bytes, first.entries) == ("dd-read-100MiB-first", 50 * 2**20, 1)
    assert (rest.job, rest.bw_bytes, rest.entries, len(rest.repetitions)) == ("dd-read-100MiB", 200 * 2**20, 9, 10)
    assert rest.repetitions[0] == 50 * 2**20  # every repetition kept, in order


def test_baseline_is_robust_and_judges_both_directions() -> None:
    steady = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
    assert bl.judge(50.0, bl.baseline(steady[:4])).verdict == "no-baseline"
    assert bl.judge(70.0, bl.baseline(steady)).verdict == "regression"
    assert bl.judge(85.0, bl.baseline(steady)).verdict == "ok"
    assert bl.judge(75.0, bl.baseline([100.0, 150.0, 60.0, 130.0, 70.0, 120.0])).verdict == "ok"
    assert bl.judge(130.0, bl.baseline(steady), higher_is_better=False).verdict == "regression"
    assert bl.judge(70.0, bl.baseline(steady), higher_is_better=False).verdict == "ok"


# ------------------------------------------------------------------------------------ reports and costs
def _result(name: str, spec: dict[str, Any], rows: dict[str, float], **run: Any) -> Any:
    from replmon.mounts.report import TargetResult

    return TargetResult(name, spec, {"run_id": "r", "run_status": "ok", **run},
                        {k: {"row": k, "direction": k.split("/")[1], "bw_bytes": v, "iops": v / 2**20, "io_bytes": int(v * 10)}
                         for k, v in rows.items()})


def test_report_rebuilds_r2_with_the_published_row_and_the_cross_region_drop() -> None:
    from replmon.mounts.report import study_report

    jobs = list(p.matrix_cells(p.raw("mountpoint-xregion")))
    same = _result("near", {"kind": "mountpoint", "region": "us-east-2"}, {f"{j}/read": 1000 * 2**20 for j in jobs},
                   task=json.dumps({"az": "us-east-2a"}))
    far = _result("far", {"kind": "mountpoint", "region": "ap-northeast-1"}, {f"{j}/read": 300 * 2**20 for j in jobs},
                  task=json.dumps({"az": "us-east-2a"}))
    rep = study_report("mountpoint-xregion", [same, far])
    drop = rep.comparisons["cross_region_drop"]
    assert (drop["same_region"], drop["cross_region"]) == ("near", "far") and drop["mean"] == pytest.approx(0.7) and drop["published"] == 0.7
    table = rep.tables[0].rows
    assert {"target": "published", "file": "3G", "1": 111, "8": 459, "16": 487} in table
    assert {"target": "far", "file": "500M", "1": "300.0", "8": "300.0", "16": "300.0"} in table


def test_report_rebuilds_r3_with_express_standard_ratios_and_r4_against_the_per_unit_baseline() -> None:
    from replmon.mounts.report import study_report

    tests = ("write-100MiB", "read-100MiB", "write-4KiB", "read-4KiB")
    std = _result("std", {"kind": "mountpoint", "bucket": "b"}, {f"dd-{t}/{t.split('-')[0]}": 100.0 * 2**20 for t in tests})
    xz = _result("xz", {"kind": "mountpoint", "bucket": "b--use1-az4--x-s3"}, {f"dd-{t}/{t.split('-')[0]}": 400.0 * 2**20 for t in tests})
    rep = study_report("express-vs-standard", [std, xz])
    ratios = rep.comparisons["express_standard"]
    assert ratios["read-4KiB"] == {"express": "xz", "standard": "std", "ratio": 4.0, "published": 4}
    assert ratios["write-4KiB"]["published"] == 10
    fsx = _result("lustre", {"kind": "lustre"}, {"ior-write/write": 300e6}, baseline_mb_s=117.0)
    fsx.rows["ior-write/write"].update(burst_bytes=604e6, sustained_bytes=149e6, burst_s=900.0, knee_at_s=905.0, decline_end_s=910.0)
    rows = study_report("burst-write", [fsx]).tables[0].rows
    assert rows[0]["burst/baseline"] == "5.16" and rows[0]["sustained/baseline"] == "1.27"  # the study: 5.15x and +27.34 %
    assert rows[-1]["burst/baseline"] == 5.15


def test_cost_of_a_cross_region_run_is_the_studys_bill() -> None:
    """R2: 112 GB read from a Tokyo bucket in Ohio cost $10 at $0.09/GB."""
    from replmon.mounts.read_cost import estimate

    got = estimate("mountpoint-xregion", "full", bucket_region="ap-northeast-1")
    assert got.read_gib == pytest.approx(112.1, abs=0.1) and got.per_run == pytest.approx(10.1, abs=0.05)
    assert estimate("mountpoint-xregion", "full", bucket_region="us-east-1").per_run == pytest.approx(2.25, abs=0.05)
    with pytest.raises(p.PresetError, match=r"read_prices\.json"):
        estimate("mountpoint-xregion", bucket_region="mars-1")


# ------------------------------------------------------------------------------------ ECS task events
def test_stopped_task_events_are_judged_by_stop_code_exit_code_and_summary() -> None:
    from replmon.mounts.taskevents import NotAStoppedTask, judge

    def ev(code: str, exit_code: int | None) -> dict[str, Any]:
        return {"detail-type": "ECS Task State Change", "detail": {"lastStatus": "STOPPED", "stopCode": code, "stoppedReason": "why",
                                                                   "taskArn": "arn:aws:ecs:r:1:task/c/t1",
                                                                   "containers": [{"name": "fio", **({"exitCode": exit_code} if exit_code is not None else {})}]}}

    assert judge(ev("TaskFailedToStart", None), False).failed
    assert judge(ev("SpotInterruption", None), True).failed  # stopped before the runner exited
    assert judge(ev("EssentialContainerExited", 137), False).failed
    assert not judge(ev("EssentialContainerExited", 1), True).failed  # the runner reported and counted it
    assert not judge(ev("EssentialContainerExited", 0), True).failed
    with pytest.raises(NotAStoppedTask):
        judge({**ev("x", 0), "detail": {**ev("x", 0)["detail"], "lastStatus": "RUNNING"}}, False)


# ------------------------------------------------------------------------------------ with fio
TERSE = {"read": (6, 7, 8), "write": (47, 48, 49)}  # fio HOWTO "Terse output" v3 fields (0-based): bw KiB/s, IOPS, runtime ms
OPTION_SETS = {
    "read-json": (["--name=r", "--rw=read", "--bs=64k", "--size=8M", "--ioengine=psync"], "json"),
    "write-json+-lat": (["--name=w", "--rw=write", "--bs=16k", "--size=4M", "--lat_percentiles=1"], "json+"),
    "randrw-per-thread": (["--name=m", "--rw=randrw", "--bs=4k", "--size=2M", "--numjobs=2", "--group_reporting=0"], "json"),
    "randrw-grouped": (["--name=g", "--rw=randrw", "--bs=4k", "--size=2M", "--numjobs=2", "--group_reporting=1"], "json"),
    "no-percentiles": (["--name=n", "--rw=read", "--bs=4k", "--size=1M", "--clat_percentiles=0"], "json"),
}


@needs_fio
@pytest.mark.parametrize("case", sorted(OPTION_SETS))
def test_parser_agrees_with_fios_own_terse_output(tmp_path: Path, case: str) -> None:
    """One fio run writes JSON and its terse (v3) line; the parser's units match fio's terse fields."""
    args, fmt = OPTION_SETS[case]
    text = fio(tmp_path, *args, fmt=f"{fmt},terse")
    lines = text.splitlines()
    terse_lines = [line for line in lines if line.startswith("3;")]
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    end = max(i for i, line in enumerate(lines) if line.startswith("}"))
    json_part = "\n".join(lines[start:end + 1])
    doc = json.loads(json_part)
    assert len(terse_lines) == len(doc["jobs"])
    assert parse_text(text) == parse_text(json_part)  # the terse lines after the JSON are left, not an error
    for job, line in zip(doc["jobs"], terse_lines, strict=True):
        fields = line.split(";")
        for row in parse({**doc, "jobs": [job]}):
            raw = job[row.direction]
            assert row.bw_bytes == raw["bw_bytes"] and row.iops == raw["iops"] and row.io_bytes == raw["io_bytes"]
            bw_kib, iops, runtime_ms = (fields[i] for i in TERSE[row.direction])
            assert abs(row.bw_bytes / 1024 - float(bw_kib)) <= 1 and abs(row.iops - float(iops)) <= 1
            assert row.runtime_s * 1000 == float(runtime_ms)
            uses_lat = "--lat_percentiles=1" in args
            pct = raw["lat_ns" if uses_lat else "clat_ns"].get("percentile")
            if case == "no-percentiles":
                assert row.clat_p50_s is None and row.clat_p99_s is None
            else:
                assert (row.lat_p99_s if uses_lat else row.clat_p99_s) == pct["99.000000"] / 1e9
    if case == "randrw-per-thread":
        rows = parse_text(json_part)
        agg = next(r for r in fio_rows(rows) if r.direction == "read")
        threads = [r for r in rows if r.direction == "read"]
        assert agg.bw_bytes == sum(t.io_bytes for t in threads) / max(t.runtime_s for t in threads) and agg.clat_p99_s is None
    if case == "write-json+-lat":
        [row] = fio_rows(parse_text(json_part))
        assert row.lat_p99_s is not None and row.latency("p99") == row.lat_p99_s  # total latency carried through


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_fio
def test_fio_client_output_from_two_servers_parses_to_one_row_per_job(tmp_path: Path) -> None:
    """fio --client against two fio servers on loopback: each job per client in client_stats, the
    per-client rows added up, fio's "All clients" sum over every group left out."""
    assert FIO is not None
    servers, hosts = [], []
    try:
        for i in range(2):
            port = _free_port()
            (tmp_path / f"d{i}").mkdir()
            servers.append(subprocess.Popen([FIO, f"--server=ip:127.0.0.1,{port}"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True))
            hosts.append(f"ip:127.0.0.1,{port}")
        (tmp_path / "hosts").write_text("\n".join(hosts) + "\n")
        (tmp_path / "j.fio").write_text(f"[global]\ndirectory={tmp_path}\nsize=1M\nbs=64k\n[a]\nrw=read\nnumjobs=2\ngroup_reporting=1\n"
                                        "[b]\nstonewall\nrw=write\n")
        deadline = time.monotonic() + 30
        for h in hosts:  # fio --client goes on with the clients it reaches: wait until both servers listen
            port = int(h.rsplit(",", 1)[1])
            while True:
                with socket.socket() as probe:
                    if probe.connect_ex(("127.0.0.1", port)) == 0:
                        break
                assert time.monotonic() < deadline, f"fio --server on {port} did not listen"
                time.sleep(0.2)
        out = subprocess.run([FIO, f"--client={tmp_path / 'hosts'}", "--output-format=json", str(tmp_path / "j.fio")],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
    finally:
        for s in servers:
            s.terminate()
            s.wait(timeout=10)
    doc = json.loads(out.stdout[out.stdout.index("{"):])
    assert "jobs" not in doc and any(e["jobname"] == "All clients" for e in doc["client_stats"])
    rows = fio_rows(parse_text(out.stdout))
    assert [(r.job, r.direction, r.entries, r.io_bytes) for r in rows] == [("a", "read", 2, 2 * 2 * 2**20), ("b", "write", 2, 2 * 2**20)]


@needs_fio
def test_fio_parse_cli_prints_what_ingestion_stores(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(fio(tmp_path, "--name=r", "--rw=randrw", "--bs=4k", "--size=1M", "--numjobs=2", "--group_reporting=0"))
    r = subprocess.run([sys.executable, "-m", "replmon.cli", "fio", "parse", str(tmp_path / "r.json"), "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    stored = [x.to_json() for x in fio_rows(parse_text((tmp_path / "r.json").read_text()))]
    assert printed == json.loads(json.dumps(stored)) and [x["direction"] for x in printed] == ["read", "write"]
    assert {x["entries"] for x in printed} == {2}  # two threads, one row per direction, as stored
    (tmp_path / "bad.json").write_text('{"jobs": [{"jobname": "r"')
    r = subprocess.run([sys.executable, "-m", "replmon.cli", "fio", "parse", str(tmp_path / "bad.json")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and "not valid JSON" in r.stderr


@needs_fio
def test_dd_runs_as_the_study_did_on_one_path_per_test(tmp_path: Path) -> None:
    """The study's loop, with 1 MiB instead of 100 MiB to keep CI short: every write from
    /dev/urandom to the one path, every read of it, in order, each repetition's figures kept."""
    from dataclasses import replace

    from replmon.mounts.runner import run_dd

    plan = p.expand("express-vs-standard", "local", "tiny")
    small = replace(plan, dd=tuple(replace(d, count=1) if d.bs == "1M" else d for d in plan.dd))
    dd = run_dd(small, tmp_path)
    assert [d["name"] for d in dd[::10]] == ["write-100MiB", "read-100MiB", "write-4KiB", "read-4KiB"]
    assert [d["repetition"] for d in dd[:10]] == list(range(1, 11)) and not [d for d in dd if d.get("error")]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["100M_data", "4k_data"]  # one path per test, reused ten times
    assert {d["bytes"] for d in dd} == {2**20, 4096}
    rows = dd_rows(dd)
    assert [r.job for r in rows][:2] == ["dd-write-100MiB-first", "dd-write-100MiB"] and len(rows[1].repetitions) == 10


@needs_fio
class _Series:
    """A MetricReader with the given points per metric name."""

    def __init__(self, points: dict[str, list[tuple[float, float]]]) -> None:
        self.points = points

    def read(self, queries: Any, start: float, end: float) -> list[Any]:
        from replmon.core.ports import MetricSeries

        return [MetricSeries(q.id, tuple(self.points.get(q.metric, []))) for q in queries]


def test_a_burst_run_without_the_file_systems_series_fails_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """R4 read its figures from the file system's own series (AWS/FSx DataReadBytes/DataWriteBytes):
    for a burst preset a missing series (no Region, no permission, no data) fails the run instead of
    being recorded as context, so FioRunFailed alarms. Other presets keep them as context."""
    from replmon.mounts import runner as runner_mod

    monkeypatch.setattr(runner_mod, "run_fio", lambda *a: [])  # the series is what is tested, not fio
    # Nor the layout the runner writes before fio: a scale of this test's own (added to p.SCALES, where
    # expand and load_targets look scales up) lays every file out at its floor, one block: 19 MiB,
    # where burst-read's and mountpoint-parity's at tiny came to 474 MiB.
    monkeypatch.setitem(p.SCALES, "smallest", 2**-20)
    (tmp_path / "m").mkdir()
    efs = Target.from_json({"name": "efs", "kind": "efs", "mount_point": str(tmp_path / "m"), "file_system_id": "fs-1"})
    now = time.time()
    writes = _Series({"DataWriteIOBytes": [(now - 30, 6e9)]})

    def go(preset: str, reader: Any) -> Any:
        return run(efs, preset, "smallest", DirSink(str(tmp_path / "out")), workdir=str(tmp_path), metric_reader=reader, settle_s=0)

    ok = go("burst-write", writes)
    assert ok.exit_code == 0 and ok.run["service_metrics"]["series"]["DataWriteIOBytes"], ok.run["errors"]
    for preset, reader, missing in (("burst-write", _Series({}), "DataWriteIOBytes"), ("burst-read", writes, "DataReadIOBytes")):
        got = go(preset, reader)
        assert got.exit_code == 1 and got.run["status"] == "failed"
        assert [e for e in got.run["errors"] if f"no {missing} in the run window" in e and "AWS_REGION" in e], got.run["errors"]

    class Broken:
        def read(self, *a: Any) -> Any:
            raise RuntimeError("NoRegionError: You must specify a region.")

    got = go("burst-write", Broken())
    assert got.exit_code == 1 and any("NoRegionError" in e for e in got.run["errors"])
    assert go("mountpoint-parity", Broken()).run["service_metrics_error"].startswith("RuntimeError")  # context only
    assert go("mountpoint-parity", Broken()).exit_code == 0


def test_the_memory_limit_is_the_tasks_where_ecs_says_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ECS task metadata v4, "Amazon ECS task metadata V4 JSON response": ``Limits`` is "the
    resource limits specified at the task level" (Memory in MiB). On ECS on EC2 the task-level limit
    sits on the task's cgroup and the container's memory.max can read "max": the runner takes the
    smaller of the task's limit and the cgroup's, never the host's MemTotal when ECS gave a limit."""
    from replmon.mounts import runner as runner_mod
    from replmon.mounts.memory import TASK_METADATA, memory_limit

    (tmp_path / "max").write_text("max\n")
    (tmp_path / "small").write_text(str(2**30))
    (tmp_path / "meminfo").write_text("MemTotal:       131072000 kB\n")
    assert memory_limit((str(tmp_path / "max"),), str(tmp_path / "meminfo"), task_memory_mib=114688) == (112 * 2**30, TASK_METADATA)
    assert memory_limit((str(tmp_path / "small"),), str(tmp_path / "meminfo"), task_memory_mib=114688) == (2**30, str(tmp_path / "small"))
    assert memory_limit((str(tmp_path / "max"),), str(tmp_path / "meminfo"))[1] == str(tmp_path / "meminfo")
    monkeypatch.setattr(runner_mod, "task_info", lambda: {"host": "h", "cpus": 2, "task_memory_mib": 4096})
    monkeypatch.setattr(runner_mod, "run_fio", lambda *a: [])
    (tmp_path / "m").mkdir()
    local = Target.from_json({"name": "d", "kind": "local", "mount_point": str(tmp_path / "m")})
    got = run(local, "burst-write", "tiny", DirSink(str(tmp_path / "out")), workdir=str(tmp_path))
    assert got.run["memory"]["limit_bytes"] <= 4 * 2**30 and got.run["task"]["task_memory_mib"] == 4096


def test_mountpoint_is_held_to_the_share_the_preflight_leaves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Mountpoint's doc/CONFIGURATION.md, "Configuring memory usage": "--memory-target defaults to
    95% of total (or cgroup-limited) memory" (MiB, at least 512; Mountpoint 1.24.0 on, the image pins 1.23.0). The preflight
    leaves a FUSE client a quarter of the limit, so a binary that lists --memory-target is mounted
    with that quarter, recorded; one that does not (the lab's build, older mount-s3) gets none."""
    from replmon.mounts import runner as runner_mod

    seen: list[list[str]] = []

    class NoMount:
        def __init__(self, target: Target, log: str) -> None:
            seen.append(target.mount_argv() or [])
            self.unmount_error = None

        def __enter__(self) -> Any:
            raise TargetError("not mounting in this test")

        def __exit__(self, *a: Any) -> None:
            return None

    monkeypatch.setattr(runner_mod, "Mounted", NoMount)
    for has, expect in ((True, ["--memory-target", "4096"]), (False, [])):
        binary = tmp_path / f"mount-s3-{has}"
        binary.write_text("#!/bin/sh\necho '  --cache <DIR>'\n" + ("echo '  --memory-target <MiB>  Target for total memory usage'\n" if has else ""))
        binary.chmod(0o755)
        t = Target.from_json({"name": "mp", "kind": "mountpoint", "bucket": "b", "mount_point": str(tmp_path / "mp"), "binary": str(binary)})
        got = run(t, "mountpoint-parity", "tiny", DirSink(str(tmp_path / "out")), workdir=str(tmp_path), memory=(16 * 2**30, "test"))
        assert seen[-1][len(seen[-1]) - len(expect):] == expect and ("--memory-target" in seen[-1]) == has
        assert got.run["memory"]["mountpoint_memory_target_mib"] == (4096 if has else None)


def test_runner_failures_exit_non_zero_and_leave_nothing_mounted(tmp_path: Path) -> None:
    bogus = Target.from_json({"name": "mp", "kind": "mountpoint", "bucket": "b", "mount_point": str(tmp_path / "mnt"), "binary": "/bin/false"})
    got = run(bogus, "mountpoint-xregion", "tiny", DirSink(str(tmp_path / "out")), workdir=str(tmp_path))
    assert got.exit_code == 1 and got.run["status"] == "failed" and "exited 1 before mounting" in got.run["errors"][0]
    assert not is_mounted(str(tmp_path / "mnt"))
    stored = json.loads(next((tmp_path / "out").rglob(RUN_FILE)).read_text())
    assert stored["status"] == "failed" and stored["errors"] == got.run["errors"]


# ------------------------------------------------------------------- the long real-fio runs
class FioRuns:
    """The session's long real-fio runs (tests/fioruns.py: started with the session, in a process
    of their own); each test reads only its own run's result."""

    def __init__(self, results: dict[str, Any]) -> None:
        self.dirs: dict[str, Path] = results["dirs"]
        self._results = results

    def get(self, name: str) -> Any:
        got = self._results[name]
        if isinstance(got, Exception):
            raise got
        return got


@pytest.fixture(scope="module")
def fio_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FioRuns]:
    """The runs tests/conftest.py started with the session; run here (and waited for) when nothing
    started them (a session on other paths that still reaches these tests)."""
    started = os.environ.get(fioruns.ENV)
    if started:
        yield FioRuns(fioruns.wait(Path(started)))
        return
    child, directory = fioruns.start()
    try:
        yield FioRuns(fioruns.wait(directory))
    finally:
        fioruns.stop(child, directory)


@needs_fio
def test_knee_is_found_in_a_real_fio_log_with_a_throttled_phase(fio_runs: FioRuns) -> None:
    t, v = knee_mod.per_second(fio_runs.get("throttled"), "write")  # 8 MiB/s for 5 s, then 2 MiB/s
    k = knee_mod.find_knee(t, v)
    assert k is not None, v
    assert k.burst == pytest.approx(8 * 2**20, rel=0.15) and k.sustained == pytest.approx(2 * 2**20, rel=0.15)
    assert 4 <= k.at_s <= 6 and 4 <= k.burst_duration_s <= 6


@needs_fio
def test_a_flat_real_fio_log_has_no_knee(fio_runs: FioRuns) -> None:
    t, v = knee_mod.per_second(fio_runs.get("flat"), "write")  # 4 MiB/s for 5 s, then again
    assert len(v) >= 8 and knee_mod.find_knee(t, v) is None


@needs_fio
def test_runner_keeps_the_layout_between_runs_and_removes_its_own_files(fio_runs: FioRuns) -> None:
    tmp = fio_runs.dirs["layout"]
    first, second = fio_runs.get("layout")
    assert first.exit_code == second.exit_code == 0, (first.run["errors"], second.run["errors"])
    assert (first.run["layout"]["written"], second.run["layout"]["reused"], second.run["layout"]["written"]) == (75, 75, 0)
    assert {r.io_bytes for r in second.rows if r.job.startswith("SEQ8M-Q128T8-")} == {8 * 8 * 2**20}  # 8 threads, 8 files
    base = tmp / "out" / "dir" / "mountpoint-xregion" / second.run["run_id"]
    stored = json.loads((base / RUN_FILE).read_text())
    assert stored["memory"]["limit_bytes"] > 0 and stored["fio_version"].startswith("fio-") and stored["task"]["cpus"] == os.cpu_count()
    assert stored["versions"]["fio"] == stored["fio_version"] and stored["versions"]["kernel"] == os.uname().release
    assert stored["bw_series"] == {}  # this preset writes no bandwidth log
    assert sorted(x.name for x in (tmp / "m" / "replmon-fio").iterdir()) == ["layout"]  # the run directories are gone
    assert not [f for f in tmp.iterdir() if f.name.startswith("replmon-fio-")]


@needs_fio
def test_runner_skips_what_memory_cannot_hold_and_records_why(fio_runs: FioRuns) -> None:
    got = fio_runs.get("memory")
    assert got.exit_code == 0, got.run["errors"]
    skipped = {s["job"] for s in got.run["skipped"]}
    assert skipped == {f"SEQ8M-Q128T16-{f}-Read" for f in ("500M", "1G", "3G")}  # 128 MiB > 90 MiB; T8's 64 MiB fits
    assert all("a 100 MiB test limit" in s["reason"] for s in got.run["skipped"])
    assert {r.job for r in got.rows}.isdisjoint(skipped) and got.rows


@needs_fio
def test_the_entrypoint_runs_its_targets_in_order_and_writes_the_task_summary(fio_runs: FioRuns,
                                                                           monkeypatch: pytest.MonkeyPatch,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    tmp = fio_runs.dirs["entrypoint"]
    assert fio_runs.get("entrypoint") == 0
    [summary_file] = (tmp / "out" / "tasks").iterdir()
    summary = json.loads(summary_file.read_text())
    assert [x["target"] for x in summary["runs"]] == ["a", "b"] and summary["status"] == "ok"
    assert summary["runs"][0]["run_id"] < summary["runs"][1]["run_id"] or summary["runs"][0]["run_id"][:16] <= summary["runs"][1]["run_id"][:16]
    for k, v in fioruns.entrypoint_env(tmp, fioruns.mount_of(tmp.parent)).items():
        monkeypatch.setenv(k, v)
    with open(tmp / "lock", "a") as held:  # another runner holds this host: nothing measured, recorded, exit 1
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        capsys.readouterr()
        assert main() == 1
        assert "another fio runner holds" in capsys.readouterr().err
    busy = [json.loads(f.read_text()) for f in (tmp / "out" / "tasks").iterdir()]
    assert sum(1 for s in busy if s.get("error") and s["status"] == "failed" and not s["runs"]) == 1


# ------------------------------------------------------------------------------------ issue: knees, levels, versions, hosts
def test_a_run_without_a_knee_still_has_its_level_from_fio_and_from_the_file_system() -> None:
    """No knee (the burst outlasted the run, or there was none): the row's level is what ingestion
    judges (measures.sustained_bytes), printed as the sustained level beside "no knee", and the
    file system's own series gives its mean the same way."""
    from replmon.mounts.report import study_report

    fsx = _result("lustre", {"kind": "lustre"}, {"ior-write/write": 300e6}, baseline_mb_s=117.0,
                  service=json.dumps({"summary": {"DataWriteBytes": {"mean": 250e6, "max": 260e6, "points": 3}},
                                      "knees": {"write": {"samples": 3, "metric": "DataWriteBytes", "knee": None}}}))
    fsx.rows["ior-write/write"]["measures"] = {"sustained_bytes": 300e6}
    rows = study_report("burst-write", [fsx]).tables[0].rows
    fio_row, fs_row = rows[0], rows[1]
    assert fio_row["knee at s"] == "no knee" and fio_row["sustained MB/s"] == "300.0 (one level)" and fio_row["burst MB/s"] == "-"
    assert fio_row["sustained/baseline"] == "2.56"
    assert fs_row["source"] == "file system (DataWriteBytes)" and fs_row["sustained MB/s"] == "250.0 (one level)"
    assert fs_row["knee at s"] == "no knee"


def test_a_sustained_level_of_zero_is_printed_as_zero_not_left_out() -> None:
    """A knee whose sustained level is 0 (writes held to nothing after the burst) is a level: the
    row prints 0.0 MB/s, not "-" (0 was read as "no value", and the fio row fell back to the mean)."""
    from replmon.mounts.report import study_report

    fsx = _result("lustre", {"kind": "lustre"}, {"ior-write/write": 40e6}, baseline_mb_s=117.0)
    fsx.rows["ior-write/write"].update(burst_bytes=80e6, sustained_bytes=0, burst_s=9, knee_at_s=6, decline_end_s=9)
    fsx.rows["ior-write/write"]["measures"] = {"sustained_bytes": 0}
    [fio_row] = [r for r in study_report("burst-write", [fsx]).tables[0].rows if r["source"] == "fio"]
    assert fio_row["sustained MB/s"] == "0.0" and fio_row["knee at s"] == "6" and fio_row["sustained/baseline"] == "0.00"


def test_r2_has_the_studys_iops_and_labels_what_ran_at_a_smaller_scale() -> None:
    """The study compared MiB/s and IOPS (its fio logs: IOPS=5/40/51, 5/50/58, 13/57/60); at tiny
    scale every file is 8 MiB, and the rows say so."""
    from replmon.mounts.report import study_report

    jobs = list(p.matrix_cells(p.raw("mountpoint-xregion")))
    r = _result("mp", {"kind": "mountpoint"}, {f"{j}/read": 80 * 2**20 for j in jobs}, scale="tiny")
    rep = study_report("mountpoint-xregion", [r])
    mib, iops = rep.tables[0], rep.tables[1]
    assert (mib.title, iops.title) == ("R2 MiB/s", "R2 IOPS")
    assert {"target": "published", "file": "3G", "1": 13, "8": 57, "16": 60} in iops.rows
    assert [x["file"] for x in mib.rows if x["target"] == "mp"] == ["500M (ran 8M)", "1G (ran 8M)", "3G (ran 8M)"]
    small = study_report("mountpoint-xregion", [_result("mp", {"kind": "mountpoint"}, {f"{j}/read": 1.0 for j in jobs}, scale="small")])
    assert [x["file"] for x in small.tables[0].rows if x["target"] == "mp"] == ["500M (ran 8M)", "1G (ran 16M)", "3G (ran 48M)"]
    full = study_report("mountpoint-xregion", [_result("mp", {"kind": "mountpoint"}, {f"{j}/read": 1.0 for j in jobs}, scale="full")])
    assert [x["file"] for x in full.tables[0].rows if x["target"] == "mp"] == ["500M", "1G", "3G"]


def test_the_report_states_the_hosts_ceiling_beside_the_cells_it_caps() -> None:
    from replmon.mounts.report import study_report

    cells = list(p.matrix_cells(p.raw("nfs-matrix")))
    small = _result("nfs", {"kind": "nfs"}, {f"{j}/read": 1000 * 2**20 for j in cells}, task=json.dumps({"instance_type": "m6i.8xlarge"}))
    note = study_report("nfs-matrix", [small]).tables[0].note
    assert "nfs ran on a m6i.8xlarge: 12.5 Gbps = 1,490 MiB/s" in note and "1M read (20.7 Gbps)" in note and "32K randread (13.1 Gbps)" in note
    default = _result("nfs", {"kind": "nfs"}, {f"{j}/read": 1000 * 2**20 for j in cells}, task=json.dumps({"instance_type": "c6in.8xlarge"}))
    assert "ran on" not in study_report("nfs-matrix", [default]).tables[0].note


def test_the_lab_throttle_is_armed_when_the_measured_io_starts_not_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner calls on_io_start once, after mounting and laying out, right before fio: the lab
    arms its cap there, so neither mounting nor the layout spends the burst."""
    from replmon.mounts import runner as runner_mod

    events: list[str] = []

    def ensure(files: Any, directory: Path, stat: Any) -> Any:
        events.append("layout")
        return type("Done", (), {"to_json": lambda self: {"seconds": 0.0, "written": len(files)}})()

    def fio_runs(plan: Any, run_dir: Path, work: Path, layout_dir: Path) -> list[Any]:
        events.append("fio")
        return []

    monkeypatch.setattr(runner_mod.layout_mod, "ensure", ensure)
    monkeypatch.setattr(runner_mod, "run_fio", fio_runs)
    t = Target.from_json({"name": "loc", "kind": "local", "mount_point": str(tmp_path / "m")})
    (tmp_path / "m").mkdir()
    got = run(t, "burst-read", "tiny", DirSink(str(tmp_path / "out")), workdir=str(tmp_path), memory=(16 * 2**30, "test"),
              on_io_start=lambda: events.append("io start"))
    assert events == ["layout", "io start", "fio"], events
    assert got.run["versions"]["kernel"] and "fio" in got.run["versions"]


def test_the_lustre_layout_is_set_before_the_files_are_made_and_recorded() -> None:
    """R4 ran with stripe count 1 and stripe size 1 MiB (its cloud-config left the file system's
    default). `lfs setstripe` on a directory gives files made there afterwards its layout; `lfs
    getstripe -d` reads the directory's back (Lustre wiki, "Configuring Lustre File Striping")."""
    from replmon.mounts.runner import lustre_stripe

    calls: list[list[str]] = []

    def lfs(argv: list[str], **_: Any) -> Any:
        calls.append(argv)
        out = "stripe_count:  1 stripe_size:   1048576 pattern:       0 stripe_offset: -1" if argv[1] == "getstripe" else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    spec = p.raw("burst-write")
    assert spec["lustre_stripe"] == {"count": 1, "size": "1M"} == p.raw("burst-read")["lustre_stripe"] == p.raw("burst-cache-read")["lustre_stripe"]
    got = lustre_stripe(spec, {"run_dir": Path("/tmp/replmon-test-run")}, run=lfs)
    assert calls == [["lfs", "setstripe", "-c", "1", "-S", "1M", "/tmp/replmon-test-run"], ["lfs", "getstripe", "-d", "/tmp/replmon-test-run"]]
    assert got["asked"] == {"count": 1, "size": "1M"} and "stripe_count:  1" in got["run_dir"]
    with pytest.raises(OSError, match="exited 22"):
        lustre_stripe(spec, {"run_dir": Path("/tmp/replmon-test-run")},
                      run=lambda argv, **_: subprocess.CompletedProcess(argv, 22, "", "Invalid argument"))
    assert "stripe count 1" in spec["differs"] and "Lustre 2.10" in spec["differs"]


def test_a_layout_file_made_under_another_stripe_is_laid_out_again(tmp_path: Path) -> None:
    """`lfs setstripe` on a directory sets the layout only of files made there afterwards (Lustre
    wiki, "Configuring Lustre File Striping"): a layout file an earlier run left under another
    layout keeps it, so it is read back (`lfs getstripe -c -S FILE`) and removed to be written
    again; a file that already matches is kept."""
    from replmon.mounts import layout as layout_mod
    from replmon.mounts.presets import LayoutFile
    from replmon.mounts.runner import lustre_stripe

    layout_dir = tmp_path / "layout"
    files = (LayoutFile("a.0", 4096), LayoutFile("a.1", 4096), LayoutFile("a.2", 4096))
    layout_mod.ensure(files, layout_dir, layout_mod.FileStat(layout_dir))
    (layout_dir / "a.2").unlink()  # missing: nothing to read back
    stripes = {"a.0": "stripe_count:  4\nstripe_size:   4194304", "a.1": "stripe_count:  1\nstripe_size:   1048576"}
    calls: list[list[str]] = []

    def lfs(argv: list[str], **_: Any) -> Any:
        calls.append(argv)
        out = stripes[Path(argv[-1]).name] if argv[1:4] == ["getstripe", "-c", "-S"] else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    got = lustre_stripe(p.raw("burst-read"), {"layout_dir": layout_dir}, run=lfs, files=[layout_dir / f.path for f in files])
    assert ["lfs", "getstripe", "-c", "-S", str(layout_dir / "a.0")] in calls and not any(str(layout_dir / "a.2") in c for c in calls)
    assert got["relaid"] == ["a.0"] and not (layout_dir / "a.0").exists() and (layout_dir / "a.1").exists()
    again = layout_mod.ensure(files, layout_dir, layout_mod.FileStat(layout_dir))
    assert (again.reused, again.written) == (1, 2)
    with pytest.raises(OSError, match="exited 2"):
        lustre_stripe(p.raw("burst-read"), {"layout_dir": layout_dir}, files=[layout_dir / "a.1"],
                      run=lambda argv, **_: subprocess.CompletedProcess(argv, 2 if argv[1:3] == ["getstripe", "-c"] else 0, "", "no such"))


def test_every_preset_lists_its_version_gap_and_r2_r3_their_other_differences() -> None:
    for name in p.names():
        assert "Versions:" in p.raw(name)["differs"], name
    r2, r3 = p.raw("mountpoint-xregion")["differs"], p.raw("express-vs-standard")["differs"]
    assert "Mountpoint 1.0.0 and fio 3.28" in r2 and "--memory-target" in r2 and "moves the bucket, not the client" in r2
    # The image's Mountpoint, and the host: cross-Region traffic may use up to 50 % of the bandwidth of an
    # instance with 32 or more vCPUs (EC2 User Guide, "Amazon EC2 instance network bandwidth",
    # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-network-bandwidth.html); the study's
    # same-region run may have been held by the m6i.8xlarge's 12.5 Gbps.
    assert "pins Mountpoint 1.23.0" in r2 and "50 %" in r2 and "InstanceType m6i.8xlarge" in r2 and "drop larger" in r2
    assert "runs them first, then dd" in r3 and "encrypted" in r3
    assert "112.2 GiB" in p.raw("mountpoint-xregion")["description"]


def test_the_bandwidth_series_kept_with_a_result_is_bounded_and_keeps_the_level(tmp_path: Path) -> None:
    from replmon.mounts.runner import SERIES_POINTS, bw_series

    (tmp_path / "ior-write_bw.1.log").write_text("".join(f"{1_700_000_000_000 + s * 1000}, {8192 if s < 3600 else 2048}, 1, 1048576, 0\n"
                                                         for s in range(7200)))
    got = bw_series(tmp_path)["write"]
    assert len(got["t"]) <= SERIES_POINTS and got["step_s"] == 4
    assert got["bytes_s"][0] == 8 * 2**20 and got["bytes_s"][-1] == 2 * 2**20 and got["t"][:2] == [0.0, 4.0]


def test_fio_report_charts_draw_throughput_over_time_from_what_the_store_keeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deployed, `fio report --charts` has no bandwidth logs: it draws the series ingestion kept with
    the run (fio's and the file system's own), the study's throughput-over-time graph; R3's bars go
    on a log axis (100 MiB and 4 KiB rows differ a thousandfold)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    from replmon.mounts.charts import _burst_over_time, chart

    fsx = _result("lustre", {"kind": "lustre"}, {"ior-write/write": 300e6}, start=1000.0, fio_start=1010.0,
                  bw_series=json.dumps({"write": {"step_s": 1, "t": [0, 1, 2, 3], "bytes_s": [6e8, 6e8, 1.5e8, 1.5e8]}}),
                  service=json.dumps({"period_s": 60, "series": {"DataWriteBytes": [[950.0, 1e6], [1010.0, 6e8], [1070.0, 1.5e8]]}}))
    fig, ax = plt.subplots()
    assert _burst_over_time(ax, fsx, None)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["file system DataWriteBytes", "fio write"]
    assert list(ax.get_lines()[1].get_ydata()) == [600.0, 600.0, 150.0, 150.0]
    plt.close(fig)
    scales: list[str] = []
    monkeypatch.setattr(Axes, "set_xscale", lambda self, value, **kw: scales.append(value))
    std = _result("std", {"kind": "mountpoint"}, {"dd-write-100MiB/write": 90 * 2**20, "dd-write-4KiB/write": 0.3 * 2**20})
    assert chart("express-vs-standard", [std], tmp_path / "r3.png").stat().st_size > 1000 and scales == ["log"]


def test_ingestion_keeps_versions_layout_scale_and_series_with_the_run() -> None:
    from replmon.adapters.metrics import NullMetrics
    from replmon.mounts.ingest import ingest_run

    store = MemStore()
    series = {"write": {"step_s": 1, "t": [0.0, 1.0], "bytes_s": [1, 2]}}
    ingest_run(_run("burst-write", 1, versions={"fio": "fio-3.33", "lustre_client": "lfs 2.15.5"}, bw_series=series,
                    lustre_stripe={"asked": {"count": 1, "size": "1M"}}, fio_start=1.8e9 + 86400 + 2,
                    service_metrics={"period_s": 60, "series": {"DataWriteBytes": [[1.8e9 + 86400, 5.0]]}, "before": {}}),
               [Row("ior-write", "write", 300e6, 300.0, 60.0, None, None, None, 0, "fio")], store, NullMetrics())  # type: ignore[arg-type]
    [run_item] = [i for i in store.items_of("fio#t#burst-write#full") if str(i["at"]).endswith("#run")]
    assert json.loads(run_item["versions"]) == {"fio": "fio-3.33", "lustre_client": "lfs 2.15.5"}
    assert json.loads(run_item["bw_series"]) == series and run_item["scale"] == "full" and run_item["fio_start"] == 1.8e9 + 86400 + 2
    assert json.loads(run_item["lustre_stripe"])["asked"]["count"] == 1
    assert json.loads(run_item["service"])["series"]["DataWriteBytes"] == [[1.8e9 + 86400, 5.0]]


def test_a_fargate_task_does_not_record_the_ec2_host_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """REPLMON_FIO_INSTANCE_TYPE names the EC2 host of the ECS-on-EC2 task; a task whose metadata
    (task metadata endpoint v4, LaunchType) says FARGATE ran elsewhere, so its run drops it."""
    import io

    from replmon.mounts import runner as runner_mod

    def metadata(launch_type: str) -> Any:
        body = json.dumps({"LaunchType": launch_type, "AvailabilityZone": "us-east-1a", "Limits": {"CPU": 4, "Memory": 8192}, "TaskARN": "arn:x/t1"})
        return lambda url, timeout: io.BytesIO(body.encode())

    monkeypatch.setenv("ECS_CONTAINER_METADATA_URI_V4", "http://169.254.170.2/v4/x")
    monkeypatch.setenv("REPLMON_FIO_INSTANCE_TYPE", "c6in.8xlarge")
    monkeypatch.setattr(runner_mod.urllib.request, "urlopen", metadata("FARGATE"))
    assert "instance_type" not in runner_mod.task_info() and runner_mod.task_info()["launch_type"] == "FARGATE"
    monkeypatch.setattr(runner_mod.urllib.request, "urlopen", metadata("EC2"))
    assert runner_mod.task_info()["instance_type"] == "c6in.8xlarge"
