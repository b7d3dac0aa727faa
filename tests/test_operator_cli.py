"""An operator's CLI: the answer first, exit codes a script can gate on, one output
schema (docs/output.schema.json), tables that never cut a number at 80 or 100 columns, help
that reads at 80 columns with no secret-valued flag, an ad-hoc probe without a
table. `replmon report` runs here against DynamoDB served by moto on loopback, seeded with
records, and `replmon probe` against S3 served the same way."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer

from replmon import __version__
from replmon.cli.app import app
from replmon.cli.exitcodes import COMMANDS, markdown
from replmon.cli.output import SUMMARY_KEYS
from replmon.core.record import ProbeRecord, ProbeStatus
from tests.conftest import ROOT

SCHEMA = json.loads((ROOT / "docs" / "output.schema.json").read_text())
REPLMON = [sys.executable, "-m", "replmon.cli"]


def validate(doc: dict[str, Any], definition: str = "measurement") -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    errors = [f"{list(e.path)}: {e.message}" for e in
              jsonschema.Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": SCHEMA["$defs"]}).iter_errors(doc)]
    assert errors == []
    assert jsonschema.Draft202012Validator(SCHEMA).is_valid(doc)


def keys_are_snake_case(value: Any, where: str = "") -> list[str]:
    """Every key of a document (size classes and windows are values, never keys)."""
    bad = []
    if isinstance(value, dict):
        for k, v in value.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", k):
                bad.append(f"{where}.{k}")
            bad += keys_are_snake_case(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            bad += keys_are_snake_case(v, f"{where}[{i}]")
    return bad


def numbers_are_numbers(value: Any) -> list[str]:
    """No number hides in a string ("0.02", "66,240.0 transitions")."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers_are_numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in numbers_are_numbers(v)]
    return [value] if isinstance(value, str) and re.fullmatch(r"[-+]?[\d,]+(\.\d+)?( ?%| \w+)?", value) else []


