"""Mount baselines: fio parsing against real fio runs, preset expansion, baselines, knees from
real bandwidth logs, the runner's failure paths, and the template's ECS/Scheduler contracts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from replmon.mounts import baseline as bl
from replmon.mounts import knee as knee_mod
from replmon.mounts import presets as p
from replmon.mounts.document import RUN_FILE, fio_rows
from replmon.mounts.fioresult import FioResultError, parse, parse_text
from replmon.mounts.runner import LAYOUT_CHUNK, DirSink, lay_out, main, run
from replmon.mounts.targets import Target, TargetError, is_mounted
from tests.cfnutil import ACCOUNT, default_transformed, resolver

ROOT = Path(__file__).resolve().parents[1]
FIO = shutil.which("fio")
pytestmark = pytest.mark.skipif(FIO is None, reason="fio is installed by `make lab-deps` (apt); make test installs it")


def fio(tmp: Path, *args: str, fmt: str = "json") -> str:
    out = subprocess.run([FIO, f"--directory={tmp}", f"--output-format={fmt}", *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


# ------------------------------------------------------------------------------------ the parser
TERSE = {"read": (6, 7, 8), "write": (47, 48, 49)}  # fio HOWTO "Terse output" v3 fields (0-based): bw KiB/s, IOPS, runtime ms

OPTION_SETS = {
    "read-json": (["--name=r", "--rw=read", "--bs=64k", "--size=8M", "--ioengine=psync"], "json"),
    "write-json+-lat": (["--name=w", "--rw=write", "--bs=16k", "--size=4M", "--lat_percentiles=1"], "json+"),
    "randrw-per-thread": (["--name=m", "--rw=randrw", "--bs=4k", "--size=2M", "--numjobs=2", "--group_reporting=0"], "json"),
    "randrw-grouped": (["--name=g", "--rw=randrw", "--bs=4k", "--size=2M", "--numjobs=2", "--group_reporting=1"], "json"),
    "no-percentiles": (["--name=n", "--rw=read", "--bs=4k", "--size=1M", "--clat_percentiles=0"], "json"),
}


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
    rows = parse_text(json_part)
    doc = json.loads(json_part)
    assert len(terse_lines) == len(doc["jobs"])
    for job, line in zip(doc["jobs"], terse_lines, strict=True):
        fields = line.split(";")
        for row in parse({**doc, "jobs": [job]}):  # this entry's rows (threads share a jobname)
            raw = job[row.direction]
            assert row.bw_bytes == raw["bw_bytes"] and row.iops == raw["iops"] and row.io_bytes == raw["io_bytes"]
            assert row.runtime_s == raw["runtime"] / 1000
            bw_kib, iops, runtime_ms = (fields[i] for i in TERSE[row.direction])
            assert abs(row.bw_bytes / 1024 - float(bw_kib)) <= 1, (case, row.direction)
            assert abs(row.iops - float(iops)) <= 1
            assert row.runtime_s * 1000 == float(runtime_ms)
            uses_lat = "--lat_percentiles=1" in args
            pct = raw["lat_ns" if uses_lat else "clat_ns"].get("percentile")
            if case == "no-percentiles":
                assert row.clat_p50_s is None and row.clat_p99_s is None
            else:
                assert pct is not None
                got = row.lat_p99_s if uses_lat else row.clat_p99_s
                assert got == pct["99.000000"] / 1e9
    directions = {r.direction for r in rows}
    assert directions == ({"read", "write"} if "randrw" in case else {"read"} if args[1].endswith("read") else {"write"})
    if case == "randrw-per-thread":
        assert len(rows) == 4 and len(fio_rows(rows)) == 2  # two threads add up to one row per direction
        agg = next(r for r in fio_rows(rows) if r.direction == "read")
        threads = [r for r in rows if r.direction == "read"]
        assert agg.bw_bytes == sum(t.io_bytes for t in threads) / max(t.runtime_s for t in threads)
        assert agg.clat_p99_s is None  # percentiles of two threads do not combine


def test_malformed_or_truncated_results_are_rejected_never_zero(tmp_path: Path) -> None:
    good = fio(tmp_path, "--name=r", "--rw=read", "--bs=4k", "--size=1M")
    for text, field in ((good[: len(good) // 2], "not valid JSON"), ("fio: something\n", "no JSON object"),
                        ('{"jobs": []}', "jobs: missing or empty"),
                        (json.dumps({"jobs": [{"jobname": "r", "job options": {"rw": "read"}, "read": {"bw_bytes": 1, "runtime": 1, "io_bytes": 1}}]}),
                         "jobs[0].read.iops"),
                        (json.dumps({"jobs": [{"jobname": "r", "job options": {"rw": "sideways"}}]}), "rw: 'sideways'")):
        with pytest.raises(FioResultError, match=field.replace("[", r"\[").replace("]", r"\]")):
            parse_text(text)
    # fio's warning lines before the JSON are skipped, not fatal
    assert parse_text("fio: warning\n" + good)[0].bw_bytes > 0


def test_fio_parse_cli_prints_rows_or_one_error_line(tmp_path: Path) -> None:
    (tmp_path / "r.json").write_text(fio(tmp_path, "--name=r", "--rw=randrw", "--bs=4k", "--size=1M"))
    r = subprocess.run([sys.executable, "-m", "replmon.cli", "fio", "parse", str(tmp_path / "r.json"), "--format", "json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["direction"] for x in rows] == ["read", "write"]
    assert {"bw_bytes", "iops", "runtime_s", "clat_p50_s", "clat_p99_s", "clat_p999_s", "error"} <= set(rows[0])
    (tmp_path / "bad.json").write_text('{"jobs": [{"jobname": "r"')
    r = subprocess.run([sys.executable, "-m", "replmon.cli", "fio", "parse", str(tmp_path / "bad.json")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "not valid JSON" in r.stderr


# ------------------------------------------------------------------------------------ presets
def test_presets_give_the_studies_job_options() -> None:
    x = p.expand("mountpoint-xregion", "local", "full")
    assert [j.name for j in x.jobs] == [f"SEQ8M-Q128T{t}-{f}-Read" for f in ("500M", "1G", "3G") for t in (1, 8, 16)]
    for j in x.jobs:
        assert {k: j.options[k] for k in ("rw", "bs", "iodepth", "ioengine")} == {"rw": "read", "bs": "8M", "iodepth": "128", "ioengine": "libaio"}
    assert {j.options["size"] for j in x.jobs} == {str(500 * 2**20), str(2**30), str(3 * 2**30)}
    n = p.expand("nfs-matrix", "nfs", "full")
    assert [j.name for j in n.jobs] == [f"{b}-{w}" for b in ("1M", "32K", "4K") for w in ("read", "randread", "write", "randwrite")]
    for j in n.jobs:
        assert {k: j.options[k] for k in ("numjobs", "iodepth", "ioengine", "direct", "time_based", "runtime", "group_reporting")} == \
            {"numjobs": "32", "iodepth": "64", "ioengine": "libaio", "direct": "1", "time_based": "1", "runtime": "600", "group_reporting": "1"}
    e = p.expand("express-vs-standard", "mountpoint", "full")
    assert len(e.dd) == 40 and {(d.bs, d.count, d.flag) for d in e.dd} == {("1M", 100, "oflag=direct"), ("1M", 100, "iflag=direct"),
                                                                        ("4k", 1, "oflag=direct"), ("4k", 1, "iflag=direct")}
    assert e.dd[0].argv("/m")[:3] == ["dd", "if=/dev/zero", "of=/m/dd-100MiB.0"]
    b = p.expand("burst-vs-baseline", "lustre", "full")
    assert all(j.options["log_avg_msec"] == "1000" and j.options["write_bw_log"] == j.name for j in b.jobs)
    par = p.expand("mountpoint-parity", "mountpoint", "full")
    assert all(j.options["bs"] == "256k" or j.name == "small_file_read" for j in par.jobs)
    assert {j.options["ioengine"] for j in par.jobs} == {"sync"}


def test_one_fio_per_preset_unless_a_job_reads_what_an_earlier_one_wrote() -> None:
    """fio creates every job's files before running any (create_serialize): a read of a file an
    earlier job writes must start a new fio, or the write would find it made and Mountpoint
    would refuse the overwrite. Everything else runs in one fio, as bare fio would."""
    from replmon.mounts.runner import fio_groups

    burst = fio_groups(p.expand("burst-vs-baseline", "mountpoint", "tiny"))
    assert [[j.name for j in g] for g in burst] == [["seq-write"], ["seq-read"]]
    express = fio_groups(p.expand("express-vs-standard", "mountpoint", "tiny"))
    assert [g[0].reads_earlier_writes for g in express] == [False, True, True] and sum(map(len, express)) == 4
    for name in ("nfs-matrix", "mountpoint-xregion", "mountpoint-parity"):
        assert len(fio_groups(p.expand(name, "local", "tiny"))) == 1, name


@pytest.mark.parametrize("name", p.names())
def test_mountpoint_targets_never_get_random_or_overwriting_writes(name: str) -> None:
    plan = p.expand(name, "mountpoint", "small")
    for j in plan.jobs:
        if j.writes:
            assert j.options["rw"] == "write", j.name
            assert (j.options["fallocate"], j.options["create_on_open"], j.options.get("iodepth", "1")) == ("none", "1", "1")
            assert "time_based" not in j.options  # it would wrap to offset 0: an overwrite
    assert all(s.reason.startswith("mountpoint:") for s in plan.skipped)
    for kind in p.TARGET_KINDS:  # every preset expands for every target kind and scale
        for scale in p.SCALES:
            assert p.expand(name, kind, scale).jobs


def test_scale_shrinks_sizes_and_run_times_with_floors() -> None:
    full, small = p.expand("nfs-matrix", "local", "full"), p.expand("nfs-matrix", "local", "small")
    assert int(small.jobs[0].options["size"]) == 2**30 // 64 and small.jobs[0].options["runtime"] == "9"
    tiny = p.expand("mountpoint-parity", "local", "tiny")
    assert all(int(j.options.get("runtime", "2")) >= p.MIN_RUNTIME_SECONDS for j in tiny.jobs)
    assert full.jobs[0].options["runtime"] == "600"
    with pytest.raises(p.PresetError, match="scale 'huge'"):
        p.expand("nfs-matrix", "local", "huge")
    with pytest.raises(p.PresetError, match="unknown preset"):
        p.expand("nope", "local")


def test_every_preset_cites_its_study_in_the_references() -> None:
    refs = (ROOT / "docs" / "REFERENCES.md").read_text()
    for name in p.names():
        spec = p.raw(name)
        assert f"## {spec['reference']}. " in refs, name


# ------------------------------------------------------------------------------------ baselines
def test_baseline_needs_runs_is_robust_to_noise_and_catches_a_real_drop() -> None:
    steady = [100.0, 101.0, 99.0, 100.5, 99.5, 100.0]
    assert bl.judge(50.0, bl.baseline(steady[:4])).verdict == "no-baseline"  # 4 < 5: never a pass
    v = bl.judge(70.0, bl.baseline(steady))
    assert v.verdict == "regression" and v.change == pytest.approx(-0.3)
    assert bl.judge(85.0, bl.baseline(steady)).verdict == "ok"  # 15 % < 20 % threshold
    noisy = [100.0, 150.0, 60.0, 130.0, 70.0, 120.0]
    assert bl.judge(75.0, bl.baseline(noisy)).verdict == "ok"  # 30 % down, but inside 3 spreads
    assert bl.baseline(list(range(100)), window=10).runs == 10


# ------------------------------------------------------------------------------------ knees
def _bw_logs(tmp: Path, *jobs: list[str]) -> list[tuple[float, float, str]]:
    args = []
    for n, job in enumerate(jobs):
        args += [f"--name=j{n}", "--rw=write", "--bs=64k", "--size=1G", "--time_based", "--runtime=5", "--ioengine=psync",
                 f"--write_bw_log={tmp}/log{n}", "--log_avg_msec=1000", "--log_unix_epoch=1", *job]
        if n:
            args.append("--stonewall")
    fio(tmp, *args)
    samples = []
    for log in sorted(tmp.glob("log*_bw.*.log")):
        samples += knee_mod.read_bw_log(log.read_text(), log.name)
    return samples


def test_knee_is_found_in_a_real_fio_log_with_a_throttled_phase(tmp_path: Path) -> None:
    samples = _bw_logs(tmp_path, ["--rate=8m"], ["--rate=2m"])  # burst 8 MiB/s for 5 s, then 2 MiB/s
    t, v = knee_mod.per_second(samples, "write")
    k = knee_mod.find_knee(t, v)
    assert k is not None, v
    assert k.burst == pytest.approx(8 * 2**20, rel=0.15) and k.sustained == pytest.approx(2 * 2**20, rel=0.15)
    assert 4 <= k.at_s <= 6


def test_a_flat_real_fio_log_has_no_knee(tmp_path: Path) -> None:
    samples = _bw_logs(tmp_path, ["--rate=4m"], ["--rate=4m"])
    t, v = knee_mod.per_second(samples, "write")
    assert len(v) >= 8 and knee_mod.find_knee(t, v) is None


def test_knee_cli_and_bad_log(tmp_path: Path) -> None:
    (tmp_path / "bad_bw.1.log").write_text("12, x, 1\n")
    with pytest.raises(FioResultError, match=r"bad_bw\.1\.log:1"):
        knee_mod.read_bw_log((tmp_path / "bad_bw.1.log").read_text(), "bad_bw.1.log")


# ------------------------------------------------------------------------------------ the runner
def test_runner_on_a_directory_uploads_fio_outputs_then_run_json(tmp_path: Path) -> None:
    target = Target.from_json({"name": "dir", "kind": "local", "mount_point": str(tmp_path / "m")})
    (tmp_path / "m").mkdir()
    got = run(target, "burst-vs-baseline", "tiny", DirSink(str(tmp_path / "out")), workdir=str(tmp_path))
    assert got.exit_code == 0, got.run["errors"]
    base = tmp_path / "out" / "dir" / "burst-vs-baseline" / got.run["run_id"]
    written = sorted(str(f.relative_to(base)) for f in base.rglob("*") if f.is_file())
    assert written == sorted([RUN_FILE, "job.fio", *got.run["fio_outputs"], "bw/seq-write_bw.1.log", "bw/seq-read_bw.1.log"])
    run_doc = json.loads((base / RUN_FILE).read_text())
    assert run_doc["fio_version"].startswith("fio-") and run_doc["task"]["cpus"] == os.cpu_count()
    assert isinstance(run_doc["knees"], dict) and run_doc["end"] >= run_doc["start"]  # tiny runs log < 1 s: no samples
    assert list((tmp_path / "m").iterdir()) == []  # the run directory and its parent are gone
    assert not [f for f in tmp_path.iterdir() if f.name.startswith("replmon-fio-")]  # the work dir is gone


def test_runner_failures_exit_non_zero_and_leave_nothing_mounted(tmp_path: Path) -> None:
    bogus = Target.from_json({"name": "mp", "kind": "mountpoint", "bucket": "b", "mount_point": str(tmp_path / "mnt"),
                              "binary": "/bin/false"})
    got = run(bogus, "mountpoint-xregion", "tiny", DirSink(str(tmp_path / "out")), workdir=str(tmp_path))
    assert got.exit_code == 1 and got.run["status"] == "failed"
    assert "exited 1 before mounting" in got.run["errors"][0]
    assert not is_mounted(str(tmp_path / "mnt"))
    stored = json.loads(next((tmp_path / "out").rglob(RUN_FILE)).read_text())
    assert stored["status"] == "failed" and stored["errors"] == got.run["errors"]


def test_runner_configuration_errors_name_the_field(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for env, msg in (({}, "REPLMON_FIO_TARGET"),
                     ({"REPLMON_FIO_TARGET": '{"name": "n", "kind": "nfs", "mount_point": "/m"}'}, 'nfs needs "source"'),
                     ({"REPLMON_FIO_TARGET": '{"name": "d", "kind": "local", "mount_point": "/m"}', "REPLMON_FIO_PRESET": "x"}, "unknown preset"),
                     ({"REPLMON_FIO_TARGET": '{"name": "d", "kind": "local", "mount_point": "/m"}', "REPLMON_FIO_PRESET": "nfs-matrix"},
                      "REPLMON_FIO_RESULTS")):
        for k in ("REPLMON_FIO_TARGET", "REPLMON_FIO_PRESET", "REPLMON_FIO_RESULTS"):
            monkeypatch.delenv(k, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        assert main() == 2
        assert msg in capsys.readouterr().err
    with pytest.raises(TargetError, match="unknown field"):
        Target.from_json({"name": "d", "kind": "local", "mount_point": "/m", "colour": "red"})
    with pytest.raises(TargetError, match="Mountpoint options"):
        Target.from_json({"name": "d", "kind": "s3fs", "bucket": "b", "mount_point": "/m", "cache": "/c"})


# ------------------------------------------------------------------------------------ ingestion (contract run)
def test_ingestion_judges_six_runs_and_rejects_a_truncated_result(contract: Any) -> None:
    rows = [i for i in contract.fio_items if "row" in i]
    runs = {i["run_id"]: i for i in contract.fio_items if i["at"].endswith("#run")}
    # six good runs x (seq-write, seq-read) + the failed run's readable seq-read; nothing of the truncated one
    assert len(rows) == 6 * 2 + 1 and len(runs) == 7
    failed = [r for r in runs.values() if r["run_status"] == "failed"]
    assert len(failed) == 1 and failed[0]["errors"] and failed[0]["rows"] == 1
    assert {(i["job"], i["run_status"], i.get("verdict")) for i in rows if i["run_id"] == failed[0]["run_id"]} == {("seq-read", "failed", "ok")}
    by_run: dict[str, list[dict[str, Any]]] = {}
    for it in rows:
        if it["run_status"] == "ok":
            by_run.setdefault(it["run_id"], []).append(it)
    ordered = [by_run[k] for k in sorted(by_run, key=lambda k: by_run[k][0]["start"])]
    assert [{i["verdict"] for i in r} for r in ordered] == [{"no-baseline"}] * 5 + [{"regression"}]
    assert all(runs[k]["run_status"] == "ok" and runs[k]["rows"] == 2 for k in by_run)
    last = ordered[-1][0]
    assert last["baseline_runs"] == 5 and last["change"] == pytest.approx(-0.5, abs=0.01)
    assert json.loads(last["target"])["kind"] == "local" and "env" not in json.loads(last["target"])
    assert [f["itemIdentifier"] for f in contract.fio_ingest["batchItemFailures"]] == ["m6"]


def test_fio_metrics_reach_the_fio_alarms(contract: Any) -> None:
    emitted = {(blob["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
                frozenset(blob["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0])) for fn, blob in contract.emf
               if fn in ("FioRunner", "IngestFioResults")}
    assert ("FioRegression", frozenset({"service"})) in emitted
    assert ("FioRunFailed", frozenset({"service"})) in emitted
    assert ("FioBandwidth", frozenset({"service", "Target", "Preset", "Job"})) in emitted


# ------------------------------------------------------------------------------------ template contracts
TASK_DEFINITIONS = ("FioEfsTaskDefinition", "FioMountpointTaskDefinition", "FioNfsTaskDefinition")


def _fio_template(**params: str) -> tuple[dict[str, Any], Any]:
    cfn = default_transformed()
    r = resolver(cfn)
    r.params.update({"MountBaselines": "ENABLED", "EfsFileSystemId": "fs-0123456789abcdef0", "EfsAccessPointId": "fsap-0123456789abcdef0",
                     "MountpointBucketName": "bench-bucket", "NfsSource": "fs-1.example:/export", **params})
    ecs = f"arn:aws:ecs:{r.pseudo['AWS::Region']}:{ACCOUNT}"
    r.attributes["FioCluster.Arn"] = f"{ecs}:cluster/replmon-FioCluster"
    # A log group's Arn attribute ends in ":*" (AWS::Logs::LogGroup return values).
    r.attributes["FioLogGroup.Arn"] = f"arn:aws:logs:{r.pseudo['AWS::Region']}:{ACCOUNT}:log-group:replmon-FioLogGroup:*"
    for td in TASK_DEFINITIONS:  # Ref of a task definition is its ARN
        r.physical[td] = f"{ecs}:task-definition/replmon-{td}:1"
    return cfn, r


def test_a_stack_without_mount_baselines_has_none_of_their_resources() -> None:
    cfn = default_transformed()
    r = resolver(cfn)
    fio = [k for k in cfn["Resources"] if k.startswith(("Fio", "IngestFio"))]
    assert fio and not [k for k in fio if r.exists(k)]


def test_fargate_task_needs_no_fuse_and_ec2_task_has_it() -> None:
    """ECS docs: Fargate tasks may add only SYS_PTRACE and cannot map devices, so FUSE (Mountpoint)
    and Lustre need the EC2 launch type; EFS with IAM authorization requires transit encryption."""
    cfn, r = _fio_template()
    fargate = r.resolve(cfn["Resources"]["FioEfsTaskDefinition"]["Properties"])
    assert fargate["RequiresCompatibilities"] == ["FARGATE"] and fargate["NetworkMode"] == "awsvpc"
    for c in fargate["ContainerDefinitions"]:
        caps = c.get("LinuxParameters", {}).get("Capabilities", {}).get("Add", [])
        assert set(caps) <= {"SYS_PTRACE"} and not c.get("LinuxParameters", {}).get("Devices")
    efs = fargate["Volumes"][0]["EFSVolumeConfiguration"]
    assert efs["AuthorizationConfig"]["IAM"] == "ENABLED" and efs["TransitEncryption"] == "ENABLED"
    for name in ("FioMountpointTaskDefinition", "FioNfsTaskDefinition"):
        ec2 = r.resolve(cfn["Resources"][name]["Properties"])
        assert ec2["RequiresCompatibilities"] == ["EC2"], name
        lp = ec2["ContainerDefinitions"][0]["LinuxParameters"]
        assert "SYS_ADMIN" in lp["Capabilities"]["Add"] and lp["Devices"][0]["HostPath"] == "/dev/fuse", name


@pytest.mark.parametrize("extra", [{}, {"MountpointBucketRegion": "ap-northeast-1", "MountpointCacheXzBucket": "c--use1-az4--x-s3",
                                        "NfsKind": "lustre", "NfsSource": "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd"}])
def test_each_task_definition_gives_the_runner_a_target_it_accepts(extra: dict[str, str]) -> None:
    """What a scheduled task runs with is its task definition's environment (no overrides): each
    one parses as the runner parses it, names its preset, and mounts what the parameters say."""
    cfn, r = _fio_template(**extra)
    argv = {}
    for name in TASK_DEFINITIONS:
        [container] = r.resolve(cfn["Resources"][name]["Properties"])["ContainerDefinitions"]
        env = {e["Name"]: e["Value"] for e in container["Environment"]}
        target = Target.from_json(json.loads(env["REPLMON_FIO_TARGET"]))
        assert p.expand(env["REPLMON_FIO_PRESET"], target.kind, env["REPLMON_FIO_SCALE"]).jobs
        assert env["REPLMON_FIO_RESULTS"] == f"s3://{r.physical['FioResultsBucket']}/fio-results/"
        # The runner's EMF (FioRunFailed, FioBandwidth) reaches CloudWatch as log lines: awslogs
        # sends stdout with PutLogEvents, and CloudWatch Logs extracts EMF from it without the
        # x-amzn-logs-format header (CloudWatch User Guide, "Using the PutLogEvents API to send
        # manually-created embedded metric format logs"), in the namespace the alarms read.
        logs = container["LogConfiguration"]
        assert logs["LogDriver"] == "awslogs" and logs["Options"]["awslogs-group"] == r.ref("FioLogGroup"), name
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == r.resolve(cfn["Resources"]["FioRunFailedAlarm"]["Properties"])["Namespace"], name
        argv[target.kind] = target.mount_argv()
    assert argv["efs"] is None  # Fargate mounts the EFS volume itself
    mp = argv["mountpoint"]
    assert mp[:3] == ["mount-s3", "bench-bucket", "/mnt/target"] and mp[mp.index("--prefix") + 1] == "replmon-fio/"
    assert mp[mp.index("--region") + 1] == extra.get("MountpointBucketRegion", "us-east-1")
    assert ("--cache-xz" in mp) == bool(extra)
    kind = extra.get("NfsKind", "nfs")
    assert argv[kind][:3] == ["mount", "-t", kind] and argv[kind][-2] == extra.get("NfsSource", "fs-1.example:/export")


def test_schedules_run_only_replmons_tasks_with_least_privilege() -> None:
    """EventBridge Scheduler's ECS target needs ecs:RunTask on the task definition and iam:PassRole
    for the task's roles (Scheduler user guide, "Set up the execution role"); nothing more."""
    from tests.iam import IamRequest, evaluate

    cfn, r = _fio_template()
    role = r.resolve(cfn["Resources"]["FioSchedulerRole"]["Properties"])
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}
    policies = {"Scheduler": [{"name": x["PolicyName"], "policy": x["PolicyDocument"]} for x in role["Policies"]]}
    cluster = r.get_att("FioCluster", "Arn")
    taskdefs = [r.ref(td) for td in TASK_DEFINITIONS]
    roles = [r.get_att("FioExecutionRole", "Arn"), r.get_att("FioTaskRole", "Arn")]
    ok = [("Scheduler", IamRequest("ecs:RunTask", t, {"ecs:cluster": cluster})) for t in taskdefs]
    ok += [("Scheduler", IamRequest("iam:PassRole", x, {"iam:PassedToService": "ecs-tasks.amazonaws.com"})) for x in roles]
    assert evaluate(ok, policies, ACCOUNT) == []
    bad = [("Scheduler", IamRequest("ecs:RunTask", taskdefs[0], {"ecs:cluster": cluster.replace("FioCluster", "other")})),
           ("Scheduler", IamRequest("ecs:RunTask", f"arn:aws:ecs:us-east-1:{ACCOUNT}:task-definition/other:1", {"ecs:cluster": cluster})),
           ("Scheduler", IamRequest("iam:PassRole", roles[0], {"iam:PassedToService": "lambda.amazonaws.com"}))]
    assert len(evaluate(bad, policies, ACCOUNT)) == 3


