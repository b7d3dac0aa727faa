"""boto3 S3 adapter: AWS, or any S3-compatible endpoint such as MinIO (``endpoint_url``)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import boto3
import botocore.session
from botocore.config import Config
from botocore.credentials import AssumeRoleCredentialFetcher, DeferredRefreshableCredentials
from botocore.exceptions import ClientError

from replmon.config import Destination, Endpoint
from replmon.ports import HeadResult, PutResult

_CHECKSUM_FIELDS = ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME", "ChecksumSHA1", "ChecksumSHA256")


def _checksum(resp: dict[str, Any]) -> str | None:
    for f in _CHECKSUM_FIELDS:
        if resp.get(f):
            return f"{f.removeprefix('Checksum')}:{resp[f]}"
    return None


class S3ObjectStore:
    def __init__(self, client: Any) -> None:
        self.client = client

    def put(self, bucket: str, key: str, body: bytes, metadata: dict[str, str]) -> PutResult:
        r = self.client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata, Tagging="replmon=probe")
        return PutResult(r.get("VersionId"), r["ETag"], _checksum(r))

    def create_multipart(self, bucket: str, key: str, metadata: dict[str, str]) -> str:
        r = self.client.create_multipart_upload(Bucket=bucket, Key=key, Metadata=metadata, Tagging="replmon=probe")
        return str(r["UploadId"])

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str:
        r = self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=part_number, Body=body)
        return str(r["ETag"])

    def upload_part_copy(
        self, bucket: str, key: str, upload_id: str, part_number: int, source_key: str, first: int, last: int
    ) -> str:
        r = self.client.upload_part_copy(
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            PartNumber=part_number,
            CopySource={"Bucket": bucket, "Key": source_key},
            CopySourceRange=f"bytes={first}-{last}",
        )
        return str(r["CopyPartResult"]["ETag"])

    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: Sequence[str]) -> PutResult:
        r = self.client.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"ETag": e, "PartNumber": i} for i, e in enumerate(etags, start=1)]},
        )
        return PutResult(r.get("VersionId"), r["ETag"], _checksum(r))

    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None:
        self.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)

    def check_bucket(self, bucket: str) -> None:
        """Raises if the bucket cannot be reached with these credentials (versioning must be on)."""
        state = self.client.get_bucket_versioning(Bucket=bucket).get("Status")
        if state != "Enabled":
            raise ValueError(f"versioning is {state or 'off'}; replication needs it Enabled on both buckets")

    def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult | None:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key}
        if version_id:
            kwargs["VersionId"] = version_id
        try:
            r = self.client.head_object(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound", "NoSuchVersion"):
                return None
            raise
        return HeadResult(r.get("ReplicationStatus"), int(r["ContentLength"]), r["ETag"], r.get("VersionId"))

    def delete_all_versions(self, bucket: str, key: str) -> int:
        """Delete every version and delete marker of exactly ``key``; returns how many."""
        doomed: list[dict[str, str]] = []
        try:
            for page in self.client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=key):
                for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                    if v["Key"] == key:
                        doomed.append({"Key": key, "VersionId": v["VersionId"]})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "NoSuchBucket":
                return 0  # nothing can be left in a bucket that does not exist
            raise
        for i in range(0, len(doomed), 1000):
            self.client.delete_objects(Bucket=bucket, Delete={"Objects": doomed[i : i + 1000], "Quiet": True})
        return len(doomed)


_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=60)
_PATH_STYLE = Config(s3={"addressing_style": "path"})


def _assumed_role_session(base: boto3.session.Session, role_arn: str, region: str | None) -> boto3.session.Session:
    """A session whose credentials re-assume ``role_arn`` before they expire (Lambda containers
    outlive the 1-hour default), the way botocore does for profiles with role_arn."""
    fetcher = AssumeRoleCredentialFetcher(
        client_creator=base._session.create_client,
        source_credentials=base.get_credentials(),
        role_arn=role_arn,
        extra_args={"RoleSessionName": "replmon"},
    )
    core = botocore.session.Session()
    core._credentials = DeferredRefreshableCredentials(method="assume-role", refresh_using=fetcher.fetch_credentials)  # type: ignore[attr-defined]
    return boto3.session.Session(botocore_session=core, region_name=region)


@cache
def _client(endpoint_url: str | None, region: str | None, role_arn: str | None, keys: tuple[str, str] | None) -> Any:
    # Without keys: the standard chain (Lambda's role, a profile, the environment).
    session = boto3.session.Session(*keys) if keys else boto3.session.Session()
    if role_arn:  # replicas in another account: read and delete them through a role there
        session = _assumed_role_session(session, role_arn, region)
    config = _CONFIG.merge(_PATH_STYLE) if endpoint_url else _CONFIG
    return session.client("s3", region_name=region or ("us-east-1" if endpoint_url else None), endpoint_url=endpoint_url, config=config)


class S3Stores:
    """The :class:`~replmon.ports.ObjectStores` factory for boto3, clients cached per endpoint.

    ``keys`` (access key, secret) are for S3-compatible servers such as MinIO; without them the
    standard AWS credential chain is used. They are never part of the probe configuration, which
    travels through the state machine's input and history.
    """

    def __init__(self, keys: tuple[str, str] | None = None) -> None:
        self.keys = keys

    def __call__(self, endpoint: Endpoint) -> S3ObjectStore:
        role = endpoint.role_arn if isinstance(endpoint, Destination) else None
        return S3ObjectStore(_client(endpoint.endpoint_url, endpoint.region, role, self.keys))


s3_stores = S3Stores()
