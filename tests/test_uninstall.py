"""Safe removal: the latency table outlives the stack, and `replmon uninstall` leaves no
probe or seed object, notification entry or lifecycle rule of replmon's behind while keeping
every other entry of each configuration exactly as it was.

AWS contracts encoded here:
- "DeletionPolicy attribute": "If a resource has no DeletionPolicy attribute, CloudFormation
  deletes the resource by default"; "To keep a resource when its stack is deleted, specify Retain";
  "UpdateReplacePolicy attribute" covers replacement during an update; "AWS::DynamoDB::Table"
  DeletionProtectionEnabled "Determines if a table is protected from deletion"
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-attribute-deletionpolicy.html,
  .../aws-attribute-updatereplacepolicy.html, .../aws-resource-dynamodb-table.html). Neither
  attribute page documents parameters or intrinsic functions in the attribute: the values are
  literal, and the configurable part is the table's DeletionProtectionEnabled.
- "PutBucketNotificationConfiguration": "This action replaces the existing notification
  configuration with the configuration you include in the request body";
  "PutBucketLifecycleConfiguration": "Creates a new lifecycle configuration for the bucket or
  replaces an existing lifecycle configuration" (https://docs.aws.amazon.com/AmazonS3/latest/API/
  API_PutBucketNotificationConfiguration.html, .../API_PutBucketLifecycleConfiguration.html):
  removing our entries means writing back everything else.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from replmon.fleet.offboard import lifecycle_without, notification_without
from replmon.local.template import load_template
from tests.conftest import ROOT, TEMPLATE

SRC, DST, QUEUE = "prod-data", "prod-data-replica", "replmon-EventsQueue-ABC"
OTHER_RULE = {"ID": "archive-logs", "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Transitions": [{"Days": 30, "StorageClass": "GLACIER"}]}
OURS_RULE = {"ID": "replmon-probes", "Status": "Enabled", "Filter": {"Prefix": "replmon-probes/"}, "Expiration": {"Days": 1},
             "NoncurrentVersionExpiration": {"NoncurrentDays": 1}, "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}}


def test_the_latency_table_is_retained_on_deletion_and_replacement() -> None:
    t = load_template(TEMPLATE)
    table = t["Resources"]["LatencyTable"]
    assert table["DeletionPolicy"] == "Retain" and table["UpdateReplacePolicy"] == "Retain"  # literal: no parameter there
    assert table["Properties"]["DeletionProtectionEnabled"] is True  # always on; UNINSTALL.md turns it off with update-table
    assert t["Outputs"]["EventsQueueArn"]["Value"] in ({"Fn::GetAtt": "EventsQueue.Arn"}, {"Fn::GetAtt": ["EventsQueue", "Arn"]})
    uninstall = (ROOT / "docs" / "UNINSTALL.md").read_text()
    assert "LatencyTable" in uninstall and "--delete-table" in uninstall and "DeletionPolicy" in uninstall


def test_the_plan_bucket_can_be_emptied_before_the_stack_is_deleted() -> None:
    """CloudFormation deletes a bucket only when it is empty ("AWS::S3::Bucket": "Only empty
    buckets can be deleted", https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-resource-s3-bucket.html):
    the stack outputs PlanBucketName and UNINSTALL.md empties it first; unversioned, so `aws s3 rm
    --recursive` leaves nothing behind."""
    t = load_template(TEMPLATE)
    bucket = t["Resources"]["PlanBucket"]
    assert "VersioningConfiguration" not in bucket["Properties"]
    assert t["Outputs"]["PlanBucketName"]["Value"] == {"Ref": "PlanBucket"}
    uninstall = (ROOT / "docs" / "UNINSTALL.md").read_text()
    assert uninstall.index("PlanBucketName") < uninstall.index("sam delete")


def test_removing_our_entries_keeps_everything_else() -> None:
    cfg = {"QueueConfigurations": [{"Id": "x", "QueueArn": "arn:aws:sqs:us-east-1:1:q", "Events": ["s3:Replication:*"]},
                                   {"Id": "audit", "QueueArn": "arn:aws:sqs:us-east-1:1:audit", "Events": ["s3:ObjectCreated:*"]}],
           "TopicConfigurations": [{"Id": "replmon-events", "TopicArn": "arn:aws:sns:us-east-1:1:t", "Events": ["s3:Replication:*"]}],
           "EventBridgeConfiguration": {}, "ResponseMetadata": {"HTTPStatusCode": 200}}
    kept, gone = notification_without(cfg, ["arn:aws:sqs:us-east-1:1:q"])
    assert kept == {"QueueConfigurations": [cfg["QueueConfigurations"][1]], "EventBridgeConfiguration": {}} and len(gone) == 2
    assert notification_without(kept, ["arn:aws:sqs:us-east-1:1:q"]) == (kept, [])  # idempotent
    assert lifecycle_without([OTHER_RULE, OURS_RULE]) == ([OTHER_RULE], ["replmon-probes"])


@pytest.fixture
def account() -> Iterator[dict[str, Any]]:
    """Two existing buckets as an operator onboarded them (docs/DEPLOY.md), with probes in flight."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.get_queue_attributes(QueueUrl=sqs.create_queue(QueueName=QUEUE)["QueueUrl"], AttributeNames=["QueueArn"])
        audit = sqs.get_queue_attributes(QueueUrl=sqs.create_queue(QueueName="audit")["QueueUrl"], AttributeNames=["QueueArn"])
        arn, audit_arn = queue["Attributes"]["QueueArn"], audit["Attributes"]["QueueArn"]
        for b in (SRC, DST):
            s3.create_bucket(Bucket=b)
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
            s3.put_object(Bucket=b, Key="data/keep.txt", Body=b"x")
            for i in range(3):
                s3.put_object(Bucket=b, Key=f"replmon-probes/run{i}/p", Body=b"p")
            s3.delete_object(Bucket=b, Key="replmon-probes/run0/p")  # a delete marker
            s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration={"Rules": [OTHER_RULE, OURS_RULE]})
            s3.put_bucket_notification_configuration(Bucket=b, NotificationConfiguration={"QueueConfigurations": [
                {"Id": "audit", "QueueArn": audit_arn, "Events": ["s3:ObjectCreated:*"]},
                {"QueueArn": arn, "Events": ["s3:Replication:*"] if b == SRC else ["s3:ObjectCreated:*"]}]})
        s3.put_object(Bucket=SRC, Key="replmon-seed/seed-64MiB", Body=b"s")
        s3.create_multipart_upload(Bucket=SRC, Key="replmon-probes/run9/big")
        yield {"s3": s3, "queue": arn, "audit": audit_arn}


