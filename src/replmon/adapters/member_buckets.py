"""The inventory's AWS reads of member accounts (core/ports.py :class:`MemberAccounts`, :class:`BucketReader`).

- Accounts: Organizations ``ListAccounts`` (management account or delegated administrator only),
  ``MaxResults`` 20, paged until ``NextToken`` is absent even after an empty page; ACTIVE only (Organizations' ListAccounts).
- Credentials: ``sts:AssumeRole`` of ``<MemberRolePrefix>-inventory`` in each account, with the
  ExternalId when one is configured; a refusal is :class:`AccessDenied` (``sts:AssumeRole``).
- Buckets: ``ListBuckets`` always with ``MaxBuckets`` (so S3 returns each ``BucketRegion``), paged
  on ``ContinuationToken`` (S3's ListBuckets); a Region S3 did not give comes from HeadBucket's
  ``x-amz-bucket-region`` header, present on a 403 too (S3's HeadBucket). Per-bucket reads go to a client in
  the bucket's Region.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from botocore.exceptions import ClientError

from replmon.adapters import clients
from replmon.core.errors import ConfigError
from replmon.core.ports import AccessDenied, BucketMissing, BucketPage
from replmon.core.registry import member_role_arn

#: ListBuckets page size: any parameter makes S3 return BucketRegion; 1,000 is a page the Lambda handles.
MAX_BUCKETS = 1000
#: Organizations ListAccounts: MaxResults is 1..20.
MAX_ACCOUNTS = 20
KMS_ALGORITHMS = ("aws:kms", "aws:kms:dsse")
#: The AWS managed key (SSE-KMS without KMSMasterKeyID).
AWS_MANAGED_KEY = "aws/s3"
_DENIED = {"AccessDenied", "AccessDeniedException", "403", "Forbidden", "AllAccessDisabled"}
# A HEAD's error has no body: botocore names it by its status ("404"); other calls say NoSuchBucket.
_MISSING = {"404", "NoSuchBucket", "NotFound"}

#: make_client(service, region, credentials) -> a boto3 client; credentials from AssumeRole or None (the caller's).
ClientFactory = Callable[[str, "str | None", "Mapping[str, str] | None"], Any]


def default_client(service: str, region: str | None, credentials: Mapping[str, str] | None) -> Any:
    base = clients.credentials_session(credentials) if credentials else None
    return clients.client(service, clients.CONTROL, region=region, base=base)


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


class AwsBucketReader:
    """:class:`~replmon.core.ports.BucketReader` of one account, with its assumed credentials."""

    def __init__(self, account: str, credentials: Mapping[str, str] | None, make_client: ClientFactory = default_client,
                 regions: Mapping[str, str] | None = None) -> None:
        """``regions``: buckets whose Region is known beforehand (the lab's two servers, which
        HeadBucket cannot tell apart); any other is asked of S3."""
        self.account = account
        self._credentials = credentials
        self._make = make_client
        self._clients: dict[str | None, Any] = {}
        self._regions: dict[str, str] = dict(regions or {})

    def _s3(self, region: str | None) -> Any:
        if region not in self._clients:
            self._clients[region] = self._make("s3", region, self._credentials)
        return self._clients[region]

    def list_buckets(self, token: str | None) -> BucketPage:
        kwargs: dict[str, Any] = {"MaxBuckets": MAX_BUCKETS}
        if token:
            kwargs["ContinuationToken"] = token
        try:
            resp = self._s3(None).list_buckets(**kwargs)
        except ClientError as exc:
            if _code(exc) in _DENIED:
                raise AccessDenied("s3:ListAllMyBuckets", str(exc)) from exc
            raise
        page = [(b["Name"], b.get("BucketRegion") or None) for b in resp.get("Buckets", [])]
        for name, region in page:
            if region:
                self._regions[name] = region
        return BucketPage(page, resp.get("ContinuationToken") or None)

    def bucket_region(self, bucket: str) -> str:
        if bucket in self._regions:
            return self._regions[bucket]
        try:
            resp = self._s3(None).head_bucket(Bucket=bucket)
            headers = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            region = resp.get("BucketRegion") or headers.get("x-amz-bucket-region")
        except ClientError as exc:  # S3 names the Region on a 403 (and a 301) too, never for a bucket that is not there
            region = exc.response.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("x-amz-bucket-region")
            if not region and _code(exc) in _MISSING:
                raise BucketMissing(bucket, f"HeadBucket {_code(exc)}") from exc
            if not region:
                raise AccessDenied("s3:ListBucket", f"HeadBucket {bucket}: {_code(exc)} without x-amz-bucket-region") from exc
        self._regions[bucket] = str(region)
        return self._regions[bucket]

    def _bucket_config(self, call: Callable[[], Any], bucket: str, absent: str, action: str) -> Any:
        """A bucket configuration read: None when S3 answers ``absent`` (none set), AccessDenied
        naming ``action`` when refused, any other error as it came."""
        try:
            return call()
        except ClientError as exc:
            if _code(exc) == absent:
                return None
            if _code(exc) in _DENIED:
                raise AccessDenied(action, bucket) from exc
            if _code(exc) in _MISSING:  # deleted since ListBuckets (which named its Region)
                raise BucketMissing(bucket, _code(exc)) from exc
            raise

    def replication(self, bucket: str, region: str) -> Mapping[str, Any] | None:
        got = self._bucket_config(lambda: self._s3(region).get_bucket_replication(Bucket=bucket), bucket,
                                  "ReplicationConfigurationNotFoundError", "s3:GetReplicationConfiguration")
        return None if got is None else dict(got["ReplicationConfiguration"])

    def tags(self, bucket: str, region: str) -> dict[str, str]:
        got = self._bucket_config(lambda: self._s3(region).get_bucket_tagging(Bucket=bucket), bucket,
                                  "NoSuchTagSet", "s3:GetBucketTagging")
        return {} if got is None else {t["Key"]: t["Value"] for t in got.get("TagSet", [])}

    def default_kms_key(self, bucket: str, region: str) -> str | None:
        got = self._bucket_config(lambda: self._s3(region).get_bucket_encryption(Bucket=bucket), bucket,
                                  "ServerSideEncryptionConfigurationNotFoundError", "s3:GetEncryptionConfiguration")
        if got is None:
            return None
        cfg = got["ServerSideEncryptionConfiguration"]
        for rule in cfg.get("Rules", []):
            default = rule.get("ApplyServerSideEncryptionByDefault") or {}
            if default.get("SSEAlgorithm") in KMS_ALGORITHMS:
                return str(default.get("KMSMasterKeyID") or AWS_MANAGED_KEY)
        return None


class AwsMembers:
    """:class:`~replmon.core.ports.MemberAccounts` through STS and Organizations."""

    def __init__(self, role_prefix: str, external_id: str | None = None, *, make_client: ClientFactory = default_client,
                 partition: str = "aws", assume: bool = True) -> None:
        self.role_prefix = role_prefix
        self.external_id = external_id or None
        self._make = make_client
        self.partition = partition
        self.assume = assume  # False: read with the caller's own credentials (replmon fleet inventory --no-assume)

    def organization_accounts(self) -> list[str]:
        org = self._make("organizations", None, None)
        accounts: list[str] = []
        kwargs: dict[str, Any] = {"MaxResults": MAX_ACCOUNTS}
        while True:
            try:
                page = org.list_accounts(**kwargs)
            except ClientError as exc:
                raise ConfigError(f"DiscoverOrganizationAccounts: Organizations ListAccounts failed ({_code(exc)}); it works "
                                  "only from the management account or a delegated administrator: list the accounts in "
                                  "MemberAccounts instead") from exc
            # ``State`` replaces ``Status``, which AWS retires on 2026-09-09 (ListAccounts API reference);
            # an account whose state is absent from both is not assumed active.
            accounts += [a["Id"] for a in page.get("Accounts", []) if (a.get("State") or a.get("Status")) == "ACTIVE"]
            token = page.get("NextToken")
            if not token:  # an empty page may still carry a token: only its absence ends the list
                return accounts
            kwargs["NextToken"] = token

    def role_arn(self, account: str) -> str:
        return member_role_arn(account, self.role_prefix, "inventory", self.partition)

    def open(self, account: str) -> AwsBucketReader:
        if not self.assume:
            return AwsBucketReader(account, None, self._make)
        try:  # the one AssumeRole request (adapters/clients.py), made now: a refusal is this account's reason
            creds = clients.assume_role(self._make("sts", None, None), self.role_arn(account), self.external_id, "replmon-inventory")
        except ClientError as exc:
            raise AccessDenied("sts:AssumeRole", f"{self.role_arn(account)}: {_code(exc)}") from exc
        return AwsBucketReader(account, creds, self._make)


def _owner(account: str | None) -> dict[str, str]:
    return {"ExpectedBucketOwner": account} if account else {}


class BucketNotifications:
    """Buckets' notification configurations (GetBucketNotificationConfiguration and the put that
    replaces it, the S3 API reference), each bucket read and written through its account's member
    prober role (``<MemberRolePrefix>-prober``, assumed with the ExternalId when one is set:
    adapters/clients.py, the one AssumeRole request). A bucket on an S3-compatible endpoint (the
    lab's MinIO) is reached with ``keys``; the stack's own route's buckets (no role) with the
    caller's credentials."""

    def __init__(self, *, profile: str | None = None, external_id: str | None = None, keys: tuple[str, str] | None = None) -> None:
        self.profile, self.external_id, self.keys = profile, external_id or None, keys
        self._clients: dict[tuple[str | None, str | None, str | None], Any] = {}

    def s3(self, region: str | None, endpoint_url: str | None, role_arn: str | None) -> Any:
        k = (region, endpoint_url, None if endpoint_url else role_arn)
        if k not in self._clients:
            self._clients[k] = clients.client("s3", clients.CONTROL, region=region, endpoint_url=endpoint_url,
                                              keys=self.keys if endpoint_url else None, profile=self.profile,
                                              role_arn=k[2], external_id=self.external_id)
        return self._clients[k]

    def read(self, bucket: str, region: str | None, endpoint_url: str | None, role_arn: str | None,
             owner: str | None = None) -> dict[str, Any]:
        """``owner``: the account the route says owns the bucket, sent as ``ExpectedBucketOwner`` (S3
        answers 403 when another account owns it: a bucket deleted and re-created elsewhere is not written)."""
        try:
            got = self.s3(region, endpoint_url, role_arn).get_bucket_notification_configuration(Bucket=bucket, **_owner(owner))
        except ClientError as exc:
            if _code(exc) in _DENIED:
                raise AccessDenied("s3:GetBucketNotification", f"{bucket} (as {role_arn or 'the caller'})") from exc
            if _code(exc) in _MISSING:
                raise BucketMissing(bucket, _code(exc)) from exc
            raise
        return {k: v for k, v in got.items() if k != "ResponseMetadata"}

    def write(self, bucket: str, region: str | None, endpoint_url: str | None, role_arn: str | None,
              configuration: Mapping[str, Any], owner: str | None = None) -> None:
        try:
            self.s3(region, endpoint_url, role_arn).put_bucket_notification_configuration(
                Bucket=bucket, NotificationConfiguration=dict(configuration), **_owner(owner))
        except ClientError as exc:
            if _code(exc) in _DENIED:
                raise AccessDenied("s3:PutBucketNotification", f"{bucket} (as {role_arn or 'the caller'})") from exc
            raise
