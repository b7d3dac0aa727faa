"""The template and the state machine are code: cross-check them, show the ASL linter catches
defects, build them. (`make lint` runs cfn-lint, `sam validate --lint` and asl-validator on the
real files once; they are not repeated here.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from replmon.core.record import TTL_ATTRIBUTE
from replmon.entry import FUNCTIONS, MOUNT_FUNCTIONS
from replmon.local.aslrun import DEFINITION, load_handler
from replmon.local.template import load_template
from tests.conftest import ROOT, TEMPLATE

ASL_VALIDATOR = ROOT / "node_modules" / ".bin" / "asl-validator"
BIN = ROOT / ".venv" / "bin"
OFFLINE_ENV = {**os.environ, "SAM_CLI_TELEMETRY": "0", "PATH": f"{BIN}:{os.environ['PATH']}"}


def asl_lint(path: Path) -> subprocess.CompletedProcess[str]:
    assert ASL_VALIDATOR.exists(), "asl-validator missing: run `make test` (it runs npm ci)"
    return subprocess.run([str(ASL_VALIDATOR), "--json-path", str(path)], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("state", "field", "value", "code"),
    [("Cleanup", "Type", "Tsk", "SCHEMA_VALIDATION_FAILED"), ("WaitForReplication", "Next", "Nowhere", "MISSING_TRANSITION_TARGET")],
)
def test_asl_lint_catches_bad_state_types_and_dangling_next(tmp_path: Path, state: str, field: str, value: str, code: str) -> None:
    d = json.loads(DEFINITION.read_text())
    d["States"]["Probes"]["ItemProcessor"]["States"][state][field] = value
    bad = tmp_path / "bad.asl.json"
    bad.write_text(json.dumps(d))
    r = asl_lint(bad)
    assert r.returncode != 0 and code in r.stdout + r.stderr


def test_definition_substitutions_cover_every_placeholder() -> None:
    res = load_template(TEMPLATE)["Resources"]
    subs = res["ProbeStateMachine"]["Properties"]["DefinitionSubstitutions"]
    placeholders = set(re.findall(r"\$\{(\w+)\}", DEFINITION.read_text()))
    assert placeholders == set(subs)
    for name in placeholders:  # each points at a function whose handler file exists
        fn = subs[name]["Fn::GetAtt"].split(".")[0]
        handler = res[fn]["Properties"]["Handler"]
        assert (ROOT / "functions" / f"{handler.split('.')[0]}.py").exists()


def test_every_function_file_is_the_packaged_entry_point() -> None:
    """functions/<x>.py re-exports replmon.entry.<x>.handler: what deploys is what the runner loads."""
    import importlib.util

    res = load_template(TEMPLATE)["Resources"]
    fns = {k.removesuffix("Function"): r for k, r in res.items() if r["Type"] == "AWS::Serverless::Function"}
    assert set(fns) == set(FUNCTIONS) - set(MOUNT_FUNCTIONS)  # those: tests/test_mounts_template.py
    for name, fn in fns.items():
        module, attr = fn["Properties"]["Handler"].rsplit(".", 1)
        spec = importlib.util.spec_from_file_location(f"fn_{module}", ROOT / "functions" / f"{module}.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        assert getattr(mod, attr) is load_handler(name), name


def test_iam_has_no_wildcard_actions_on_data() -> None:
    text = TEMPLATE.read_text()
    # A wildcard only in a Deny (a bucket policy refusing every action without TLS), never granted.
    for m in re.finditer(r"Action:\s*\[?\s*\"?(s3|dynamodb|sqs|sns):\*", text):
        assert "Effect: Deny" in text[m.start() - 120 : m.start()], text[m.start() - 200 : m.end()]
    assert not re.search(r"Action:\s*\"?\*\"?\s*$", text, re.M)
    # "*" resources: X-Ray's, CloudWatch GetMetricData's and Organizations ListAccounts' (no resource-level
    # permissions) and the alarm key's own key policy (in a key policy, "*" is that key): its account,
    # CloudWatch alarms and the EventBridge rules that forward route pages.
    star = [m.start() for m in re.finditer(r'Resource: "\*"', text)]
    no_resource = ("xray:PutTraceSegments", "cloudwatch:GetMetricData", "organizations:ListAccounts")
    assert len(star) == 6
    assert sum(any(a in text[i - 300 : i] for a in no_resource) for i in star) == 3
    assert sum("KeyPolicy:" in text[i - 1500 : i] for i in star) == 3


def test_one_source_for_target_ttl_and_runtime() -> None:
    t = load_template(TEMPLATE)
    res = t["Resources"]
    assert res["RpoAboveTargetG00Alarm"]["Properties"]["Threshold"] == {"Ref": "LatencyTargetSeconds"}
    assert "${LatencyTargetSeconds}" in json.dumps(t["Globals"]["Function"]["Environment"])
    assert res["LatencyTable"]["Properties"]["TimeToLiveSpecification"]["AttributeName"] == TTL_ATTRIBUTE
    g = t["Globals"]["Function"]
    assert g["Runtime"] == "python3.13" and g["Architectures"] == ["arm64"]
    assert res["CollectorHeartbeatAlarm"]["Properties"]["TreatMissingData"] == "breaching"
    assert res["ProbeStateMachine"]["Properties"]["Tracing"] == {"Enabled": True}
    sched = res["ProbeStateMachine"]["Properties"]["Events"]["Schedule"]
    assert sched["Type"] == "ScheduleV2" and "DeadLetterConfig" in sched["Properties"]


@pytest.mark.build
def test_sam_build_without_docker(tmp_path: Path) -> None:
    """The makefile build method: arm64 / cp313 wheels in the layer, the domain package, thin handlers."""
    build = tmp_path / "build"
    r = subprocess.run([str(BIN / "sam"), "build", "--build-dir", str(build), "--template-file", str(TEMPLATE)],
                       capture_output=True, text=True, timeout=900, env={**OFFLINE_ENV, "REPLMON_SRC": str(ROOT / "src")}, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    layer = build / "ReplmonLayer" / "python"
    assert list(layer.glob("pydantic_core/_pydantic_core.cpython-313-aarch64-linux-gnu.so"))
    assert (layer / "replmon" / "probe" / "steps.py").exists() and (layer / "replmon" / "probe" / "ladders.json").exists()
    assert not (layer / "replmon" / "lab").exists()
    fn = build / "PollReplicationFunction"
    assert (fn / "poll_replication.py").exists() and not (fn / "replmon").exists()
