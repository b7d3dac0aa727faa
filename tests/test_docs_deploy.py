"""docs/DEPLOY.md is a runbook that stays true: its permissions table is the template's, its steps come
in the order a new user needs them, the output it shows is what the CLI prints, and every samconfig.toml
profile names only parameters template.yaml has.

AWS contracts encoded here:
- "CloudFormation StackSets doesn't currently support creating or updating stack sets with service-managed
  permissions from templates that reference macros", and AWS::Serverless is a macro hosted by CloudFormation
  ("Overview of CloudFormation macros"; "Perform custom processing ... with template macros"): both member
  templates reference no Transform, so either permission model deploys them.
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/template-macros-overview.html
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/template-macros.html
- CreateStackSet takes TemplateBody, Parameters and Capabilities and answers StackSetId; CreateStackInstances
  takes Accounts and Regions and answers OperationId (CloudFormation API reference; the same shapes as
  botocore's service model, checked below).
  https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_CreateStackInstances.html
- A template that creates IAM resources with physical (custom) names needs CAPABILITY_NAMED_IAM ("If you have
  IAM resources with custom names, you must specify CAPABILITY_NAMED_IAM"; CreateStack, Capabilities).
  https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_CreateStack.html
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from replmon.local.template import load_template
from tests.conftest import ROOT, TABLE, TEMPLATE, tool_module

DEPLOY = ROOT / "docs" / "DEPLOY.md"


def tool() -> ModuleType:
    return tool_module("render_permissions")  # type: ignore[no-any-return]


def test_the_permissions_table_is_the_templates() -> None:
    """The block is what tools/render_permissions.py renders from the SAM-transformed template now."""
    assert tool().main([]) == 0, "docs/DEPLOY.md's permissions table is stale: python tools/render_permissions.py --write"


def test_every_function_and_every_assume_role_is_listed() -> None:
    """All of them: each function's role has a row, and each role that may sts:AssumeRole says so in its row."""
    t = tool().transformed()
    text = DEPLOY.read_text()
    block = text.split("<!-- permissions:start -->", 1)[1].split("<!-- permissions:end -->", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)[^`]*` \| [^|]+ \| (.*) \|$", block, re.M)}
    functions = [k for k, v in load_template(TEMPLATE)["Resources"].items() if v["Type"] == "AWS::Serverless::Function"]
    assert len(functions) >= 12
    assert [f for f in functions if f"{f}Role" not in rows] == []
    assuming = {name for name, role in tool().roles(t).items() if "sts:AssumeRole" in json.dumps(role["Properties"].get("Policies", []))}
    assert {"CollectSignalsFunctionRole", "InventoryFunctionRole", "UploadProbeFunctionRole"} <= assuming
    assert [r for r in assuming if "`sts:AssumeRole`" not in rows[r]] == []
    # a statement taken out of the template shows as a stale table
    t["Resources"]["ReportFunctionRole"]["Properties"]["Policies"] = []
    assert "dynamodb:Query" not in tool().render(t).split("`ReportFunctionRole`", 1)[1].split("\n", 1)[0]


def test_the_runbook_steps_come_in_order_with_real_stackset_commands() -> None:
    """Hub, member-account in every account, member-region per (account, Region), enroll, check."""
    text = DEPLOY.read_text()
    steps = re.findall(r"^## (\d)\. (.*)$", text, re.M)
    titles = [t.lower() for _, t in steps]
    assert [n for n, _ in steps] == [str(i) for i in range(len(steps))]
    order = ["hub", "member-account", "member-region", "enroll", "check"]
    at = [next(i for i, t in enumerate(titles) if word in t) for word in order]
    assert at == sorted(at), titles
    assert "the hub's included" in titles[at[1]]
    for template in ("member-account", "member-region"):
        assert f"--template-body file://templates/{template}.yaml" in text
        assert not load_template(ROOT / "templates" / f"{template}.yaml").get("Transform")  # StackSets: plain CloudFormation
    named = "RoleName:" in (ROOT / "templates" / "member-account.yaml").read_text()
    assert named and "--template-body file://templates/member-account.yaml --capabilities CAPABILITY_NAMED_IAM" in text
    import botocore.session

    model = botocore.session.get_session().get_service_model("cloudformation")
    for op, flags, answer in (("CreateStackSet", ("--stack-set-name", "--template-body", "--parameters"), "StackSetId"),
                              ("CreateStackInstances", ("--stack-set-name", "--accounts", "--regions"), "OperationId")):
        shape = model.operation_model(op)
        members = {re.sub(r"(?<!^)(?=[A-Z])", "-", m).lower() for m in shape.input_shape.members}
        assert all(f.removeprefix("--") in members for f in flags), (op, flags)
        assert answer in shape.output_shape.members and f"`{answer}`" in text
    for cmd in re.findall(r"aws cloudformation create-stack-set[^`]*?(?=\n\S|\n\n|```)", text):
        for key in re.findall(r"ParameterKey=(\w+)", cmd):
            templ = "member-account" if "member-account" in cmd else "member-region"
            assert key in load_template(ROOT / "templates" / f"{templ}.yaml")["Parameters"], (templ, key)


def test_the_opt_in_tag_and_the_example_route_are_the_codes() -> None:
    from replmon.core.defaults import DEFAULTS
    from replmon.core.registry import RouteSpec

    text = DEPLOY.read_text()
    assert f"`{DEFAULTS.enroll_tag}`" in text or f"**`{DEFAULTS.enroll_tag}`**" in text
    example = (ROOT / "docs" / "examples" / "route.json").read_text()
    assert f"```json\n{example}```" in text  # the file the command reads is the one shown
    RouteSpec.model_validate({**json.loads(example), "group": "g00", "origin": "explicit"})


def shown_after(text: str, command: str) -> str:
    """The output block the runbook shows after ``command``'s block."""
    i = text.index(command)
    m = re.compile(r"```\n(.*?)```", re.S).search(text, text.index("```", i) + 3)
    assert m, command
    return m.group(1)


def words(out: str) -> list[str]:
    """What a table says, whatever its box widths and wrapping (the runbook's came from a terminal)."""
    return sorted(re.sub(r"[\u2500-\u257f]", " ", out).split())


def test_the_runbooks_fleet_output_is_what_the_cli_prints() -> None:
    """`fleet put`, `fleet` and `report --fleet` with the example route, in-process on moto at 120 columns:
    the runbook shows what they print, word for word (the put's line is on stderr)."""
    import boto3
    from moto import mock_aws

    from replmon.local.tables import ensure_table
    from tests.test_fleet_cli import run

    text = DEPLOY.read_text()
    where = ["--table", TABLE, "--region", "us-east-1"]
    with mock_aws():
        ensure_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE, TEMPLATE)
        put = run("fleet", *where, "put", str(ROOT / "docs" / "examples" / "route.json"))
        assert put.exit_code == 0 and put.output.strip() in shown_after(text, "fleet --stack-name replmon-hub put docs/examples/route.json")
        listed = run("fleet", *where)
        assert listed.exit_code == 0
        assert words(shown_after(text, "replmon fleet --stack-name replmon-hub\n")) == words(listed.stdout)
        report = run("report", "--fleet", *where)
        assert report.exit_code == 4  # no data yet: never RPO 0
        assert words(shown_after(text, "replmon report --fleet --stack-name replmon-hub")) == words(report.stdout)


