"""SSE-KMS probes and multipart checksums, against what AWS documents.

- "PutObject" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html),
  "CreateMultipartUpload" (https://docs.aws.amazon.com/AmazonS3/latest/API/API_CreateMultipartUpload.html),
  "Using server-side encryption with AWS KMS keys (SSE-KMS)"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html): with
  ``x-amz-server-side-encryption: aws:kms`` and no key id S3 uses ``aws/s3``; AWS's example bucket
  policy denies ``s3:PutObject`` when ``s3:x-amz-server-side-encryption-aws-kms-key-id`` is absent,
  and a key-pinning policy compares it to a key ARN; PutObject needs ``kms:GenerateDataKey``, a
  multipart upload ``kms:GenerateDataKey`` (CreateMultipartUpload) and ``kms:Decrypt``
  (UploadPart, UploadPartCopy).
- "Checking object integrity for data uploads in Amazon S3"
  (https://docs.aws.amazon.com/AmazonS3/latest/userguide/checking-object-integrity-upload.html):
  CRC64NVME is S3's default and full-object only; a multipart upload chooses its algorithm and
  type at CreateMultipartUpload; a composite checksum and a full-object one are different values.
- "Actions, resources, and condition keys for Amazon S3"
  (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html): the
  key-id condition key is of type ARN.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from moto import mock_aws
from pydantic import ValidationError

from replmon.adapters.s3 import CHECKSUM_ALGORITHM, CHECKSUM_TYPE, S3ObjectStore, S3Stores
from replmon.core.clock import ManualClock
from replmon.core.ports import HeadResult
from replmon.core.route import Endpoint, Route
from replmon.probe.poll import same_content
from replmon.probe.state import ProbeState
from replmon.probe.upload import MiB, UploadSettings, upload_probe
from tests.cfnutil import ACCOUNT, MODES, default_transformed, function_role_policies, resolver
from tests.conftest import SRC, make_buckets, route
from tests.iam import simulate

KEY = f"arn:aws:kms:us-east-1:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SMALL = UploadSettings(multipart_threshold=8 * MiB, compose_threshold=32 * MiB, part_size=5 * MiB, seed_part_size=8 * MiB, workers=2)
WRITES = ("PutObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy", "CompleteMultipartUpload")


def probe(size: int) -> ProbeState:
    r = route()
    r["source"] = {**r["source"], "kms_key_arn": KEY}
    return ProbeState(probe_id=f"p{size}", run_id="19700101T000000Z-r1", planned_at=0.0, route=Route(**r), size_bytes=size,
                      size_class="x", trial=1, timeout_seconds=60, target_seconds=900)


def rnd(n: int) -> bytes:
    return hashlib.sha256(str(n).encode()).digest() * (n // 32) + b"x" * (n % 32)


@pytest.fixture
def s3() -> Any:
    with mock_aws():
        yield make_buckets()


def capture(client: Any) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for op in WRITES:
        client.meta.events.register(f"provide-client-params.s3.{op}",
                                    lambda params, _op=op, **_: calls.append((_op, dict(params))))
    return calls


@pytest.mark.parametrize("size", [3 * MiB, 20 * MiB, 40 * MiB + 123], ids=["put", "multipart", "compose"])
def test_every_write_sends_the_key_and_declares_its_checksum(s3: Any, size: int) -> None:
    calls = capture(s3)
    state = probe(size)
    store = S3ObjectStore(s3, kms_key_arn=state.route.source.kms_key_arn)
    out = upload_probe(state, store, ManualClock(), SMALL, rnd)
    assert out.upload is not None
    ops = {op for op, _ in calls}
    assert ops & {"PutObject", "CreateMultipartUpload"}, ops
    # A probe composed with UploadPartCopy declares no checksum: a copied range carries none of its
    # own, and MinIO (the lab) refuses the copy into a CRC64NVME upload ("checksum missing, want
    # CRC64NVME"); it is verified by size and ETag. Every other write declares CRC64NVME.
    composed = "UploadPartCopy" in ops
    for op, params in calls:
        if op in ("PutObject", "CreateMultipartUpload"):  # the two calls that create an object (the seed too)
            assert params["ServerSideEncryption"] == "aws:kms" and params["SSEKMSKeyId"] == KEY, (op, params)
        else:  # parts inherit the upload's key; S3 takes SSE headers on them only for SSE-C
            assert not {k for k in params if k.startswith("SSE") or k == "ServerSideEncryption"}, (op, params)
        if op == "PutObject":
            assert params["ChecksumAlgorithm"] == CHECKSUM_ALGORITHM, (op, params)
        if op == "CreateMultipartUpload" and not composed:
            assert params["ChecksumAlgorithm"] == CHECKSUM_ALGORITHM and params["ChecksumType"] == CHECKSUM_TYPE == "FULL_OBJECT"
        if op == "UploadPart" and not composed:
            assert params["ChecksumAlgorithm"] == CHECKSUM_ALGORITHM
        if op == "CompleteMultipartUpload" and not composed:
            assert params["ChecksumType"] == CHECKSUM_TYPE
        if composed and op in ("CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
            assert "ChecksumAlgorithm" not in params and "ChecksumType" not in params, (op, params)
    # moto keeps what was asked for: the object is SSE-KMS with the key.
    head = s3.head_object(Bucket=SRC, Key=out.upload.key, ChecksumMode="ENABLED")
    assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == KEY


def test_without_a_key_nothing_asks_for_kms(s3: Any) -> None:
    calls = capture(s3)
    state = probe(3 * MiB)
    upload_probe(state.model_copy(update={"route": Route(**route())}), S3ObjectStore(s3), ManualClock(), SMALL, rnd)
    assert calls and all("SSEKMSKeyId" not in p and "ServerSideEncryption" not in p for _, p in calls)


def test_the_stores_write_with_the_endpoints_key() -> None:
    store = S3Stores(keys=("k", "s"))(Endpoint(bucket="orders", region="us-east-1", kms_key_arn=KEY))
    assert store.kms_key_arn == KEY


@pytest.mark.parametrize("bad", ["alias/orders", "1234abcd-12ab-34cd-56ef-1234567890ab", "arn:aws:kms:us-east-1:123456789012:alias/orders"])
def test_a_key_that_is_not_a_full_arn_is_refused_naming_the_field_and_the_fix(bad: str) -> None:
    with pytest.raises(ValidationError) as err:
        Endpoint(bucket="orders", kms_key_arn=bad)
    text = str(err.value)
    assert "kms_key_arn" in text and "full KMS key ARN" in text and "describe-key" in text


def test_the_template_refuses_an_alias_for_the_source_key() -> None:
    import re

    from replmon.local.template import load_template
    from tests.conftest import TEMPLATE

    pattern = load_template(TEMPLATE)["Parameters"]["SourceKmsKeyArn"]["AllowedPattern"]
    assert re.match(pattern, KEY) and re.match(pattern, "") and not re.match(pattern, "alias/orders")


def test_the_verifier_compares_algorithm_and_type() -> None:
    full = HeadResult("COMPLETED", 3, '"a"', "v", "CRC64NVME/FULL_OBJECT:AAA=")
    assert same_content(full, HeadResult("REPLICA", 3, '"b"', "v", "CRC64NVME/FULL_OBJECT:AAA="), '"a"') == (True, "checksum:CRC64NVME/FULL_OBJECT")
    assert same_content(full, HeadResult("REPLICA", 3, '"b"', "v", "CRC64NVME/FULL_OBJECT:BBB="), '"a"')[0] is False
    # The same value under another type or algorithm is not a match: the kinds are not comparable.
    for other in ("CRC64NVME/COMPOSITE:AAA=", "CRC32/FULL_OBJECT:AAA="):
        ok, how = same_content(full, HeadResult("REPLICA", 3, '"a"', "v", other), '"a"')
        assert ok is False and "not comparable" in how, (other, how)


# ------------------------------------------------------------------------------ IAM: the prober's role and the bucket's policy
def kms_requests(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """The KMS permission each write needs: GenerateDataKey to create, Decrypt for parts."""
    need = {"PutObject": "kms:GenerateDataKey", "CreateMultipartUpload": "kms:GenerateDataKey",
            "UploadPart": "kms:Decrypt", "UploadPartCopy": "kms:Decrypt"}
    return sorted({(need[op], KEY) for op, _ in calls if op in need})


def test_upload_probes_role_may_use_that_key_and_no_other(s3: Any) -> None:
    calls = capture(s3)
    upload_probe(probe(40 * MiB + 123), S3ObjectStore(s3, kms_key_arn=KEY), ManualClock(), SMALL, rnd)
    wanted = kms_requests(calls)
    assert {a for a, _ in wanted} == {"kms:GenerateDataKey", "kms:Decrypt"}
    cfn = default_transformed()
    r = resolver(cfn, "existing")
    r.params["SourceKmsKeyArn"] = KEY
    policies = function_role_policies(cfn, "UploadProbe", r)
    other = KEY.replace("1234abcd", "99999999")
    # A KMS key is reached only if its key policy allows it: the default key policy delegates to IAM
    # ("Default key policy", AWS KMS developer guide); DEPLOY.md says what to add to one that does not.
    key_policy = {"Version": "2012-10-17", "Statement": [{"Sid": "Enable IAM User Permissions", "Effect": "Allow",
                                                          "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}, "Action": "kms:*", "Resource": "*"}]}
    batch = [{"id": f"{a} {k}", "principal": f"arn:aws:iam::{ACCOUNT}:role/UploadProbeRole", "action": a, "resource": k,
              "accountId": ACCOUNT, "context": {}, "identityPolicies": policies, "resourcePolicy": key_policy}
             for a, key in wanted for k in (key, other)]
    got = {k: v["result"] for k, v in simulate(batch).items()}
    assert all(got[f"{a} {KEY}"] == "Allowed" for a, _ in wanted), got
    assert all(got[f"{a} {other}"] != "Allowed" for a, _ in wanted), got
    assert MODES["existing"]["SourceKmsKeyArn"]  # the contract runs' existing mode has a source key too


def test_a_bucket_policy_requiring_the_key_admits_the_probes_puts(s3: Any) -> None:
    """AWS's two example bucket policies (require a key-id header; require this key) as the bucket's
    policy, evaluated for each object-creating call the probe made (with and without the key)."""
    calls = capture(s3)
    upload_probe(probe(20 * MiB), S3ObjectStore(s3, kms_key_arn=KEY), ManualClock(), SMALL, rnd)
    bucket_arn = f"arn:aws:s3:::{SRC}"
    policy = {"Version": "2012-10-17", "Statement": [
        {"Sid": "AllowRole", "Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:role/UploadProbeRole"},
         "Action": "s3:PutObject", "Resource": f"{bucket_arn}/*"},
        {"Sid": "DenyObjectsThatAreNotSSEKMS", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject",
         "Resource": f"{bucket_arn}/*", "Condition": {"Null": {"s3:x-amz-server-side-encryption-aws-kms-key-id": "true"}}},
        {"Sid": "DenyOtherKeys", "Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": f"{bucket_arn}/*",
         "Condition": {"ArnNotEqualsIfExists": {"s3:x-amz-server-side-encryption-aws-kms-key-id": KEY}}}]}
    batch = []
    for i, (op, params) in enumerate(c for c in calls if c[0] in ("PutObject", "CreateMultipartUpload")):
        ctx = {"s3:x-amz-server-side-encryption": params["ServerSideEncryption"],
               "s3:x-amz-server-side-encryption-aws-kms-key-id": params["SSEKMSKeyId"]}
        for label, context in (("with", ctx), ("without", {})):
            batch.append({"id": f"{i} {op} {label}", "principal": f"arn:aws:iam::{ACCOUNT}:role/UploadProbeRole", "action": "s3:PutObject",
                          "resource": f"{bucket_arn}/{params['Key']}", "accountId": ACCOUNT, "context": context, "resourcePolicy": policy})
    got = {k: v["result"] for k, v in simulate(batch).items()}
    assert got and all(v == "Allowed" for k, v in got.items() if k.endswith(" with")), got
    assert all(v != "Allowed" for k, v in got.items() if k.endswith(" without")), got
