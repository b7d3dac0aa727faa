"""IAM of the fleet's inventory, evaluated with the policy evaluator (@cloud-copilot/iam-simulate):
the hub's InventoryFunction role (template.yaml) and the member roles (templates/member-account.yaml),
for every call an inventory run makes, plus the negatives.

AWS pages:
- "AWS global condition context keys" (aws:ResourceAccount, aws:ResourceOrgID, aws:PrincipalArn) —
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html
- "AssumeRole" (ExternalId; a cross-account AssumeRole needs the caller's identity policy AND the
  role's trust policy) — https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html
- "Actions, resources, and condition keys for Amazon S3" (s3:ResourceAccount; HeadBucket is
  s3:ListBucket; ListBuckets is s3:ListAllMyBuckets on "*") —
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
- "Considerations for StackSets" (service-managed StackSets refuse transforms such as SAM's) —
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/stacksets-limitations.html
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import boto3
import pytest

from replmon.adapters.member_buckets import AwsMembers, default_client
from replmon.adapters.registry_table import DynamoRegistry
from replmon.core.registry import MEMBER_ROLES
from replmon.fleet.accounts import load_inventory_settings
from replmon.fleet.inventory import InventoryDeps, run_inventory
from replmon.local.cfn import Resolver
from replmon.local.tables import ensure_table
from replmon.local.template import load_template
from tests.cfnutil import ACCOUNT, REGION, STACK, default_transformed, function_role_policies
from tests.conftest import TABLE, TEMPLATE
from tests.iam import CallRecorder, IamRequest, simulate

ROOT = Path(__file__).resolve().parents[1]
MEMBER_TEMPLATE = ROOT / "templates" / "member-account.yaml"
MEMBER, OTHER = "444455556666", "777788889999"
HUB_ROLE = f"arn:aws:iam::{ACCOUNT}:role/{STACK}-InventoryFunctionRole-AbCdEf123456"


def member_roles(account: str, external_id: str = "ext-1", **params: str) -> dict[str, dict[str, Any]]:
    """Each member role's trust policy and inline policies, resolved for ``account``."""
    t = load_template(MEMBER_TEMPLATE)
    r = Resolver(t, {"HubAccountId": ACCOUNT, "HubStackName": STACK, "ExternalId": external_id, **params}, account=account)
    out = {}
    for res in t["Resources"].values():
        p = res["Properties"]
        name = r.resolve(p["RoleName"])
        out[name] = {"trust": r.resolve(p["AssumeRolePolicyDocument"]),
                     "policies": [{"name": x["PolicyName"], "policy": r.resolve(x["PolicyDocument"])} for x in p["Policies"]]}
    return out


def hub_policies(**params: Any) -> list[dict[str, Any]]:
    cfn = default_transformed()
    r = Resolver(cfn, {"MemberAccounts": [MEMBER], **params}, region=REGION, account=ACCOUNT, stack=STACK,
                 physical={"LatencyTable": TABLE})
    return function_role_policies(cfn, "Inventory", r)


def check(cases: list[dict[str, Any]]) -> dict[str, str]:
    """id -> the evaluator's result (Allowed, ImplicitlyDenied, ExplicitlyDenied)."""
    batch = [{"principal": HUB_ROLE, "context": {}, **c} for c in cases]
    for b in batch:
        b["context"] = {"aws:PrincipalArn": b["principal"], "aws:PrincipalAccount": b["principal"].split(":")[4], **b["context"]}
    return {k: v["result"] for k, v in simulate(batch).items()}


def test_the_member_template_is_plain_cloudformation_with_the_three_named_roles() -> None:
    t = load_template(MEMBER_TEMPLATE)
    assert "Transform" not in t
    assert all(not r["Type"].startswith("AWS::Serverless::") for r in t["Resources"].values())
    assert sorted(member_roles(MEMBER)) == sorted(f"replmon-{k}" for k in MEMBER_ROLES)
    assert "CAPABILITY_NAMED_IAM" in MEMBER_TEMPLATE.read_text()


