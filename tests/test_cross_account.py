"""Every cross-account call of every function, evaluated on both sides with the IAM evaluator.

A registry route in a member account (source in us-east-1, destination in eu-west-1) is reached
by each function that touches it, with the adapters ``wiring.from_env`` builds from the
environment template.yaml gives that function (MemberExternalId set), on moto with two accounts
(moto gives an assumed role's credentials to the role's account). Every call is recorded
(tests/iam.py, with the principal that signed it) and evaluated by @cloud-copilot/iam-simulate:

- the function's own calls, sts:AssumeRole included, against the role template.yaml gives it;
  an AssumeRole also against the assumed role's trust policy (templates/member-account.yaml,
  resolved with the same ExternalId): a cross-account AssumeRole needs both ("AssumeRole", STS API
  reference, https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html);
- the calls made with the assumed credentials against that member role's policies.

AWS pages encoded here:
- ExternalId: the trust policy's ``sts:ExternalId`` condition admits only a request that sends the
  same value; a request without it is refused ("Access to AWS accounts owned by third parties",
  https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_create_for-user_externalid.html;
  "The confused deputy problem", https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html).
- aws:PrincipalArn, aws:ResourceAccount ("AWS global condition context keys",
  https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html).
- S3 publishes ReplicationLatency, BytesPendingReplication and OperationsPendingReplication in the
  destination bucket's Region ("This metric is published in the Region of the destination bucket")
  and OperationsFailedReplication in the source's ("Using S3 Replication metrics", column "Which
  Region is this metric published in?", https://docs.aws.amazon.com/AmazonS3/latest/userguide/repl-metrics.html);
  CloudWatch reads only its own Region and account, so the collector reads them as the member
  account's reader role in each of those Regions (which account holds them: docs/DEPLOY.md).
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import boto3
import pytest

from replmon import wiring
from replmon.adapters import clients
from replmon.adapters.cloudwatch import CloudWatchReaders
from replmon.core.registry import MEMBER_ROLES, load_route_spec, member_role_arn
from replmon.core.route import Route
from replmon.fleet.trust import ASSUMED_BY, DESTINATION_ROLE_ASSUMED_BY, OPERATOR_ASSUMES, assumes, function_role_pattern, render_into
from replmon.local.aslrun import LambdaContext, load_handler
from replmon.local.tables import ensure_table
from replmon.local.template import load_template
from replmon.probe.steps import plan_step
from replmon.signals.rtc import collect_rtc_fleet
from tests.cfnutil import (
    ACCOUNT,
    MODES,
    REGION,
    SPOOL_QUEUE,
    STACK,
    default_transformed,
    function_environment,
    function_role_policies,
    resolver,
)
from tests.conftest import ROOT, TABLE, TEMPLATE
from tests.iam import Call, CallRecorder
from tests.test_member_iam import MEMBER, OTHER, check, member_roles

EXT = "ext-1"
DST_REGION = "eu-west-1"
SRC_BUCKET, DST_BUCKET = "member-orders", "member-orders-dr"
MEMBER_TEMPLATE = ROOT / "templates" / "member-account.yaml"
#: A trust policy that leaves the decision to the hub's identity policies (the account as principal):
#: a cross-account AssumeRole needs both sides, so this isolates the caller's side.
TRUSTS_THE_HUB = {"Version": "2012-10-17", "Statement": [
    {"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "sts:AssumeRole"}]}


def hub_resolver(cfn: dict[str, Any], mode: str = "create-demo", **params: Any) -> Any:
    r = resolver(cfn, mode)
    r.params.update({"MemberAccounts": [MEMBER], "MemberExternalId": EXT, **params})
    return r


def hub_functions(cfn: dict[str, Any]) -> list[str]:
    return sorted(k.removesuffix("Function") for k, v in cfn["Resources"].items()
                  if v["Type"] == "AWS::Lambda::Function" and k.endswith("Function"))


def hub_role_arn(function: str) -> str:
    """The role CloudFormation names for ``<function>Function`` (stack name, logical id, suffix)."""
    return f"arn:aws:iam::{ACCOUNT}:role/{STACK}-{function}FunctionRole-AbCdEf123456"


def member_route() -> Route:
    return load_route_spec({
        "name": "member-orders", "group": "g00", "origin": "discovered",
        "source": {"account": MEMBER, "region": REGION, "bucket": SRC_BUCKET},
        "destinations": [{"account": MEMBER, "region": DST_REGION, "bucket": DST_BUCKET, "rule_id": "dr",
                          "priority": 1, "rtc": True, "metrics": True}],
    }).to_route("replmon")


# ------------------------------------------------------------------------------ one source of truth
def test_the_member_trust_policies_are_rendered_from_the_functions_that_assume_each_role() -> None:
    current = MEMBER_TEMPLATE.read_text()
    assert render_into(current) == current, "python tools/render_member_trust.py --write"
    t = load_template(MEMBER_TEMPLATE)
    for res in t["Resources"].values():
        kind = res["Properties"]["RoleName"]["Fn::Sub"].rsplit("-", 1)[-1]
        [statement] = res["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        cond, with_id, without_id = statement["Condition"]["Fn::If"]
        assert cond == "HasExternalId"
        want = [{"Fn::Sub": function_role_pattern(f)} for f in ASSUMED_BY[kind]]
        if kind in OPERATOR_ASSUMES:  # the hub's operator role, when the member stack names one (OperatorRoleArn)
            want.append({"Fn::If": ["HasOperator", {"Ref": "OperatorRoleArn"}, {"Ref": "AWS::NoValue"}]})
        assert with_id == {"ArnLike": {"aws:PrincipalArn": want}, "StringEquals": {"sts:ExternalId": {"Ref": "ExternalId"}}}
        assert without_id == {"ArnLike": {"aws:PrincipalArn": want}}


def test_the_render_bites() -> None:
    current = MEMBER_TEMPLATE.read_text()
    stale = current.replace("-HeartbeatFunctionRole-*", "-RecordResultFunctionRole-*")
    assert render_into(stale) == current
    with pytest.raises(ValueError, match="no '# >>> generated: reader trust' block"):
        render_into(current.replace("# >>> generated: reader trust", "# reader trust"))


def test_each_hub_function_may_assume_exactly_the_member_roles_it_assumes() -> None:
    """Evaluated, not read: every function's role against AssumeRole of each member role in a
    listed account (allowed exactly as ASSUMED_BY says) and in an unlisted one (never)."""
    cfn = default_transformed()
    r = hub_resolver(cfn)
    functions = hub_functions(cfn)
    assert set(functions) >= {f for fns in ASSUMED_BY.values() for f in fns}
    cases = []
    for fn in functions:
        for kind in MEMBER_ROLES:
            for account in (MEMBER, ACCOUNT, OTHER):
                cases.append({"id": f"{fn} {kind} {account}", "principal": hub_role_arn(fn), "action": "sts:AssumeRole",
                              "resource": member_role_arn(account, "replmon", kind), "accountId": account,
                              "context": {"aws:ResourceAccount": account}, "identityPolicies": function_role_policies(cfn, fn, r),
                              "resourcePolicy": TRUSTS_THE_HUB})
    got = check(cases)
    allowed = {k for k, v in got.items() if v == "Allowed"}
    assert allowed == {f"{fn} {kind} {account}" for kind, fns in ASSUMED_BY.items() for fn in fns for account in (MEMBER, ACCOUNT)}


def test_the_destination_role_is_assumed_by_the_functions_its_documented_trust_names() -> None:
    """The stack's own cross-account destination (DestinationRoleArn): the functions whose role may
    assume it are DESTINATION_ROLE_ASSUMED_BY, and docs/DEPLOY.md's trust list and the stack's
    outputs name each of them."""
    cfn = default_transformed()
    r = resolver(cfn, "existing")
    role = MODES["existing"]["DestinationRoleArn"]
    account = role.split(":")[4]
    got = check([{"id": fn, "principal": hub_role_arn(fn), "action": "sts:AssumeRole", "resource": role, "accountId": account,
                  "context": {"aws:ResourceAccount": account}, "identityPolicies": function_role_policies(cfn, fn, r),
                  "resourcePolicy": TRUSTS_THE_HUB}
                 for fn in hub_functions(cfn)])
    assert {k for k, v in got.items() if v == "Allowed"} == set(DESTINATION_ROLE_ASSUMED_BY)
    deploy = " ".join((ROOT / "docs" / "DEPLOY.md").read_text().split())
    trust = deploy[deploy.index("### Cross-account destinations"):deploy.index("### Incomplete multipart uploads")]
    outputs = load_template(ROOT / "template.yaml")["Outputs"]
    for fn in DESTINATION_ROLE_ASSUMED_BY:
        assert f"`{fn}RoleArn`" in trust, fn
        assert outputs[f"{fn}RoleArn"]["Value"] == {"Fn::GetAtt": f"{fn}FunctionRole.Arn"}


# ------------------------------------------------------------------------------ every call, both sides
@contextlib.contextmanager
def as_deployed(env: dict[str, str]) -> Iterator[wiring.Deps]:
    """The function's environment and the adapters from_env builds from it, with a fresh client
    cache (each Lambda function is its own process: its own AssumeRole)."""
    clients.cached.cache_clear()
    saved = wiring._from_env
    wiring._from_env = None
    try:
        with mock.patch.dict(os.environ, env, clear=True):
            yield wiring.for_function(env["AWS_LAMBDA_FUNCTION_NAME"])
    finally:
        wiring._from_env = saved
        clients.cached.cache_clear()


def handler(fn: str, event: dict[str, Any]) -> Any:
    """The function's deployed entry point (Powertools' logs kept off the test's stdout)."""
    with contextlib.redirect_stdout(io.StringIO()):
        return load_handler(fn)(event, LambdaContext(fn))


