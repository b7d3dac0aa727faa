"""`replmon fleet`, `fleet put`, `fleet inventory --dry-run`, `routes --account` (cli/fleet.py, cli/routes.py),
in-process on moto (DynamoDB, STS AssumeRole, S3).

The JSON document is validated against docs/output.schema.json; errors name the field and its fix.
AWS contract (the inventory's reads) as in tests/test_inventory.py: "ListBuckets" —
https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListBuckets.html; "HeadBucket" —
https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadBucket.html (moto returns no BucketRegion,
so a bucket's Region comes from HeadBucket's x-amz-bucket-region here).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
from typer.testing import CliRunner

from replmon.cli.app import app
from replmon.cli.common import CliError
from replmon.local.tables import ensure_table
from tests.conftest import TABLE, TEMPLATE

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "docs" / "output.schema.json").read_text())
ACCOUNT = "123456789012"  # moto's
ARGS = ["--table", TABLE, "--region", "us-east-1"]


@pytest.fixture(scope="module")
def aws() -> Iterator[Any]:
    from moto import mock_aws

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        s3 = boto3.client("s3", region_name="eu-west-1")
        for b in ("orders", "orders-dr", "applogs", "applogs-dr", "plain"):
            s3.create_bucket(Bucket=b, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        # (moto 5 returns every rule's Filter.Prefix as "": a disabled rule makes the passive route here)
        for src, status in (("orders", "Enabled"), ("applogs", "Disabled")):
            s3.put_bucket_replication(Bucket=src, ReplicationConfiguration={
                "Role": f"arn:aws:iam::{ACCOUNT}:role/replication",
                "Rules": [{"ID": "dr", "Priority": 1, "Status": status, "Filter": {"Prefix": ""},
                           "DeleteMarkerReplication": {"Status": "Disabled"}, "Destination": {"Bucket": f"arn:aws:s3:::{src}-dr"}}]})
            # probes are opt-in (REPLMON_FLEET enroll_tag): both are enrolled, so their rules decide
            s3.put_bucket_tagging(Bucket=src, Tagging={"TagSet": [{"Key": "replmon:enroll", "Value": "true"}]})
        yield ddb


@dataclass
class Result:
    exit_code: int
    stdout: str
    output: str  # stdout and stderr


def run(*args: str, stdin: str | None = None) -> Result:
    """As `replmon ...` runs (cli/app.py main): a CliError is one line and its exit code."""
    r = CliRunner().invoke(app, list(args), input=stdin, env={"COLUMNS": "120"}, standalone_mode=False)
    if isinstance(r.exception, CliError):
        return Result(r.exception.code, r.stdout, f"{r.output}error: {r.exception}")
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    code = r.return_value if isinstance(r.return_value, int) else r.exit_code
    return Result(code, r.stdout, r.output)


ROUTE = {"name": "dr-orders", "source": {"account": ACCOUNT, "region": "eu-west-1", "bucket": "orders"},
         "destinations": [{"account": ACCOUNT, "region": "eu-west-1", "bucket": "orders-dr", "rule_id": "dr"}]}


def test_put_then_list_and_the_json_is_the_schemas(aws: Any, tmp_path: Path) -> None:
    r = run("fleet", "put", "-", *ARGS, stdin=json.dumps(ROUTE))
    assert r.exit_code == 0, r.output
    assert "version 1" in r.output
    again = run("fleet", "put", "-", *ARGS, stdin=json.dumps({**ROUTE, "prefix": "p2/"}))
    assert again.exit_code == 0 and "version 2" in again.output
    stale = run("fleet", "put", "-", *ARGS, stdin=json.dumps({**ROUTE, "version": 1}))
    assert stale.exit_code == 2 and "version" in stale.output and "read it again" in stale.output
    doc = run("fleet", *ARGS, "--format", "json")
    assert doc.exit_code == 0, doc.output
    data = json.loads(doc.stdout)
    jsonschema.validate(data, SCHEMA)
    (route,) = data["routes"]
    assert (route["name"], route["origin"], route["version"], route["reason_code"]) == ("dr-orders", "explicit", 2, "OK")
    table = run("fleet", *ARGS)
    assert table.exit_code == 0 and "dr-orders" in table.stdout and "eu-west-1>eu-west-1" in table.stdout


def test_put_takes_the_groups_options_and_prints_a_schema_document(aws: Any) -> None:
    """``replmon fleet --table T --format json put FILE``: the group's options reach put; its JSON is
    docs/output.schema.json's fleet_put, its CSV one row; its own --format wins over the group's."""
    route = {**ROUTE, "name": "dr-orders-put"}
    r = run("fleet", *ARGS, "--format", "json", "put", "-", stdin=json.dumps(route))
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert (doc["command"], doc["route"], doc["version"]) == ("fleet put", "dr-orders-put", 1)
    again = run("fleet", *ARGS, "--format", "json", "put", "-", "--format", "csv", stdin=json.dumps(route))
    assert again.exit_code == 0 and again.stdout.splitlines() == ["route,group,version,origin", f"dr-orders-put,{doc['group']},2,explicit"]
    from replmon.adapters.registry_table import DynamoRegistry

    DynamoRegistry(TABLE, aws).delete_route(doc["group"], "dr-orders-put")  # the module's other tests list dr-orders only


@pytest.mark.parametrize(("route", "words"), [
    ({**ROUTE, "destinations": []}, "at least one destination"),
    ({**ROUTE, "source": {**ROUTE["source"], "account": "12"}}, "source.account"),
    ({**ROUTE, "group": "g05"}, "group"),
    ({**ROUTE, "origin": "discovered"}, "origin"),
    ({**ROUTE, "colour": "red"}, "colour"),
])
def test_put_errors_name_the_field(aws: Any, route: dict[str, Any], words: str) -> None:
    r = run("fleet", "put", "-", *ARGS, stdin=json.dumps(route))
    assert r.exit_code == 2 and words in r.output, r.output


def test_inventory_dry_run_writes_nothing_and_routes_account_reads_one_account(aws: Any) -> None:
    # Its own explicit route (the test passes alone or after the others).
    if "dr-orders" not in [x["name"] for x in json.loads(run("fleet", *ARGS, "--format", "json").stdout)["routes"]]:
        assert run("fleet", "put", "-", *ARGS, stdin=json.dumps(ROUTE)).exit_code == 0
    r = run("fleet", "inventory", *ARGS, "--dry-run", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["dry_run"] and doc["complete"]
    writes = {(w["op"], w.get("route") or w.get("account")): w for w in doc["writes"]}
    assert writes[("put_discovered", "applogs")]["reason"] == "RULE_DISABLED"
    # the explicit dr-orders measures bucket orders: the discovered route is listed, superseded
    assert writes[("put_discovered", "orders")]["reason"] == "SUPERSEDED"
    assert writes[("put_account", ACCOUNT)]["status"] == "OK"
    after = json.loads(run("fleet", *ARGS, "--format", "json").stdout)
    assert [x["name"] for x in after["routes"]] == ["dr-orders"] and after["accounts"] == [], "a dry run writes nothing"
    acct = run("routes", "--account", ACCOUNT, "--source-region", "us-east-1", "--format", "json")
    assert acct.exit_code == 0, acct.output
    got = {row["bucket"]: row["reason"] for row in json.loads(acct.stdout)["routes"]}
    assert got == {"applogs": "RULE_DISABLED", "orders": "OK"}
    bad = run("routes", "--account", "12")
    assert bad.exit_code == 2 and "--account" in bad.output


def raw_item(aws: Any, name: str, **attrs: Any) -> None:
    """A registry item written around `fleet put` (by hand, or by an older version): no validation."""
    from replmon.adapters.registry_table import to_attrs

    aws.put_item(TableName=TABLE, Item=to_attrs({"route": "#routes/g00", "at": name, "name": name, "group": "g00",
                                                 "origin": "explicit", **attrs}))


def test_a_bad_registry_item_is_named_with_its_field_and_the_others_are_listed(aws: Any) -> None:
    """One item without destinations and one named 'old..name' do not stop `replmon fleet`: each is
    a line naming the item and the field, the JSON lists them, the good route is listed, exit 0.
    The group's --table reaches `put` and `release` (`replmon fleet --table T put FILE`)."""
    assert run("fleet", *ARGS, "put", "-", stdin=json.dumps(ROUTE)).exit_code == 0  # the group's --table
    src = {"account": ACCOUNT, "region": "eu-west-1", "bucket": "plain"}
    raw_item(aws, "no-dests", source=src)
    raw_item(aws, "old..name", source=src, destinations=[{"account": ACCOUNT, "region": "eu-west-1", "bucket": "orders-dr"}])
    try:
        table = run("fleet", *ARGS)
        assert table.exit_code == 0, table.output
        assert "dr-orders" in table.stdout and "2 invalid items skipped" in table.output
        assert "registry item 'no-dests' in g00 skipped (MissingField): destinations: is required" in table.output
        assert "registry item 'old..name' in g00 skipped (BadName): name:" in table.output
        doc = json.loads(run("fleet", *ARGS, "--format", "json").stdout)
        jsonschema.validate(doc, SCHEMA)
        assert [r["name"] for r in doc["routes"]] == ["dr-orders"]
        assert {(b["name"], b["reason"], b["field"]) for b in doc["invalid"]} == {
            ("no-dests", "MissingField", "destinations"), ("old..name", "BadName", "name")}
        # `report --fleet` lists every route, each bad item as a row naming its field (riskiest first)
        rep = run("report", "--fleet", *ARGS, "--format", "json")
        assert rep.exit_code in (0, 4), rep.output  # not 3: one bad item no longer stops the report
        report = json.loads(rep.stdout)
        jsonschema.validate(report, SCHEMA)
        rows = {r["route"]: r for r in report["fleet"]}
        assert rows["old..name"]["mode"] == "invalid" and rows["old..name"]["reason"].startswith("INVALID_BadName: name:")
        assert rows["no-dests"]["reason"].startswith("INVALID_MissingField: destinations: is required")
        assert rows["dr-orders"]["mode"] == "probe" and [r["route"] for r in report["fleet"]][-1] == "dr-orders"
        # `fleet put` refuses such an item at the edge, naming the field ...
        bad = run("fleet", "put", "-", *ARGS, stdin=json.dumps({**ROUTE, "name": "old..name"}))
        assert bad.exit_code == 2 and "name" in bad.output, bad.output
        # ... and replaces the stored invalid item once it is fixed (conditional on the version it has)
        fixed = run("fleet", "put", "-", *ARGS, stdin=json.dumps({**ROUTE, "name": "no-dests", "source": src}))
        assert fixed.exit_code == 0, fixed.output
        doc = json.loads(run("fleet", *ARGS, "--format", "json").stdout)
        assert [r["name"] for r in doc["routes"]] == ["dr-orders", "no-dests"] and len(doc["invalid"]) == 1
    finally:
        for name in ("no-dests", "old..name"):
            aws.delete_item(TableName=TABLE, Key={"route": {"S": "#routes/g00"}, "at": {"S": name}})


