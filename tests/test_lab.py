"""The lab on real servers: two MinIO with real replication, DynamoDB Local, the real state machine.

These need the servers scripts/lab-deps.sh builds (`make test` runs it first); they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replmon.core.keys import probe_object_key
from replmon.core.record import ProbeStatus
from replmon.lab.lab import EVENTS_TARGET, PREFIX, Lab, ReplicaObserver
from replmon.local.execution import run_request
from replmon.probe.request import load_request
from tests.conftest import ROOT

pytestmark = pytest.mark.lab
REPLMON = [sys.executable, "-m", "replmon.cli"]


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with Lab(tmp_path_factory.mktemp("lab")) as running:
        yield running
    # Every process it started is gone.
    assert all(not s.running for s in running.servers.values())


@pytest.fixture(autouse=True)
def _nothing_left(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "lab" in request.fixturenames:
        lab: Lab = request.getfixturevalue("lab")
        assert lab.leftovers() == {"source": [], "destination": []}


def test_real_replication_pending_then_completed_interval_holds_the_observer(lab: Lab) -> None:
    with ReplicaObserver(lab, PREFIX, period=0.01) as truth:
        res = run_request(load_request({"routes": [lab.route()], "sizes": ["64MiB", "256MiB"], "trials": 1, "max_concurrency": 1,
                           "timeout_seconds": 120, "poll": {"floor_seconds": 0.1, "use_history": False}}), lab.deps(),
                          function_deps=lab.function_deps())
    assert res.execution.status == "SUCCEEDED" and res.failed_iterations == 0
    assert [r.status for r in res.records] == [ProbeStatus.COMPLETED] * 2
    for rec in res.records:
        assert rec.head_count >= 2 and rec.latency_lo and rec.latency_lo > 0  # PENDING was seen, then COMPLETED
        seen = truth.seen[probe_object_key(PREFIX, rec.run_id, rec.route, rec.probe_id)]
        obs_lo, obs_hi = seen[0] - rec.put_end, seen[1] - rec.put_end
        # The replica appeared inside the observer's 10 ms window; that window meets [lo, hi].
        assert rec.latency_lo <= obs_hi + 0.02 and obs_lo - 0.02 <= rec.latency_hi, (rec.latency_lo, rec.latency_hi, obs_lo, obs_hi)
        assert rec.width is not None and rec.width <= max(0.1, 0.02 * rec.latency_hi) + 0.05
        assert rec.destinations[0]["status"] == "REPLICA" and rec.destinations[0]["content_match"]
    # 256 MiB at a 100 MiB/s limit: latency grows with size, as between regions.
    small, big = res.records
    assert big.latency_mid > 2 * small.latency_mid


@pytest.mark.parametrize(
    ("fault", "status"),
    [
        # A hung destination (SIGSTOP): the source stays PENDING, the probe times out -> STUCK.
        ("pause", ProbeStatus.STUCK),
        # A dead destination (process stopped): MinIO, unlike S3 (which keeps temporary failures
        # PENDING, docs/REFERENCES.md R6), marks the source FAILED at once -> FAILED.
        ("stop", ProbeStatus.FAILED),
    ],
)
def test_destination_down_mid_run_is_recorded_not_lost(lab: Lab, fault: str, status: ProbeStatus) -> None:
    store, route_name = lab.store(), f"lab-{fault}"
    dest = lab.servers["destination"]
    recovered = threading.Event()

    def recover_after_record() -> None:
        # Bring the destination back once the record exists, so Cleanup (retrying) can finish.
        deadline = time.time() + 120
        while time.time() < deadline and not store.query(route_name, time.time() - 600, time.time() + 60):
            time.sleep(0.2)
        dest.resume() if fault == "pause" else lab.restart("destination")
        recovered.set()

    # Down from before the PUT: a 1 MiB probe replicates in ~20 ms, faster than a fault could land after it.
    dest.pause() if fault == "pause" else dest.stop()
    helper = threading.Thread(target=recover_after_record, daemon=True)
    helper.start()
    try:
        res = run_request(load_request({"routes": [lab.route(route_name)], "sizes": ["1MiB"], "timeout_seconds": 5,
                           "poll": {"floor_seconds": 0.5, "use_history": False}}), lab.deps(), function_deps=lab.function_deps())
    finally:
        helper.join(150)
        if not recovered.is_set():
            dest.resume() if fault == "pause" else lab.restart("destination")
    [rec] = res.records
    assert rec.status is status, rec
    if status is ProbeStatus.STUCK:
        assert rec.latency_lo >= 4.5 and rec.latency_hi is None and "timeout 5 s" in rec.failure_reason  # from the probe's start
    assert res.execution.status == "SUCCEEDED" and res.failed_iterations == 0


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REPLMON, *args], capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def lab_env(lab: Lab, secret: str | None = None) -> dict[str, str]:
    """Credentials the way the README gives them: in the environment, never on the command line."""
    return {"REPLMON_ACCESS_KEY_ID": lab.keys[0], "REPLMON_SECRET_ACCESS_KEY": secret or lab.keys[1]}


@pytest.mark.parametrize(
    ("extra", "secret", "expected", "code"),
    [
        (["--sizes", "10QB"], None, "--sizes: unknown size unit 'QB'", 2),
        (["--source-endpoint", "http://127.0.0.1:9"], None, "cannot connect", 3),
        ([], "wrong-secret-key", "credentials rejected", 3),
    ],
)
def test_bad_flags_give_one_clear_line_and_write_nothing(lab: Lab, extra: list[str], secret: str | None, expected: str, code: int) -> None:
    store = lab.store()
    before = store.query("badflags", 0, 4e9)
    args = ["probe", "--route", "badflags", "--source-bucket", "probe-source", "--dest-bucket", "probe-replica",
            "--source-endpoint", lab.servers["source"].url, "--dest-endpoint", lab.servers["destination"].url,
            "--dynamodb-endpoint", lab.servers["dynamodb"].url]
    r = cli(*args, *extra, env=lab_env(lab, secret))
    assert r.returncode == code, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], r.stderr
    assert lab.keys[1] not in r.stderr + r.stdout  # no secret in any message
    assert store.query("badflags", 0, 4e9) == before == []


def test_probe_and_report_commands_against_the_lab(lab: Lab, tmp_path: Path) -> None:
    common = ["--dynamodb-endpoint", lab.servers["dynamodb"].url]
    r = cli("probe", "--route", "cli", "--source-bucket", "probe-source", "--dest-bucket", "probe-replica",
            "--source-endpoint", lab.servers["source"].url, "--dest-endpoint", lab.servers["destination"].url,
            "--sizes", "1MiB,16MiB", "--format", "json", *common, env=lab_env(lab))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # one JSON document on stdout, nothing else there
    records = doc["records"]
    assert doc["exit_code"] == 0
    assert sorted(x["size_class"] for x in records) == ["16MiB", "1MiB"] and {x["status"] for x in records} == {"COMPLETED"}
    charts = tmp_path / "charts"
    rep = cli("report", "--route", "cli", "--hours", "1", "--format", "json", "--charts", str(charts), *common)
    assert rep.returncode == 0, rep.stderr
    doc = json.loads(rep.stdout)
    summaries = doc["summaries"]
    csv = cli("report", "--route", "cli", "--hours", "1", "--format", "csv", *common)
    assert csv.returncode == 0 and csv.stdout.splitlines()[0].startswith("route,size_class,size_bytes,probes") and len(csv.stdout.splitlines()) == 3
    assert [(s["size_class"], s["completed"]) for s in summaries] == [("1MiB", 1), ("16MiB", 1)]
    assert len(doc["chart_files"]) == 2 and all(Path(f).read_bytes()[:4] == b"\x89PNG" for f in doc["chart_files"])
    table = cli("report", "--route", "cli", "--hours", "1", *common)
    assert table.returncode == 0 and "16MiB" in table.stdout and "p50" in table.stdout
    assert table.stdout.startswith("OK route cli: RPO now ≤ ")  # the answer first
    # A typo in --route: no data, its own exit code, never "RPO 0"
    typo = cli("report", "--route", "cli-typo", "--hours", "1", *common)
    assert typo.returncode == 4 and "NO DATA route cli-typo: RPO now unknown" in typo.stdout
    # preflight on the lab's route: every check runs against MinIO for real; the
    # replication role is not applicable there (no IAM), never "unknown", and does not fail the exit code
    pre = cli("preflight", "--source-bucket", "probe-source", "--events-target", EVENTS_TARGET, "--source-endpoint",
              lab.servers["source"].url, "--dest-endpoint", lab.servers["destination"].url, "--format", "json", env=lab_env(lab))
    assert pre.returncode == 0, pre.stdout + pre.stderr
    checks = {c["check"]: c for c in json.loads(pre.stdout)["checks"]}
    assert {k: c["verdict"] for k, c in checks.items()} == {
        "source versioning": "pass", "replication configuration": "pass", "rule covers the probe prefix": "pass",
        "RTC on the rule": "warn", "replication metrics on the rule": "warn",  # MinIO's rules carry neither field
        "destination versioning": "pass", "replication events": "warn",  # the lab's webhook entry filters the probe prefix
        "encryption": "pass", "replication role": "not_applicable"}
    assert "replmon-probes" in checks["rule covers the probe prefix"]["detail"] and "no IAM" in checks["replication role"]["detail"]
    assert "mc replicate add" in checks["RTC on the rule"]["detail"]  # why, precisely: not a missing AWS setting
    table = cli("preflight", "--source-bucket", "probe-source", "--events-target", EVENTS_TARGET, "--source-endpoint",
                lab.servers["source"].url, "--dest-endpoint", lab.servers["destination"].url, env=lab_env(lab))
    assert table.returncode == 0 and table.stdout.startswith("probe-source: ready to probe 'replmon-probes/'")
    assert "not_applicable" in table.stdout and "1 not applicable" in table.stdout


def test_the_readme_main_command_prints_the_table_and_writes_the_chart(tmp_path: Path) -> None:
    r = cli("lab", "run", "--sizes", "1MiB,32MiB", "--trials", "1", "--dir", str(tmp_path), env={"REPLMON_PROGRESS": "1"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "probes" in r.stderr and "2/2" in r.stderr  # the progress bar reached the end
    assert "p50 s" in r.stdout and "32MiB" in r.stdout and "left behind: 0 probe objects/versions/uploads" in r.stdout
    assert r.stdout.startswith("OK route lab: RPO now ≤ ") and "2 of 2 probes within target" in r.stdout
    [png] = (tmp_path / "runs").glob("*-latency-vs-size.png")  # one chart per run, named by its run id
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    [data] = (tmp_path / "runs").glob("*.json")
    assert len(json.loads(data.read_text())) == 2
    # Its servers are gone: nothing listens on the ports it printed.
    assert "minio" not in subprocess.run(["pgrep", "-af", str(tmp_path)], capture_output=True, text=True).stdout


def test_each_function_runs_as_a_minio_user_with_only_its_roles_s3_statements(lab: Lab) -> None:
    """MinIO enforces AWS-style policies: the lab's users hold exactly template.yaml's statements."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import ClientError

    from replmon.adapters.s3 import S3ObjectStore
    from replmon.lab.lab import DEST_BUCKET, SOURCE_BUCKET, function_policy

    def client(fn: str) -> Any:
        access, secret = lab.users[fn]
        return boto3.session.Session(access, secret).client("s3", endpoint_url=lab.servers["source"].url, region_name="us-east-1",
                                                             config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}))

    def outcome(call: Any) -> str:
        try:
            r = call()
        except ClientError as exc:
            return str(exc.response["Error"]["Code"])
        errors = r.get("Errors") if isinstance(r, dict) else None
        return str(errors[0]["Code"]) if errors else "allowed"

    key = f"{PREFIX}lp-check/x"
    upload, cleanup, plan = client("UploadProbe"), client("Cleanup"), client("PlanProbes")
    try:
        version = upload.put_object(Bucket=SOURCE_BUCKET, Key=key, Body=b"x")["VersionId"]
        doomed = {"Objects": [{"Key": key, "VersionId": version}]}
        seen = {
            "upload puts outside its prefix": outcome(lambda: upload.put_object(Bucket=SOURCE_BUCKET, Key="elsewhere/x", Body=b"x")),
            "upload deletes": outcome(lambda: upload.delete_objects(Bucket=SOURCE_BUCKET, Delete=doomed)),
            "cleanup puts": outcome(lambda: cleanup.put_object(Bucket=SOURCE_BUCKET, Key=key, Body=b"y")),
            "cleanup lists outside the prefix": outcome(lambda: cleanup.list_object_versions(Bucket=SOURCE_BUCKET, Prefix="elsewhere/")),
            "plan lists": outcome(lambda: plan.list_object_versions(Bucket=SOURCE_BUCKET, Prefix=PREFIX)),
            "cleanup lists its prefix": outcome(lambda: cleanup.list_object_versions(Bucket=SOURCE_BUCKET, Prefix=PREFIX)),
        }
        assert seen == {"upload puts outside its prefix": "AccessDenied", "upload deletes": "AccessDenied",
                        "cleanup puts": "AccessDenied", "cleanup lists outside the prefix": "AccessDenied",
                        "plan lists": "AccessDenied", "cleanup lists its prefix": "allowed"}
        # PlanProbes reaches no route bucket: its only S3 statement is the fleet's plan bucket (plans/*)
        plan_policy = json.dumps(function_policy("PlanProbes") or {})
        assert SOURCE_BUCKET not in plan_policy and DEST_BUCKET not in plan_policy and "PlanBucket/plans/*" in plan_policy
        assert function_policy("UploadProbe") is not None
    finally:
        for which, bucket in (("source", SOURCE_BUCKET), ("destination", DEST_BUCKET)):
            S3ObjectStore(lab.s3(which)).delete_all_versions(bucket, key)