def play(fn: str, deps: wiring.Deps, route: Route, now: float, results: dict[str, Any]) -> Any:
    """What ``fn`` does in the member account: the probe's functions and Housekeeping through their
    handlers (one probe, planned as PlanProbes plans it: uploaded, polled, cleaned up), the others
    through the port their step calls (the Heartbeat's stores, the collector's readers, the
    inventory's member accounts)."""
    src = route.source
    if fn == "UploadProbe":
        [probe] = plan_step({"routes": [route.model_dump(mode="json")], "sizes": "1KiB", "trials": 1,
                             "poll": {"use_history": False, "inline_budget_seconds": 0}}, deps)["probes"]
        return handler(fn, probe)
    if fn == "PollReplication":
        return handler(fn, results["UploadProbe"])
    if fn == "Cleanup":
        return handler(fn, results["PollReplication"])
    if fn == "Housekeeping":  # the spool, then the sweep of the run's routes
        return handler(fn, {"routes": [route.model_dump(mode="json")]})
    if fn == "Heartbeat":  # its short-timeout stores: PUT, HEAD the version, delete it
        assert deps.heartbeat_stores is not None
        store, key = deps.heartbeat_stores(src), f"{route.prefix}heartbeat/x"
        put = store.put(src.bucket, key, b"beat", {})
        return store.head(src.bucket, key, put.version_id), store.delete_all_versions(src.bucket, key)
    if fn == "CollectSignals":  # the collector's own call into the readers
        return collect_rtc_fleet(deps.metric_readers, [route], now)  # type: ignore[arg-type]
    if fn == "Inventory":
        return wiring.member_accounts(deps.fleet).open(MEMBER).replication(src.bucket, src.region)
    raise AssertionError(fn)


