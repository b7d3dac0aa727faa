"""The CLI tells the truth: one line naming the flag for bad input (before any server starts or any
endpoint is contacted), documented exit codes, one document on stdout for JSON."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from replmon.cli.common import exit_code
from replmon.core.record import ProbeRecord, ProbeStatus
from tests.conftest import ROOT

REPLMON = [sys.executable, "-m", "replmon.cli"]
AWS_LESS = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``replmon ARGS`` in this process (the console entry, ``main``, with exactly this environment
    and working directory): what a shell sees, without a second interpreter's imports per call.
    tests/test_operator_cli.py runs the installed command as a process."""
    from replmon.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with mock.patch.dict(os.environ, {**(AWS_LESS if env is None else env), "REPLMON_CACHE": "/nonexistent"}, clear=True), \
            contextlib.chdir(cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess([*REPLMON, *args], code, stdout.getvalue(), stderr.getvalue())


LAB = ["lab", "run", "--dir"]
LOCAL_PROBE = ["probe", "--source-bucket", "src-bucket", "--dest-bucket", "dst-bucket", "--source-endpoint", "http://127.0.0.1:9",
               "--dest-endpoint", "http://127.0.0.1:9", "--dynamodb-endpoint", "http://127.0.0.1:9"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["lab", "run", "--bandwidth", "10MiB"], "--bandwidth: 10MiB is below MinIO's minimum replication limit of 100MiB"),
        (["lab", "run", "--bandwidth", "0"], "--bandwidth: size '0' must be at least 1 byte"),
        (["lab", "run", "--bandwidth", "fast"], "--bandwidth: 'fast' is not a size"),
        (["lab", "run", "--resolution", "nan"], "--resolution: must be a finite number"),
        (["lab", "run", "--timeout", "-5"], "--timeout: must be at least 1"),
        (["lab", "run", "--sizes", "crr-ladder", "--trials", "100"], "--trials: 1400 probes"),
        ([*LOCAL_PROBE, "--target", "inf"], "--target: must be a finite number"),
        ([*LOCAL_PROBE, "--sizes", "10QB"], "--sizes: unknown size unit 'QB'"),
        ([*LOCAL_PROBE, "--dynamodb-endpoint", "127.0.0.1:8000"], "--dynamodb-endpoint: '127.0.0.1:8000' is not an http(s) URL"),
        (["report", "--route", "r", "--dynamodb-endpoint", "http://127.0.0.1:9", "--charts", "/proc/nope"],
         "--charts: cannot make /proc/nope"),
        (["report", "--route", "r", "--hours", "-1", "--dynamodb-endpoint", "http://127.0.0.1:9"], "--hours: -1 is outside (0, 9600]"),
        (["probe", "--source-bucket", "a-bucket", "--dest-bucket", "b-bucket", "--table", "t"],
         "no AWS region: pass --source-region, or set AWS_REGION"),
        (["report", "--route", "r"], "no AWS region: pass --region, or set AWS_REGION"),
        (["cost", "--sizes", "12XB"], "--sizes: unknown size unit 'XB'"),
        (["lab", "run", "--sizes", "[1MiB]"], "--sizes: '[1MiB]' is not a size"),  # brackets survive (no markup)
        (["lab", "bench", "--compose-size", "lots"], "--compose-size: 'lots' is not a size"),
        (["report", "--route", "r", "--format", "xml"], "'xml' is not one of 'table', 'json', 'csv'"),
        (["probe", "--no-such-flag"], "No such option: --no-such-flag"),
        (["lab", "bench", "--trials", "0"], "--trials: must be at least 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag_and_exit_2(tmp_path: Path, args: list[str], expected: str) -> None:
    t0 = time.time()
    r = cli(*args, env={**AWS_LESS, "HOME": str(tmp_path)}, cwd=tmp_path)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2, r.stdout + r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], r.stderr
    assert r.stdout == ""
    assert time.time() - t0 < 20  # nothing was started or waited for
    assert not (tmp_path / "lab-data").exists()  # no lab directory made, no server started


def test_a_lab_directory_that_is_a_file_or_unwritable_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x")
    r = cli(*LAB, str(f))
    assert r.returncode == 2 and "is a file" in r.stderr
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    if os.geteuid() != 0:  # root may write anywhere; the check is the same code path
        r = cli(*LAB, str(ro / "lab"))
        assert r.returncode == 2 and "not writable" in r.stderr


def test_help_documents_the_exit_codes() -> None:
    r = cli("probe", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "0 OK: every route judged is within its target" in text and "1 breach: replication is late or failing" in text
    assert "2 usage: a flag" in text and "3 not measured" in text and "130 interrupted by SIGINT" in text


def test_presets_and_cost_speak_json(tmp_path: Path) -> None:
    presets = json.loads(cli("presets", "--format", "json").stdout)["presets"]
    crr = next(p for p in presets if p["preset"] == "crr-ladder")
    assert crr["trials"] == 10 and crr["sizes"][:2] == ["10MiB", "20MiB"] and crr["size_bytes"][0] == 10 * 2**20
    doc = json.loads(cli("cost", "--format", "json").stdout)
    assert doc["modelled"] is True and doc["prices_as_of"] and doc["total_usd_per_month"] > 0
    rtc = next(x for x in doc["lines"] if x["item"] == "S3 RTC fee")
    assert rtc["usd_per_month"] / doc["total_usd_per_month"] > 0.5  # the default schedule's cost is mostly the RTC fee
    csv = cli("cost", "--format", "csv").stdout.splitlines()
    assert csv[0] == "item,quantity,unit,usd_per_month,share_percent" and csv[-1].startswith("total,")
    assert "S3 RTC fee," in csv[6] and csv[6].split(",")[2] == "GiB replicated"  # quantity and unit in their own columns


@pytest.mark.parametrize("args", [
    ["cost"], ["cost", "--sizes", "crr-ladder", "--cross-region", "--source-region", "ap-northeast-1"], ["cost", "--routes", "1,10,100"],
    ["presets"], *(["events", "parse", str(p.relative_to(ROOT))] for p in sorted((ROOT / "events").rglob("*.json"))
                   if p.parent.name == "s3" or p.name == "ingest_events.json"),
], ids=lambda a: " ".join(a))
def test_every_json_document_validates_against_the_output_schema(args: list[str]) -> None:
    """docs/output.schema.json is the one output contract: each command's --format json document is
    exactly one of its definitions (jsonschema, draft 2020-12)."""
    import jsonschema

    schema = json.loads((ROOT / "docs" / "output.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    r = cli(*args, "--format", "json")
    assert r.returncode in (0, 1), r.stderr  # events parse: 1 when a record fails, still one document
    doc = json.loads(r.stdout)
    errors = [f"{list(e.path)}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert errors == [] and doc["schema_version"] == 1


def test_cost_models_one_runs_price_and_duration() -> None:
    """``usd_per_run`` is what one more run adds (the month's fixed items cancel out); ``run_seconds``
    takes the probes ``--max-concurrency`` at a time, each at least its modelled replication time."""
    one, two = (json.loads(cli("cost", "--sizes", "crr-ladder", "--cross-region", "--max-concurrency", c, "--format", "json").stdout)
                for c in ("1", "2"))
    a = one["assumptions"]
    replication = sum(one["probes_per_run"] / 14 * (a["replication_base_seconds"] + mib / a["replication_mib_per_s"])
                      for mib in (10 * 2**i for i in range(14)))  # the ladder: 10 MiB doubling to 80 GiB, 10 trials each
    assert replication < one["run_seconds"] < 1.2 * replication and 1.9 < one["run_seconds"] / two["run_seconds"] <= 2.0
    variable = [x["usd_per_month"] for x in one["lines"] if x["item"].startswith(("S3 RTC", "S3 inter-region"))]
    assert one["usd_per_run"] == two["usd_per_run"] and 0 < sum(variable) / one["runs_per_month"] <= one["usd_per_run"]
    assert one["usd_per_run"] < one["total_usd_per_month"] / one["runs_per_month"] * 1.01


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("args", [["presets"], ["events", "parse", "events/s3/sqs_batch_mixed.json"]], ids=" ".join)
def test_tables_wrap_and_never_cut_a_value(args: list[str], columns: int) -> None:
    """At 80 and 100 columns, every value the JSON holds is in the table whole (wrapped where it is
    wider than the console), no line is wider than the console, and nothing ends in an ellipsis."""
    from replmon.cli import render

    width = render.out.width
    render.out.width = columns
    try:
        text = cli(*args).stdout
    finally:
        render.out.width = width
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= columns
    flat = "".join(text.split())
    doc = json.loads(cli(*args, "--format", "json").stdout)
    if args[0] == "presets":
        values = [v for p in doc["presets"] for v in (p["preset"], ",".join(p["sizes"]), str(p["trials"]), p["description"])]
    else:
        values = [r["error"] for r in doc["failures"]] + [r["signal"].get("key") or "" for r in doc["records"] if "signal" in r]
    assert values and all("".join(v.split()) in flat for v in values), [v for v in values if "".join(v.split()) not in flat]


#: Commands without --format, each because it prints no data: status lines on stderr (spool retry
#: and drop), the shell unsets for ``eval`` (lab down), a fio job file (fio jobfile),
#: nothing (lab serve), or figures written to docs/BENCH*.md (lab bench*). docs/CLI.md names them.
NO_FORMAT = {"lab down", "lab serve", "lab bench", "lab bench-ingest", "lab bench-stall", "lab bench-fleet", "lab bench-collector",
             "lab bench-mounts", "fio jobfile", "spool retry", "spool drop"}


def test_every_command_that_prints_data_takes_format() -> None:
    """Every command takes --format table|json|csv (its own, or its group's: ``replmon fleet
    --format json put``) but the few of NO_FORMAT, which docs/CLI.md lists as printing no data."""
    import typer

    from replmon.cli.app import app

    def leaves(cmd: Any, path: tuple[str, ...] = (), inherited: bool = False) -> Iterator[tuple[str, bool]]:
        has = any("--format" in getattr(p, "opts", []) for p in cmd.params)
        if getattr(cmd, "commands", None):
            for name, sub in cmd.commands.items():
                yield from leaves(sub, (*path, name), inherited or has)
        else:
            yield " ".join(path), has or inherited

    without = {name for name, has in leaves(typer.main.get_command(app)) if not has}
    assert without == NO_FORMAT
    readme = " ".join((ROOT / "docs" / "CLI.md").read_text().split())
    listed = readme.split("Every command that prints data takes `--format table|json|csv`", 1)[1].split("none but", 1)[1].split(")", 1)[0]
    assert set(re.findall(r"`([a-z][a-z *-]*)`", listed)) == {"lab bench*" if n.startswith("lab bench") else n for n in NO_FORMAT}


def rec(status: ProbeStatus, hi: float | None = 1.0, target: float = 900.0) -> ProbeRecord:
    return ProbeRecord(route="r", probe_id="p", run_id="19700101T000000Z-x", planned_at=0.0, size_bytes=1, size_class="1B", trial=1, status=status,
                       latency_lo=0.0 if hi is not None else None, latency_hi=hi, target_seconds=target)


@pytest.mark.parametrize(
    ("records", "planned", "ok", "code"),
    [
        ([rec(ProbeStatus.COMPLETED)], 1, True, 0),
        ([rec(ProbeStatus.COMPLETED, hi=1000.0)], 1, True, 1),  # over target
        ([rec(ProbeStatus.FAILED, hi=None)], 1, True, 1),
        # a STUCK probe breaches through the RPO it raises (at least its age, lo) when that is over the target...
        ([replace(rec(ProbeStatus.STUCK, hi=None), latency_lo=7200.0), rec(ProbeStatus.ERROR, hi=None)], 2, True, 1),
        ([replace(rec(ProbeStatus.STUCK, hi=None), latency_lo=300.0)], 1, True, 3),  # ...else it is not measured (a ticket)
        ([rec(ProbeStatus.ERROR, hi=None)], 1, True, 3),
        ([rec(ProbeStatus.COMPLETED)], 2, True, 3),  # a record missing
        ([rec(ProbeStatus.COMPLETED)], 1, False, 3),  # the execution failed
    ],
)
def test_exit_codes_by_outcome(records: list[ProbeRecord], planned: int, ok: bool, code: int) -> None:
    assert exit_code(records, planned, ok) == code


def test_stack_outputs_name_what_the_template_outputs() -> None:
    """--stack-name reads LatencyTableName, SourceBucket and DestinationBucket: the template must output them."""
    from replmon.local.template import load_template
    from tests.conftest import TEMPLATE

    outputs = load_template(TEMPLATE)["Outputs"]
    assert {"LatencyTableName", "SourceBucket", "DestinationBucket"} <= set(outputs)


def test_stack_name_finds_the_table_in_cloudformation_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws

    from replmon.cli.common import stack_outputs

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        import boto3

        template = {"Resources": {"T": {"Type": "AWS::SQS::Queue"}},
                    "Outputs": {"LatencyTableName": {"Value": "replmon-LatencyTable-ABC"}, "SourceBucket": {"Value": "src"}}}
        boto3.client("cloudformation", region_name="us-east-1").create_stack(StackName="replmon", TemplateBody=json.dumps(template))
        assert stack_outputs("replmon", "us-east-1", None)["LatencyTableName"] == "replmon-LatencyTable-ABC"
        from replmon.cli.common import CliError

        with pytest.raises(CliError, match="--stack-name nope: "):
            stack_outputs("nope", "us-east-1", None)