def test_release_ends_a_lease_by_hand_and_keeps_the_record(aws: Any) -> None:
    from replmon.adapters.leases import DynamoLeases
    from replmon.core.partitions import runs_partition

    leases = DynamoLeases(TABLE, aws)
    assert leases.acquire("dr-orders", "arn:aws:states:us-east-1:1:execution:sm:dead", 0.0, 4e9, {}) is not None
    r = run("fleet", *ARGS, "release", "dr-orders")  # the group's --table
    assert r.exit_code == 0 and "released by" in r.output and "execution:sm:dead" in r.output, r.output
    assert leases.leases(["dr-orders"])["dr-orders"].holder is None
    kept = aws.query(TableName=TABLE, KeyConditionExpression="#pk = :pk", ExpressionAttributeNames={"#pk": "route"},
                     ExpressionAttributeValues={":pk": {"S": runs_partition("dr-orders")}})["Items"]
    (record,) = [i for i in kept if i["at"]["S"].endswith("#released")]
    assert record["holder"]["S"].endswith(":dead") and record["until"]["N"] and record["released_by"]["S"]
    again = run("fleet", *ARGS, "release", "dr-orders")
    assert again.exit_code == 0 and "nothing to release" in again.output
    assert run("fleet", *ARGS, "release", "old..name").exit_code == 2