def evaluate_calls(calls: list[Call], policies: dict[str, list[dict[str, Any]]], external_id: str | None = EXT,
                   strip_external_id: bool = False, bucket_account: Callable[[str], str] | None = None) -> dict[str, str]:
    """Each recorded call against the role that made it: the function's own (``policies``, its
    role in template.yaml) or the member role whose credentials signed it (templates/member-account.yaml,
    resolved for that role's account with ``external_id``); an AssumeRole also against the assumed
    role's trust policy. ``bucket_account`` names a bucket's owner (default: the signing role's account).
    Usable for any recorded run (the deployed harness's too); ``strip_external_id`` asks the same
    AssumeRoles without it."""
    trusts: dict[str, dict[str, dict[str, Any]]] = {}

    def member(account: str) -> dict[str, dict[str, Any]]:
        if account not in trusts:
            trusts[account] = member_roles(account, external_id or "")
        return trusts[account]

    cases = []
    for i, c in enumerate(calls):
        for req in c.requests:
            ctx = dict(req.context)
            if strip_external_id:
                ctx.pop("sts:ExternalId", None)
            case: dict[str, Any] = {"id": f"{i} {c.function} {req.action} {req.resource} as {c.principal or 'own role'}",
                                    "action": req.action, "resource": req.resource, "context": ctx}
            if c.principal is None:
                case.update(principal=hub_role_arn(c.function), identityPolicies=policies[c.function], accountId=ACCOUNT)
                if req.action == "sts:AssumeRole":
                    account = ctx["aws:ResourceAccount"]
                    case.update(accountId=account, resourcePolicy=member(account)[req.resource.rsplit("/", 1)[-1]]["trust"])
            else:
                account = c.principal.split(":")[4]
                case.update(principal=c.principal, identityPolicies=member(account)[c.principal.rsplit("/", 1)[-1]]["policies"],
                            accountId=account)
                if req.action.startswith("s3:"):
                    owner = bucket_account(c.params["Bucket"]) if bucket_account and "Bucket" in c.params else account
                    case.update(accountId=owner, context={**ctx, "s3:ResourceAccount": owner, "aws:ResourceAccount": owner})
            cases.append(case)
    return check(cases)