# --------------------------------------------------------------------------------------------- samconfig
def profiles() -> dict[str, dict[str, str]]:
    """Each samconfig.toml profile's parameter_overrides as {name: value}."""
    conf = tomllib.loads((ROOT / "samconfig.toml").read_text())
    out = {}
    for env, commands in conf.items():
        if isinstance(commands, dict):
            overrides = commands.get("deploy", {}).get("parameters", {}).get("parameter_overrides")
            if overrides:
                out[env] = dict(pair.split("=", 1) for pair in shlex.split(overrides))
    return out


def template_for(env: str) -> Path:
    conf = tomllib.loads((ROOT / "samconfig.toml").read_text())[env]
    return ROOT / conf.get("global", {}).get("parameters", {}).get("template_file", "template.yaml")


def test_there_is_a_fleet_hub_profile_and_a_single_route_profile() -> None:
    p = profiles()
    assert p["fleet-hub"]["BucketMode"] == "none" and p["fleet-hub"]["MemberAccounts"]
    assert not {"SourceBucketName", "DestinationBucketName"} & set(p["fleet-hub"])  # no route of its own
    assert p["existing-route"]["BucketMode"] == "existing"
    assert p["existing-route"]["SourceBucketName"] and p["existing-route"]["DestinationBucketName"]
    text = DEPLOY.read_text()
    for env in ("fleet-hub", "existing-route"):
        assert f"--config-env {env}" in text
        row = next(line for line in text.splitlines() if line.startswith(f"| `{env}` |"))
        assert sorted(re.findall(r"`(\w+)(?:=[^`]*)?`", row.split("|")[3])) == sorted(p[env]), row


def test_the_readmes_single_route_deploys_the_route_it_preflights() -> None:
    """The README's one-route recipe: the profile it deploys names the buckets, destination Region and rule
    of the route its preflight checks (a cross-Region destination deployed without DestinationRegion would
    probe the wrong Region)."""
    readme = (ROOT / "README.md").read_text()
    pre = re.search(r"^replmon preflight --source-bucket (\S+) --dest-bucket (\S+) --dest-region (\S+)$", readme, re.M)
    assert pre and "--config-env existing-route" in readme
    p = profiles()["existing-route"]
    assert (p["SourceBucketName"], p["DestinationBucketName"], p["DestinationRegion"]) == pre.groups()
    assert p["ReplicationRuleId"]  # RTC metrics need the rule


@pytest.mark.parametrize("env", sorted(profiles()))
def test_every_samconfig_profile_names_only_template_parameters(env: str) -> None:
    """A renamed or moved parameter fails here, not at `sam deploy`."""
    params = load_template(template_for(env))["Parameters"]
    assert sorted(set(profiles()[env]) - set(params)) == []


def test_every_samconfig_value_is_one_the_template_allows() -> None:
    bad = []
    for env, overrides in profiles().items():
        params: dict[str, Any] = load_template(template_for(env))["Parameters"]
        bad += [(env, k, v) for k, v in overrides.items() if k in params and v not in params[k].get("AllowedValues", [v])]
    assert bad == []
