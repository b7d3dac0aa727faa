"""The mount baselines' own stack (templates/mount-baselines.yaml) as it deploys, for the mount
contract tests: SAM-transformed offline, intrinsics resolved for a realistic deployment (several
EC2 targets - same-region and cross-region Mountpoint, Express, caches, the EBS row, NFS, Lustre -
and an EFS target on Fargate)."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from replmon.local.cfn import Resolver
from replmon.local.template import load_template
from tests.cfnutil import ACCOUNT, REGION, transformed
from tests.conftest import ROOT

MOUNT_TEMPLATE = ROOT / "templates" / "mount-baselines.yaml"
STACK = "replmon-mounts"
RESULTS_BUCKET = "replmon-mounts-results"
TABLE = "replmon-mounts-fio"
BUCKETS = ["bench-std", "bench-tokyo", "bench--use1-az4--x-s3", "cache--use1-az4--x-s3"]
#: The targets docs/MOUNTS.md shows (a test checks they are the same): every study's row on AWS.
TARGETS: list[dict[str, Any]] = [
    {"name": "mp-standard", "kind": "mountpoint", "bucket": "bench-std", "region": "us-east-1", "preset": "express-vs-standard"},
    {"name": "mp-express", "kind": "mountpoint", "bucket": "bench--use1-az4--x-s3", "region": "us-east-1", "preset": "express-vs-standard"},
    {"name": "mp-cache-xz", "kind": "mountpoint", "bucket": "bench-std", "region": "us-east-1", "cache_xz": "cache--use1-az4--x-s3",
     "preset": "express-vs-standard"},
    {"name": "mp-cache-ebs", "kind": "mountpoint", "bucket": "bench-std", "region": "us-east-1", "cache": "/mnt/ebs/mp-cache",
     "preset": "express-vs-standard"},
    {"name": "ebs", "kind": "local", "mount_point": "/mnt/ebs", "preset": "express-vs-standard"},
    {"name": "mp-same-region", "kind": "mountpoint", "bucket": "bench-std", "region": "us-east-1", "preset": "mountpoint-xregion"},
    {"name": "mp-cross-region", "kind": "mountpoint", "bucket": "bench-tokyo", "region": "ap-northeast-1", "preset": "mountpoint-xregion"},
    {"name": "nfs", "kind": "nfs", "source": "10.0.0.5:/export", "preset": "nfs-matrix"},
    {"name": "lustre", "kind": "lustre", "source": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh",
     "file_system_id": "fs-0123456789abcdef0", "per_unit_mb_s": 50, "storage_gib": 2400, "preset": "burst-write"},
]
PARAMS: dict[str, Any] = {
    "FioRunnerImage": f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com/replmon-fio:1", "SubnetIds": ["subnet-0a"], "SecurityGroupIds": ["sg-0a"],
    "Ec2Targets": json.dumps(TARGETS), "MountpointBuckets": BUCKETS,
    "EfsFileSystemId": "fs-0e0e0e0e0e0e0e0e0", "EfsAccessPointId": "fsap-0e0e0e0e0e0e0e0e0", "EfsPreset": "nfs-matrix",
}
TASK_DEFINITIONS = ("FioEfsTaskDefinition", "FioEc2TaskDefinition")


class MountResolver(Resolver):
    """Resolver with Fn::Split (the mount template splits MountpointBuckets element by element)."""

    def resolve(self, node: Any) -> Any:
        if isinstance(node, dict) and len(node) == 1 and "Fn::Split" in node:
            sep, text = node["Fn::Split"]
            value = self.resolve(text)
            return str(value).split(sep)
        if isinstance(node, dict) and len(node) == 1 and "Fn::Join" in node:
            sep, items = node["Fn::Join"]
            value = self.resolve(items)
            return sep.join(str(x) for x in (value if isinstance(value, list) else [value]))
        return super().resolve(node)


def template() -> dict[str, Any]:
    return load_template(MOUNT_TEMPLATE)


@cache
def _transformed() -> str:
    return json.dumps(transformed(template()))


def mount_cfn() -> dict[str, Any]:
    return json.loads(_transformed())


def mount_resolver(cfn: dict[str, Any] | None = None, **params: Any) -> MountResolver:
    cfn = cfn or mount_cfn()
    ecs = f"arn:aws:ecs:{REGION}:{ACCOUNT}"
    r = MountResolver(cfn, {**PARAMS, **params}, region=REGION, account=ACCOUNT, stack=STACK,
                      physical={"FioResultsBucket": RESULTS_BUCKET, "FioTable": TABLE},
                      attributes={"FioCluster.Arn": f"{ecs}:cluster/{STACK}-FioCluster",
                                  # A log group's Arn attribute ends in ":*" (AWS::Logs::LogGroup return values).
                                  "FioLogGroup.Arn": f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{STACK}-FioLogGroup:*",
                                  "FioTaskStoppedRule.Arn": f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{STACK}-FioTaskStoppedRule"})
    for td in TASK_DEFINITIONS:  # Ref of a task definition is its ARN
        r.physical[td] = f"{ecs}:task-definition/{STACK}-{td}:1"
    r.physical["FioCapacityProvider"] = f"{STACK}-FioCapacityProvider"
    return r


def role_policies(cfn: dict[str, Any], role: str, r: Resolver) -> list[dict[str, Any]]:
    props = r.resolve(cfn["Resources"][role]["Properties"])
    return [{"name": p["PolicyName"], "policy": p["PolicyDocument"]} for p in props.get("Policies", [])]


def function_role(cfn: dict[str, Any], function: str) -> str:
    return str(cfn["Resources"][f"{function}Function"]["Properties"]["Role"]["Fn::GetAtt"][0])


def container_env(cfn: dict[str, Any], task_definition: str, r: Resolver) -> dict[str, str]:
    [container] = r.resolve(cfn["Resources"][task_definition]["Properties"])["ContainerDefinitions"]
    return {e["Name"]: str(e["Value"]) for e in container["Environment"]}


def function_env(cfn: dict[str, Any], function: str, r: Resolver) -> dict[str, str]:
    fn = cfn["Resources"][f"{function}Function"]["Properties"]
    return {k: str(v) for k, v in r.resolve(fn.get("Environment", {}).get("Variables", {})).items()}
