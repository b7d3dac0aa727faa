"""Every AWS call each handler makes is allowed by that function's role, as deployed.

The calls come from the real state machine playing every path (tests/contract.py); each is
mapped to the IAM actions AWS authorizes it with and evaluated against the role SAM builds from
template.yaml, in both bucket modes, by a maintained policy evaluator (tests/iam.py). moto
answers a HEAD of a missing key with 403 when the role may not list the bucket, as S3 does, so
code that relied on 404 would end ERROR here exactly as it would in AWS.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from replmon.core.record import ProbeStatus
from tests.cfnutil import ACCOUNT, MODES, default_transformed, function_role_policies, resolver, transformed
from tests.contract import FUNCTIONS, ContractRun
from tests.iam import evaluate


def policies_for(cfn: dict[str, Any], mode: str) -> dict[str, list[dict[str, Any]]]:
    r = resolver(cfn, mode)
    return {fn: function_role_policies(cfn, fn, r) for fn in FUNCTIONS}


def test_the_scenarios_reach_every_outcome_and_path(contract: ContractRun) -> None:
    statuses = {r.status for r in contract.records}
    assert statuses == {ProbeStatus.COMPLETED, ProbeStatus.FAILED, ProbeStatus.STUCK, ProbeStatus.ERROR}
    ops = {(c.function, c.operation) for c in contract.recorder.calls}
    assert {("UploadProbe", "UploadPartCopy"), ("UploadProbe", "ListObjectsV2"), ("UploadProbe", "CreateMultipartUpload"),
            ("PollReplication", "HeadObject"), ("PollReplication", "Query"), ("PollReplication", "ListObjectVersions"),
            ("RecordResult", "TransactWriteItems"), ("RecordResult", "SendMessage"), ("Cleanup", "DeleteObjects"),
            ("Cleanup", "ListMultipartUploads"), ("Housekeeping", "ReceiveMessage"), ("Housekeeping", "DeleteMessage"),
            ("Housekeeping", "TransactWriteItems"), ("Housekeeping", "AbortMultipartUpload"),
            ("BeginRouteRun", "DescribeExecution"), ("CollectSignals", "GetItem"), ("Report", "GetItem"), ("Report", "Query"),
            ("Heartbeat", "PutObject"), ("Heartbeat", "HeadObject"), ("Heartbeat", "DeleteObjects"), ("Heartbeat", "Publish"),
            ("Heartbeat", "UpdateItem")} <= ops
    assert contract.heartbeats == ["STALLED", "RECOVERING", "HEALTHY"]  # healthy, stalled (published), recovered (published)
    # a single route is a fleet of one: the stack's route is the registry's (StackRoute)
    assert contract.stack_route["PhysicalResourceId"] == "primary"
    assert [h["route"] for h in contract.report["health"]] == [r["route"] for r in contract.fleet_report["fleet"]] == ["primary"]
    missing = next(r for r in contract.records if r.status is ProbeStatus.FAILED and r.destinations)
    assert missing.destinations[0].get("status") is None and "ReplicaMismatch" in missing.failure_reason  # not an ERROR
    assert contract.swept_late_replica


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_recorded_call_is_allowed_by_its_functions_role(contract: ContractRun, mode: str) -> None:
    denied = evaluate(contract.recorder.requests(), policies_for(default_transformed(), mode), ACCOUNT)
    assert denied == [], "\n".join(denied)


def _granted(statement: dict[str, Any]) -> dict[str, Any]:
    """A statement, or the one a condition's Fn::If grants (the stack route's, under HasStackRoute)."""
    if "Fn::If" in statement and isinstance(statement["Fn::If"][1], dict):
        return statement["Fn::If"][1]  # type: ignore[no-any-return]
    return statement


@pytest.mark.parametrize(
    ("function", "needle", "expected"),
    [
        ("UploadProbe", "s3:ListBucket", "UploadProbe: s3:ListBucket on arn:aws:s3:::probe-source"),
        ("PollReplication", "s3:ListBucketVersions", "PollReplication: s3:ListBucketVersions on arn:aws:s3:::probe-replica"),
        ("RecordResult", "sqs:SendMessage", "RecordResult: sqs:SendMessage"),
        ("Cleanup", "s3:ListBucketMultipartUploads", "Cleanup: s3:ListBucketMultipartUploads"),
        ("BeginRouteRun", "states:DescribeExecution", "BeginRouteRun: states:DescribeExecution"),
        ("Report", "dynamodb:GetItem", "Report: dynamodb:GetItem"),
        ("Heartbeat", "sns:Publish", "Heartbeat: sns:Publish"),
        ("Heartbeat", "s3:DeleteObjectVersion", "Heartbeat: s3:DeleteObjectVersion"),
    ],
)
def test_removing_a_statement_makes_the_check_fail(contract: ContractRun, function: str, needle: str, expected: str) -> None:
    """The check is not vacuous: without the statement that grants it, the recorded call is denied."""
    t = copy.deepcopy(transformed())
    role = t["Resources"][t["Resources"][f"{function}Function"]["Properties"]["Role"]["Fn::GetAtt"][0]]["Properties"]
    for policy in role["Policies"]:
        policy["PolicyDocument"]["Statement"] = [
            st for st in policy["PolicyDocument"]["Statement"] if needle not in str(_granted(st).get("Action", ""))
        ]
    denied = evaluate(contract.recorder.requests(), policies_for(t, "create-demo"), ACCOUNT)
    assert any(d.startswith(expected) for d in denied), denied


def test_no_role_grants_an_action_no_handler_needs(contract: ContractRun) -> None:
    """Least privilege from the other side: every S3, DynamoDB and SQS action a function's role
    grants is used by at least one recorded call (KMS and STS are exercised by S3 and STS
    themselves, and checked in tests/test_transform.py)."""
    used = {(c.function, r.action) for c in contract.recorder.calls for r in c.requests}
    cfn = default_transformed()
    r = resolver(cfn, "existing")
    # Lambda's SQS poller receives and deletes IngestEvents' messages with the function's role
    # (Lambda developer guide, "Lambda execution role permissions" for SQS event sources).
    used |= {(fn, a) for fn in ("IngestEvents",)
             for a in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")}
    # Lambda sends a failed asynchronous invocation to its OnFailure queue with the function's role
    # (Lambda developer guide, "Asynchronous invocation", destinations): scheduled functions have one.
    used |= {(v["Properties"]["FunctionName"]["Ref"].removesuffix("Function"), "sqs:SendMessage") for v in cfn["Resources"].values()
             if v["Type"] == "AWS::Lambda::EventInvokeConfig"}
    # The fleet path (PlanProbes from the registry, a plan in the plan bucket) is recorded and checked
    # the same way, both sides, by tests/test_fleet_plan.py::test_the_fleet_calls_are_allowed_...
    used |= {("PlanProbes", "dynamodb:Query"), ("PlanProbes", "dynamodb:BatchGetItem"), ("PlanProbes", "s3:PutObject"),
             ("BeginRouteRun", "s3:GetObject"), ("BeginRouteRun", "s3:PutObject")}
    unused = []
    for fn in FUNCTIONS:
        for policy in function_role_policies(cfn, fn, r):
            for st in policy["policy"]["Statement"]:
                for action in st["Action"] if isinstance(st["Action"], list) else [st["Action"]]:
                    if action.split(":")[0] in ("s3", "dynamodb", "sqs") and (fn, action) not in used:
                        unused.append(f"{fn}: {action}")
    assert unused == [], unused
