"""`replmon preflight`: an existing route checked read-only, a verdict per check and a
fix for each failure, on moto's S3 and IAM.

AWS contracts encoded here (each cited where the test relies on it):
- "Use PutBucketReplication" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/example_s3_PutBucketReplication_section.html):
  "The destination bucket must have versioning enabled. The specified role must have permission
  to write to the destination bucket and have a trust relationship that allows Amazon S3 to assume
  the role"; "Amazon S3 replication failure reasons"
  (https://docs.amazonaws.cn/en_us/AmazonS3/latest/user-guide/replication-failure-codes.html):
  ``DstBucketUnversioned``, ``AssumeRoleNotPermitted``.
- "Setting up permissions for live replication"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/setting-repl-config-perm-overview.html):
  the role S3 assumes needs s3:GetReplicationConfiguration and s3:ListBucket on the source bucket,
  s3:GetObjectVersionForReplication / GetObjectVersionAcl on its objects, s3:ReplicateObject on the
  destination's objects; GetObjectVersionTagging, ReplicateTags and ReplicateDelete are optional
  ("Permissions for the s3:ReplicateObject action ... also allow replication of object tags, so you
  don't need to explicitly grant permission for the s3:ReplicateTags action"; without
  GetObjectVersionTagging "it replicates the objects, but not the object tags").
- "Error responses" (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html):
  GetBucketReplication on a bucket without one answers ``ReplicationConfigurationNotFoundError``
  (a state, reported as a failed check, not an infrastructure error).
- "FilterRule" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_FilterRule.html): "Overlapping
  prefixes and suffixes are not supported"; "PutBucketNotificationConfiguration": "This action
  replaces the existing notification configuration" - so the fix is the merged document, and an
  existing s3:Replication:* entry elsewhere is a conflict.
- "Replicating encrypted objects" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-config-for-kms-objects.html):
  SSE-KMS objects replicate only with SseKmsEncryptedObjects enabled and a ReplicaKmsKeyID.
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

from replmon.fleet import preflight as pf

SRC, DST = "prod-data", "prod-data-dr"
ROLE = "replication-role"
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
RULE = {"ID": "everything", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": ""}, "DeleteMarkerReplication": {"Status": "Disabled"},
        "Destination": {"Bucket": f"arn:aws:s3:::{DST}", "ReplicationTime": {"Status": "Enabled", "Time": {"Minutes": 15}},
                        "Metrics": {"Status": "Enabled", "EventThreshold": {"Minutes": 15}}}}


@pytest.fixture
def route() -> Iterator[dict[str, Any]]:
    """A route as the docs set it up: versioned pair, an RTC rule on everything, a least-privilege role."""
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        iam = boto3.client("iam", region_name="us-east-1")
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.get_queue_attributes(QueueUrl=sqs.create_queue(QueueName="replmon-EventsQueue")["QueueUrl"],
                                         AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        for b in (SRC, DST):
            s3.create_bucket(Bucket=b)
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        arn = iam.create_role(RoleName=ROLE, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]["Arn"]
        iam.put_role_policy(RoleName=ROLE, PolicyName="replicate", PolicyDocument=json.dumps(pf.role_policy(SRC, [DST], "replmon-probes/")))
        s3.put_bucket_replication(Bucket=SRC, ReplicationConfiguration={"Role": arn, "Rules": [RULE]})
        s3.put_bucket_notification_configuration(Bucket=SRC, NotificationConfiguration={"QueueConfigurations": [
            {"Id": "replmon-events", "QueueArn": queue, "Events": ["s3:Replication:*"]}]})
        yield {"s3": s3, "iam": iam, "queue": queue, "role": arn}


def run(*args: str, calls: list[str] | None = None) -> tuple[int, dict[str, Any]]:
    """`replmon preflight ... --format json`, recording every AWS operation it calls."""
    from botocore.client import BaseClient

    from replmon.cli.app import main

    original = BaseClient._make_api_call

    def record(self: BaseClient, operation: str, params: Any) -> Any:
        if calls is not None:
            calls.append(operation)
        return original(self, operation, params)

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()), \
            pytest.MonkeyPatch.context() as mp:
        mp.setattr(BaseClient, "_make_api_call", record)
        try:
            main(["preflight", "--source-region", "us-east-1", "--format", "json", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, json.loads(out.getvalue())


def verdicts(doc: dict[str, Any]) -> dict[str, str]:
    return {c["check"]: c["verdict"] for c in doc["checks"]}


def test_a_ready_route_passes_every_check_and_nothing_is_written(route: dict[str, Any]) -> None:
    calls: list[str] = []
    code, doc = run("--source-bucket", SRC, "--events-target", route["queue"], calls=calls)
    assert code == 0 and doc["ready"], doc
    assert verdicts(doc) == {"source versioning": "pass", "replication configuration": "pass", "rule covers the probe prefix": "pass",
                             "RTC on the rule": "pass", "replication metrics on the rule": "pass", "destination versioning": "pass",
                             "replication events": "pass", "encryption": "pass", "replication role trusts S3": "pass",
                             "replication role permissions": "pass"}
    assert calls and all(c.startswith(("Get", "List")) for c in calls), calls  # read-only: no Put, Delete or Create


def test_each_broken_precondition_fails_with_its_fix(route: dict[str, Any]) -> None:
    s3, iam = route["s3"], route["iam"]
    s3.put_bucket_versioning(Bucket=DST, VersioningConfiguration={"Status": "Suspended"})  # DstBucketUnversioned
    iam.update_assume_role_policy(RoleName=ROLE, PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
    iam.put_role_policy(RoleName=ROLE, PolicyName="deny-replicate", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": "s3:ReplicateObject", "Resource": "*"}]}))
    code, doc = run("--source-bucket", SRC, "--events-target", route["queue"])
    assert code == 1 and not doc["ready"]
    got = {c["check"]: c for c in doc["checks"]}
    assert got["destination versioning"]["verdict"] == "fail" and "put-bucket-versioning --bucket prod-data-dr" in got["destination versioning"]["fix"]
    assert got["replication role trusts S3"]["verdict"] == "fail" and got["replication role trusts S3"]["document"] == pf.TRUST
    perms = got["replication role permissions"]
    assert perms["verdict"] == "fail" and "s3:ReplicateObject" in perms["detail"] and "ReplicateTags" not in perms["detail"]


def test_a_role_without_the_tag_and_delete_actions_warns_and_is_ready(route: dict[str, Any]) -> None:
    """"Setting up permissions for live replication"
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/setting-repl-config-perm-overview.html):
    "Permissions for the s3:ReplicateObject action ... also allow replication of object tags, so you
    don't need to explicitly grant permission for the s3:ReplicateTags action"; without
    s3:GetObjectVersionTagging "it replicates the objects, but not the object tags"; the page shows a
    destination owner denying s3:ReplicateTags as a supported setup. Probes carry no tags and
    replmon's rule has DeleteMarkerReplication Disabled: such a role replicates the probes."""
    iam = route["iam"]
    iam.put_role_policy(RoleName=ROLE, PolicyName="replicate", PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"], "Resource": f"arn:aws:s3:::{SRC}"},
        {"Effect": "Allow", "Action": ["s3:GetObjectVersionForReplication", "s3:GetObjectVersionAcl"], "Resource": f"arn:aws:s3:::{SRC}/*"},
        {"Effect": "Allow", "Action": "s3:ReplicateObject", "Resource": f"arn:aws:s3:::{DST}/*"}]}))
    iam.put_role_policy(RoleName=ROLE, PolicyName="deny-tags", PolicyDocument=json.dumps(
        {"Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Action": "s3:ReplicateTags", "Resource": "*"}]}))
    code, doc = run("--source-bucket", SRC, "--events-target", route["queue"])
    perms = next(c for c in doc["checks"] if c["check"] == "replication role permissions")
    assert code == 0 and doc["ready"] and perms["verdict"] == "warn", doc
    for action in ("s3:ReplicateTags", "s3:GetObjectVersionTagging", "s3:ReplicateDelete"):
        assert action in perms["detail"]
    assert "tags are not replicated" in perms["detail"] and "delete markers are not replicated" in perms["detail"]
    assert "s3:ReplicateObject on" not in perms["detail"]