def cli(*args: str, env: dict[str, str] | None = None, columns: int | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "REPLMON_", "COLUMNS"))}
    base.update({"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "REPLMON_CACHE": "/nonexistent", **(env or {})})
    if columns:
        base["COLUMNS"] = str(columns)
    return subprocess.run([*REPLMON, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=base)


# ------------------------------------------------------------------------------------------- help
def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, cmd in group.commands.items():
        if getattr(cmd, "hidden", False):
            continue
        if hasattr(cmd, "commands"):
            if getattr(cmd, "invoke_without_command", False):  # a group that is a command itself (replmon fleet)
                yield (*path, name)
            yield from commands(cmd, (*path, name))
        else:
            yield (*path, name)


SECRET = re.compile(r"secret|password|passwd|token|credential|access-key|private-key|api-key", re.I)


def test_every_commands_help_reads_at_80_columns_lists_its_exit_codes_and_takes_no_secret() -> None:
    """Help is plain text at 80 columns: no line longer, no flag split at its hyphen, nothing
    truncated, brackets kept (Rich markup once ate "[lo, hi]"), every command's exit codes
    listed from the one table (cli/exitcodes.py), and no option whose value is a secret:
    credentials come from the environment, a profile or a file only."""
    from typer.testing import CliRunner

    runner = CliRunner()
    root = typer.main.get_command(app)
    seen = set()
    for path in commands(root):
        name = " ".join(path)
        seen.add(name)
        r = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
        assert r.exit_code == 0, (name, r.output)
        text = r.output
        assert max(len(line) for line in text.splitlines()) <= 80, name
        assert not re.search(r"--[a-z][a-z-]*-$", text, re.M), f"{name}: a flag is split at a line end"
        assert "…" not in text and "Input should" not in text, name
        assert "Exit codes:" in text, name
        for code in COMMANDS[name]:
            assert re.search(rf"^  {int(code)}  ", text, re.M), f"{name}: exit code {int(code)} not listed"
        cmd = root
        for part in path:
            cmd = cmd.commands[part]  # type: ignore[attr-defined]
        options = [o for p in cmd.params for o in (*p.opts, *p.secondary_opts)]
        assert [o for o in options if SECRET.search(o)] == [], f"{name} takes a secret on the command line"
    assert seen == set(COMMANDS), "cli/exitcodes.py COMMANDS must list exactly the app's commands"
    bench = runner.invoke(app, ["lab", "--help"], env={"COLUMNS": "80"}).output + runner.invoke(
        app, ["lab", "bench", "--help"], env={"COLUMNS": "80"}).output
    assert "[lo, hi]" in " ".join(bench.split())


#: Flag names that name the same concept a different way: never both in the CLI.
SYNONYMS = [("--endpoint-url", "--source-endpoint"), ("--slo-threshold", "--target"), ("--chart", "--charts"),
            ("--target-seconds", "--target"), ("--mount", "--mount-target")]


def flag_signature(p: Any) -> tuple[str, bool]:
    """What a flag's value is: its annotated type (float, Path, str, an enum...; one value or a
    repeated one alike) and whether it is an on/off switch. One flag name: one of these everywhere."""
    kind = str(p.bare_type()).removesuffix(" | None")
    return re.sub(r"^list\[(.*)\]$", r"\1", kind), bool(getattr(p, "is_flag", False))


def test_no_two_commands_use_one_flag_name_for_two_concepts() -> None:
    """Read every command's parameters from click (typer builds them): a flag name has one value
    type, repetition and on/off-ness in every command that takes it, its help says the same thing
    (`--target` is the latency target in seconds everywhere, a mount target is `--mount`), and no
    two synonyms of one concept coexist (`--chart` FILE vs `--charts` DIR: both are `--charts` DIR)."""
    root = typer.main.get_command(app)
    uses: dict[str, dict[tuple[str, bool], list[str]]] = {}
    helps: dict[str, list[tuple[str, str]]] = {}
    for path in commands(root):
        cmd = root
        for part in path:
            cmd = cmd.commands[part]  # type: ignore[attr-defined]
        for p in cmd.params:
            if p.param_type_name != "option" or getattr(p, "hidden", False):
                continue
            for opt in (*p.opts, *p.secondary_opts):
                if opt.startswith("--"):
                    uses.setdefault(opt, {}).setdefault(flag_signature(p), []).append(" ".join(path))
                    helps.setdefault(opt, []).append((" ".join(path), p.help or ""))
    assert len(uses) > 50 and "--target" in uses
    clashes = {opt: sigs for opt, sigs in uses.items() if len(sigs) > 1}
    assert clashes == {}, "one flag name, several kinds of value:\n" + "\n".join(f"{o}: {s}" for o, s in clashes.items())
    assert [pair for pair in SYNONYMS if all(name in uses for name in pair)] == []
    # --target: a number of seconds, and its help says it is the latency target
    assert set(uses["--target"]) == {("float", False)}, uses["--target"]
    assert all(re.search(r"target", h, re.I) and re.search(r"second|LatencyTargetSeconds", h, re.I) for _, h in helps["--target"]), \
        helps["--target"]
    assert {c for cmds in uses["--mount"].values() for c in cmds} == {"fio report", "lab fio"}
    assert {c for cmds in uses["--charts"].values() for c in cmds} == {"report", "fio report", "lab fio"}


def test_version() -> None:
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    r = cli("--version")
    assert r.returncode == 0 and r.stdout == f"replmon {declared}\n" and __version__ == declared


def test_the_exit_code_tables_in_the_docs_are_the_codes() -> None:
    """One table (cli/exitcodes.py): docs/SEMANTICS.md carries it verbatim (docs/CLI.md points there; no copy elsewhere)."""
    assert "<!-- exit-codes:start -->" not in (ROOT / "README.md").read_text() + (ROOT / "docs" / "CLI.md").read_text()
    for doc in (ROOT / "docs" / "SEMANTICS.md",):
        m = re.search(r"<!-- exit-codes:start -->\n(.*?)<!-- exit-codes:end -->", doc.read_text(), re.S)
        assert m, f"{doc.name} has no exit-codes block"
        assert m.group(1) == markdown(), f"{doc.name}: regenerate with python -c 'from replmon.cli.exitcodes import markdown; print(markdown())'"


def test_the_schema_documents_every_field_in_semantics() -> None:
    text = (ROOT / "docs" / "SEMANTICS.md").read_text()
    section = text[text.index("## Output"):]
    for name in ("route", "summary", "finding", "record"):
        missing = [k for k in SCHEMA["$defs"][name]["properties"] if f"`{k}`" not in section]
        assert missing == [], f"docs/SEMANTICS.md 'Output' does not explain {name} fields {missing}"


# ------------------------------------------------------------------------------------------- report
@pytest.fixture(scope="module")
def moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server._server.server_port}"  # type: ignore[attr-defined]
    finally:
        server.stop()


NOW = time.time()


def probe(route: str, i: int, status: ProbeStatus, hi: float | None, size: str = "1MiB", ago: float = 0.0) -> ProbeRecord:
    t = NOW - ago
    run = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t)) + f"-{i:06x}"
    lo = None if hi is None else round(hi * 0.97, 6)
    if status is ProbeStatus.STUCK:
        lo, hi = 7200.0, None
    return ProbeRecord(route=route, probe_id=f"p{i}", run_id=run, planned_at=t - 1, size_bytes=2**20 if size == "1MiB" else 2**30,
                       size_class=size, trial=1, status=status, put_end=t, latency_lo=lo, latency_hi=hi, head_count=3, target_seconds=900,
                       bound_seconds=1.0)