class MemberReplication:
    """moto never replicates: a source HEAD after the PUT answers COMPLETED and the replica appears
    in the destination bucket (S3 keeps the source's version id on a replica; moto makes a new one,
    so a HEAD of the replica by the source's version id is pointed at it), as tests/fakes.py does
    for the one-account run. Installed under the recorder, so what replmon calls is what is recorded."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin  # the member's own client: the emulator's hands, not a call replmon makes
        admin._replmon_untracked = True  # tests/iam.py leaves it out
        admin._request_signer._credentials.get_frozen_credentials()  # its own AssumeRole now, before any recording
        self.replicas: dict[str, str] = {}  # source version -> replica version

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        from botocore.client import BaseClient

        original = BaseClient._make_api_call
        emulator = self

        def make_api_call(client: Any, operation: str, params: dict[str, Any]) -> Any:
            if operation != "HeadObject" or client is emulator.admin:
                return original(client, operation, params)
            params = dict(params)
            replica = params.get("Bucket") == DST_BUCKET and params.get("VersionId") in emulator.replicas
            if replica:
                params["VersionId"] = emulator.replicas[params["VersionId"]]
            answer = original(client, operation, params)
            if replica:
                answer["ReplicationStatus"] = "REPLICA"
            elif params.get("Bucket") == SRC_BUCKET:
                answer["ReplicationStatus"] = "COMPLETED"
                version = answer["VersionId"]
                if version not in emulator.replicas:
                    copy = emulator.admin.copy_object(Bucket=DST_BUCKET, Key=params["Key"], ChecksumAlgorithm="CRC64NVME",
                                                      CopySource={"Bucket": SRC_BUCKET, "Key": params["Key"], "VersionId": version})
                    emulator.replicas[version] = copy["VersionId"]
            return answer

        with mock.patch.object(BaseClient, "_make_api_call", make_api_call):
            yield


CROSS_ACCOUNT = ("UploadProbe", "PollReplication", "Cleanup", "Housekeeping", "Heartbeat", "CollectSignals", "Inventory")
assert sorted(CROSS_ACCOUNT) == sorted({f for fns in ASSUMED_BY.values() for f in fns})


@pytest.fixture(scope="module")
def member_run() -> Iterator[tuple[CallRecorder, dict[str, Any], dict[str, list[dict[str, Any]]]]]:
    """Each function's member-account calls, recorded (one moto world, two accounts)."""
    from moto import mock_aws

    cfn = default_transformed()
    r = hub_resolver(cfn)
    policies = {fn: function_role_policies(cfn, fn, r) for fn in CROSS_ACCOUNT}
    envs = {fn: {**function_environment(cfn, fn, r), "AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION,
                 "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_LAMBDA_FUNCTION_NAME": fn,
                 "POWERTOOLS_TRACE_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING", "REPLMON_METRICS": "none"}
            for fn in CROSS_ACCOUNT}
    route = member_route()
    now = time.time()
    with mock_aws(), mock.patch.dict(os.environ, {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}):
        boto3.client("sqs", region_name=REGION).create_queue(QueueName=SPOOL_QUEUE)
        ensure_table(boto3.client("dynamodb", region_name=REGION), TABLE, TEMPLATE)
        # The member's buckets and S3's metrics, made in the member account (as its admin would)
        admin = f"arn:aws:iam::{MEMBER}:role/admin"
        for bucket, region in ((SRC_BUCKET, REGION), (DST_BUCKET, DST_REGION)):
            s3 = clients.client("s3", clients.CONTROL, region=region, role_arn=admin)
            s3.create_bucket(Bucket=bucket, **({} if region == "us-east-1" else
                                               {"CreateBucketConfiguration": {"LocationConstraint": region}}))
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        s3 = clients.client("s3", clients.CONTROL, region=REGION, role_arn=admin)
        s3.put_bucket_replication(Bucket=SRC_BUCKET, ReplicationConfiguration={"Role": f"arn:aws:iam::{MEMBER}:role/r", "Rules": [
            {"ID": "dr", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": ""},
             "DeleteMarkerReplication": {"Status": "Disabled"}, "Destination": {"Bucket": f"arn:aws:s3:::{DST_BUCKET}"}}]})
        dims = [{"Name": "SourceBucket", "Value": SRC_BUCKET}, {"Name": "DestinationBucket", "Value": DST_BUCKET},
                {"Name": "RuleId", "Value": "dr"}]
        at = datetime.fromtimestamp(now - 120, UTC)
        clients.client("cloudwatch", clients.STORE, region=DST_REGION, role_arn=admin).put_metric_data(
            Namespace="AWS/S3", MetricData=[{"MetricName": "ReplicationLatency", "Dimensions": dims, "Timestamp": at, "Value": 42.0}])
        clients.client("cloudwatch", clients.STORE, region=REGION, role_arn=admin).put_metric_data(
            Namespace="AWS/S3", MetricData=[{"MetricName": "OperationsFailedReplication", "Dimensions": dims, "Timestamp": at,
                                             "Value": 3.0}])
        recorder = CallRecorder(ACCOUNT)
        results: dict[str, Any] = {}
        replication = MemberReplication(clients.client("s3", clients.CONTROL, region=REGION, role_arn=admin))
        with replication.installed(), recorder.recording():
            for fn in CROSS_ACCOUNT:
                with as_deployed(envs[fn]) as deps, recorder.function(fn):
                    results[fn] = play(fn, deps, route, now, results)
        # what moto's STS was asked (its backend keeps every AssumeRole, in the role's account)
        from moto.sts.models import sts_backends

        results["moto-assumed"] = [(r.role_arn, r.session_name, r.external_id) for r in sts_backends[MEMBER]["aws"].assumed_roles]
        # the hub's own credentials read the hub's CloudWatch: the member's metrics are not there
        results["hub-readers"] = collect_rtc_fleet(CloudWatchReaders(None), [route], now)
        yield recorder, results, policies