def test_trust_admits_only_the_hub_stacks_roles_with_the_external_id() -> None:
    roles = member_roles(MEMBER)
    trust = roles["replmon-inventory"]["trust"]
    role = f"arn:aws:iam::{MEMBER}:role/replmon-inventory"
    base = {"action": "sts:AssumeRole", "resource": role, "accountId": MEMBER, "resourcePolicy": trust,
            "identityPolicies": hub_policies()}
    got = check([
        {"id": "hub", **base, "context": {"sts:ExternalId": "ext-1", "aws:ResourceAccount": MEMBER}},
        {"id": "no-external-id", **base, "context": {"aws:ResourceAccount": MEMBER}},
        {"id": "wrong-external-id", **base, "context": {"sts:ExternalId": "guess", "aws:ResourceAccount": MEMBER}},
        {"id": "other-role-in-hub", **base, "principal": f"arn:aws:iam::{ACCOUNT}:role/someone-else",
         "identityPolicies": [{"name": "all", "policy": {"Version": "2012-10-17", "Statement": [
             {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}}],
         "context": {"sts:ExternalId": "ext-1", "aws:ResourceAccount": MEMBER}},
        {"id": "unlisted-account", **base, "resource": f"arn:aws:iam::{OTHER}:role/replmon-inventory", "accountId": OTHER,
         "context": {"sts:ExternalId": "ext-1", "aws:ResourceAccount": OTHER}},
    ])
    assert got == {"hub": "Allowed", "no-external-id": "ImplicitlyDenied", "wrong-external-id": "ImplicitlyDenied",
                   "other-role-in-hub": "ImplicitlyDenied", "unlisted-account": "ImplicitlyDenied"}


def test_with_an_organization_the_hub_may_assume_the_role_in_its_accounts_and_the_listed_ones() -> None:
    """OrganizationId adds the organization's accounts; MemberAccounts stay allowed even outside it
    (two statements, either allows: review s26 N3, the parameter's description says so)."""
    trust = member_roles(OTHER, external_id="")["replmon-inventory"]["trust"]
    role = f"arn:aws:iam::{OTHER}:role/replmon-inventory"

    def case(i: str, org: str, members: list[str]) -> dict[str, Any]:
        return {"id": i, "action": "sts:AssumeRole", "resource": role, "accountId": OTHER, "resourcePolicy": trust,
                "identityPolicies": hub_policies(OrganizationId="o-abcdefghij", MemberAccounts=members),
                "context": {"aws:ResourceOrgID": org, "aws:ResourceAccount": OTHER}}

    got = check([case("in-org", "o-abcdefghij", [""]), case("other-org", "o-zzzzzzzzzz", [""]),
                 case("listed-outside-org", "o-zzzzzzzzzz", [OTHER])])
    assert got == {"in-org": "Allowed", "other-org": "ImplicitlyDenied", "listed-outside-org": "Allowed"}


def test_the_prober_reaches_probe_keys_of_its_own_account_only() -> None:
    prober = member_roles(MEMBER)["replmon-prober"]["policies"]
    p = f"arn:aws:iam::{MEMBER}:role/replmon-prober"

    def put(i: str, key: str, account: str = MEMBER, action: str = "s3:PutObject") -> dict[str, Any]:
        return {"id": i, "principal": p, "action": action, "resource": f"arn:aws:s3:::dr-bucket/{key}", "accountId": account,
                "context": {"s3:ResourceAccount": account, "aws:ResourceAccount": account}, "identityPolicies": prober}

    got = check([put("probe", "replmon-probes/r/1"), put("delete", "replmon-probes/r/1", action="s3:DeleteObjectVersion"),
                 put("data", "data/x"), put("other-account", "replmon-probes/r/1", OTHER),
                 put("tagging", "replmon-probes/r/1", action="s3:PutObjectTagging"),
                 # IAM's * spans '/': a key with the probe prefix deeper down matches too (docs/design/fleet.md 3, documented)
                 put("nested", "x/replmon-probes/r/1")])
    assert got == {"probe": "Allowed", "delete": "Allowed", "data": "ImplicitlyDenied", "other-account": "ImplicitlyDenied",
                   "tagging": "ImplicitlyDenied", "nested": "Allowed"}
    tagged = member_roles(MEMBER, AllowProbeTags="true")["replmon-prober"]["policies"]
    assert check([{**put("tagging", "replmon-probes/r/1", action="s3:PutObjectTagging"), "identityPolicies": tagged}]) == \
        {"tagging": "Allowed"}


def test_every_call_an_inventory_run_makes_is_allowed_hub_and_member_side() -> None:
    """A run on moto (AssumeRole into this account and a member, ListBuckets, HeadBucket, the bucket
    reads, the registry writes), each call's IAM request evaluated against the role that makes it."""
    from moto import mock_aws

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        ensure_table(ddb, TABLE, TEMPLATE)
        s3 = boto3.client("s3", region_name=REGION)
        for b in ("src", "dst", "plain"):
            s3.create_bucket(Bucket=b)
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        s3.put_bucket_tagging(Bucket="src", Tagging={"TagSet": [{"Key": "team", "Value": "a"}, {"Key": "replmon:enroll", "Value": "true"}]})
        s3.put_bucket_replication(Bucket="src", ReplicationConfiguration={"Role": f"arn:aws:iam::{ACCOUNT}:role/r", "Rules": [
            {"ID": "all", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": ""},
             "DeleteMarkerReplication": {"Status": "Disabled"}, "Destination": {"Bucket": "arn:aws:s3:::dst"}}]})
        registry = DynamoRegistry(TABLE, ddb)
        recorder = CallRecorder(ACCOUNT)
        deps = InventoryDeps(registry=registry, rows=registry, members=AwsMembers("replmon", "ext-1", make_client=default_client),
                             hub_account=ACCOUNT, settings=load_inventory_settings({"member_accounts": MEMBER, "workers": 2}),
                             clock=lambda: 1_795_000_000.0)
        with recorder.recording(), recorder.function("Inventory"):
            summary = run_inventory(deps, 1_795_000_000.0, 1_795_000_600.0)
        assert summary.complete and summary.reasons["OK"] == 1
    member = member_roles(ACCOUNT)
    hub = hub_policies()
    cases, seen = [], set()
    for i, (_, req) in enumerate(recorder.requests()):
        seen.add(req.action)
        if req.action.startswith("s3:"):  # made with the member inventory role's credentials (this account's buckets)
            ctx = {"s3:ResourceAccount": ACCOUNT, "aws:ResourceAccount": ACCOUNT}
            cases.append({"id": f"{i} {req.action} {req.resource}", "principal": f"arn:aws:iam::{ACCOUNT}:role/replmon-inventory",
                          "action": req.action, "resource": req.resource, "accountId": ACCOUNT, "context": ctx,
                          "identityPolicies": member["replmon-inventory"]["policies"]})
        elif req.action == "sts:AssumeRole":  # with the ExternalId the request carried (tests/iam.py records it)
            account = dict(req.context)["aws:ResourceAccount"]
            assert dict(req.context)["sts:ExternalId"] == "ext-1", req
            cases.append({"id": f"{i} {req.action} {req.resource}", "action": req.action, "resource": req.resource,
                          "accountId": account, "context": dict(req.context),
                          "identityPolicies": hub, "resourcePolicy": member_roles(account)["replmon-inventory"]["trust"]})
        else:
            cases.append({"id": f"{i} {req.action} {req.resource}", "action": req.action, "resource": req.resource,
                          "accountId": ACCOUNT, "identityPolicies": hub})
    assert {"sts:AssumeRole", "s3:ListAllMyBuckets", "s3:GetReplicationConfiguration", "s3:GetBucketTagging",
            "s3:GetEncryptionConfiguration", "s3:ListBucket", "dynamodb:Query", "dynamodb:PutItem"} <= seen
    denied = {k: v for k, v in check(cases).items() if v != "Allowed"}
    assert denied == {}
    # the other side: what the roles grant is what the run used (GetItem/UpdateItem/DeleteItem: the
    # registry's observe, moves and checkpoint, covered by tests/test_registry.py and test_inventory.py)
    granted = {a for pol in member["replmon-inventory"]["policies"] for st in pol["policy"]["Statement"]
               for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
    assert granted <= seen, granted - seen


@pytest.mark.parametrize("remove", ["s3:GetBucketTagging", "s3:ListAllMyBuckets"])
def test_removing_a_member_statement_is_caught(remove: str) -> None:
    roles = member_roles(ACCOUNT)
    policies = copy.deepcopy(roles["replmon-inventory"]["policies"])
    for pol in policies:
        for st in pol["policy"]["Statement"]:
            if isinstance(st["Action"], list):
                st["Action"] = [a for a in st["Action"] if a != remove] or ["s3:GetObjectAcl"]
            elif st["Action"] == remove:
                st["Action"] = "s3:GetObjectAcl"
    req = IamRequest(remove, "*" if remove == "s3:ListAllMyBuckets" else "arn:aws:s3:::src")
    got = check([{"id": "x", "principal": f"arn:aws:iam::{ACCOUNT}:role/replmon-inventory", "action": req.action,
                  "resource": req.resource, "accountId": ACCOUNT, "identityPolicies": policies,
                  "context": {"s3:ResourceAccount": ACCOUNT}}])
    assert got == {"x": "ImplicitlyDenied"}


def test_the_hub_stack_name_is_short_enough_for_every_generated_role_name_to_keep_it() -> None:
    """The member trust admits ``<HubStackName>-*``. CloudFormation generates a role's name as
    ``<stack>-<logical id>-<suffix>`` within IAM's 64 characters, shortening the parts when they do
    not fit ("Name type", CloudFormation User Guide,
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-name.html; IAM
    role names: 64 characters). So the parameter caps the stack name at what the longest hub
    function role leaves: 64 - len(<logical id>Role) - a 12-character suffix - 2 hyphens."""
    import re as _re

    from replmon.local.template import load_template

    member = load_template(ROOT / "templates" / "member-account.yaml")
    hub = (ROOT / "template.yaml").read_text()
    roles = [f"{i}Role" for i in _re.findall(r"^  ([A-Za-z0-9]+Function):\n    Type: AWS::Serverless::Function", hub, _re.M)]
    longest = max(len(r) for r in roles)
    pattern = member["Parameters"]["HubStackName"]["AllowedPattern"]
    cap = int(_re.search(r"\{0,(\d+)\}\$$", pattern).group(1)) + 1  # type: ignore[union-attr]
    assert cap + 1 + longest + 1 + 12 <= 64, (cap, longest)
    assert _re.fullmatch(pattern, "a" * cap) and not _re.fullmatch(pattern, "a" * (cap + 1))