@pytest.fixture(scope="module")
def table() -> Iterator[str]:
    """Three routes over 3 h at a 15-minute cadence, in moto's DynamoDB: `healthy`; `late` (the
    last hour's 1 GiB probes take 25 times longer); `broken` (a FAILED probe in the last hour)."""
    from moto import mock_aws

    from replmon.adapters import clients
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.local.tables import ensure_table

    with mock_aws():
        client = clients.dynamodb(clients.STORE, region="us-east-1", keys=("testing", "testing"))
        ensure_table(client, "t")
        items = []
        i = 0
        for route in ("healthy", "late", "broken"):
            for k in range(12):
                for size, base in (("1MiB", 8.0), ("1GiB", 60.0)):
                    i += 1
                    hi = base * (1 + (k % 7) / 10)
                    status = ProbeStatus.COMPLETED
                    if route == "late" and k < 4 and size == "1GiB":
                        hi *= 25
                    if route == "broken" and k == 1 and size == "1MiB":
                        status, hi = ProbeStatus.FAILED, None
                    items.append(probe(route, i, status, hi, size, ago=k * 900 + 30).to_item())
        for start in range(0, len(items), 25):  # BatchWriteItem: 25 puts a call
            client.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": DynamoLatencyStore._item(x)}} for x in items[start:start + 25]]})
        yield "t"


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def report(table: str, *args: str, columns: int | None = None) -> Ran:
    """`replmon report` in this process (moto's DynamoDB is here), as a terminal of ``columns``."""
    import contextlib
    import io

    from replmon.cli import render
    from replmon.cli.app import main

    stdout, stderr = io.StringIO(), io.StringIO()
    width = (render.out.width, render.err.width)
    render.out.width = render.err.width = columns or 220
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                main(["report", "--table", table, "--region", "us-east-1", *args])
                code = 0
            except SystemExit as exc:
                code = int(exc.code or 0)
    finally:
        render.out.width, render.err.width = width
    return Ran(code, stdout.getvalue(), stderr.getvalue())


@pytest.mark.parametrize(("route", "code", "headline"), [
    ("healthy", 0, "OK route healthy: RPO now ≤ 78 s (last 1 h), target 900 s; 24 of 24 probes within target (last 24 h)"),
    ("late", 1, "BREACH route late: RPO now ≤ 1,950 s (last 1 h), target 900 s; 20 of 24 probes within target"),
    ("broken", 1, "BREACH route broken: RPO now UNBOUNDED (last 1 h), target 900 s; 23 of 24 probes within target"),
    ("helthy", 4, "NO DATA route helthy: RPO now unknown (last 1 h), target 900 s; 0 of 0 probes within target"),
])
def test_report_is_a_gate_a_script_can_trust(table: str, route: str, code: int, headline: str) -> None:
    """Exit 1 when the RPO is over target or unbounded, 4 for a route with no data (a typo:
    never "RPO 0" with exit 0), 0 otherwise; the headline comes before the table."""
    r = report(table, "--route", route, columns=100)
    assert r.returncode == code, r.stdout + r.stderr
    assert " ".join(r.stdout.split()).startswith(headline), r.stdout[:400]
    if code == 1:
        assert "failing [page]: " in r.stdout
    doc = json.loads(report(table, "--route", route, "--format", "json").stdout)
    validate(doc)
    assert doc["exit_code"] == code and doc["routes"][0]["verdict"] == {0: "ok", 1: "breach", 4: "no_data"}[code]
    if code == 4:
        assert doc["routes"][0]["rpo_seconds"] is None and doc["health"][0]["rpo_seconds"] is None


