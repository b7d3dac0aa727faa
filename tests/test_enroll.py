"""`replmon fleet enroll` / `fleet unenroll` (fleet/enroll.py, cli/enroll.py) on moto: real
notification configurations carrying Lambda, SQS and SNS entries and EventBridge delivery, and
overlapping filters; through the CLI as an operator runs it, every member bucket reached through
its account's prober role (moto's STS: each assumed role's calls land in its own account).

The S3 and SNS rules the code encodes, as AWS documents them:
- PutBucketNotificationConfiguration "replaces the existing notification configuration with the
  configuration you include in the request body" (so a merge is a read-modify-write) —
  https://docs.amazonaws.cn/goto/WebAPI/s3-2006-03-01/PutBucketNotification
- FilterRule: "Overlapping prefixes and suffixes are not supported" (for one event type) —
  https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-filter-rule/name.html
- "The Amazon SNS topic must be in the same region as your Amazon S3 bucket" (and the SQS queue) —
  https://github.com/awsdocs/amazon-s3-user-guide/blob/master/doc_source/setup-event-notification-destination.md
- SNS Subscribe across accounts: the endpoint's (the queue's) owner subscribes, in the topic's
  Region — https://docs.aws.amazon.com/cli/latest/reference/sns/subscribe.html
- "When the queue owner creates a subscription, the subscription doesn't require confirmation"
  (so the hub's subscription to a member account's topic is active at once) —
  https://docs.aws.amazon.com/sns/latest/dg/sns-send-message-to-sqs-cross-account.html
- Get/PutBucketNotificationConfiguration take ExpectedBucketOwner —
  https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketNotificationConfiguration.html
- GetBucketNotificationConfiguration returns ``EventBridgeConfiguration`` when delivery to
  EventBridge is on (NotificationConfiguration: "EventBridgeConfiguration - Enables delivery of
  events to Amazon EventBridge") — https://docs.aws.amazon.com/goto/WebAPI/s3-2006-03-01/NotificationConfiguration
  (moto stores it on a put but leaves it out of the GET: :func:`_moto_returns_eventbridge` adds it back)
- IAM: the notification configuration's Get/Put are s3:GetBucketNotification / s3:PutBucketNotification —
  https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replmon.fleet.enroll import (
    EVENTS_ID,
    REPLICAS_ID,
    Wanted,
    conflicts,
    filters_overlap,
    kept_intact,
    plan_enroll,
    plan_unenroll,
    replicas_id,
)
from replmon.local.tables import ensure_table
from tests.conftest import TABLE, TEMPLATE
from tests.test_fleet_cli import ROUTE, run

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "output.schema.json").read_text())
HUB, MEMBER = "123456789012", "444455556666"  # moto's default account is the hub
QUEUE = f"arn:aws:sqs:us-east-1:{HUB}:replmon-events"
ARGS = ["--table", TABLE, "--region", "us-east-1"]
LAMBDA = f"arn:aws:lambda:us-east-1:{HUB}:function:thumbnails"
AUDIT_Q = f"arn:aws:sqs:us-east-1:{HUB}:audit"
RESTORE_T = f"arn:aws:sns:us-east-1:{HUB}:restores"
#: A bucket's configuration before replmon: three entries (Lambda, SQS, SNS) and EventBridge on.
THREE = {
    "LambdaFunctionConfigurations": [{"Id": "thumbnails", "LambdaFunctionArn": LAMBDA, "Events": ["s3:ObjectCreated:*"],
                                      "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "images/"},
                                                                         {"Name": "suffix", "Value": ".jpg"}]}}}],
    "QueueConfigurations": [{"Id": "audit", "QueueArn": AUDIT_Q, "Events": ["s3:ObjectRemoved:*"]}],
    "TopicConfigurations": [{"Id": "restores", "TopicArn": RESTORE_T, "Events": ["s3:ObjectRestore:Completed"]}],
    "EventBridgeConfiguration": {},
}


def _entry(events: list[str], prefix: str = "", suffix: str = "") -> dict[str, Any]:
    rules = [{"Name": n, "Value": v} for n, v in (("prefix", prefix), ("suffix", suffix)) if v]
    return {"Events": events, **({"Filter": {"Key": {"FilterRules": rules}}} if rules else {})}


# ---------------------------------------------------------------- S3's rules, in S3's terms
@pytest.mark.parametrize(("a", "b", "overlap"), [
    (_entry(["s3:ObjectCreated:*"]), _entry(["s3:ObjectCreated:Put"], "replmon-probes/"), True),  # no filter overlaps every prefix
    (_entry(["s3:ObjectCreated:*"], "images/"), _entry(["s3:ObjectCreated:*"], "images/thumbs/"), True),
    (_entry(["s3:ObjectCreated:*"], "images/"), _entry(["s3:ObjectCreated:*"], "logs/"), False),
    (_entry(["s3:ObjectCreated:*"], "", ".jpg"), _entry(["s3:ObjectCreated:*"], "", ".png"), False),
    (_entry(["s3:ObjectCreated:*"], "images/", ".jpg"), _entry(["s3:ObjectCreated:*"], "", "small.jpg"), True),
    (_entry(["s3:ObjectRemoved:*"]), _entry(["s3:ObjectCreated:*"]), False),  # different event types never conflict
    (_entry(["s3:Replication:*"]), _entry(["s3:Replication:OperationFailedReplication"], "logs/"), True),
])
def test_overlap_is_s3s_rule_prefix_and_suffix_for_one_event_type(a: dict[str, Any], b: dict[str, Any], overlap: bool) -> None:
    """FilterRule: overlapping prefixes and suffixes are not supported for one event type."""
    assert conflicts(a, b) is overlap and conflicts(b, a) is overlap


def test_filters_overlap_needs_both_prefix_and_suffix_overlap() -> None:
    assert filters_overlap(_entry([], "a/", ".jpg"), _entry([], "a/b/", ".png")) is False
    assert filters_overlap(_entry([], "a/"), _entry([], "b/", ".jpg")) is False


def test_a_target_in_another_region_is_refused_with_the_fix() -> None:
    """S3 notifies only a queue or topic in the bucket's own Region."""
    w = Wanted("orders", "us-east-1", "source", EVENTS_ID, "arn:aws:sqs:us-west-2:123456789012:replmon-events", ("s3:Replication:*",))
    plan = plan_enroll("orders", "us-east-1", THREE, [w])
    assert plan.action == "refused" and plan.after == plan.before == THREE and plan.diff() == []
    assert "us-west-2" in plan.reason and "own Region" in plan.reason and "member-region.yaml" in plan.fix


