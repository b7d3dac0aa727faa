"""Stand-ins for what cannot run offline: moto never replicates, so S3 replication is emulated
with botocore hooks on the test's S3 client, following S3's documented behaviour (docs/REFERENCES.md R6):
the source reports PENDING then COMPLETED (or FAILED, or PENDING forever), the replica appears
with the source's version id and ETag and reports REPLICA."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import boto3

from replmon.adapters.s3 import S3ObjectStore
from replmon.core.clock import ManualClock
from replmon.core.route import Endpoint


@dataclass
class Scenario:
    latency: float | None  # seconds after the PUT ends; None = never (stays PENDING)
    outcome: str = "COMPLETED"  # or FAILED


@dataclass
class FakeReplication:
    clock: ManualClock
    source_bucket: str
    destination_bucket: str
    by_size: dict[int, Scenario] = field(default_factory=dict)
    default: Scenario = field(default_factory=lambda: Scenario(latency=5.0))
    put_end: dict[str, float] = field(default_factory=dict)
    replicas: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)  # (key, src version) -> (replica version, src etag)
    heads: dict[str, int] = field(default_factory=dict)  # source HEADs per key
    no_rule: bool = False  # emulate a bucket without a replication rule
    corrupt_replicas: bool = False  # replicas hold other bytes: another checksum (and ETag)
    kms_etags: bool = False  # replicas answer with another ETag but the same checksum, as SSE-KMS objects may
    lose_replicas: bool = False  # the source says COMPLETED but no replica arrives
    fail_deletes: int = 0  # the next N DeleteObjects calls fail (a destination outage during Cleanup)
    fail_puts: int = 0  # the next N PutObject calls fail with an internal error
    fail_parts: int = 0  # the next N UploadPart calls fail with an internal error
    fail_aborts: int = 0  # the next N AbortMultipartUpload calls fail (as if the uploader were killed)
    next_puts: list[Scenario] = field(default_factory=list)  # the next PUTs' own scenarios (one slow object)
    by_key: dict[str, Scenario] = field(default_factory=dict)
    by_key_part: dict[str, Scenario] = field(default_factory=dict)  # any key containing this (e.g. "/<route>/")

    def __post_init__(self) -> None:
        self.raw = boto3.client("s3", region_name="us-east-1")  # unhooked: the emulator's own hands
        self.raw._replmon_untracked = True  # not a call replmon makes (tests/iam.py ignores it)

    # --- hooks --------------------------------------------------------------
    def _stash_deletes(self, params: dict[str, Any], **_: Any) -> None:
        """A replica keeps its source's version id in S3: a DeleteObjects naming it reaches the replica."""
        if params.get("Bucket") == self.destination_bucket:
            for o in params.get("Delete", {}).get("Objects", []):
                if (o.get("Key"), o.get("VersionId")) in self.replicas:
                    o["VersionId"] = self.replicas[(o["Key"], o["VersionId"])][0]

    def _stash(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["fake_params"] = dict(params)
        bucket, key, version = params.get("Bucket"), params.get("Key"), params.get("VersionId")
        if bucket == self.destination_bucket and version and (key, version) in self.replicas:
            params["VersionId"] = self.replicas[(key, version)][0]  # replicas keep the source's version id

    def _after_put(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        params = context.get("fake_params", {})
        if params.get("Bucket") == self.source_bucket and http_response.status_code == 200:
            self.put_end[params["Key"]] = self.clock.now()
            if self.next_puts:
                self.by_key[params["Key"]] = self.next_puts.pop(0)

    def _after_head(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        params = context.get("fake_params", {})
        bucket, key = params.get("Bucket"), params.get("Key")
        if http_response.status_code != 200 or (key not in self.put_end and bucket == self.source_bucket):
            return
        if bucket == self.destination_bucket:
            src = self.replicas.get((key, params.get("VersionId", "")))
            parsed["ReplicationStatus"] = "REPLICA"
            if src:
                parsed["VersionId"] = params["VersionId"]
                parsed["ETag"] = '"not-an-md5-of-the-content"' if (self.corrupt_replicas or self.kms_etags) else src[1]
                if self.corrupt_replicas:
                    for field_name in [k for k in parsed if k.startswith("Checksum") and k != "ChecksumType"]:
                        parsed[field_name] = "AAAAAA=="
            return
        if bucket != self.source_bucket or self.no_rule:
            return
        self.heads[key] = self.heads.get(key, 0) + 1
        part = next((v for k, v in self.by_key_part.items() if k in key), None)
        scenario = self.by_key.get(key) or part or self.by_size.get(int(parsed["ContentLength"]), self.default)
        elapsed = self.clock.now() - self.put_end[key]
        if scenario.latency is None or elapsed < scenario.latency:
            parsed["ReplicationStatus"] = "PENDING"
            return
        parsed["ReplicationStatus"] = scenario.outcome
        if scenario.outcome == "COMPLETED" and not self.lose_replicas:
            version = parsed.get("VersionId")
            if (key, version) not in self.replicas:
                copy = self.raw.copy_object(
                    Bucket=self.destination_bucket, Key=key, CopySource={"Bucket": bucket, "Key": key, "VersionId": version}
                )
                self.replicas[(key, version)] = (copy["VersionId"], parsed["ETag"])

    def _maybe_fail_delete(self, **_: Any) -> None:
        if self.fail_deletes > 0:
            self.fail_deletes -= 1
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "emulated outage"}}, "DeleteObjects")

    def _maybe_fail_put(self, **_: Any) -> None:
        if self.fail_puts > 0:
            self.fail_puts -= 1
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "InternalError", "Message": "emulated failure"}}, "PutObject")

    def _maybe_fail_part(self, **_: Any) -> None:
        if self.fail_parts > 0:
            self.fail_parts -= 1
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "InternalError", "Message": "emulated failure"}}, "UploadPart")

    def _maybe_fail_abort(self, **_: Any) -> None:
        if self.fail_aborts > 0:
            self.fail_aborts -= 1
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "InternalError", "Message": "emulated failure"}}, "AbortMultipartUpload")

    def client(self) -> Any:
        c = boto3.client("s3", region_name="us-east-1")
        ev = c.meta.events
        ev.register("before-call.s3.DeleteObjects", self._maybe_fail_delete)
        ev.register("before-call.s3.PutObject", self._maybe_fail_put)
        ev.register("before-call.s3.UploadPart", self._maybe_fail_part)
        ev.register("before-call.s3.AbortMultipartUpload", self._maybe_fail_abort)
        for op in ("HeadObject", "PutObject", "CompleteMultipartUpload"):
            ev.register(f"before-parameter-build.s3.{op}", self._stash)
        ev.register("before-parameter-build.s3.DeleteObjects", self._stash_deletes)
        ev.register("after-call.s3.PutObject", self._after_put)
        ev.register("after-call.s3.CompleteMultipartUpload", self._after_put)
        ev.register("after-call.s3.HeadObject", self._after_head)
        return c

    def stores(self) -> Any:
        store = S3ObjectStore(self.client())

        def factory(endpoint: Endpoint) -> S3ObjectStore:
            return store

        return factory
