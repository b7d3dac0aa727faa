"""template.yaml after the SAM transform (run offline: no managed-policy lookup leaves the machine)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from samtranslator.translator.transform import transform

from replmon.local.template import load_template
from replmon.probe.request import load_request
from tests.conftest import TEMPLATE


class OfflinePolicies:
    """The translator asks IAM for managed policy ARNs only when a template names one; we name none."""

    def load(self) -> dict[str, str]:
        return {}


@pytest.fixture(scope="module")
def cfn() -> dict[str, Any]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")  # the translator builds ARNs; it calls nothing
        t = load_template(TEMPLATE)
        for res in t["Resources"].values():  # what `sam package` does: local paths become S3 URIs
            for uri in ("CodeUri", "DefinitionUri", "ContentUri"):
                if uri in res.get("Properties", {}):
                    res["Properties"][uri] = f"s3://artifacts/{res['Properties'][uri].strip('/')}"
        return transform(t, {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}, OfflinePolicies())  # type: ignore[arg-type]


def resources(cfn: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in cfn["Resources"].items() if v["Type"] == kind}


def test_schedule_is_an_eventbridge_scheduler_schedule_with_a_dlq(cfn: dict[str, Any]) -> None:
    scheds = resources(cfn, "AWS::Scheduler::Schedule")
    beats = {f"HeartbeatFunctionGroup{n:02d}" for n in range(8)}
    assert set(scheds) == {"ProbeStateMachineSchedule", "CollectSignalsFunctionSchedule", "InventoryFunctionSchedule", *beats}  # mount runners: templates/mount-baselines.yaml
    for name, sched in scheds.items():
        target = sched["Properties"]["Target"]
        assert "SchedulerDeadLetterQueue" in json.dumps(target["DeadLetterConfig"]["Arn"]), name
        if name in beats:
            # a heartbeat delivered late is worthless (the next minute's invocation continues): no retry,
            # at most 60 s old; one group per schedule, ENABLED only while its group exists and heartbeats run
            n = name[-2:]
            assert target["RetryPolicy"] == {"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}, name
            assert json.loads(target["Input"]) == {"group": f"g{n}"} and sched["Properties"]["ScheduleExpression"] == "rate(1 minute)"
            assert sched["Properties"]["State"] == {"Fn::If": [f"HeartbeatsG{n}", "ENABLED", "DISABLED"]}
            assert sched["Properties"]["FlexibleTimeWindow"] == {"Mode": "OFF"}
            continue
        assert target["RetryPolicy"]["MaximumRetryAttempts"] == (3 if name.startswith("Probe") else 1), name
        assert sched["Properties"]["State"] == {"Ref": "ScheduleState"}


def statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A policy's statements, both branches of each Fn::If (AWS::NoValue dropped)."""
    out = []
    for st in doc["Statement"]:
        if "Fn::If" in st:
            out += [b for b in st["Fn::If"][1:] if b != {"Ref": "AWS::NoValue"}]
        else:
            out.append(st)
    return out