def test_one_unreadable_group_is_named_and_no_group_answering_is_the_store(aws: Any) -> None:
    """A throttled or denied Query marks its group only; every group failing is the table (exit 3)."""
    from botocore.exceptions import ClientError

    assert run("fleet", "put", "-", *ARGS, stdin=json.dumps(ROUTE)).exit_code == 0

    def throttle(which: str) -> Any:
        def hook(params: dict[str, Any], **_: Any) -> None:
            pk = params.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", "")
            if pk.startswith("#routes/") and (which == "all" or pk == which):
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"}}, "Query")
        return hook

    import replmon.adapters.clients as clients

    real = clients.dynamodb

    def hooked(which: str) -> Any:
        def make(*a: Any, **k: Any) -> Any:
            c = real(*a, **k)
            c.meta.events.register("before-parameter-build.dynamodb.Query", throttle(which))
            return c
        return make

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(clients, "dynamodb", hooked("#routes/g03"))
        one = run("fleet", *ARGS)
        assert one.exit_code == 0 and "dr-orders" in one.stdout, one.output
        assert "registry item '#routes/g03' in g03 skipped (ReadFailed)" in one.output
        mp.setattr(clients, "dynamodb", hooked("all"))
        down = run("fleet", *ARGS)
        assert down.exit_code == 3 and "ProvisionedThroughputExceeded" in down.output, down.output