def test_the_merge_keeps_every_entry_and_adds_replmons() -> None:
    w = Wanted("orders-dr", "us-east-1", "destination", REPLICAS_ID, QUEUE, ("s3:ObjectCreated:*",), "replmon-probes/")
    plan = plan_enroll("orders-dr", "us-east-1", {**THREE, "ResponseMetadata": {"HTTPStatusCode": 200}}, [w])
    assert plan.action == "add"
    assert {k: v for k, v in plan.after.items() if k != "QueueConfigurations"} == {k: v for k, v in THREE.items() if k != "QueueConfigurations"}
    assert plan.after["QueueConfigurations"] == [*THREE["QueueConfigurations"], w.entry()]
    assert kept_intact(THREE, plan.after) == []
    assert any(line.startswith("+") and REPLICAS_ID in line for line in plan.diff())
    assert not any(line.startswith("-") and not line.startswith("---") for line in plan.diff())  # nothing of the user's removed
    # idempotent, and reversible exactly
    assert plan_enroll("orders-dr", "us-east-1", plan.after, [w]).action == "none"
    assert plan_unenroll("orders-dr", "us-east-1", plan.after).after == THREE


def test_preflight_prints_the_merge_enroll_applies() -> None:
    """One merge: the document `replmon preflight` prints for a source is what enroll writes."""
    from replmon.fleet.preflight import FAIL, notifications

    check = notifications("orders", THREE, QUEUE)
    w = Wanted("orders", "us-east-1", "source", EVENTS_ID, QUEUE, ("s3:Replication:*",))
    assert check.verdict == FAIL and check.document == plan_enroll("orders", "us-east-1", THREE, [w]).after
    assert "replmon fleet enroll --apply" in check.fix


def test_an_entry_of_replmons_with_another_target_is_updated_not_duplicated() -> None:
    old = {"QueueConfigurations": [{"Id": EVENTS_ID, "QueueArn": "arn:aws:sqs:us-east-1:123456789012:old", "Events": ["s3:Replication:*"]}]}
    w = Wanted("orders", "us-east-1", "source", EVENTS_ID, QUEUE, ("s3:Replication:*",))
    plan = plan_enroll("orders", "us-east-1", old, [w])
    assert plan.action == "add" and plan.after == {"QueueConfigurations": [w.entry()]} and plan.entries[0].startswith("update ")


def test_kept_intact_names_a_users_entry_the_put_lost() -> None:
    lost = copy.deepcopy(THREE)
    lost["TopicConfigurations"] = []
    del lost["EventBridgeConfiguration"]
    assert kept_intact(THREE, lost) == ["Topic restores: s3:ObjectRestore:Completed -> " + RESTORE_T, "EventBridgeConfiguration"]


# ---------------------------------------------------------------- the CLI on moto, as an operator runs it
def _member(service: str, region: str) -> Any:
    """An administrator of the member account (moto: an assumed role's calls land in its account)."""
    creds = boto3.client("sts", region_name="us-east-1").assume_role(
        RoleArn=f"arn:aws:iam::{MEMBER}:role/admin", RoleSessionName="setup")["Credentials"]
    return boto3.client(service, region_name=region, aws_access_key_id=creds["AccessKeyId"],
                        aws_secret_access_key=creds["SecretAccessKey"], aws_session_token=creds["SessionToken"])


def _create(s3: Any, bucket: str, region: str) -> None:
    s3.create_bucket(Bucket=bucket, **({} if region == "us-east-1" else {"CreateBucketConfiguration": {"LocationConstraint": region}}))