def run(*args: str) -> tuple[int, dict[str, Any]]:
    from replmon.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(["uninstall", "--source-region", "us-east-1", "--format", "json", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, json.loads(out.getvalue())


def test_uninstall_is_a_dry_run_until_applied_and_then_leaves_nothing_of_ours(account: dict[str, Any]) -> None:
    s3 = account["s3"]
    args = ["--source-bucket", SRC, "--dest-bucket", DST, "--events-target", account["queue"]]
    code, plan = run(*args)
    assert code == 0 and not plan["applied"]
    found = {(a["bucket"], a["what"]): a["found"] for a in plan["actions"]}
    assert found == {(SRC, "objects under replmon-probes/"): 5, (SRC, "objects under replmon-seed/"): 1, (SRC, "notification entries"): 1,
                     (SRC, "lifecycle rules"): 1, (DST, "objects under replmon-probes/"): 4, (DST, "notification entries"): 1,
                     (DST, "lifecycle rules"): 1}
    assert len(s3.list_object_versions(Bucket=SRC, Prefix="replmon-probes/")["Versions"]) == 3  # nothing changed yet

    code, done = run(*args, "--apply")
    assert code == 0 and done["applied"] and done["left_behind"] == 0
    for b in (SRC, DST):
        versions = s3.list_object_versions(Bucket=b)
        assert [v["Key"] for v in versions.get("Versions", []) + versions.get("DeleteMarkers", [])] == ["data/keep.txt"]
        assert s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"][0]["ID"] == "archive-logs"
        assert len(s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]) == 1
        queues = s3.get_bucket_notification_configuration(Bucket=b).get("QueueConfigurations", [])
        assert [q["QueueArn"] for q in queues] == [account["audit"]]
    assert s3.list_multipart_uploads(Bucket=SRC).get("Uploads", []) == []
    code, again = run(*args)
    assert code == 0 and sum(a["found"] for a in again["actions"]) == 0


def test_a_bucket_with_only_our_lifecycle_rule_loses_the_configuration(account: dict[str, Any]) -> None:
    s3 = account["s3"]
    s3.put_bucket_lifecycle_configuration(Bucket=DST, LifecycleConfiguration={"Rules": [OURS_RULE]})
    assert run("--source-bucket", SRC, "--dest-bucket", DST, "--apply")[0] == 0
    with pytest.raises(s3.exceptions.ClientError, match="NoSuchLifecycleConfiguration"):
        s3.get_bucket_lifecycle_configuration(Bucket=DST)


def test_the_table_is_deleted_only_when_asked_and_only_after_the_stack(account: dict[str, Any]) -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(TableName="replmon-LatencyTable-X", BillingMode="PAY_PER_REQUEST", DeletionProtectionEnabled=True,
                     AttributeDefinitions=[{"AttributeName": "route", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "route", "KeyType": "HASH"}])
    code, plan = run("--source-bucket", SRC, "--table", "replmon-LatencyTable-X")
    assert code == 0 and plan["actions"][-1]["action"].startswith("kept")
    assert run("--table", "replmon-LatencyTable-X", "--delete-table", "--apply")[0] == 0
    assert "replmon-LatencyTable-X" not in ddb.list_tables()["TableNames"]
    cfn = boto3.client("cloudformation", region_name="us-east-1")
    cfn.create_stack(StackName="replmon", TemplateBody=json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}},
                                                                   "Outputs": {"LatencyTableName": {"Value": "t"}}}))
    from replmon.cli.common import CliError

    with pytest.raises(CliError, match="still exists and owns the table"):
        from replmon.cli.uninstall import uninstall

        uninstall(stack_name="replmon", delete_table=True, source_region="us-east-1", table="t")