def test_a_rule_that_misses_the_probe_prefix_gets_the_whole_configuration_to_apply() -> None:
    """On S3's documented shape (moto drops a rule's Filter on PutBucketReplication: tested here
    without it): a prefix rule for logs/ does not replicate probes."""
    from replmon.fleet.discovery import discover

    config = {"Role": "arn:aws:iam::123456789012:role/r", "Rules": [{**RULE, "ID": "logs", "Filter": {"Prefix": "logs/"}}]}
    checks = {c.name: c for c in pf.replication(SRC, config, discover(SRC, config, "replmon-probes/"), DST, "replmon-probes/")}
    assert checks["rule covers the probe prefix"].verdict == "fail"
    merged = checks["rule covers the probe prefix"].document
    assert [r["ID"] for r in merged["Rules"]] == ["logs", "replmon-probes"] and merged["Role"] == config["Role"]
    assert merged["Rules"][1]["Filter"] == {"Prefix": "replmon-probes/"} and merged["Rules"][1]["Priority"] == 2
    fixed = {c.name: c.verdict for c in pf.replication(SRC, merged, discover(SRC, merged, "replmon-probes/"), DST, "replmon-probes/")}
    assert fixed["rule covers the probe prefix"] == "pass" and fixed["RTC on the rule"] == "pass"