def _notification(s3: Any, bucket: str) -> dict[str, Any]:
    return {k: v for k, v in s3.get_bucket_notification_configuration(Bucket=bucket).items() if k != "ResponseMetadata"}


@pytest.fixture()
def _moto_returns_eventbridge(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's GetBucketNotificationConfiguration answer, with ``EventBridgeConfiguration`` where the
    bucket has it (as S3's does); everything else as moto answers."""
    from moto.s3.responses import S3Response

    original = S3Response.get_bucket_notification

    def get(self: Any) -> Any:
        config = self.backend.get_bucket_notification_configuration(self.bucket_name)
        answer = original(self)
        if config is None or config.event_bridge is None:
            return answer
        status, headers, body = answer
        body = body.decode() if isinstance(body, bytes) else body
        return status, headers, body.replace("</NotificationConfiguration>", "<EventBridgeConfiguration/></NotificationConfiguration>")

    monkeypatch.setattr(S3Response, "get_bucket_notification", get)


@pytest.fixture()
def fleet(tmp_path: Path, _moto_returns_eventbridge: None) -> Iterator[dict[str, Any]]:
    """Three routes: ``shop`` (hub account, source in the hub's Region with THREE, destination in
    eu-west-1 with THREE's shape there), ``member`` (another account, eu-west-1) and ``clash``
    (entries that overlap replmon's on both sides)."""
    from moto import mock_aws

    with mock_aws():
        ensure_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE, TEMPLATE)
        boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="replmon-events")
        hub = {r: boto3.client("s3", region_name=r) for r in ("us-east-1", "eu-west-1")}
        member = _member("s3", "eu-west-1")
        _member("sns", "eu-west-1").create_topic(Name="replmon-events")  # templates/member-region.yaml's topic
        for s3, bucket, region in ((hub["us-east-1"], "shop", "us-east-1"), (hub["eu-west-1"], "shop-dr", "eu-west-1"),
                                   (member, "member-src", "eu-west-1"), (member, "member-dr", "eu-west-1"),
                                   (hub["us-east-1"], "clash", "us-east-1"), (hub["us-east-1"], "clash-dr", "us-east-1")):
            _create(s3, bucket, region)
        hub["us-east-1"].put_bucket_notification_configuration(Bucket="shop", NotificationConfiguration=THREE)
        three_dr = json.loads(json.dumps(THREE).replace("us-east-1", "eu-west-1"))
        hub["eu-west-1"].put_bucket_notification_configuration(Bucket="shop-dr", NotificationConfiguration=three_dr)
        clash_src = {"QueueConfigurations": [{"Id": "ops-failures", "QueueArn": AUDIT_Q, "Events": ["s3:Replication:OperationFailedReplication"]}]}
        clash_dr = {"LambdaFunctionConfigurations": [{"Id": "index-all", "LambdaFunctionArn": LAMBDA, "Events": ["s3:ObjectCreated:*"]}],
                    "EventBridgeConfiguration": {}}
        hub["us-east-1"].put_bucket_notification_configuration(Bucket="clash", NotificationConfiguration=clash_src)
        hub["us-east-1"].put_bucket_notification_configuration(Bucket="clash-dr", NotificationConfiguration=clash_dr)
        routes = [("shop", HUB, "us-east-1", "shop-dr", HUB, "eu-west-1"), ("member", MEMBER, "eu-west-1", "member-dr", MEMBER, "eu-west-1"),
                  ("clash", HUB, "us-east-1", "clash-dr", HUB, "us-east-1")]
        for name, sa, sr, dst, da, dr in routes:
            spec = {**ROUTE, "name": name, "source": {"account": sa, "region": sr, "bucket": name if name != "member" else "member-src"},
                    "destinations": [{"account": da, "region": dr, "bucket": dst, "rule_id": "dr"}]}
            f = tmp_path / f"{name}.json"
            f.write_text(json.dumps(spec))
            assert run("fleet", *ARGS, "put", str(f)).exit_code == 0
        yield {"hub": hub, "member": member, "three_dr": three_dr, "clash": clash_src, "clash_dr": clash_dr}


def _enroll(*extra: str) -> tuple[int, dict[str, Any]]:
    r = run("fleet", *ARGS, "--format", "json", "enroll", "--events-queue-arn", QUEUE, *extra)
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    return r.exit_code, doc


def _by_bucket(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["bucket"]: b for b in doc["buckets"]}


def test_enroll_dry_run_prints_each_buckets_diff_and_changes_nothing(fleet: dict[str, Any]) -> None:
    code, doc = _enroll("--route", "shop", "--route", "member")
    assert code == 0 and doc["applied"] is False
    got = _by_bucket(doc)
    assert set(got) == {"shop", "shop-dr", "member-src", "member-dr"} and {b["action"] for b in got.values()} == {"add"}
    # the source in the hub's account and Region sends to the queue; elsewhere to that account and Region's topic
    assert any(f'"QueueArn": "{QUEUE}"' in line and line.startswith("+") for line in got["shop"]["diff"])
    assert any(f"arn:aws:sns:eu-west-1:{HUB}:replmon-events" in line for line in got["shop-dr"]["diff"])
    assert any(f"arn:aws:sns:eu-west-1:{MEMBER}:replmon-events" in line for line in got["member-src"]["diff"])
    assert doc["subscriptions"] == [{"topic": f"arn:aws:sns:eu-west-1:{MEMBER}:replmon-events", "endpoint": QUEUE,
                                     "action": "would subscribe (sqs, raw delivery)"}]
    assert _notification(fleet["hub"]["us-east-1"], "shop") == THREE  # a dry run writes nothing