def test_every_role_is_least_privilege(cfn: dict[str, Any]) -> None:
    seen = set()
    standalone = [(n, {"Properties": {"Policies": [p["Properties"]]}}) for n, p in resources(cfn, "AWS::IAM::Policy").items()]
    for name, role in [*resources(cfn, "AWS::IAM::Role").items(), *standalone]:
        for policy in [b for p in role["Properties"].get("Policies", []) for b in (p["Fn::If"][1:] if "Fn::If" in p else [p])
                       if b != {"Ref": "AWS::NoValue"}]:
            for st in statements(policy["PolicyDocument"]):
                seen.update(st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
                actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
                assert not any(a == "*" or a.endswith(":*") for a in actions), (name, actions)
                if st.get("Resource") == "*":
                    # Only actions without resource-level permissions may use "*" (X-Ray; CloudWatch
                    # GetMetricData: "Actions, resources, and condition keys for Amazon CloudWatch";
                    # ecr:GetAuthorizationToken: the same page for Amazon ECR lists no resource type;
                    # organizations:ListAccounts: "Actions, resources, and condition keys for AWS Organizations").
                    assert all(a.startswith("xray:") or a in ("cloudwatch:GetMetricData", "ecr:GetAuthorizationToken",
                                                               "organizations:ListAccounts") for a in actions), \
                        (name, actions)
        # No managed policy grants more than the statements above (X-Ray's write-only one aside).
        for arn in role["Properties"].get("ManagedPolicyArns", []):
            ok = ("AWSXrayWriteOnlyAccess", "AWSLambdaBasicExecutionRole")
            assert any(m in json.dumps(arn) for m in ok), (name, arn)
    # The statements that were checked: each function's own, the state machine's invoke and child runs.
    assert {"s3:PutObject", "s3:DeleteObjectVersion", "dynamodb:PutItem", "dynamodb:Query", "lambda:InvokeFunction",
            "states:StartExecution", "s3:ReplicateObject", "sqs:SendMessage", "kms:Decrypt", "sts:AssumeRole"} <= seen


def test_functions_are_arm64_python313_with_the_layer_and_tracing(cfn: dict[str, Any]) -> None:
    fns = resources(cfn, "AWS::Lambda::Function")
    assert len(fns) == 13  # IngestFioResults is the mount stack's
    for name, fn in fns.items():
        p = fn["Properties"]
        assert p["Runtime"] == "python3.13" and p["Architectures"] == ["arm64"], name
        assert p["TracingConfig"] == {"Mode": "Active"}, name
        [layer] = p["Layers"]
        assert cfn["Resources"][layer["Ref"]]["Type"] == "AWS::Lambda::LayerVersion", name


def test_the_deployment_defaults_are_valid_request_defaults_and_name_no_route() -> None:
    """REPLMON_DEFAULTS is JSON written inside YAML: render it with the parameters' defaults. It holds
    request defaults only: the routes are the registry's (the stack's own: the StackRoute item)."""
    t = load_template(TEMPLATE)
    text = t["Globals"]["Function"]["Environment"]["Variables"]["REPLMON_DEFAULTS"]["Fn::Sub"]
    assert isinstance(text, str)
    values = {k: str(v.get("Default", "")) for k, v in t["Parameters"].items()}
    assert set(re.findall(r"\$\{([\w:]+)\}", text)) <= set(values)
    defaults = json.loads(re.sub(r"\$\{([\w:]+)\}", lambda m: values[m.group(1)], text))
    assert "routes" not in defaults
    route = {"name": "primary", "source": {"bucket": "demo-source-bucket"}, "destinations": [{"bucket": "demo-replica-bucket"}]}
    req = load_request({"routes": [route]}, defaults)
    assert req.sizes == [2**20, 64 * 2**20, 2**30] and req.target_seconds == 900 and req.timeout_seconds == 7200


def test_the_state_machine_may_run_its_distributed_map_children(cfn: dict[str, Any]) -> None:
    """IAM policies for using Distributed Map states: StartExecution on the state machine, and
    DescribeExecution/StopExecution on its executions, under both `NAME/*` and `NAME:*`."""
    from tests.cfnutil import resolver

    r = resolver(cfn)
    role = next(v for k, v in resources(cfn, "AWS::IAM::Role").items() if k.startswith("ProbeStateMachine"))
    grants: dict[str, set[str]] = {}
    for policy in role["Properties"]["Policies"]:
        for st in statements(r.resolve(policy["PolicyDocument"])):
            res = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
            for a in st["Action"] if isinstance(st["Action"], list) else [st["Action"]]:
                grants.setdefault(a, set()).update(res)
    base = "arn:aws:states:us-east-1:123456789012"
    assert f"{base}:stateMachine:replmon-replication-probe" in grants["states:StartExecution"]
    for action in ("states:DescribeExecution", "states:StopExecution"):
        assert {f"{base}:execution:replmon-replication-probe/*", f"{base}:execution:replmon-replication-probe:*"} <= grants[action]