def test_every_cross_account_call_is_allowed_by_the_caller_and_by_the_member_role(member_run: Any) -> None:
    recorder, results, policies = member_run
    denied = {k: v for k, v in evaluate_calls(recorder.calls, policies).items() if v != "Allowed"}
    assert denied == {}
    # each function assumed exactly the member roles ASSUMED_BY names for it, each with the ExternalId
    assumed: dict[str, set[str]] = {}
    for c in recorder.calls:
        if c.operation == "AssumeRole":
            assert c.principal is None and c.params["ExternalId"] == EXT, c
            assumed.setdefault(c.function, set()).add(c.params["RoleArn"].rsplit("-", 1)[-1])
    assert {fn: tuple(sorted(k)) for fn, k in assumed.items()} == {fn: tuple(sorted(assumes(fn))) for fn in CROSS_ACCOUNT}
    # moto's STS received each of them with the ExternalId (the member's admin set the buckets up without one)
    received = {(arn.rsplit("/", 1)[-1], ext) for arn, _, ext in results["moto-assumed"]}
    assert received == {("admin", None), *((f"replmon-{k}", EXT) for k in MEMBER_ROLES)}, received
    # and its member-account calls were signed by that role, not by its own
    made_as = {(c.function, c.service, c.principal.rsplit("/", 1)[-1] if c.principal else None) for c in recorder.calls
               if c.service in ("s3", "cloudwatch")}
    assert made_as == {(fn, "cloudwatch" if fn == "CollectSignals" else "s3", f"replmon-{assumes(fn)[0]}") for fn in CROSS_ACCOUNT}