def test_execution_role_pulls_this_accounts_images_and_logs_only_to_its_group() -> None:
    """ECS task execution role (ECS developer guide): the agent pulls the image from ECR and writes
    the awslogs stream with it; ecr:GetAuthorizationToken has no resource type (Service
    Authorization Reference for Amazon ECR), pulls are per repository."""
    from tests.iam import IamRequest, evaluate

    cfn, r = _fio_template()
    role = r.resolve(cfn["Resources"]["FioExecutionRole"]["Properties"])
    assert "ManagedPolicyArns" not in role
    policies = {"Exec": [{"name": x["PolicyName"], "policy": x["PolicyDocument"]} for x in role["Policies"]]}
    group = r.get_att("FioLogGroup", "Arn").removesuffix(":*")
    repo = f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/replmon-fio"
    ok = [("Exec", IamRequest("ecr:GetAuthorizationToken", "*")), ("Exec", IamRequest("ecr:BatchGetImage", repo)),
          ("Exec", IamRequest("ecr:GetDownloadUrlForLayer", repo)), ("Exec", IamRequest("logs:PutLogEvents", f"{group}:log-stream:fio/x")),
          ("Exec", IamRequest("logs:CreateLogStream", f"{group}:log-stream:fio/x"))]
    assert evaluate(ok, policies, ACCOUNT) == []
    bad = [("Exec", IamRequest("ecr:BatchGetImage", repo.replace(ACCOUNT, "999999999999"))),
           ("Exec", IamRequest("logs:PutLogEvents", f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:other:log-stream:x")),
           ("Exec", IamRequest("s3:GetObject", "arn:aws:s3:::any/x"))]
    assert len(evaluate(bad, policies, ACCOUNT)) == 3


def test_results_flow_matches_the_runner_layout_and_the_task_role() -> None:
    """The bucket notifies on the key the runner writes last, under the prefix the task's
    REPLMON_FIO_RESULTS names; the task role may write results and touch only its Mountpoint prefix."""
    from replmon.mounts.document import results_prefix
    from tests.iam import IamRequest, evaluate

    cfn, r = _fio_template()
    bucket = r.resolve(cfn["Resources"]["FioResultsBucket"]["Properties"])
    rules = {x["Name"]: x["Value"] for x in bucket["NotificationConfiguration"]["QueueConfigurations"][0]["Filter"]["S3Key"]["Rules"]}
    env = {e["Name"]: e["Value"] for e in r.resolve(cfn["Resources"]["FioNfsTaskDefinition"]["Properties"])["ContainerDefinitions"][0]["Environment"]}
    prefix = env["REPLMON_FIO_RESULTS"].split("/", 3)[3]
    key = prefix + results_prefix("", "efs", "nfs-matrix", "20261122T140000Z-ab12cd") + RUN_FILE
    assert key.startswith(rules["prefix"]) and key.endswith(rules["suffix"])
    role = r.resolve(cfn["Resources"]["FioTaskRole"]["Properties"])
    policies = {"Task": [{"name": x["PolicyName"], "policy": x["PolicyDocument"]} for x in role["Policies"]]}
    results = r.physical["FioResultsBucket"]
    # Mountpoint's documented needs on a general purpose bucket (doc/CONFIGURATION.md, "IAM
    # permissions"): ListBucket (scoped with s3:prefix), GetObject to read, PutObject and
    # AbortMultipartUpload to write, DeleteObject for --allow-delete (the runner removes its files).
    run_file = "arn:aws:s3:::bench-bucket/replmon-fio/replmon-fio/x/f"
    ok = [("Task", IamRequest("s3:PutObject", f"arn:aws:s3:::{results}/{key}")),
          *[("Task", IamRequest(a, run_file)) for a in ("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject")],
          ("Task", IamRequest("s3:ListBucket", "arn:aws:s3:::bench-bucket", {"s3:prefix": "replmon-fio/"})),
          ("Task", IamRequest("s3:ListBucket", "arn:aws:s3:::bench-bucket", {"s3:prefix": "replmon-fio/replmon-fio/x/"}))]
    assert evaluate(ok, policies, ACCOUNT) == []
    # A directory bucket target: object calls ride on a CreateSession for that bucket only
    # (S3 User Guide, "Authenticating and authorizing requests" for S3 Express One Zone).
    cfn, r = _fio_template(MountpointBucketName="bench--use1-az4--x-s3", MountpointCacheXzBucket="cache--use1-az4--x-s3")
    role = r.resolve(cfn["Resources"]["FioTaskRole"]["Properties"])
    express = {"Task": [{"name": x["PolicyName"], "policy": x["PolicyDocument"]} for x in role["Policies"]]}
    xz = f"arn:aws:s3express:us-east-1:{ACCOUNT}:bucket/"
    assert evaluate([("Task", IamRequest("s3express:CreateSession", xz + b)) for b in ("bench--use1-az4--x-s3", "cache--use1-az4--x-s3")],
                    express, ACCOUNT) == []
    assert len(evaluate([("Task", IamRequest("s3express:CreateSession", xz + "other--use1-az4--x-s3"))], express, ACCOUNT)) == 1
    bad = [("Task", IamRequest("s3:GetObject", f"arn:aws:s3:::{results}/{key}")),
           ("Task", IamRequest("s3:PutObject", "arn:aws:s3:::bench-bucket/data/f")),
           ("Task", IamRequest("s3:ListBucket", "arn:aws:s3:::bench-bucket", {"s3:prefix": ""}))]
    assert len(evaluate(bad, policies, ACCOUNT)) == 3


def test_the_runner_dockerfile_passes_hadolint() -> None:
    hadolint = Path(sys.executable).parent / "hadolint"
    r = subprocess.run([str(hadolint), str(ROOT / "runners" / "fio" / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (ROOT / "runners" / "fio" / "Dockerfile").read_text()
    assert "amazonlinux:2023" in text and "mount-s3" in text and "replmon.mounts.runner" in text


def test_layout_writes_every_file_at_its_size_and_a_failed_write_fails_the_layout(tmp_path: Path) -> None:
    plan = p.expand("mountpoint-parity", "local", "tiny")
    lay_out(plan, tmp_path)
    assert plan.layout and any(f.size > LAYOUT_CHUNK for f in plan.layout)  # several chunks per file are covered
    for f in plan.layout:
        assert (tmp_path / f.path).stat().st_size == f.size, f.path
    other = tmp_path / "again"
    (other / plan.layout[-1].path).mkdir(parents=True)  # a directory where a file must go: that writer fails
    with pytest.raises(IsADirectoryError):
        lay_out(plan, other)