@pytest.mark.parametrize(
    ("extra", "code", "status"),
    [
        (["--prefix", "unreplicated/"], 1, "FAILED"),  # no replication rule covers the prefix: FAILED, exit 1
        (["--target", "0.001"], 1, "COMPLETED"),  # replicated, but over the RPO target: exit 1
        (["--sizes", "1GiB", "--timeout", "1"], 3, "ERROR"),  # the upload outlived the probe's deadline: not measured, exit 3
    ],
)
def test_probe_exit_codes_on_real_outcomes(lab: Lab, extra: list[str], code: int, status: str) -> None:
    r = cli("probe", "--route", f"exit-{code}-{status.lower()}", "--source-bucket", "probe-source", "--dest-bucket", "probe-replica",
            "--source-endpoint", lab.servers["source"].url, "--dest-endpoint", lab.servers["destination"].url,
            "--dynamodb-endpoint", lab.servers["dynamodb"].url, "--sizes", "1MiB", "--format", "json", *extra, env=lab_env(lab))
    assert r.returncode == code, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exit_code"] == code and [x["status"] for x in doc["records"]] == [status]
    for which, bucket in (("source", "probe-source"), ("destination", "probe-replica")):  # nothing left under either prefix
        for prefix in ("unreplicated/", PREFIX):
            assert lab.s3(which).list_object_versions(Bucket=bucket, Prefix=prefix).get("Versions", []) == []