def test_a_probe_of_a_member_route_completes_through_the_prober_role(member_run: Any) -> None:
    """Uploaded, HEADed on both sides by version, cleaned on both sides: every S3 call as the prober."""
    recorder, results, _ = member_run
    cleanup = results["Cleanup"]
    assert cleanup["status"] == "COMPLETED" and cleanup["cleanup_failed"] == 0
    assert cleanup["cleaned"] == {"source": 1, f"destination:{DST_BUCKET}": 1}
    heads = {(c.params["Bucket"], c.region) for c in recorder.calls if c.function == "PollReplication" and c.operation == "HeadObject"}
    assert heads == {(SRC_BUCKET, REGION), (DST_BUCKET, DST_REGION)}


def test_the_collector_reads_a_member_routes_metrics_as_its_reader_where_s3_publishes_them(member_run: Any) -> None:
    recorder, results, _ = member_run
    fleet = results["CollectSignals"]
    assert fleet.failed == {}
    [sample] = fleet.samples["member-orders"]
    assert sample.series["ReplicationLatency"].latest == 42.0  # (member account, destination Region)
    assert sample.series["OperationsFailedReplication"].latest == 3.0  # (member account, source Region)
    reads = {(c.region, c.principal) for c in recorder.calls if c.function == "CollectSignals" and c.operation == "GetMetricData"}
    reader = member_role_arn(MEMBER, "replmon", "reader")
    assert reads == {(DST_REGION, reader), (REGION, reader)}
    # read with the hub's own credentials, the same route has no data at all: what this replaces
    [hub] = results["hub-readers"].samples["member-orders"]
    assert all(s.missing for s in hub.series.values())


def test_housekeeping_sweeps_a_member_route_through_the_prober_role(member_run: Any) -> None:
    recorder, results, _ = member_run
    out = results["Housekeeping"]
    assert "sweep_failures" not in out and out["swept"] == 0, out
    sweeps = {(c.operation, c.params["Bucket"]) for c in recorder.calls if c.function == "Housekeeping" and c.service == "s3"}
    assert {("ListObjectVersions", SRC_BUCKET), ("ListObjectVersions", DST_BUCKET)} <= sweeps