def test_a_disabled_rule_fails_and_the_printed_configuration_is_one_s3_accepts(route: dict[str, Any]) -> None:
    s3 = route["s3"]
    s3.put_bucket_replication(Bucket=SRC, ReplicationConfiguration={"Role": route["role"], "Rules": [{**RULE, "Status": "Disabled"}]})
    code, doc = run("--source-bucket", SRC, "--dest-bucket", DST, "--events-target", route["queue"])
    got = {c["check"]: c for c in doc["checks"]}
    assert code == 1 and got["rule covers the probe prefix"]["verdict"] == "fail"
    s3.put_bucket_replication(Bucket=SRC, ReplicationConfiguration=got["rule covers the probe prefix"]["document"])
    code, doc = run("--source-bucket", SRC, "--dest-bucket", DST, "--events-target", route["queue"])
    assert code == 0 and verdicts(doc)["rule covers the probe prefix"] == "pass"


def test_no_replication_configuration_is_a_failed_check_not_an_error(route: dict[str, Any]) -> None:
    route["s3"].delete_bucket_replication(Bucket=SRC)
    code, doc = run("--source-bucket", SRC)
    got = {c["check"]: c for c in doc["checks"]}
    assert code == 1 and got["replication configuration"]["verdict"] == "fail"
    assert "ReplicationConfigurationNotFoundError" in got["replication configuration"]["detail"]
    assert got["replication configuration"]["document"]["Rules"][0]["Filter"] == {"Prefix": "replmon-probes/"}


def test_rtc_and_metrics_off_are_warnings_the_route_still_works(route: dict[str, Any]) -> None:
    plain = {**RULE, "Destination": {"Bucket": f"arn:aws:s3:::{DST}"}}
    route["s3"].put_bucket_replication(Bucket=SRC, ReplicationConfiguration={"Role": route["role"], "Rules": [plain]})
    code, doc = run("--source-bucket", SRC, "--events-target", route["queue"])
    assert code == 0 and doc["ready"]
    assert verdicts(doc)["RTC on the rule"] == "warn" and verdicts(doc)["replication metrics on the rule"] == "warn"


def test_notifications_merged_or_conflicting(route: dict[str, Any]) -> None:
    s3 = route["s3"]
    audit = {"Id": "audit", "QueueArn": route["queue"].replace("replmon-EventsQueue", "audit"), "Events": ["s3:ObjectCreated:*"]}
    s3.put_bucket_notification_configuration(Bucket=SRC, NotificationConfiguration={"QueueConfigurations": [audit]})
    code, doc = run("--source-bucket", SRC, "--events-target", route["queue"])
    check = next(c for c in doc["checks"] if c["check"] == "replication events")
    assert code == 1 and check["verdict"] == "fail"
    assert check["document"] == {"QueueConfigurations": [audit, {"Id": "replmon-events", "QueueArn": route["queue"], "Events": ["s3:Replication:*"]}]}
    # someone else already takes the replication events: S3 would refuse an overlapping second entry
    other = {"Id": "ops", "QueueArn": audit["QueueArn"], "Events": ["s3:Replication:OperationFailedReplication"]}
    assert pf.notifications(SRC, {"QueueConfigurations": [other]}, route["queue"]).verdict == "fail"
    assert "overlapping" in pf.notifications(SRC, {"QueueConfigurations": [other]}, route["queue"]).detail


