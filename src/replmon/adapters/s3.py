"""boto3 S3 adapter: AWS, or any S3-compatible endpoint such as MinIO (``endpoint_url``).

Two S3 behaviours shape this adapter (tests/test_iam_contract.py encodes both):

- Without ``s3:ListBucket`` on the bucket, HeadObject of a missing key answers **403**, not 404
  (HeadObject API reference, "Permissions"). replmon's roles list only their own prefixes, so a
  403 is resolved by listing the key's versions (``s3:ListBucketVersions`` with an ``s3:prefix``
  condition): absent there means missing, present means the HEAD itself was denied.
- With ``ChecksumMode=ENABLED`` HeadObject returns the object's checksum (S3 stores a CRC for
  every new upload); for SSE-KMS objects that needs ``kms:Decrypt`` (HeadObject, "ChecksumMode").

What every probe write declares (tests/test_sse_kms.py encodes both):

- **SSE-KMS** ("PutObject"): with the endpoint's ``kms_key_arn``, PutObject and CreateMultipartUpload
  send ``ServerSideEncryption=aws:kms`` and ``SSEKMSKeyId=<the key ARN>`` (a bucket policy that
  denies PUTs without the key header is common; without the header S3 would use ``aws/s3``).
  UploadPart and UploadPartCopy send no SSE headers: the upload's key applies to its parts.
- **A defined checksum** ("Checking object integrity for data uploads in Amazon S3"): PutObject and CreateMultipartUpload declare CRC64NVME, and a
  multipart upload also ``ChecksumType=FULL_OBJECT``, so a composed probe has one full-object
  CRC64NVME checksum (S3's default for a single PUT) that the replica's HEAD can be compared with;
  each part carries its CRC64NVME (botocore computes it with awscrt). A probe composed from a seed
  with UploadPartCopy declares none (a copied range carries no checksum of its own; MinIO refuses
  the copy) and is verified by size and ETag.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import ClientError

from replmon.adapters import clients
from replmon.adapters.clients import CONTROL, DATA, CallClass
from replmon.core.ports import HeadResult, PutResult, UploadInfo, VersionInfo
from replmon.core.route import Endpoint

_CHECKSUM_FIELDS = ("ChecksumCRC64NVME", "ChecksumCRC32C", "ChecksumCRC32", "ChecksumSHA256", "ChecksumSHA1")
_MISSING = ("404", "NoSuchKey", "NotFound", "NoSuchVersion")
_DENIED = ("403", "AccessDenied", "Forbidden")


def checksum_of(resp: dict[str, Any]) -> str | None:
    """'ALGORITHM/TYPE:value' from a response's checksum headers, e.g. 'CRC64NVME/FULL_OBJECT:...'.

    >>> checksum_of({"ChecksumCRC32": "AAAA", "ChecksumType": "COMPOSITE"})
    'CRC32/COMPOSITE:AAAA'
    >>> checksum_of({"ETag": '"x"'}) is None
    True
    """
    for f in _CHECKSUM_FIELDS:
        if resp.get(f):
            return f"{f.removeprefix('Checksum')}/{resp.get('ChecksumType', 'FULL_OBJECT')}:{resp[f]}"
    return None


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


#: The checksum every probe write declares: S3's default algorithm, full-object for multipart too.
CHECKSUM_ALGORITHM, CHECKSUM_TYPE = "CRC64NVME", "FULL_OBJECT"


class S3ObjectStore:
    def __init__(self, client: Any, control: Any | None = None, kms_key_arn: str | None = None) -> None:
        self.client = client  # data path: PUTs and parts (long read timeout)
        self.control = control or client  # HEAD, list, delete: short timeouts, fail fast
        self.kms_key_arn = kms_key_arn  # the bucket's SSE-KMS key: every new object is written with it
        # Each part's checksum, for CompleteMultipartUpload (an upload that declared an algorithm
        # lists every part's checksum); one upload is written through one store.
        self._part_checksums: dict[str, dict[int, str | None]] = {}

    def _encryption(self) -> dict[str, str]:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.kms_key_arn} if self.kms_key_arn else {}

    # ------------------------------------------------------------------ writing
    def put(self, bucket: str, key: str, body: bytes, metadata: dict[str, str]) -> PutResult:
        r = self.client.put_object(Bucket=bucket, Key=key, Body=body, Metadata=metadata, ChecksumAlgorithm=CHECKSUM_ALGORITHM,
                                   **self._encryption())
        return PutResult(r.get("VersionId"), r["ETag"], checksum_of(r))

    def create_multipart(self, bucket: str, key: str, metadata: dict[str, str], checksum: bool = True) -> str:
        """``checksum=False`` for a probe composed with UploadPartCopy: an upload that declares
        CRC64NVME wants each copied range's checksum, which a range copy of the seed does not
        carry (MinIO refuses: "checksum missing, want CRC64NVME"); such a probe is verified by
        size and ETag, as before 19.7."""
        declared = {"ChecksumAlgorithm": CHECKSUM_ALGORITHM, "ChecksumType": CHECKSUM_TYPE} if checksum else {}
        r = self.client.create_multipart_upload(Bucket=bucket, Key=key, Metadata=metadata, **declared, **self._encryption())
        upload_id = str(r["UploadId"])
        if checksum:
            self._part_checksums[upload_id] = {}
        return upload_id

    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str:
        declared = upload_id in self._part_checksums
        r = self.client.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=part_number, Body=body,
                                    **({"ChecksumAlgorithm": CHECKSUM_ALGORITHM} if declared else {}))
        if declared:
            self._part_checksums[upload_id][part_number] = r.get(f"Checksum{CHECKSUM_ALGORITHM}")
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
        if upload_id in self._part_checksums:
            self._part_checksums[upload_id][part_number] = r["CopyPartResult"].get(f"Checksum{CHECKSUM_ALGORITHM}")
        return str(r["CopyPartResult"]["ETag"])

    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: Sequence[str]) -> PutResult:
        declared = upload_id in self._part_checksums
        sums = self._part_checksums.pop(upload_id, {})
        parts = []
        for i, e in enumerate(etags, start=1):
            part: dict[str, Any] = {"ETag": e, "PartNumber": i}
            if sums.get(i):
                part[f"Checksum{CHECKSUM_ALGORITHM}"] = sums[i]
            parts.append(part)
        r = self.client.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts},
                                                  **({"ChecksumType": CHECKSUM_TYPE} if declared else {}))
        return PutResult(r.get("VersionId"), r["ETag"], checksum_of(r))

    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None:
        self.control.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)

    # ------------------------------------------------------------------ reading
    def read(self, bucket: str, key: str) -> bytes:
        return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())

    def check_bucket(self, bucket: str) -> None:
        """Raises if the bucket cannot be reached with these credentials (versioning must be on)."""
        state = self.control.get_bucket_versioning(Bucket=bucket).get("Status")
        if state != "Enabled":
            raise ValueError(f"versioning is {state or 'off'}; replication needs it Enabled on both buckets")

    def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult | None:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "ChecksumMode": "ENABLED"}
        if version_id:
            kwargs["VersionId"] = version_id
        try:
            r = self.control.head_object(**kwargs)
        except ClientError as exc:
            if _code(exc) in _MISSING:
                return None
            if _code(exc) in _DENIED and not self._version_exists(bucket, key, version_id):
                return None  # 403 for a missing key: the role has no bucket-wide s3:ListBucket
            raise
        return HeadResult(r.get("ReplicationStatus"), int(r["ContentLength"]), r["ETag"], r.get("VersionId"), checksum_of(r))

    def _version_exists(self, bucket: str, key: str, version_id: str | None) -> bool:
        return any(v.key == key and (version_id is None or v.version_id == version_id) for v in self.list_versions(bucket, key))

    def object_size(self, bucket: str, key: str) -> int | None:
        """Size of the current version of exactly ``key``, or None: a prefix listing, so a role
        with ``s3:ListBucket`` on that prefix gets an answer whether or not the key exists."""
        r = self.control.list_objects_v2(Bucket=bucket, Prefix=key, MaxKeys=10)
        return next((int(o["Size"]) for o in r.get("Contents", []) if o["Key"] == key), None)

    def list_versions(self, bucket: str, prefix: str) -> list[VersionInfo]:
        """Every version and delete marker under ``prefix``."""
        out: list[VersionInfo] = []
        for page in self.control.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
            for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                out.append(VersionInfo(v["Key"], v["VersionId"], v["LastModified"].timestamp()))
        return out

    def list_uploads(self, bucket: str, prefix: str) -> list[UploadInfo]:
        """Incomplete multipart uploads under ``prefix``."""
        out: list[UploadInfo] = []
        for page in self.control.get_paginator("list_multipart_uploads").paginate(Bucket=bucket, Prefix=prefix):
            for u in page.get("Uploads", []):
                out.append(UploadInfo(u["Key"], u["UploadId"], u["Initiated"].timestamp()))
        return out

    # ------------------------------------------------------------------ removing
    def delete_versions(self, bucket: str, versions: Sequence[VersionInfo]) -> int:
        """Delete exactly these versions; returns how many S3 confirmed (errors raise)."""
        done = 0
        for i in range(0, len(versions), 1000):
            batch = versions[i : i + 1000]
            r = self.control.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": v.key, "VersionId": v.version_id} for v in batch], "Quiet": True}
            )
            if r.get("Errors"):
                e = r["Errors"][0]
                raise RuntimeError(f"DeleteObjects left {len(r['Errors'])} version(s), e.g. {e.get('Key')}: {e.get('Code')} {e.get('Message')}")
            done += len(batch)
        return done

    def delete_all_versions(self, bucket: str, key: str) -> int:
        """Delete every version and delete marker of exactly ``key``; returns how many."""
        try:
            doomed = [v for v in self.list_versions(bucket, key) if v.key == key]
        except ClientError as exc:
            if _code(exc) == "NoSuchBucket":
                return 0  # nothing can be left in a bucket that does not exist
            raise
        return self.delete_versions(bucket, doomed)

    def abort_uploads(self, bucket: str, key: str) -> int:
        """Abort every incomplete multipart upload of exactly ``key``; returns how many."""
        try:
            uploads = [u for u in self.list_uploads(bucket, key) if u.key == key]
        except ClientError as exc:
            if _code(exc) == "NoSuchBucket":
                return 0
            raise
        for u in uploads:
            self.abort_multipart(bucket, u.key, u.upload_id)
        return len(uploads)


class S3Stores:
    """The :class:`~replmon.core.ports.ObjectStores` factory for boto3: one store per endpoint,
    its clients made once (adapters/clients.py) with the ``data`` call class for PUTs and parts and
    the ``control`` class for HEAD, list and delete.

    ``keys`` (access key, secret) are for S3-compatible servers such as MinIO, per endpoint URL
    (``by_url``) or for all; without them the standard AWS credential chain (or ``profile``)
    is used. Keys are never part of the probe configuration, which travels through the state
    machine's input and history; nor is ``external_id`` (MemberExternalId), sent with every
    AssumeRole of an endpoint's ``role_arn``.
    """

    def __init__(self, keys: tuple[str, str] | None = None, by_url: Mapping[str, tuple[str, str]] | None = None,
                 profile: str | None = None, *, data: CallClass = DATA, control: CallClass = CONTROL,
                 external_id: str | None = None) -> None:
        self.keys, self.by_url, self.profile = keys, dict(by_url or {}), profile
        self.data, self.control = data, control
        self.external_id = external_id or None

    def __call__(self, endpoint: Endpoint) -> S3ObjectStore:
        keys = self.by_url.get(endpoint.endpoint_url or "", self.keys)
        where = {"region": endpoint.region, "endpoint_url": endpoint.endpoint_url, "keys": keys, "profile": self.profile,
                 "role_arn": endpoint.role_arn, "external_id": self.external_id if endpoint.role_arn else None}
        return S3ObjectStore(clients.cached("s3", self.data, **where), clients.cached("s3", self.control, **where), endpoint.kms_key_arn)
