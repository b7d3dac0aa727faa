"""template.yaml as it deploys: SAM-transformed offline, intrinsics resolved for test parameters."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import pytest
from samtranslator.translator.transform import transform

from replmon.local.cfn import Resolver
from replmon.local.template import load_template
from tests.conftest import DST, SRC, TABLE, TEMPLATE

ACCOUNT, REGION, STACK = "123456789012", "us-east-1", "replmon"
SPOOL_QUEUE = "replmon-spool"


class OfflinePolicies:
    """The translator asks IAM for managed policy ARNs only when a template names one; we name none."""

    def load(self) -> dict[str, str]:
        return {}


def transformed(template: dict[str, Any] | None = None) -> dict[str, Any]:
    """What `sam deploy` hands CloudFormation (local paths become S3 URIs, as `sam package` does)."""
    t = copy.deepcopy(template or load_template(TEMPLATE))
    for res in t["Resources"].values():
        for uri in ("CodeUri", "DefinitionUri", "ContentUri"):
            if uri in res.get("Properties", {}):
                res["Properties"][uri] = f"s3://artifacts/{res['Properties'][uri].strip('/')}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_DEFAULT_REGION", REGION)  # the translator builds ARNs; it calls nothing
        return transform(t, {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT}, OfflinePolicies())  # type: ignore[arg-type]


@cache
def _default_transformed() -> str:
    return json.dumps(transformed())


def default_transformed() -> dict[str, Any]:
    return json.loads(_default_transformed())


#: Deployments the contract tests check: the demo pair, and existing (SSE-KMS, cross-account) buckets.
MODES: dict[str, dict[str, str]] = {
    "create-demo": {"BucketMode": "create-demo"},
    "existing": {"BucketMode": "existing", "SourceBucketName": SRC, "DestinationBucketName": DST,
                 "SourceKmsKeyArn": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/src-key",
                 "DestinationKmsKeyArn": f"arn:aws:kms:us-west-2:{ACCOUNT}:key/dst-key",
                 "DestinationRoleArn": "arn:aws:iam::210987654321:role/replmon-replica-reader"},
}


def resolver(template: dict[str, Any], mode: str = "create-demo") -> Resolver:
    """Physical names as the tests create them (moto buckets, table and queue)."""
    return Resolver(template, MODES[mode], region=REGION, account=ACCOUNT, stack=STACK,
                    physical={"DemoSourceBucket": SRC, "DemoDestinationBucket": DST, "LatencyTable": TABLE,
                              "RecordSpoolQueue": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{SPOOL_QUEUE}",
                              "RecordQuarantineQueue": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{SPOOL_QUEUE}-quarantine",
                              # Ref of an SNS topic is its ARN (AWS::SNS::Topic, "Return values")
                              "PageTopic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{STACK}-PageTopic",
                              "TicketTopic": f"arn:aws:sns:{REGION}:{ACCOUNT}:{STACK}-TicketTopic"},
                    attributes={"RecordSpoolQueue.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{SPOOL_QUEUE}",
                                "RecordSpoolQueue.QueueName": SPOOL_QUEUE,
                                "RecordQuarantineQueue.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:{SPOOL_QUEUE}-quarantine",
                                "RecordQuarantineQueue.QueueName": f"{SPOOL_QUEUE}-quarantine"})


def function_role_policies(cfn: dict[str, Any], function: str, r: Resolver) -> list[dict[str, Any]]:
    """The inline policies of ``<function>Function``'s role in the transformed template, resolved."""
    fn = cfn["Resources"][f"{function}Function"]
    role_logical = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    role = cfn["Resources"][role_logical]["Properties"]
    return [{"name": p["PolicyName"], "policy": r.resolve(p["PolicyDocument"])} for p in role.get("Policies", [])]


def function_environment(cfn: dict[str, Any], function: str, r: Resolver) -> dict[str, str]:
    """The environment template.yaml gives ``<function>Function`` (Globals merged by SAM)."""
    fn = cfn["Resources"][f"{function}Function"]["Properties"]
    return {k: str(v) for k, v in r.resolve(fn.get("Environment", {}).get("Variables", {})).items()}
