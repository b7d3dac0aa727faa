"""`replmon fleet enroll`, `fleet unenroll` and `uninstall --fleet` on the lab's MinIO servers (the
registry in the lab's DynamoDB Local), through the CLI as an operator runs it.

What MinIO supports of a notification configuration, as this test asserts it:
- queue entries to its own configured targets (``arn:minio:sqs::REPLMON:webhook``, the lab's
  webhook), with their ``Id`` and key filters kept as written: the merge, idempotency and
  unenroll are tested on those;
- no topic and no Lambda entries: MinIO answers ``UnsupportedNotification`` ("MinIO server does
  not support Topic or Cloud Function based notifications"), so the Lambda and SNS entries of
  tests/test_enroll.py (moto) cannot exist here;
- ``EventBridgeConfiguration`` is accepted and dropped (GET does not return it);
- overlapping filters for one event type are accepted: MinIO does not enforce S3's rule
  (FilterRule: "Overlapping prefixes and suffixes are not supported" —
  https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/s3/aws.sdk.kotlin.services.s3.model/-filter-rule/name.html),
  but replmon refuses such a merge anyway, since S3 would reject it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from replmon.cli.app import app
from replmon.fleet.enroll import replicas_id
from replmon.lab.lab import EVENTS_TARGET, PREFIX, Lab

pytestmark = pytest.mark.lab
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "output.schema.json").read_text())
TABLE = "replmon-latency"
ACCOUNT = "111122223333"
DOCS = {"Id": "docs-index", "QueueArn": EVENTS_TARGET, "Events": ["s3:ObjectCreated:*"],
        "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "docs/"}]}}}
AUDIT = {"Id": "audit", "QueueArn": EVENTS_TARGET, "Events": ["s3:ObjectRemoved:*"]}
THUMBS = {"Id": "thumbs", "QueueArn": EVENTS_TARGET, "Events": ["s3:ObjectCreated:*"],
          "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": "images/"}, {"Name": "suffix", "Value": ".jpg"}]}}}
OPS = {"Id": "ops-failures", "QueueArn": EVENTS_TARGET, "Events": ["s3:Replication:OperationFailedReplication"]}


def _config(s3: Any, bucket: str) -> dict[str, Any]:
    return {k: v for k, v in s3.get_bucket_notification_configuration(Bucket=bucket).items() if k != "ResponseMetadata"}


def _cli(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    r = CliRunner().invoke(app, [*args, "--format", "json"], env=env, catch_exceptions=False, standalone_mode=False)
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    return (r.return_value if isinstance(r.return_value, int) else r.exit_code), doc


def test_enroll_then_uninstall_fleet_on_minio_leaves_nothing_of_replmons_and_keeps_the_owners(tmp_path: Path) -> None:
    with Lab(tmp_path / "lab", least_privilege=False) as lab:
        src, dst = lab.s3("source"), lab.s3("destination")
        for s3, bucket in ((src, "shop"), (dst, "shop-dr"), (src, "clash"), (dst, "clash-dr")):
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        src.put_bucket_notification_configuration(Bucket="shop", NotificationConfiguration={"QueueConfigurations": [AUDIT, THUMBS]})
        dst.put_bucket_notification_configuration(Bucket="shop-dr", NotificationConfiguration={"QueueConfigurations": [DOCS]})
        src.put_bucket_notification_configuration(Bucket="clash", NotificationConfiguration={"QueueConfigurations": [OPS]})
        # what MinIO refuses and drops
        with pytest.raises(ClientError, match="UnsupportedNotification"):
            dst.put_bucket_notification_configuration(Bucket="clash-dr", NotificationConfiguration={"TopicConfigurations": [
                {"Id": "t", "TopicArn": "arn:aws:sns:us-east-1:111122223333:t", "Events": ["s3:ObjectRemoved:*"]}]})
        # probe objects in flight: two versions, a delete marker, an incomplete upload
        for s3, bucket in ((src, "shop"), (dst, "shop-dr"), (src, "clash")):
            s3.put_object(Bucket=bucket, Key=f"{PREFIX}run/1", Body=b"x")
            s3.put_object(Bucket=bucket, Key=f"{PREFIX}run/1", Body=b"y")
            s3.delete_object(Bucket=bucket, Key=f"{PREFIX}run/2")
            s3.create_multipart_upload(Bucket=bucket, Key=f"{PREFIX}run/3")
        src.put_object(Bucket="shop", Key="images/cat.jpg", Body=b"owner's")  # not replmon's: stays

        env = {"REPLMON_ACCESS_KEY_ID": lab.keys[0], "REPLMON_SECRET_ACCESS_KEY": lab.keys[1], "AWS_REGION": "us-east-1",
               "COLUMNS": "200"}
        ddb = ["--table", TABLE, "--dynamodb-endpoint", lab.servers["dynamodb"].url, "--region", "us-east-1"]
        for name in ("shop", "clash"):
            route = {"name": name, "source": {"account": ACCOUNT, "region": "us-east-1", "bucket": name,
                                              "endpoint_url": lab.servers["source"].url},
                     "destinations": [{"account": ACCOUNT, "region": "us-east-1", "bucket": f"{name}-dr",
                                       "endpoint_url": lab.servers["destination"].url}]}
            (tmp_path / f"{name}.json").write_text(json.dumps(route))
            assert CliRunner().invoke(app, ["fleet", *ddb, "put", str(tmp_path / f"{name}.json")], env=env).exit_code == 0
        # the lab's own route (probe-source -> probe-replica) is in the registry too, wired by the lab itself
        enroll = ["fleet", *ddb, "enroll", "--events-target", EVENTS_TARGET, "--route", "shop", "--route", "clash"]

        code, dry = _cli(env, *enroll)
        actions = {b["bucket"]: b["action"] for b in dry["buckets"]}
        assert code == 1 and actions == {"shop": "add", "shop-dr": "add", "clash": "refused", "clash-dr": "add"}, dry
        assert _config(src, "shop") == {"QueueConfigurations": [AUDIT, THUMBS]}  # a dry run changes nothing

        code, applied = _cli(env, *enroll, "--apply")
        assert code == 1 and applied["subscriptions"] == []
        assert _config(src, "shop") == {"QueueConfigurations": [AUDIT, THUMBS, {"Id": "replmon-events", "QueueArn": EVENTS_TARGET,
                                                                              "Events": ["s3:Replication:*"]}]}
        replicas = {"Id": replicas_id(PREFIX), "QueueArn": EVENTS_TARGET, "Events": ["s3:ObjectCreated:*"],
                    "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": PREFIX}]}}}
        assert _config(dst, "shop-dr") == {"QueueConfigurations": [DOCS, replicas]}
        assert _config(src, "clash") == {"QueueConfigurations": [OPS]}  # refused: left as it was (MinIO would have taken it)
        code, again = _cli(env, *enroll, "--apply")
        assert {b["bucket"]: b["action"] for b in again["buckets"]} == {"shop": "none", "shop-dr": "none", "clash": "refused",
                                                                         "clash-dr": "none"}

        code, gone = _cli(env, "uninstall", "--fleet", *ddb[:4], "--source-region", "us-east-1", "--apply")
        assert code == 0 and gone["left_behind"] == 0, gone
        # MinIO makes no delete marker for a key that never existed: 2 versions and the upload
        assert any(a["bucket"] == "shop" and a["what"] == f"objects under {PREFIX}" and a["found"] == 3 for a in gone["actions"]), gone
        # nothing of replmon's in any bucket of either server; the owners' entries and objects kept
        for s3 in (src, dst):
            for bucket in (b["Name"] for b in s3.list_buckets()["Buckets"]):
                versions = s3.list_object_versions(Bucket=bucket, Prefix=PREFIX)
                assert versions.get("Versions", []) == versions.get("DeleteMarkers", []) == [], bucket
                # (MinIO lists an upload for its exact key or no prefix only: listed whole)
                uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
                assert [u["Key"] for u in uploads if u["Key"].startswith(PREFIX)] == [], bucket
                ids = [e.get("Id", "") for e in _config(s3, bucket).get("QueueConfigurations", [])]
                assert not [i for i in ids if i.startswith("replmon")], (bucket, ids)
        assert _config(src, "shop") == {"QueueConfigurations": [AUDIT, THUMBS]}
        assert _config(dst, "shop-dr") == {"QueueConfigurations": [DOCS]}
        assert _config(src, "clash") == {"QueueConfigurations": [OPS]}
        assert [v["Key"] for v in src.list_object_versions(Bucket="shop").get("Versions", [])] == ["images/cat.jpg"]