def test_enroll_apply_keeps_the_users_three_entries_and_eventbridge_then_is_idempotent(fleet: dict[str, Any]) -> None:
    code, doc = _enroll("--route", "shop", "--route", "member", "--apply")
    assert code == 0, doc
    shop = _notification(fleet["hub"]["us-east-1"], "shop")
    assert kept_intact(THREE, shop) == [] and shop["EventBridgeConfiguration"] == {}
    assert shop["LambdaFunctionConfigurations"] == THREE["LambdaFunctionConfigurations"]
    assert shop["TopicConfigurations"] == THREE["TopicConfigurations"]
    assert [e["Id"] for e in shop["QueueConfigurations"]] == ["audit", EVENTS_ID]
    dr = _notification(fleet["hub"]["eu-west-1"], "shop-dr")
    assert kept_intact(fleet["three_dr"], dr) == []
    ours = next(e for e in dr["TopicConfigurations"] if e["Id"] == replicas_id("replmon-probes/"))
    assert ours["Events"] == ["s3:ObjectCreated:*"] and ours["Filter"]["Key"]["FilterRules"][0]["Value"] == "replmon-probes/"
    member = _notification(fleet["member"], "member-src")
    assert member["TopicConfigurations"][0]["TopicArn"] == f"arn:aws:sns:eu-west-1:{MEMBER}:replmon-events"
    # the queue's owner subscribes: "the subscription doesn't require confirmation"
    # (https://docs.aws.amazon.com/sns/latest/dg/sns-send-message-to-sqs-cross-account.html), so SNS
    # answers the subscription's ARN, never "pending confirmation"
    assert doc["subscriptions"][0]["action"] == "subscribed" and doc["subscriptions"][0]["subscription_arn"].startswith("arn:")
    topic = f"arn:aws:sns:eu-west-1:{MEMBER}:replmon-events"
    hub_sns = boto3.client("sns", region_name="eu-west-1")  # ListSubscriptions: the requester's (the queue owner's) subscriptions
    subs = [x for x in hub_sns.list_subscriptions()["Subscriptions"] if x["TopicArn"] == topic]
    assert [(x["Protocol"], x["Endpoint"], x["Owner"]) for x in subs] == [("sqs", QUEUE, HUB)]
    # a second apply changes nothing
    again_code, again = _enroll("--route", "shop", "--route", "member", "--apply")
    assert again_code == 0 and {b["action"] for b in again["buckets"]} == {"none"}
    assert again["subscriptions"][0]["subscription_arn"] == doc["subscriptions"][0]["subscription_arn"]  # SNS: the same subscription
    assert len([x for x in hub_sns.list_subscriptions()["Subscriptions"] if x["TopicArn"] == topic]) == 1
    assert _notification(fleet["hub"]["us-east-1"], "shop") == shop
    # unenroll takes out replmon's entries only: each bucket is as it was
    r = run("fleet", *ARGS, "--format", "json", "unenroll", "--route", "shop", "--route", "member", "--apply")
    jsonschema.validate(json.loads(r.stdout), SCHEMA)
    assert r.exit_code == 0
    assert _notification(fleet["hub"]["us-east-1"], "shop") == THREE
    assert _notification(fleet["hub"]["eu-west-1"], "shop-dr") == fleet["three_dr"]
    assert _notification(fleet["member"], "member-src") == {}


def test_overlapping_entries_are_refused_with_the_reason_and_fix_and_left_alone(fleet: dict[str, Any]) -> None:
    code, doc = _enroll("--route", "clash", "--apply")
    assert code == 1
    got = _by_bucket(doc)
    assert got["clash"]["action"] == got["clash-dr"]["action"] == "refused"
    assert "ops-failures" in got["clash"]["reason"] and "overlapping" in got["clash"]["reason"] and "fan out" in got["clash"]["fix"]
    assert "index-all" in got["clash-dr"]["reason"] and "polling" in got["clash-dr"]["fix"]
    assert _notification(fleet["hub"]["us-east-1"], "clash") == fleet["clash"]
    assert _notification(fleet["hub"]["us-east-1"], "clash-dr") == fleet["clash_dr"]


def test_enroll_table_prints_the_diff_and_csv_one_row_a_bucket(fleet: dict[str, Any]) -> None:
    table = run("fleet", *ARGS, "enroll", "--events-queue-arn", QUEUE, "--route", "shop")
    assert table.exit_code == 0 and "dry run" in table.output and "+++ shop (after)" in table.output
    csv = run("fleet", *ARGS, "--format", "csv", "enroll", "--events-queue-arn", QUEUE, "--route", "shop").stdout.splitlines()
    assert csv[0] == "bucket,region,side,action,entries,reason" and len(csv) == 3