def test_report_fleet_lists_every_registry_route_riskiest_first(table: str) -> None:
    """`report --fleet` reads the registry, not a list of names: every route, probed or
    not, in risk order (unbounded, breach, a probed route with no data, the rest by RPO share),
    the exit code the worst route's; a passive route keeps its reason."""
    from replmon.adapters import clients
    from replmon.adapters.registry_table import DynamoRegistry
    from replmon.core.registry import Reason, RouteVerdict, group_of, load_route_spec
    from replmon.fleet.risk import COLUMNS

    registry = DynamoRegistry(table, clients.dynamodb(clients.STORE, region="us-east-1", keys=("testing", "testing")))

    def spec(name: str, origin: str = "explicit", verdict: RouteVerdict | None = None) -> Any:
        raw: dict[str, Any] = {"name": name, "group": group_of(name, 1), "origin": origin,
                               "source": {"account": "111122223333", "region": "us-east-1", "bucket": f"{name}-src"},
                               "destinations": [{"account": "111122223333", "region": "eu-west-1", "bucket": f"{name}-dst"}]}
        if verdict is not None:
            raw["verdict"] = verdict.model_dump()
        return load_route_spec(raw)

    for name in ("healthy", "late", "broken", "fresh"):
        assert registry.put_explicit(spec(name), None)
    assert registry.put_discovered(spec("optout", "discovered", RouteVerdict.of(Reason.OPTED_OUT)))
    r = report(table, "--fleet", "--format", "json")
    doc = json.loads(r.stdout)
    validate(doc)
    rows = doc["fleet"]
    assert [x["route"] for x in rows] == ["broken", "late", "fresh", "healthy", "optout"], rows
    assert r.returncode == doc["exit_code"] == 1
    assert rows[0]["rpo_seconds"] == "unbounded" and rows[1]["verdict"] == "breach" and rows[1]["worst_size_class"] == "1GiB"
    assert rows[2]["verdict"] == "no_data" and rows[2]["mode"] == "probe" and rows[2]["probes"] == 0
    assert rows[3]["rpo_share_of_target"] == round(78 / 900, 3) and rows[3]["reason"] == "-"
    assert rows[4]["mode"] == "passive" and rows[4]["reason"].startswith("OPTED_OUT: the source bucket carries the opt-out tag")
    table_out = report(table, "--fleet", columns=200).stdout
    assert table_out.splitlines()[0] == "fleet: 5 routes: 2 breach, 0 not measured, 2 no data, 1 ok"
    assert report(table, "--fleet", "--format", "csv").stdout.splitlines()[0] == ",".join(COLUMNS)
    both = report(table, "--fleet", "--route", "late")
    assert both.returncode == 2 and "--fleet and --route" in both.stderr
    for name in ("healthy", "late", "broken", "fresh", "optout"):  # the module's other tests read routes by name only
        registry.delete_route(group_of(name, 1), name)


def test_a_looser_target_passes_the_late_route_and_several_routes_give_the_worst_code(table: str) -> None:
    assert report(table, "--route", "late", "--target", "2000").returncode == 0
    assert report(table, "--route", "healthy", "--route", "helthy").returncode == 4
    assert report(table, "--route", "helthy", "--route", "late", "--route", "healthy").returncode == 1


def test_one_output_schema_numbers_as_numbers_units_in_the_keys(table: str) -> None:
    doc = json.loads(report(table, "--route", "late", "--route", "healthy", "--format", "json").stdout)
    validate(doc)
    assert keys_are_snake_case(doc) == [] and numbers_are_numbers(doc) == []
    s = doc["summaries"][0]
    assert isinstance(s["p50_seconds"], float) and s["percentile_samples"] == 12 and s["small_sample_percentiles"] == ["p99"]
    csv = report(table, "--route", "late", "--format", "csv").stdout.splitlines()
    assert csv[0] == ",".join(SUMMARY_KEYS) and len(csv) == 3
    assert "p99" in csv[1].split(",")  # the small-sample marker, a value of its own column