def test_a_conflicting_events_entry_gets_only_the_fan_out_fix() -> None:
    """"Configuring event notifications using object key name filtering"
    (https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-how-to-filtering.html): "Any
    existing notification configuration rule is assumed to have a default prefix and suffix that
    match any other prefix ... the root prefix overlaps with any other prefix". replmon's entry has
    no filter, so narrowing the other entry's prefix never clears the overlap: only fan-out does."""
    other = {"Id": "ops", "QueueArn": "arn:aws:sqs:us-east-1:123456789012:ops", "Events": ["s3:Replication:*"],
             "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "data/"}]}}}
    check = pf.notifications(SRC, {"QueueConfigurations": [other]}, "arn:aws:sqs:us-east-1:123456789012:replmon-EventsQueue")
    assert check.verdict == "fail"
    assert "SNS topic" in check.fix and "replmon's queue" in check.fix
    assert "narrow the other entry" not in check.fix and "so it does not cover the probes" not in check.fix


def test_every_destination_bucket_is_checked_against_the_rule(route: dict[str, Any]) -> None:
    """Each --dest-bucket needs an enabled rule replicating the probe prefix to it, not only the first
    one given: a rule has one Destination ("ReplicationRule",
    https://docs.aws.amazon.com/AmazonS3/latest/API/API_ReplicationRule.html)."""
    s3 = route["s3"]
    s3.create_bucket(Bucket="prod-data-dr2")
    s3.put_bucket_versioning(Bucket="prod-data-dr2", VersioningConfiguration={"Status": "Enabled"})
    code, doc = run("--source-bucket", SRC, "--dest-bucket", DST, "--dest-bucket", "prod-data-dr2", "--events-target", route["queue"])
    rule = next(c for c in doc["checks"] if c["check"] == "rule covers the probe prefix")
    assert code == 1 and rule["verdict"] == "fail" and rule["detail"].endswith("to prod-data-dr2")
    added = rule["document"]["Rules"][1:]
    assert [(r["ID"], r["Destination"]["Bucket"]) for r in added] == [("replmon-probes", "arn:aws:s3:::prod-data-dr2")]
    code, doc = run("--source-bucket", SRC, "--dest-bucket", DST, "--events-target", route["queue"])
    assert code == 0 and verdicts(doc)["rule covers the probe prefix"] == "pass"


def test_sse_kms_by_default_needs_the_rule_to_replicate_kms_objects(route: dict[str, Any]) -> None:
    s3 = route["s3"]
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    s3.put_bucket_encryption(Bucket=SRC, ServerSideEncryptionConfiguration={"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key}}]})
    code, doc = run("--source-bucket", SRC, "--events-target", route["queue"])
    check = next(c for c in doc["checks"] if c["check"] == "encryption")
    assert code == 1 and check["verdict"] == "fail" and "SseKmsEncryptedObjects" in check["fix"]
    # the fixed rule, on S3's documented shape (moto drops SourceSelectionCriteria on PutBucketReplication)
    from replmon.fleet.discovery import discover

    kms_rule = {**RULE, "SourceSelectionCriteria": {"SseKmsEncryptedObjects": {"Status": "Enabled"}},
                "Destination": {**RULE["Destination"], "EncryptionConfiguration": {"ReplicaKmsKeyID": key}}}
    config = {"Role": route["role"], "Rules": [kms_rule]}
    chosen = [r for r in discover(SRC, config, "replmon-probes/").rules if r.chosen]
    answer = s3.get_bucket_encryption(Bucket=SRC)
    assert pf.encryption(SRC, answer, config, chosen).verdict == "pass"
    assert pf.encryption(SRC, answer, {"Rules": [RULE]}, chosen).verdict == "fail"


def test_a_missing_source_bucket_is_not_measured() -> None:
    with mock_aws():
        code, _ = run_raw("--source-bucket", "nope")
    assert code == 3


def run_raw(*args: str) -> tuple[int, str]:
    from replmon.cli.app import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(["preflight", "--source-region", "us-east-1", *args])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, err.getvalue()


def test_an_events_entry_filtered_on_the_probe_prefix_is_a_warning() -> None:
    """The lab's MinIO notifies its webhook for the probe prefix only: the probes' replication
    events arrive (a working route, a warning that the route's other objects' events do not), and
    that entry is replmon's own, not a conflict with itself."""
    target = "arn:minio:sqs::REPLMON:webhook"
    entry = {"Id": "1", "QueueArn": target, "Events": ["s3:ObjectCreated:Put", "s3:Replication:OperationFailedReplication"],
             "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "replmon-probes/"}]}}}
    check = pf.notifications(SRC, {"QueueConfigurations": [entry]}, target, probe_prefix="replmon-probes/")
    assert check.verdict == "warn" and "for prefix 'replmon-probes/' only" in check.detail, check
    # a prefix that does not cover the probes is no help: the merged document is the fix
    assert pf.notifications(SRC, {"QueueConfigurations": [entry]}, target, probe_prefix="other/").verdict == "fail"


def test_not_applicable_is_ready_and_neither_a_pass_nor_a_failure() -> None:
    report = pf.Preflight([pf.Check("source versioning", pf.PASS, "x"),
                           pf.Check("replication role", pf.NOT_APPLICABLE, "an S3-compatible endpoint: no IAM")])
    assert report.ready and report.count(pf.PASS) == 1 and report.count(pf.NOT_APPLICABLE) == 1