def test_without_the_external_id_or_from_another_function_the_member_roles_refuse(member_run: Any) -> None:
    """The same AssumeRole requests, without the ExternalId, with a wrong one, or from a hub role
    that ASSUMED_BY does not name for that role (with an identity policy that allows everything):
    each member role refuses every one."""
    recorder, _, policies = member_run
    assumes_ = [c for c in recorder.calls if c.operation == "AssumeRole"]
    assert {c.params["RoleArn"] for c in assumes_} == {member_role_arn(MEMBER, "replmon", k) for k in MEMBER_ROLES}
    got = evaluate_calls(assumes_, policies, strip_external_id=True)
    assert set(got.values()) == {"ImplicitlyDenied"}, got
    wrong = [Call(c.function, c.service, c.operation, {**c.params, "ExternalId": "guess"}, c.region,
                  [type(r)(r.action, r.resource, tuple((k, "guess" if k == "sts:ExternalId" else v) for k, v in r.context))
                   for r in c.requests]) for c in assumes_]
    assert set(evaluate_calls(wrong, policies).values()) == {"ImplicitlyDenied"}
    everything = [{"name": "all", "policy": {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}}]
    trusts = member_roles(MEMBER, EXT)
    cases = [{"id": f"{fn} -> {kind}", "principal": hub_role_arn(fn), "action": "sts:AssumeRole",
              "resource": member_role_arn(MEMBER, "replmon", kind), "accountId": MEMBER, "identityPolicies": everything,
              "resourcePolicy": trusts[f"replmon-{kind}"]["trust"],
              "context": {"aws:ResourceAccount": MEMBER, "sts:ExternalId": EXT}}
             for kind in MEMBER_ROLES for fn in ("RecordResult", "Report", "PlanProbes", *CROSS_ACCOUNT)]
    got = check(cases)
    assert {k for k, v in got.items() if v == "Allowed"} == {f"{fn} -> {kind}" for kind, fns in ASSUMED_BY.items() for fn in fns}


def test_with_no_external_id_configured_none_is_sent_and_a_trust_without_one_admits_it() -> None:
    """MemberExternalId empty: the request carries no ExternalId (adapters/clients.py), and the
    member template's trust without ExternalId admits the same functions' roles."""
    assert "ExternalId" not in clients.assume_role_params(member_role_arn(MEMBER, "replmon", "prober"), "")
    trusts = member_roles(MEMBER, "")
    cases = [{"id": f"{fn} -> {kind}", "principal": hub_role_arn(fn), "action": "sts:AssumeRole",
              "resource": member_role_arn(MEMBER, "replmon", kind), "accountId": MEMBER, "resourcePolicy": trusts[f"replmon-{kind}"]["trust"],
              "identityPolicies": function_role_policies(default_transformed(), fn, hub_resolver(default_transformed(), MemberExternalId="")),
              "context": {"aws:ResourceAccount": MEMBER}}
             for kind, fns in ASSUMED_BY.items() for fn in fns]
    assert set(check(cases).values()) == {"Allowed"}


def test_deploy_names_the_functions_that_assume_each_member_role() -> None:
    """docs/DEPLOY.md's "who assumes which role" table is ASSUMED_BY, row for row."""
    rows = {}
    for line in (ROOT / "docs" / "DEPLOY.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`<MemberRolePrefix>-"):
            rows[cells[0].strip("`").rsplit("-", 1)[-1]] = tuple(f.strip() for f in cells[1].split(","))
    assert rows == dict(ASSUMED_BY)


def test_a_member_account_that_refuses_the_reader_fails_only_its_routes_and_names_the_fix() -> None:
    """An AssumeRole refused while reading (botocore refreshes the credentials inside the call)
    is StoreUnavailable naming the role and the member template, the collector's RtcReadFailed."""
    from botocore.exceptions import ClientError

    from replmon.adapters.cloudwatch import CloudWatchReader

    class Refused:
        def get_metric_data(self, **_: Any) -> Any:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "AssumeRole")

    role = member_role_arn(MEMBER, "replmon", "reader")
    got = collect_rtc_fleet(lambda key: CloudWatchReader(Refused(), role), [member_route()], time.time())
    assert got.samples == {}
    why = got.failed["member-orders"]
    assert why.startswith("StoreUnavailable: cannot assume arn:aws:iam::444455556666:role/replmon-reader") and "AccessDenied" in why
    assert "templates/member-account.yaml" in why and "MemberExternalId" in why