def test_tables_never_cut_a_number(table: str) -> None:
    """Every figure the JSON holds is printed whole at 80 and 100 columns, default and --wide
    (the 100-column default table fits; the rest print transposed)."""
    doc = json.loads(report(table, "--route", "late", "--format", "json").stdout)
    for columns, wide in ((80, []), (100, []), (100, ["--wide"])):
        text = report(table, "--route", "late", *wide, columns=columns).stdout
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= columns
        for s in doc["summaries"]:
            for key in ("p50_seconds", "p90_seconds", "max_seconds"):
                shown = {f"{s[key] + d:.2f}" for d in (-1e-6, 1e-6)} | {f"{s[key]:.0f}"}  # the JSON keeps 6 decimals
                assert any(x in text for x in shown), (key, s[key])
            if wide:
                assert f"{s['mib_per_second']:.1f}" in text and f"{s['widest_interval_seconds']:.3f}" in text


def test_report_charts_are_named_per_report(table: str, tmp_path: Path) -> None:
    doc = json.loads(report(table, "--route", "late", "--charts", str(tmp_path), "--format", "json").stdout)
    files = [Path(f) for f in doc["chart_files"]]
    assert [f.name.split("Z-", 1)[1] for f in files] == ["latency-over-time.png", "latency-vs-size.png"]
    assert all(f.parent == tmp_path and f.read_bytes()[:4] == b"\x89PNG" and f.name.startswith("report-late-") for f in files)


def test_errors_speak_the_projects_words(table: str) -> None:
    for args, expected in ((["--route", "x", "--rpo-window", "5"], "--rpo-window: must be at least 60"),
                           (["--route", "x", "--slo-target-percent", "101"], "--slo-target-percent: must be at most 99.999"),
                           (["--route", "x", "--hours", "many"], "--hours: must be a number")):
        r = report(table, *args)
        assert r.returncode == 2 and r.stderr.strip() == f"error: {expected}" and "Input should" not in r.stderr


# ------------------------------------------------------------------------------------------- ad hoc probe
def test_an_ad_hoc_probe_needs_no_table_and_keeps_the_exit_codes(moto_server: str) -> None:
    """No --table: results on stdout only, the same exit code a kept run would get. moto's S3 never
    replicates, so the probe ends FAILED ("no replication rule covers the prefix"): exit 1."""
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    for b in ("adhoc-src", "adhoc-dst"):
        s3.create_bucket(Bucket=b)
        s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
    env = {"REPLMON_ACCESS_KEY_ID": "testing", "REPLMON_SECRET_ACCESS_KEY": "testing", "REPLMON_SOURCE_ENDPOINT": moto_server,
           "REPLMON_DEST_ENDPOINT": moto_server, "REPLMON_SOURCE_BUCKET": "adhoc-src", "REPLMON_DEST_BUCKET": "adhoc-dst"}
    r = cli("probe", "--route", "adhoc", "--sizes", "1MiB", "--timeout", "5", "--resolution", "0.5", "--format", "json", env=env, timeout=180)
    assert r.returncode == 1, r.stderr
    assert "ad hoc: no latency table" in r.stderr
    doc = json.loads(r.stdout)
    validate(doc)
    assert doc["kept_in"] is None and doc["verdict"] == "breach" and [f["kind"] for f in doc["routes"][0]["findings"]] == ["probe_failed"]
    assert [x["status"] for x in doc["records"]] == ["FAILED"] and "no replication rule covers" in doc["records"][0]["failure_reason"]
    assert keys_are_snake_case(doc) == []
    assert s3.list_object_versions(Bucket="adhoc-src", Prefix="replmon-probes/").get("Versions", []) == []  # cleaned up


def test_secrets_come_from_the_environment_only() -> None:
    r = cli("probe", "--source-bucket", "a-bucket", "--dest-bucket", "b-bucket", "--source-endpoint", "http://127.0.0.1:9",
            env={"REPLMON_ACCESS_KEY_ID": "AKIA"})
    assert r.returncode == 2
    assert r.stderr.strip() == ("error: REPLMON_ACCESS_KEY_ID is set but REPLMON_SECRET_ACCESS_KEY is not: an access key and its secret "
                                "go together; set both (or neither, for AWS's credential chain)")
    assert cli("probe", "--secret-key", "x").returncode == 2  # the flag is gone
