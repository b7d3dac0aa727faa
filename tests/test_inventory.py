"""The inventory (fleet/inventory.py, fleet/accounts.py) and its AWS reads (adapters/member_buckets.py).

AWS contracts, with botocore's Stubber returning AWS's documented response shapes (moto returns
neither BucketRegion nor a ContinuationToken from ListBuckets, and no empty ListAccounts page with a
token):

- "ListBuckets" — https://docs.aws.amazon.com/AmazonS3/latest/API/API_ListBuckets.html: BucketRegion
  only when the request has a parameter; ContinuationToken pages.
- "HeadBucket" / "GetBucketLocation" — https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadBucket.html,
  https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketLocation.html: HeadBucket returns the
  Region in ``x-amz-bucket-region`` whether access is authorized or not.
- "ListAccounts" — https://docs.aws.amazon.com/organizations/latest/APIReference/API_ListAccounts.html:
  MaxResults <= 20; continue until NextToken is null, even after an empty page.
- "AssumeRole" — https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html (ExternalId).
- "Error responses" — https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html
  (ReplicationConfigurationNotFoundError); "GetBucketTagging" —
  https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketTagging.html (NoSuchTagSet);
  "GetBucketEncryption" — https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketEncryption.html
  and "ServerSideEncryptionByDefault" —
  https://docs.aws.amazon.com/AmazonS3/latest/API/API_ServerSideEncryptionByDefault.html (aws:kms /
  aws:kms:dsse; no KMSMasterKeyID = the AWS managed key aws/s3).
- "ReplicationRule" — https://docs.aws.amazon.com/AmazonS3/latest/API/API_ReplicationRule.html and
  "Replicating encrypted objects" —
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-config-for-kms-objects.html
  (filters, priority, SseKmsEncryptedObjects): the verdict fixtures.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from replmon.adapters.member_buckets import AwsMembers
from replmon.adapters.registry_table import DynamoRegistry
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.ports import AccessDenied, BucketMissing, BucketPage
from replmon.core.registry import Mode, Origin, Reason, group_of, load_route_spec
from replmon.fleet.accounts import load_inventory_settings
from replmon.fleet.inventory import RUN_LEASE_MARGIN_SECONDS, InventoryDeps, run_inventory
from tests.conftest import TEMPLATE

HUB, MEMBER, DENIED, FOREIGN = "111122223333", "444455556666", "777788889999", "999900001111"
KEY = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
NOW = 1_795_000_000.0


def rule(rid: str, dest: str, *, prefix: str | None = "", status: str = "Enabled", tags: Mapping[str, str] | None = None,
         priority: int = 1, account: str | None = None, kms: bool = False) -> dict[str, Any]:
    r: dict[str, Any] = {"ID": rid, "Priority": priority, "Status": status, "DeleteMarkerReplication": {"Status": "Disabled"},
                         "Destination": {"Bucket": f"arn:aws:s3:::{dest}", "Metrics": {"Status": "Enabled"},
                                         "ReplicationTime": {"Status": "Enabled", "Time": {"Minutes": 15}}}}
    if account:
        r["Destination"]["Account"] = account
    if tags and prefix is not None:
        r["Filter"] = {"And": {"Prefix": prefix, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}}
    elif tags:
        r["Filter"] = {"Tag": {"Key": next(iter(tags)), "Value": next(iter(tags.values()))}}
    else:
        r["Filter"] = {"Prefix": prefix} if prefix is not None else {}
    if kms:
        r["SourceSelectionCriteria"] = {"SseKmsEncryptedObjects": {"Status": "Enabled"}}
    return r


def cfg(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"Role": f"arn:aws:iam::{HUB}:role/replication", "Rules": list(rules)}


@dataclass
class FakeBucket:
    region: str | None = "eu-west-1"
    replication: dict[str, Any] | None = None
    tags: dict[str, str] = field(default_factory=dict)
    kms: str | None = None
    denied: set[str] = field(default_factory=set)  # actions refused


@dataclass
class FakeReader:
    """A BucketReader over fixtures (the AWS adapter has its own Stubber tests below)."""

    account: str
    buckets: dict[str, FakeBucket]
    page_size: int = 2
    regions: dict[str, str] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)
    missing: set[str] = field(default_factory=set)  # buckets HeadBucket answers 404 for

    def list_buckets(self, token: str | None) -> BucketPage:
        names = sorted(self.buckets)
        start = int(token or 0)
        self.calls.append(f"ListBuckets:{start}")
        page = names[start:start + self.page_size]
        nxt = start + self.page_size
        return BucketPage([(n, self.buckets[n].region) for n in page], str(nxt) if nxt < len(names) else None)

    def bucket_region(self, bucket: str) -> str:
        self.calls.append(f"HeadBucket:{bucket}")
        if bucket in self.missing:
            raise BucketMissing(bucket, "HeadBucket 404")
        if bucket in self.buckets and self.buckets[bucket].region:
            return str(self.buckets[bucket].region)
        return self.regions.get(bucket, "eu-central-1")

    def _check(self, bucket: str, action: str) -> FakeBucket:
        b = self.buckets[bucket]
        if action in b.denied:
            raise AccessDenied(action, bucket)
        return b

    def replication(self, bucket: str, region: str) -> Mapping[str, Any] | None:
        return self._check(bucket, "s3:GetReplicationConfiguration").replication

    def tags(self, bucket: str, region: str) -> dict[str, str]:
        return self._check(bucket, "s3:GetBucketTagging").tags

    def default_kms_key(self, bucket: str, region: str) -> str | None:
        return self._check(bucket, "s3:GetEncryptionConfiguration").kms


@dataclass
class FakeMembers:
    readers: dict[str, FakeReader]
    org: list[str] = field(default_factory=list)

    def organization_accounts(self) -> list[str]:
        return list(self.org)

    def open(self, account: str) -> FakeReader:
        if account not in self.readers:
            raise AccessDenied("sts:AssumeRole", f"arn:aws:iam::{account}:role/replmon-inventory")
        return self.readers[account]




def fleet_fixture() -> dict[str, FakeBucket]:
    p = "replmon-probes/"
    e = {"replmon:enroll": "true"}  # probes are opt-in: FleetSettings.enroll_tag
    return {
        "ok-src": FakeBucket(replication=cfg(rule("all", "ok-dst", prefix=""), rule("probes", "ok-dst", prefix=p, priority=2)), tags=e),
        "optout-src": FakeBucket(replication=cfg(rule("all", "x-dst")), tags={"replmon:probe": "off", "team": "a", **e}),
        "disabled-src": FakeBucket(replication=cfg(rule("all", "x-dst", status="Disabled")), tags=e),
        "data-src": FakeBucket(replication=cfg(rule("data", "x-dst", prefix="data/")), tags=e),
        "tagged-src": FakeBucket(replication=cfg(rule("t", "x-dst", prefix=None, tags={"replicate": "yes"})), tags=e),
        "kms-src": FakeBucket(replication=cfg(rule("all", "x-dst")), kms=KEY, tags=e),
        "kmsok-src": FakeBucket(replication=cfg(rule("all", "x-dst", kms=True)), kms=KEY, tags=e),
        "foreign-src": FakeBucket(replication=cfg(rule("all", "far-dst", account=FOREIGN)), tags=e),
        "member-src": FakeBucket(replication=cfg(rule("all", "m-dst", account=MEMBER)), tags=e),
        "tagdeny-src": FakeBucket(replication=cfg(rule("all", "x-dst")), denied={"s3:GetBucketTagging"}),
        "repdeny-src": FakeBucket(denied={"s3:GetReplicationConfiguration"}),
        "explicit-src": FakeBucket(replication=cfg(rule("all", "x-dst"))),
        "plain": FakeBucket(),
        "noregion": FakeBucket(region=None),
        "unenrolled-src": FakeBucket(replication=cfg(rule("all", "x-dst"))),  # no tags at all (NoSuchTagSet)
        "unenrolled-data": FakeBucket(replication=cfg(rule("data", "x-dst", prefix="data/")), tags={"replmon:enroll": "yes"}),
    }


def explicit_route(name: str, bucket: str) -> Any:
    return load_route_spec({"name": name, "group": group_of(name, 1), "origin": "explicit",
                            "source": {"account": HUB, "region": "eu-west-1", "bucket": bucket},
                            "destinations": [{"account": HUB, "region": "eu-west-1", "bucket": "x-dst"}]})


def deps_for(registry: DynamoRegistry, readers: dict[str, FakeReader], clock: Any = None, **settings: Any) -> InventoryDeps:
    return InventoryDeps(registry=registry, rows=registry, members=FakeMembers(readers), hub_account=HUB,
                         settings=load_inventory_settings({"member_accounts": f"{MEMBER},{DENIED}", "workers": 4, **settings}),
                         fleet=FleetSettings(), clock=clock or (lambda: NOW))


def test_every_reason_is_written_as_a_route_or_an_account_row_and_explicit_routes_win(registry: DynamoRegistry) -> None:
    registry.put_explicit(explicit_route("my-route", "explicit-src"), None)
    registry.put_explicit(explicit_route("kmsok-src", "kmsok-src"), None)  # same name as the discovered route
    readers = {HUB: FakeReader(HUB, fleet_fixture()), MEMBER: FakeReader(MEMBER, {})}
    summary = run_inventory(deps_for(registry, readers), NOW, NOW + 600)
    assert summary.complete
    routes = {r.name: r for r in registry.routes("g00")}
    want = {"ok-src": Reason.OK, "optout-src": Reason.OPTED_OUT, "disabled-src": Reason.RULE_DISABLED,
            "data-src": Reason.FILTER_EXCLUDES_PREFIX, "tagged-src": Reason.TAG_FILTER, "kms-src": Reason.KMS_OBJECTS_NOT_REPLICATED,
            "foreign-src": Reason.DESTINATION_NOT_MEMBER, "member-src": Reason.OK, "tagdeny-src": Reason.ACCESS_DENIED,
            "explicit-src": Reason.SUPERSEDED, "unenrolled-src": Reason.NOT_ENROLLED, "unenrolled-data": Reason.NOT_ENROLLED}
    assert {n: routes[n].verdict.reason_code for n in want} == want
    assert routes["ok-src"].destinations[0].rule_id == "probes", "the highest-Priority covering rule"
    assert routes["ok-src"].probing and routes["ok-src"].origin is Origin.DISCOVERED
    assert routes["optout-src"].opt_out and routes["optout-src"].verdict.mode is Mode.PASSIVE
    assert "GetBucketTagging" in routes["tagdeny-src"].verdict.reason and routes["tagdeny-src"].verdict.mode is Mode.OFF
    assert routes["explicit-src"].superseded_by == "my-route"
    assert routes["kms-src"].source.kms_key_arn == KEY
    assert routes["member-src"].destinations[0].account == MEMBER
    assert "'data/'" in routes["data-src"].verdict.reason
    # the explicit route of the same name keeps its configuration; the inventory's view is beside it
    mine = routes["kmsok-src"]
    assert mine.origin is Origin.EXPLICIT and mine.version == 1 and mine.verdict.reason_code is Reason.OK
    assert mine.verdict_observed is not None and mine.verdict_observed.reason_code is Reason.OK
    assert mine.inventory is not None and mine.inventory.run_id == summary.run_id
    assert "plain" not in routes and "repdeny-src" not in routes
    rows = registry.accounts()
    assert rows[HUB]["buckets"] == 16 and rows[HUB]["not_replicated"] == 2 and rows[HUB]["denied"] == 1
    assert rows[HUB]["denied_reads"] == [{"bucket": "repdeny-src", "action": "s3:GetReplicationConfiguration",
                                          "reason": "s3:GetReplicationConfiguration denied: repdeny-src"}]
    assert rows[MEMBER]["status"] == "OK" and rows[MEMBER]["buckets"] == 0
    assert rows[DENIED]["status"] == "ASSUME_ROLE_DENIED" and "sts:AssumeRole" in rows[DENIED]["reason"]
    assert summary.reasons[Reason.ASSUME_ROLE_DENIED.value] == 1
    assert readers[HUB].calls.count("HeadBucket:noregion") == 1, "a bucket listed without a Region is located by HeadBucket"
    # a second run changes nothing but the observation time: discovered items are replaced, explicit ones kept
    again = run_inventory(deps_for(registry, readers), NOW + 3600, NOW + 4200)
    assert again.complete and {r.name for r in registry.routes("g00")} == set(routes)
    assert registry.get_route("g00", "kmsok-src").version == 1  # type: ignore[union-attr]


def test_probes_are_opt_in_an_untagged_bucket_is_found_not_enrolled_and_never_planned(registry: DynamoRegistry) -> None:
    """Only a bucket with the enroll tag (key and value) is probed; the rest are listed as
    NOT_ENROLLED (mode off: no probes, no heartbeats), saying what the rules would give once
    enrolled. The planner plans probe-mode routes only (fleet/planner.py ``registry_routes``)."""
    readers = {HUB: FakeReader(HUB, fleet_fixture())}
    summary = run_inventory(deps_for(registry, readers, member_accounts=""), NOW, NOW + 600)
    routes = {r.name: r for r in registry.routes("g00")}
    plain, wrong_value = routes["unenrolled-src"], routes["unenrolled-data"]
    assert plain.verdict.mode is Mode.OFF and not plain.probing and not plain.heartbeat
    assert plain.verdict.reason.startswith("found, not enrolled: the source bucket lacks the tag replmon:enroll=true")
    assert plain.verdict.reason.endswith("once enrolled it would be probed")
    assert "once enrolled it would stay unprobed: FILTER_EXCLUDES_PREFIX" in wrong_value.verdict.reason
    assert routes["ok-src"].probing and routes["ok-src"].inventory.observed["enroll_tag"] == "replmon:enroll=true"  # type: ignore[union-attr]
    assert summary.reasons[Reason.NOT_ENROLLED.value] == 3  # and explicit-src: no explicit route holds it here
    probing = sorted(n for n, r in routes.items() if r.probing)
    assert probing == ["kmsok-src", "ok-src"]  # (member-src: its destination account is not inventoried here)
    from types import SimpleNamespace

    from replmon.fleet.planner import registry_routes
    deps = SimpleNamespace(registry=registry, fleet=FleetSettings(), defaults={}, metrics=None)
    assert sorted(fr.route.name for fr in registry_routes(deps)) == probing  # type: ignore[arg-type]
    # another enroll tag (REPLMON_FLEET enroll_tag): the same buckets are found, none enrolled
    registry2 = deps_for(registry, readers, member_accounts="")
    registry2.fleet = FleetSettings(enroll_tag="team=dr")
    run_inventory(registry2, NOW + 3600, NOW + 4200)
    assert not any(r.probing for r in registry.routes("g00"))
    assert registry.get_route("g00", "ok-src").verdict.reason_code is Reason.NOT_ENROLLED  # type: ignore[union-attr]


def test_a_rule_to_a_deleted_bucket_is_its_own_reason_not_a_refused_read(registry: DynamoRegistry) -> None:
    """Review s26 N2: a destination bucket that no longer exists (HeadBucket 404, no Region) is
    reported as DESTINATION_MISSING with its fix; a source bucket deleted mid-run is skipped."""
    buckets = {"orphan-src": FakeBucket(replication=cfg(rule("all", "gone-dst"))), "vanished": FakeBucket(region=None),
               "listed-gone": FakeBucket(replication=cfg(rule("all", "x-dst")))}

    class Deleting(FakeReader):
        def tags(self, bucket: str, region: str) -> dict[str, str]:
            if bucket == "listed-gone":  # listed with its Region, deleted before this read
                raise BucketMissing(bucket, "NoSuchBucket")
            return super().tags(bucket, region)

    readers = {HUB: Deleting(HUB, buckets, missing={"gone-dst", "vanished"})}
    summary = run_inventory(deps_for(registry, readers), NOW, NOW + 600)
    assert summary.complete
    assert summary.reasons[Reason.DESTINATION_MISSING.value] == 1 and summary.reasons[Reason.ACCESS_DENIED.value] == 0
    [row] = registry.accounts()[HUB]["denied_reads"]
    assert row["bucket"] == "orphan-src" and row["code"] == "DESTINATION_MISSING"
    assert "gone-dst does not exist" in row["reason"] and "create the bucket" in row["reason"]
    assert registry.accounts()[HUB]["not_replicated"] == 2  # deleted between ListBuckets and HeadBucket, or a later read
    assert Reason.DESTINATION_MISSING.mode is Mode.OFF


def test_a_run_past_its_deadline_checkpoints_and_the_next_run_resumes(registry: DynamoRegistry) -> None:
    buckets = {f"b{i:02d}": FakeBucket(replication=cfg(rule("all", f"b{i:02d}-dr"))) for i in range(7)}
    reader = FakeReader(HUB, buckets, page_size=3)
    ticks = iter([NOW, NOW + 10, NOW + 999])  # the deadline passes before the third page

    def clock() -> float:
        return next(ticks, NOW + 999)

    first = run_inventory(deps_for(registry, {HUB: reader}, clock, member_accounts=""), NOW, NOW + 60)
    assert not first.complete
    cp = registry.checkpoint()
    assert cp is not None and cp["account"] == HUB and cp["token"] == "6" and cp["counts"]["routes"] == 6
    assert len(registry.routes("g00")) == 6 and HUB not in registry.accounts()
    second = run_inventory(deps_for(registry, {HUB: reader}, member_accounts=""), NOW + 900, NOW + 1500)
    assert second.complete and second.run_id == first.run_id
    assert registry.checkpoint() is None
    assert len(registry.routes("g00")) == 7
    assert registry.accounts()[HUB]["routes"] == 7 and registry.accounts()[HUB]["buckets"] == 7
    assert reader.calls.count("ListBuckets:0") == 1, "the resumed run starts at the checkpoint's page"


def test_one_run_at_a_time_a_second_run_does_nothing_and_names_the_first(registry: DynamoRegistry) -> None:
    """A scheduled run and `replmon fleet inventory` at once: the second finds the first's lease,
    writes nothing (no rows, no checkpoint) and says whose lease stands; once the first ends, or
    its lease expires, the next run proceeds."""
    buckets = {f"b{i:02d}": FakeBucket(replication=cfg(rule("all", f"b{i:02d}-dr"))) for i in range(3)}
    seen: list[Any] = []

    class Interleaved(FakeReader):
        def list_buckets(self, token: str | None) -> BucketPage:
            if not seen:  # the second run starts while the first is reading its first page
                seen.append(run_inventory(deps_for(registry, {HUB: FakeReader(HUB, buckets)}, member_accounts=""), NOW + 5, NOW + 65))
            return super().list_buckets(token)

    first = run_inventory(deps_for(registry, {HUB: Interleaved(HUB, buckets)}, member_accounts=""), NOW, NOW + 60)
    [second] = seen
    assert first.complete and len(first.routes) == 3
    assert second.held_by is not None and second.held_by["until"] == NOW + 60 + RUN_LEASE_MARGIN_SECONDS
    assert not second.routes and not second.accounts and second.to_json()["held_by"] == second.held_by
    assert second.held_by["holder"].startswith(time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(NOW)))  # the first run's
    assert registry.accounts()[HUB]["run_id"] == first.run_id and registry.checkpoint() is None
    assert run_inventory(deps_for(registry, {HUB: FakeReader(HUB, buckets)}, member_accounts=""), NOW + 900, NOW + 960).complete
    # a run that died keeps the lease until its deadline + margin, then the next run takes it
    assert registry.take_run("dead-run", NOW + 1000, NOW + 1100) is None
    assert run_inventory(deps_for(registry, {HUB: FakeReader(HUB, buckets)}, member_accounts=""), NOW + 1050, NOW + 1110).held_by
    assert run_inventory(deps_for(registry, {HUB: FakeReader(HUB, buckets)}, member_accounts=""), NOW + 1101, NOW + 1160).complete


def test_inventory_settings_errors_name_the_parameter() -> None:
    with pytest.raises(ConfigError, match="MemberAccounts"):
        load_inventory_settings({"member_accounts": "1234"})
    with pytest.raises(ConfigError, match="ExpertSettings opt_out_tag"):
        load_inventory_settings({"opt_out_tag": "nokeyvalue"})


# ------------------------------------------------------------------------- the AWS adapter (Stubber)
class Clients:
    """make_client for AwsMembers: one stubbed client per (service, region); records the credentials used."""

    def __init__(self) -> None:
        self.stubs: dict[tuple[str, str | None], Stubber] = {}
        self.credentials: list[Mapping[str, str] | None] = []

    def stub(self, service: str, region: str | None = None) -> Stubber:
        if (service, region) not in self.stubs:
            client = boto3.client(service, region_name=region or "us-east-1")  # type: ignore[call-overload]
            self.stubs[(service, region)] = Stubber(client)
            self.stubs[(service, region)].activate()
        return self.stubs[(service, region)]

    def __call__(self, service: str, region: str | None, credentials: Mapping[str, str] | None) -> Any:
        self.credentials.append(credentials)
        return self.stub(service, region).client

    def done(self) -> None:
        for s in self.stubs.values():
            s.assert_no_pending_responses()


CREDS = {"AccessKeyId": "ASIAEXAMPLEEXAMPLE01", "SecretAccessKey": "x" * 40, "SessionToken": "token",
         "Expiration": "2026-11-23T20:00:00Z"}


def test_list_accounts_reads_past_an_empty_page_until_the_token_is_absent() -> None:
    c = Clients()
    org = c.stub("organizations")
    acct = {"Arn": "arn:aws:organizations::111122223333:account/o-a1b2c3d4e5/444455556666", "Email": "a@example.com",
            "Name": "m", "JoinedMethod": "INVITED", "JoinedTimestamp": "2025-01-01T00:00:00Z"}
    org.add_response("list_accounts", {"Accounts": [], "NextToken": "t1"}, {"MaxResults": 20})
    org.add_response("list_accounts", {"Accounts": [{**acct, "Id": MEMBER, "Status": "ACTIVE"},
                                                    {**acct, "Id": FOREIGN, "Status": "SUSPENDED"}], "NextToken": "t2"},
                     {"MaxResults": 20, "NextToken": "t1"})
    # AWS retires Status for State on 2026-09-09 (ListAccounts API reference): State wins, and an
    # account with neither is not taken as active.
    org.add_response("list_accounts", {"Accounts": [{**acct, "Id": DENIED, "Status": "ACTIVE"},
                                                    {**acct, "Id": "777788889999", "State": "SUSPENDED"},
                                                    {**acct, "Id": "999988887777", "State": "ACTIVE"},
                                                    {**acct, "Id": "123412341234"}]}, {"MaxResults": 20, "NextToken": "t2"})
    assert AwsMembers("replmon", make_client=c).organization_accounts() == [MEMBER, DENIED, "999988887777"]
    c.done()
    c = Clients()
    c.stub("organizations").add_client_error("list_accounts", "AWSOrganizationsNotInUseException", http_status_code=400)
    with pytest.raises(ConfigError, match="MemberAccounts"):
        AwsMembers("replmon", make_client=c).organization_accounts()


def test_assume_role_sends_the_external_id_and_a_refusal_names_the_action() -> None:
    c = Clients()
    sts = c.stub("sts")
    sts.add_response("assume_role", {"Credentials": CREDS}, {"RoleArn": f"arn:aws:iam::{MEMBER}:role/replmon-inventory",
                                                             "RoleSessionName": "replmon-inventory", "ExternalId": "ext-1"})
    sts.add_client_error("assume_role", "AccessDenied", http_status_code=403)
    members = AwsMembers("replmon", "ext-1", make_client=c)
    reader = members.open(MEMBER)
    assert reader.account == MEMBER
    with pytest.raises(AccessDenied) as err:
        members.open(DENIED)
    assert err.value.action == "sts:AssumeRole" and DENIED in str(err.value)
    c.done()


def test_list_buckets_pages_with_max_buckets_and_locates_a_bucket_without_region_by_head_bucket() -> None:
    c = Clients()
    s3 = c.stub("s3")
    created = "2025-01-01T00:00:00Z"
    s3.add_response("list_buckets", {"Buckets": [{"Name": "a", "CreationDate": created, "BucketRegion": "eu-west-1"}],
                                     "ContinuationToken": "c1"}, {"MaxBuckets": 1000})
    s3.add_response("list_buckets", {"Buckets": [], "ContinuationToken": "c2"}, {"MaxBuckets": 1000, "ContinuationToken": "c1"})
    s3.add_response("list_buckets", {"Buckets": [{"Name": "b", "CreationDate": created}]}, {"MaxBuckets": 1000, "ContinuationToken": "c2"})
    # HeadBucket refused (403), the Region still in the header
    s3.add_client_error("head_bucket", "403", http_status_code=403, expected_params={"Bucket": "b"},
                        response_meta={"HTTPHeaders": {"x-amz-bucket-region": "ap-southeast-2"}})
    s3.add_client_error("head_bucket", "403", http_status_code=403, expected_params={"Bucket": "gone"})
    # A bucket that does not exist: 404 and no Region ("HeadBucket", https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadBucket.html)
    s3.add_client_error("head_bucket", "404", http_status_code=404, expected_params={"Bucket": "deleted"})
    reader = AwsMembers("replmon", make_client=c, assume=False).open(HUB)
    seen, token = [], None
    while True:
        page = reader.list_buckets(token)
        seen += page.buckets
        token = page.next_token
        if not token:
            break
    assert seen == [("a", "eu-west-1"), ("b", None)]
    assert reader.bucket_region("a") == "eu-west-1", "a listed Region needs no call"
    assert reader.bucket_region("b") == "ap-southeast-2" and reader.bucket_region("b") == "ap-southeast-2"
    with pytest.raises(AccessDenied):
        reader.bucket_region("gone")
    with pytest.raises(BucketMissing):  # not "access denied": the bucket is not there
        reader.bucket_region("deleted")
    c.done()


def test_bucket_reads_go_to_the_buckets_region_and_map_the_documented_errors() -> None:
    c = Clients()
    c.stub("sts").add_response("assume_role", {"Credentials": CREDS})
    s3 = c.stub("s3", "eu-west-1")
    s3.add_response("get_bucket_replication", {"ReplicationConfiguration": cfg(rule("all", "dst"))}, {"Bucket": "src"})
    s3.add_client_error("get_bucket_replication", "ReplicationConfigurationNotFoundError", http_status_code=404)
    s3.add_client_error("get_bucket_replication", "AccessDenied", http_status_code=403)
    s3.add_response("get_bucket_tagging", {"TagSet": [{"Key": "replmon:probe", "Value": "off"}]}, {"Bucket": "src"})
    s3.add_client_error("get_bucket_tagging", "NoSuchTagSet", http_status_code=404)
    enc = {"ServerSideEncryptionConfiguration": {"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms",
                                                                                                    "KMSMasterKeyID": KEY}}]}}
    s3.add_response("get_bucket_encryption", enc, {"Bucket": "src"})
    s3.add_response("get_bucket_encryption", {"ServerSideEncryptionConfiguration": {"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms:dsse"}}]}})
    s3.add_response("get_bucket_encryption", {"ServerSideEncryptionConfiguration": {"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}})
    s3.add_client_error("get_bucket_encryption", "AccessDenied", http_status_code=403)
    # a bucket deleted since ListBuckets named its Region (review s27: it ended the whole run)
    s3.add_client_error("get_bucket_replication", "NoSuchBucket", http_status_code=404)
    reader = AwsMembers("replmon", make_client=c).open(MEMBER)
    assert reader.replication("src", "eu-west-1") == cfg(rule("all", "dst"))
    assert reader.replication("src", "eu-west-1") is None
    with pytest.raises(AccessDenied, match="GetReplicationConfiguration"):
        reader.replication("src", "eu-west-1")
    assert reader.tags("src", "eu-west-1") == {"replmon:probe": "off"}
    assert reader.tags("src", "eu-west-1") == {}
    assert reader.default_kms_key("src", "eu-west-1") == KEY
    assert reader.default_kms_key("src", "eu-west-1") == "aws/s3"
    assert reader.default_kms_key("src", "eu-west-1") is None
    with pytest.raises(AccessDenied, match="GetEncryptionConfiguration"):
        reader.default_kms_key("src", "eu-west-1")
    with pytest.raises(BucketMissing):
        reader.replication("src", "eu-west-1")
    assert {k for cr in c.credentials if cr for k in cr} == {"AccessKeyId", "SecretAccessKey", "SessionToken"}
    assert c.credentials[0] is None, "STS is called with the caller's credentials; S3 with the assumed ones"
    c.done()


def test_an_inventory_through_the_aws_adapter_pages_every_bucket(registry: DynamoRegistry) -> None:
    c = Clients()
    c.stub("sts").add_response("assume_role", {"Credentials": CREDS})
    glob = c.stub("s3")
    created = "2025-01-01T00:00:00Z"
    glob.add_response("list_buckets", {"Buckets": [{"Name": "src", "CreationDate": created, "BucketRegion": "eu-west-1"}],
                                       "ContinuationToken": "c1"}, {"MaxBuckets": 1000})
    glob.add_response("head_bucket", {"BucketRegion": "eu-central-1"}, {"Bucket": "dst"})  # the destination's Region
    glob.add_response("list_buckets", {"Buckets": [{"Name": "lone", "CreationDate": created, "BucketRegion": "eu-west-1"}]},
                      {"MaxBuckets": 1000, "ContinuationToken": "c1"})
    s3 = c.stub("s3", "eu-west-1")
    s3.add_response("get_bucket_replication", {"ReplicationConfiguration": cfg(rule("all", "dst"))}, {"Bucket": "src"})
    s3.add_client_error("get_bucket_tagging", "NoSuchTagSet", http_status_code=404, expected_params={"Bucket": "src"})
    s3.add_response("get_bucket_encryption", {"ServerSideEncryptionConfiguration": {"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}}, {"Bucket": "src"})
    s3.add_client_error("get_bucket_replication", "ReplicationConfigurationNotFoundError", http_status_code=404,
                        expected_params={"Bucket": "lone"})
    deps = InventoryDeps(registry=registry, rows=registry, members=AwsMembers("replmon", make_client=c), hub_account=HUB,
                         settings=load_inventory_settings({"workers": 1}), clock=lambda: NOW)
    summary = run_inventory(deps, NOW, NOW + 600)
    c.done()
    # a bucket without tags: GetBucketTagging answers NoSuchTagSet ("There is no tag set associated with the
    # bucket", https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetBucketTagging.html), read as no tags:
    # found, not enrolled
    assert summary.complete and dict(summary.reasons) == {"NOT_ENROLLED": 1}
    (route,) = registry.routes("g00")
    assert not route.probing and route.verdict.reason.endswith("once enrolled it would be probed")
    assert (route.name, route.source.region, route.destinations[0].region) == ("src", "eu-west-1", "eu-central-1")
    assert route.to_route("replmon").source.role_arn == f"arn:aws:iam::{HUB}:role/replmon-prober"
    row = registry.accounts()[HUB]
    assert {k: row[k] for k in ("status", "buckets", "not_replicated", "routes")} == {"status": "OK", "buckets": 2,
                                                                                     "not_replicated": 1, "routes": 1}


def test_a_bucket_tagged_to_enroll_through_the_aws_adapter_is_probed() -> None:
    """GetBucketTagging's TagSet (Key, Value; API_GetBucketTagging.html) carries the enroll tag: the
    route is OK. (The member inventory role's s3:GetBucketTagging, templates/member-account.yaml, is
    evaluated with every inventory call in tests/test_member_iam.py.)"""
    from replmon.fleet.accounts import InventorySettings
    from replmon.fleet.inventory import inspect_bucket

    c = Clients()
    c.stub("sts").add_response("assume_role", {"Credentials": CREDS})
    c.stub("s3").add_response("head_bucket", {"BucketRegion": "eu-west-1"}, {"Bucket": "dst"})
    s3 = c.stub("s3", "eu-west-1")
    s3.add_response("get_bucket_replication", {"ReplicationConfiguration": cfg(rule("all", "dst"))}, {"Bucket": "src"})
    s3.add_response("get_bucket_tagging", {"TagSet": [{"Key": "team", "Value": "dr"}, {"Key": "replmon:enroll", "Value": "true"}]},
                    {"Bucket": "src"})
    s3.add_response("get_bucket_encryption", {"ServerSideEncryptionConfiguration": {"Rules": [
        {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]}}, {"Bucket": "src"})
    reader = AwsMembers("replmon", make_client=c).open(HUB)
    res = inspect_bucket(reader, "src", "eu-west-1", settings=InventorySettings(), probe_prefix="replmon-probes/", groups=1,
                         members=[HUB], run_id="r", now=NOW, enroll_tag=FleetSettings().enroll_tag)
    c.done()
    assert res.route is not None and res.route.probing and res.route.verdict.reason_code is Reason.OK


def test_the_templates_inventory_settings_render_to_valid_settings() -> None:
    """REPLMON_INVENTORY and REPLMON_FLEET are JSON written inside YAML: render them with the parameters' defaults."""
    import json
    import re

    from replmon.core.fleetconfig import load_fleet_settings
    from replmon.local.template import load_template

    t = load_template(TEMPLATE)
    env = t["Resources"]["InventoryFunction"]["Properties"]["Environment"]["Variables"]
    values = {k: str(v.get("Default", "")) for k, v in t["Parameters"].items()}
    values.update({"AWS::AccountId": HUB, "Accounts": f"{MEMBER},{DENIED}", "Topic": t["Mappings"]["Fixed"]["Settings"]["EventsTopicName"]})
    text, names = env["REPLMON_INVENTORY"]["Fn::Sub"]
    assert set(names) == {"Accounts", "Topic"}

    def render(s: str) -> Any:
        assert set(re.findall(r"\$\{([\w:]+)\}", s)) <= set(values)
        return json.loads(re.sub(r"\$\{([\w:]+)\}", lambda m: values[m.group(1)], s))

    settings = load_inventory_settings(render(text))
    assert (settings.hub_account, settings.member_accounts, settings.discover_organization) == (HUB, [MEMBER, DENIED], False)
    assert settings.opt_out == ("replmon:probe", "off") and settings.workers == 16
    timeout = t["Resources"]["InventoryFunction"]["Properties"]["Timeout"]
    assert settings.run_seconds == timeout - 90, "the run checkpoints 90 s before Lambda's timeout"
    fleet = load_fleet_settings(render(env["REPLMON_FLEET"]["Fn::Sub"]))
    assert (fleet.route_groups, fleet.member_role_prefix) == (1, "replmon")


def test_scheduled_inventory_runs_never_overlap() -> None:
    """Review s26 S3: runs share one checkpoint item, so the schedule is no more frequent than the
    function's timeout. Not reserved concurrency 1: "You can reserve up to the Unreserved account
    concurrency value ... minus 100" ("Configuring reserved concurrency", Lambda developer guide,
    https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html), so a new account
    with a low concurrency quota could not deploy the stack at all."""
    from replmon.local.template import load_template
    from tests.conftest import TEMPLATE

    t = load_template(TEMPLATE)
    fn = t["Resources"]["InventoryFunction"]["Properties"]
    assert "ReservedConcurrentExecutions" not in fn
    assert t["Mappings"]["Fixed"]["Settings"]["InventoryRateMinutes"] * 60 >= fn["Timeout"]
