"""MinIO's admin API for the lab's set-up, without the mc binary (building mc cost a
fresh machine's `make demo` minutes of CPU).

- Users and policies: the ``minio`` package's ``MinioAdmin`` (user_add, policy_add, attach_policy).
- The source bucket's replication remote target: not in ``MinioAdmin``; one signed request,
  ``PUT /minio/admin/v3/set-remote-target?bucket=B`` whose body is the JSON BucketTarget
  (madmin-go's ``BucketTarget``) encrypted with the caller's secret key (``minio.crypto.encrypt``,
  the scheme madmin-go's ``EncryptData`` and MinIO's handler share); the answer is the target's
  ARN as a JSON string, which the replication rule names as its destination bucket. Relied on:
  admin API v3 of the MinIO pinned in scripts/lab-deps.sh (master of 2026-02-12), the same call
  ``mc replicate add`` makes (it refuses a bandwidth limit under 100 MB/s).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

ADMIN_PREFIX = "/minio/admin/v3"


def admin(url: str, keys: tuple[str, str]) -> Any:
    """A ``MinioAdmin`` for the server at ``url`` (http://host:port)."""
    from minio import MinioAdmin
    from minio.credentials.providers import StaticProvider

    u = urllib.parse.urlsplit(url)
    return MinioAdmin(endpoint=u.netloc, credentials=StaticProvider(*keys), secure=u.scheme == "https")


def remote_target(source_bucket: str, endpoint: str, keys: tuple[str, str], target_bucket: str, bandwidth: int) -> dict[str, Any]:
    """The BucketTarget ``mc replicate add --remote-bucket http://K:S@endpoint/target_bucket
    --bandwidth N`` sends: a replication target over plain HTTP, asynchronous, path lookup
    'auto', signature v4, health-checked every 60 s, ``bandwidth`` bytes/s."""
    return {
        "sourcebucket": source_bucket,
        "endpoint": endpoint,  # host:port
        "credentials": {"accessKey": keys[0], "secretKey": keys[1]},
        "targetbucket": target_bucket,
        "secure": False,
        "path": "auto",
        "api": "s3v4",
        "type": "replication",
        "bandwidthlimit": bandwidth,
        "replicationSync": False,
        "healthCheckDuration": 60 * 10**9,  # mc's --healthcheck-seconds default; Go's time.Duration: ns
        "disableProxy": False,
    }


def remote_target_body(target: dict[str, Any], secret_key: str) -> bytes:
    """The request body: the target's JSON, encrypted with the caller's secret key."""
    from minio.crypto import encrypt

    return encrypt(json.dumps(target).encode(), secret_key)


def _request(method: str, url: str, keys: tuple[str, str], path: str, query: dict[str, str], body: bytes = b"") -> bytes:
    """One SigV4-signed admin request (service s3, MinIO's default region); the response body."""
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    full = f"{url.rstrip('/')}{ADMIN_PREFIX}/{path}?{urllib.parse.urlencode(query)}"
    req = AWSRequest(method=method, url=full, data=body, headers={"Content-Type": "application/octet-stream"})
    S3SigV4Auth(Credentials(*keys), "s3", "us-east-1").add_auth(req)
    prepared = urllib.request.Request(full, data=body if method != "GET" else None, method=method, headers=dict(req.headers.items()))
    try:
        with urllib.request.urlopen(prepared, timeout=30) as resp:  # the lab's loopback server
            return bytes(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:300]
        raise RuntimeError(f"MinIO admin {path}: HTTP {exc.code}: {detail}") from None


def set_remote_target(url: str, keys: tuple[str, str], bucket: str, target: dict[str, Any]) -> str:
    """Register ``target`` on ``bucket`` of the server at ``url``; returns its ARN."""
    answer = _request("PUT", url, keys, "set-remote-target", {"bucket": bucket}, remote_target_body(target, keys[1]))
    arn = json.loads(answer)
    if not isinstance(arn, str) or not arn:
        raise RuntimeError(f"MinIO admin set-remote-target: no ARN in the answer {answer[:200]!r}")
    return arn


def list_remote_targets(url: str, keys: tuple[str, str], bucket: str) -> list[dict[str, Any]]:
    """The bucket's remote targets as MinIO stores them (its secret keys blanked by MinIO)."""
    answer = _request("GET", url, keys, "list-remote-targets", {"bucket": bucket, "type": "replication"})
    targets = json.loads(answer) or []
    return list(targets)