def test_the_lifecycle_minimum_object_size_setting_is_written_back_as_it_was(account: dict[str, Any]) -> None:
    """"PutBucketLifecycleConfiguration" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutBucketLifecycleConfiguration.html):
    the request's ``x-amz-transition-default-minimum-object-size`` header (TransitionDefaultMinimumObjectSize,
    ``varies_by_storage_class`` | ``all_storage_classes_128K``, the default) is part of the configuration the
    PUT replaces, and "GetBucketLifecycleConfiguration" returns it. Removing replmon's rule must not switch a
    bucket's setting back to the default. moto always answers ``all_storage_classes_128K`` and ignores the
    header, so the GET's answer is set and the PUT's parameters recorded at the client."""
    from botocore.client import BaseClient

    original = BaseClient._make_api_call
    puts: list[dict[str, Any]] = []

    def hook(self: BaseClient, operation: str, params: Any) -> Any:
        answer = original(self, operation, params)
        if operation == "GetBucketLifecycleConfiguration":
            answer["TransitionDefaultMinimumObjectSize"] = "varies_by_storage_class"
        if operation == "PutBucketLifecycleConfiguration":
            puts.append(params)
        return answer

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(BaseClient, "_make_api_call", hook)
        code, _ = run("--source-bucket", SRC, "--dest-bucket", DST, "--events-target", account["queue"], "--apply")
    assert code == 0 and len(puts) == 2
    for put in puts:
        assert put["TransitionDefaultMinimumObjectSize"] == "varies_by_storage_class"
        assert [r["ID"] for r in put["LifecycleConfiguration"]["Rules"]] == ["archive-logs"]