def test_enroll_without_a_target_names_the_flag() -> None:
    r = run("fleet", *ARGS, "enroll")
    assert r.exit_code == 2 and "--events-queue-arn" in r.output


# ---------------------------------------------------------------- IAM: the member prober role (templates/member-account.yaml)
def test_the_prober_may_read_and_write_notification_configurations_of_its_own_account_only() -> None:
    """Least privilege: s3:GetBucketNotification / s3:PutBucketNotification on this account's
    buckets (s3:ResourceAccount), nothing on another account's."""
    from tests.test_member_iam import OTHER, check, member_roles

    prober = member_roles(MEMBER)["replmon-prober"]["policies"]
    p = f"arn:aws:iam::{MEMBER}:role/replmon-prober"

    def call(i: str, action: str, account: str = MEMBER) -> dict[str, Any]:
        return {"id": i, "principal": p, "action": action, "resource": "arn:aws:s3:::orders", "accountId": account,
                "context": {"s3:ResourceAccount": account, "aws:ResourceAccount": account}, "identityPolicies": prober}

    got = check([call("get", "s3:GetBucketNotification"), call("put", "s3:PutBucketNotification"),
                 call("other-get", "s3:GetBucketNotification", OTHER), call("other-put", "s3:PutBucketNotification", OTHER),
                 call("lifecycle", "s3:PutLifecycleConfiguration")])
    assert got == {"get": "Allowed", "put": "Allowed", "other-get": "ImplicitlyDenied", "other-put": "ImplicitlyDenied",
                   "lifecycle": "ImplicitlyDenied"}


