"""UploadProbe under moto: put, multipart, server-side composition from a seed, abort on failure."""

from __future__ import annotations

import hashlib
from typing import Any

import boto3
import pytest
from moto import mock_aws

from replmon.adapters.s3 import S3ObjectStore
from replmon.core.clock import ManualClock
from replmon.core.route import Route
from replmon.probe.state import ProbeState
from replmon.probe.upload import MiB, UploadSettings, plan_upload, upload_probe
from tests.conftest import DST, SRC, make_buckets, route

SMALL = UploadSettings(multipart_threshold=8 * MiB, compose_threshold=32 * MiB, part_size=5 * MiB, seed_part_size=8 * MiB, workers=4)


def state(size: int, probe_id: str = "p1") -> ProbeState:
    return ProbeState(
        probe_id=probe_id, run_id="19700101T000000Z-r1", planned_at=0.0, route=Route(**route()), size_bytes=size, size_class="x", trial=1,
        timeout_seconds=60, target_seconds=900,
    )


class CountingRandom:
    def __init__(self) -> None:
        self.bytes = 0

    def __call__(self, n: int) -> bytes:
        self.bytes += n
        return hashlib.sha256(str(self.bytes).encode()).digest() * (n // 32) + b"x" * (n % 32)


@pytest.fixture
def s3() -> Any:
    with mock_aws():
        yield make_buckets()


def test_plan_picks_the_method_by_size() -> None:
    assert plan_upload(1 * MiB, SMALL).method == "put"
    mp = plan_upload(20 * MiB, SMALL)
    assert mp.method == "multipart" and mp.part_sizes == [5 * MiB] * 4
    comp = plan_upload(80 * 2**30)
    assert comp.method == "compose" and len(comp.part_sizes) <= 10_000
    assert sum(comp.part_sizes) == 80 * 2**30 and comp.part_sizes[0] == 8 * MiB
    assert all(p >= 5 * MiB for p in comp.part_sizes[:-1])
    # 5 TiB still fits in 10,000 parts (parts grow, seed grows with them).
    huge = plan_upload(5 * 2**40)
    assert len(huge.part_sizes) <= 10_000 and sum(huge.part_sizes) == 5 * 2**40


@pytest.mark.parametrize(("size", "method"), [(3 * MiB, "put"), (20 * MiB, "multipart"), (40 * MiB + 123, "compose")])
def test_upload_creates_a_unique_probe_of_the_exact_size(s3: Any, size: int, method: str) -> None:
    rnd = CountingRandom()
    out = upload_probe(state(size), S3ObjectStore(s3), ManualClock(), SMALL, rnd)
    assert out.upload is not None and out.upload.method == method
    head = s3.head_object(Bucket=SRC, Key=out.upload.key)
    assert head["ContentLength"] == size
    assert head["Metadata"]["replmon-probe-id"] == "p1"
    assert head["VersionId"] == out.upload.version_id and head["ETag"] == out.upload.etag
    assert out.upload.put_end >= out.upload.put_start
    if method == "compose":
        # Only the first part (and the seed, once) came through the client.
        assert rnd.bytes == SMALL.part_size + SMALL.seed_part_size
        rnd2 = CountingRandom()
        second = upload_probe(state(size, "p2"), S3ObjectStore(s3), ManualClock(), SMALL, rnd2)
        assert rnd2.bytes == SMALL.part_size  # seed reused
        # Every probe is unique: its first part is fresh random bytes.
        a = s3.get_object(Bucket=SRC, Key=out.upload.key, Range="bytes=0-1023")["Body"].read()
        b = s3.get_object(Bucket=SRC, Key=second.upload.key, Range="bytes=0-1023")["Body"].read()
        assert a != b


def test_failed_composition_aborts_the_multipart_upload(s3: Any) -> None:
    store = S3ObjectStore(s3)
    calls = {"n": 0}
    real = store.upload_part_copy

    def flaky(*args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("copy failed")
        return real(*args, **kwargs)

    store.upload_part_copy = flaky  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="copy failed"):
        upload_probe(state(40 * MiB), store, ManualClock(), SMALL, CountingRandom())
    assert s3.list_multipart_uploads(Bucket=SRC).get("Uploads", []) == []
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=SRC, Prefix="replmon-probes/").get("Contents", [])]
    assert keys == []


def test_cleanup_removes_every_version_on_both_sides(s3: Any) -> None:
    from replmon.adapters.s3 import S3ObjectStore as Store

    key = "replmon-probes/r1/p1"
    for b in (SRC, DST):
        s3.put_object(Bucket=b, Key=key, Body=b"1")
        s3.put_object(Bucket=b, Key=key, Body=b"2")
        s3.delete_object(Bucket=b, Key=key)  # a delete marker
    s3.put_object(Bucket=SRC, Key=key + "-other", Body=b"keep")
    store = Store(s3)
    assert store.delete_all_versions(SRC, key) == 3 and store.delete_all_versions(DST, key) == 3
    left = s3.list_object_versions(Bucket=SRC, Prefix="replmon-probes/")
    assert [v["Key"] for v in left.get("Versions", [])] == [key + "-other"]
    assert store.delete_all_versions("no-such-bucket", key) == 0


def test_head_of_a_missing_version_is_none(s3: Any) -> None:
    assert S3ObjectStore(boto3.client("s3", region_name="us-east-1")).head(SRC, "nope") is None


def test_destination_role_is_assumed_and_refreshable(s3: Any) -> None:
    """Cross-account replicas are read through ``role_arn``; the credentials refresh themselves."""
    from replmon.adapters.clients import cached
    from replmon.adapters.s3 import S3Stores
    from replmon.core.route import Destination

    cached.cache_clear()
    dest = Destination(bucket=DST, region="us-east-1", role_arn="arn:aws:iam::210987654321:role/replmon-reader")
    store = S3Stores()(dest)
    creds = store.client._request_signer._credentials
    assert type(creds).__name__ == "DeferredRefreshableCredentials"
    s3.put_object(Bucket=DST, Key="replmon-probes/x", Body=b"1")
    assert store.head(DST, "replmon-probes/x") is not None  # moto's STS answered the AssumeRole
    assert creds.get_frozen_credentials().access_key != "testing"
    cached.cache_clear()