def test_the_prober_trusts_the_operator_role_only_when_named_and_with_the_external_id() -> None:
    """OperatorRoleArn (optional): that hub role may assume the prober, with the ExternalId as the
    functions must; without the parameter, or as another hub role, it may not (AssumeRole API reference)."""
    from tests.test_member_iam import check, member_roles

    operator = f"arn:aws:iam::{HUB}:role/replmon-operator"
    role = f"arn:aws:iam::{MEMBER}:role/replmon-prober"
    anything = [{"name": "all", "policy": {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": "sts:AssumeRole", "Resource": "*"}]}}]

    def case(i: str, trust: dict[str, Any], principal: str = operator, external_id: str | None = "ext-1") -> dict[str, Any]:
        context = {"aws:ResourceAccount": MEMBER, **({"sts:ExternalId": external_id} if external_id else {})}
        return {"id": i, "principal": principal, "action": "sts:AssumeRole", "resource": role, "accountId": MEMBER,
                "resourcePolicy": trust, "identityPolicies": anything, "context": context}

    named = member_roles(MEMBER, OperatorRoleArn=operator)["replmon-prober"]["trust"]
    unnamed = member_roles(MEMBER)["replmon-prober"]["trust"]
    got = check([case("operator", named), case("no-external-id", named, external_id=None),
                 case("someone-else", named, principal=f"arn:aws:iam::{HUB}:role/someone-else"),
                 case("not-named", unnamed)])
    assert got == {"operator": "Allowed", "no-external-id": "ImplicitlyDenied", "someone-else": "ImplicitlyDenied",
                   "not-named": "ImplicitlyDenied"}


# ---------------------------------------------------------------- the merge's invariants, on any configuration

_EVENTS = ["s3:ObjectCreated:*", "s3:ObjectCreated:Put", "s3:ObjectRemoved:*", "s3:Replication:*",
           "s3:Replication:OperationFailedReplication", "s3:ObjectRestore:Completed"]
_KEYS = {"QueueConfigurations": ("QueueArn", AUDIT_Q), "TopicConfigurations": ("TopicArn", RESTORE_T),
         "LambdaFunctionConfigurations": ("LambdaFunctionArn", LAMBDA)}


@st.composite
def _user_config(draw: Any) -> dict[str, Any]:
    config: dict[str, Any] = {}
    n = 0
    for key, (field, arn) in _KEYS.items():
        for _ in range(draw(st.integers(0, 2))):
            n += 1
            events = draw(st.lists(st.sampled_from(_EVENTS), min_size=1, max_size=2, unique=True))
            target = draw(st.sampled_from([arn, QUEUE])) if key == "QueueConfigurations" else arn  # replmon's queue too: wired by hand
            e = {"Id": f"user-{n}", field: target, **_entry(events, draw(st.sampled_from(["", "images/", "replmon-", "replmon-probes/x/"])),
                                                         draw(st.sampled_from(["", ".jpg"])))}
            config.setdefault(key, []).append(e)
    if draw(st.booleans()):
        config["EventBridgeConfiguration"] = {}
    return config


def _valid(config: dict[str, Any]) -> bool:
    entries = [e for key in _KEYS for e in config.get(key, [])]
    return not any(conflicts(a, b) for i, a in enumerate(entries) for b in entries[i + 1:])


@settings(max_examples=200, deadline=None)
@given(_user_config(), st.booleans())
def test_the_merge_never_drops_or_changes_a_users_entry_and_is_undone_exactly(config: dict[str, Any], source: bool) -> None:
    w = (Wanted("b", "us-east-1", "source", EVENTS_ID, QUEUE, ("s3:Replication:*",)) if source else
         Wanted("b", "us-east-1", "destination", REPLICAS_ID, QUEUE, ("s3:ObjectCreated:*",), "replmon-probes/"))
    plan = plan_enroll("b", "us-east-1", config, [w])
    if plan.action == "refused":
        assert plan.after == config and plan.reason and plan.fix
        assert not _valid({**config, w.key: [*config.get(w.key, []), w.entry()]})  # refused only what S3 would refuse
        return
    assert kept_intact(config, plan.after) == []
    assert plan.after.get("EventBridgeConfiguration") == config.get("EventBridgeConfiguration")
    assert not _valid(config) or _valid(plan.after)  # S3 would accept what it writes, when it accepted what was there
    assert plan_enroll("b", "us-east-1", plan.after, [w]).action == "none"
    assert plan_unenroll("b", "us-east-1", plan.after).after == config


# ---------------------------------------------------------------- the apply's checks, on a store that misbehaves
class _Store:
    """BucketNotifications' shape over a dict; ``drop`` is a key the store loses on every write,
    ``denied`` buckets refuse reads as S3 refuses a role without s3:GetBucketNotification."""

    def __init__(self, configs: dict[str, dict[str, Any]], drop: str | None = None, denied: tuple[str, ...] = ()) -> None:
        self.configs, self.drop, self.denied, self.writes = configs, drop, denied, 0

    def read(self, bucket: str, region: str | None, endpoint_url: str | None, role_arn: str | None,
             owner: str | None = None) -> dict[str, Any]:
        from replmon.core.ports import AccessDenied

        if bucket in self.denied:
            raise AccessDenied("s3:GetBucketNotification", f"{bucket} (as {role_arn})")
        return copy.deepcopy(self.configs.get(bucket, {}))

    def write(self, bucket: str, region: str | None, endpoint_url: str | None, role_arn: str | None, config: dict[str, Any],
              owner: str | None = None) -> None:
        self.writes += 1
        self.configs[bucket] = {k: v for k, v in config.items() if k != self.drop}


def _spec(name: str, source: str, dest: str) -> Any:
    from replmon.core.registry import load_route_spec

    return load_route_spec({**ROUTE, "name": name, "group": "g00", "origin": "explicit",
                            "source": {"account": MEMBER, "region": "us-east-1", "bucket": source},
                            "destinations": [{"account": MEMBER, "region": "us-east-1", "bucket": dest}]})


def test_a_put_that_loses_an_entry_of_the_users_is_an_error_naming_it() -> None:
    from replmon.cli.enroll import ERROR, exit_code, wire
    from replmon.fleet.enroll import Hub

    store = _Store({"shop": copy.deepcopy(THREE)}, drop="EventBridgeConfiguration")
    plans, _ = wire(True, [_spec("shop", "shop", "shop-dr")], store, hub=Hub(QUEUE, "replmon-events"), override=None, apply=True,
                    member_role_prefix="replmon")
    shop = next(p for p in plans if p.bucket == "shop")
    assert shop.action == ERROR and "EventBridgeConfiguration" in shop.reason and "put back" in shop.fix
    assert exit_code(plans) == 3


def test_a_bucket_the_prober_cannot_read_is_an_error_naming_the_role_and_the_others_are_done() -> None:
    from replmon.cli.enroll import ERROR, exit_code, wire
    from replmon.fleet.enroll import Hub

    store = _Store({}, denied=("shop-dr",))
    plans, subs = wire(True, [_spec("shop", "shop", "shop-dr")], store, hub=Hub(QUEUE, "replmon-events"), override=None, apply=True,
                       member_role_prefix="replmon")
    got = {p.bucket: p for p in plans}
    assert got["shop-dr"].action == ERROR and f"arn:aws:iam::{MEMBER}:role/replmon-prober" in got["shop-dr"].fix
    assert got["shop"].action == "add" and store.writes == 1 and exit_code(plans, subs) == 3
    assert subs == [{"topic": f"arn:aws:sns:us-east-1:{MEMBER}:replmon-events", "endpoint": QUEUE,
                     "action": "would subscribe (sqs, raw delivery)"}]  # no SNS client given: nothing subscribed


# ---------------------------------------------------------------- several routes on one bucket
def _route(name: str, source: str, dest: str, prefix: str, account: str = HUB) -> Any:
    from replmon.core.registry import load_route_spec

    return load_route_spec({**ROUTE, "name": name, "group": "g00", "origin": "explicit", "prefix": prefix,
                            "source": {"account": account, "region": "us-east-1", "bucket": source},
                            "destinations": [{"account": account, "region": "us-east-1", "bucket": dest}]})


def _replicas(entry_id: str, prefix: str, target: str = QUEUE) -> dict[str, Any]:
    return {"Id": entry_id, "QueueArn": target, "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}}}


def _wire(enroll: bool, specs: list[Any], store: Any, keep: tuple[Any, ...] = ()) -> list[Any]:
    from replmon.cli.enroll import wire
    from replmon.fleet.enroll import Hub

    plans, _ = wire(enroll, specs, store, hub=Hub(QUEUE, "replmon-events") if enroll else None, override=None, apply=True,
                    member_role_prefix="replmon", **({"keep": keep} if keep else {}))
    return plans


def test_enrolling_one_route_keeps_the_other_routes_entry_on_the_same_bucket() -> None:
    """An older release's replmon-replicas (prefix a/) and replmon-replicas-2 (b/), both in place:
    `enroll --route b` finds its entry by target and prefix, whatever its Id, and writes nothing
    (it used to renumber the Ids over this run's routes only: a/'s entry became b/'s, two
    s3:ObjectCreated:* entries on one prefix, which FilterRule's overlap rule makes S3 refuse)."""
    legacy = {"QueueConfigurations": [_replicas(REPLICAS_ID, "replmon-probes/a/"), _replicas(f"{REPLICAS_ID}-2", "replmon-probes/b/")]}
    store = _Store({"shop-dr": copy.deepcopy(legacy)})
    [dr] = [p for p in _wire(True, [_route("b", "src-b", "shop-dr", "replmon-probes/b/")], store) if p.bucket == "shop-dr"]
    assert dr.action == "none" and store.configs["shop-dr"] == legacy
    # on a new bucket, each prefix's entry has the Id of its prefix: enrolling b then a adds a's beside b's
    store = _Store({})
    _wire(True, [_route("b", "src-b", "shop-dr", "replmon-probes/b/")], store)
    _wire(True, [_route("a", "src-a", "shop-dr", "replmon-probes/a/")], store)
    got = {e["Id"]: _rules_of(e) for e in store.configs["shop-dr"]["QueueConfigurations"]}
    assert got == {replicas_id("replmon-probes/b/"): "replmon-probes/b/", replicas_id("replmon-probes/a/"): "replmon-probes/a/"}
    assert _valid(store.configs["shop-dr"])


def _rules_of(entry: dict[str, Any]) -> str:
    return str(entry["Filter"]["Key"]["FilterRules"][0]["Value"])


def test_nested_probe_prefixes_of_two_routes_become_one_entry_on_the_shorter_prefix() -> None:
    """Two routes' destination prefixes p/ and p/x/ on one bucket would be two overlapping
    s3:ObjectCreated:* entries (S3 refuses the put): replmon keeps one, on p/, which covers both."""
    from replmon.fleet.enroll import Hub, wanted_for

    specs = [_route("outer", "src-1", "shop-dr", "replmon-probes/"), _route("inner", "src-2", "shop-dr", "replmon-probes/x/")]
    [w] = wanted_for(specs, Hub(QUEUE, "replmon-events"))[("shop-dr", "us-east-1")]
    assert (w.prefix, w.entry_id, set(w.routes)) == ("replmon-probes/", replicas_id("replmon-probes/"), {"outer", "inner"})
    plan = plan_enroll("shop-dr", "us-east-1", {}, [w])
    assert plan.action == "add" and _valid(plan.after)
    # the inner route enrolled first, the outer one later: the outer entry replaces the inner one
    store = _Store({})
    _wire(True, [specs[1]], store)
    _wire(True, [specs[0]], store)
    assert [_rules_of(e) for e in store.configs["shop-dr"]["QueueConfigurations"]] == ["replmon-probes/"]
    # the outer one first: the inner route's events are delivered already, nothing is added
    store = _Store({})
    _wire(True, [specs[0]], store)
    [dr] = [p for p in _wire(True, [specs[1]], store) if p.bucket == "shop-dr"]
    assert dr.action == "none" and "delivered already by replmon's entry" in dr.entries[0]


def test_replmons_own_entries_that_overlap_are_refused_with_the_fix() -> None:
    """Nested prefixes to two targets cannot be folded into one entry: S3 would refuse both."""
    a = Wanted("shop-dr", "us-east-1", "destination", replicas_id("p/"), QUEUE, ("s3:ObjectCreated:*",), "p/", ("a",))
    b = Wanted("shop-dr", "us-east-1", "destination", replicas_id("p/x/"), AUDIT_Q, ("s3:ObjectCreated:*",), "p/x/", ("b",))
    plan = plan_enroll("shop-dr", "us-east-1", {}, [a, b])
    assert plan.action == "refused" and plan.after == {} and "overlap" in plan.reason and "routes a" in plan.reason
    assert "do not nest" in plan.fix


def test_unenrolling_one_route_keeps_the_entries_other_routes_still_need() -> None:
    """`fleet unenroll --route a`: a's entries go, b's (same source bucket's replmon-events, its
    own replicas entry) stay; with no route left (uninstall --fleet) everything of replmon's goes."""
    a, b = _route("a", "shop", "shop-dr", "replmon-probes/a/"), _route("b", "shop", "shop-dr", "replmon-probes/b/")
    store = _Store({"shop": copy.deepcopy(THREE)})
    _wire(True, [a, b], store)
    enrolled = copy.deepcopy(store.configs)
    plans = {p.bucket: p for p in _wire(False, [a], store, keep=(b,))}
    assert plans["shop"].action == "none" and store.configs["shop"] == enrolled["shop"]  # b still needs replmon-events
    assert plans["shop-dr"].action == "remove"
    assert [e["Id"] for e in store.configs["shop-dr"]["QueueConfigurations"]] == [replicas_id("replmon-probes/b/")]
    assert any("route b still needs it" in line for line in plans["shop-dr"].entries)
    _wire(False, [b], store)
    assert store.configs["shop"] == THREE and store.configs["shop-dr"] == {}


def test_a_failed_put_says_s3_tests_every_destination_in_the_configuration() -> None:
    """S3 validates each SNS/SQS destination of the whole configuration at the put, the user's too."""

    class Broken(_Store):
        def write(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("InvalidArgument: Unable to validate the following destination configurations")

    [shop] = [p for p in _wire(True, [_route("shop", "shop", "shop-dr", "replmon-probes/")], Broken({})) if p.bucket == "shop"]
    assert shop.action == "error" and "every SNS/SQS destination" in shop.fix and "yours too" in shop.fix


def test_each_read_and_write_says_which_account_owns_the_bucket() -> None:
    """ExpectedBucketOwner on Get/PutBucketNotificationConfiguration (both take it:
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketNotificationConfiguration.html),
    the route's account, as the x-amz-expected-bucket-owner header on the wire."""
    from moto import mock_aws

    from replmon.adapters.member_buckets import BucketNotifications

    with mock_aws():
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="shop")
        store = BucketNotifications()
        seen: list[tuple[str, str | None]] = []
        store.s3("us-east-1", None, None).meta.events.register(
            "before-call.s3.*", lambda model, params, **_: seen.append((model.name, params["headers"].get("x-amz-expected-bucket-owner"))))
        _wire(True, [_route("shop", "shop", "shop", "replmon-probes/")], _Owned(store))
        assert seen and {h for _, h in seen} == {HUB}
        assert {n for n, _ in seen} == {"GetBucketNotificationConfiguration", "PutBucketNotificationConfiguration"}


class _Owned:
    """BucketNotifications without the prober role (moto: the caller's credentials are the hub's)."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def read(self, bucket: str, region: str | None, endpoint_url: str | None, role_arn: str | None, owner: str | None = None) -> Any:
        return self.store.read(bucket, region, endpoint_url, None, owner)

    def write(self, bucket: str, region: str | None, endpoint_url: str | None, role_arn: str | None, config: Any,
              owner: str | None = None) -> None:
        self.store.write(bucket, region, endpoint_url, None, config, owner)


def test_a_subscribed_topic_outside_event_source_accounts_is_warned_of() -> None:
    """The queue policy's MemberRegionTopics statement admits topics of EventSourceAccounts only."""
    from replmon.cli.enroll import unlisted_sources

    subs = [{"topic": f"arn:aws:sns:eu-west-1:{MEMBER}:replmon-events"}, {"topic": "arn:aws:sns:eu-west-1:777788889999:replmon-events"}]
    [line] = unlisted_sources(subs, f"{MEMBER}")
    assert "777788889999" in line and "EventSourceAccounts" in line
    assert unlisted_sources(subs, None) == []  # not known: no warning


def test_the_hub_partition_is_the_queue_arns(fleet: dict[str, Any]) -> None:
    """A hub in aws-cn: the member-Region topics' ARNs are in aws-cn too."""
    r = run("fleet", *ARGS, "--format", "json", "enroll", "--route", "member", "--events-queue-arn",
            f"arn:aws-cn:sqs:us-east-1:{HUB}:replmon-events")
    doc = json.loads(r.stdout)
    assert doc["subscriptions"][0]["topic"] == f"arn:aws-cn:sns:eu-west-1:{MEMBER}:replmon-events"


def test_fleet_unenroll_of_one_route_keeps_the_entries_of_the_routes_left(fleet: dict[str, Any], tmp_path: Path) -> None:
    """Through the CLI: the registry's other routes are the ones that stay enrolled."""
    s3 = fleet["hub"]["us-east-1"]
    _create(s3, "shared-dr", "us-east-1")
    for name, prefix in (("one", "replmon-probes/one/"), ("two", "replmon-probes/two/")):
        spec = {**ROUTE, "name": name, "prefix": prefix, "source": {"account": HUB, "region": "us-east-1", "bucket": "shop"},
                "destinations": [{"account": HUB, "region": "us-east-1", "bucket": "shared-dr", "rule_id": "shop-dr"}]}
        (tmp_path / f"{name}.json").write_text(json.dumps(spec))
        assert run("fleet", *ARGS, "put", str(tmp_path / f"{name}.json")).exit_code == 0
    assert _enroll("--route", "one", "--route", "two", "--apply")[0] == 0
    r = run("fleet", *ARGS, "--format", "json", "unenroll", "--route", "one", "--apply")
    assert r.exit_code == 0, r.output
    assert [e["Id"] for e in _notification(s3, "shared-dr")["QueueConfigurations"]] == [replicas_id("replmon-probes/two/")]
    assert EVENTS_ID in [e["Id"] for e in _notification(s3, "shop")["QueueConfigurations"]]  # route two's source
