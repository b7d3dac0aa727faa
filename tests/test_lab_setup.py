"""The lab's set-up: servers start with a minimal environment; the mount lab's
parts are installed on its first use, not by `make demo`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_a_lab_server_gets_a_minimal_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The shell's AWS and replmon secrets never reach a lab server (MinIO, DynamoDB
    Local, Toxiproxy)."""
    from replmon.lab.servers import server_env

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-the-shell")
    monkeypatch.setenv("REPLMON_SECRET_ACCESS_KEY", "from-the-shell")
    monkeypatch.setenv("GITHUB_TOKEN", "from-the-shell")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = server_env({"MINIO_ROOT_USER": "lab"}, tmp_path)
    assert env == {"PATH": "/usr/bin", "TMPDIR": str(tmp_path), "MINIO_ROOT_USER": "lab", **{k: os.environ[k] for k in
                   ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "JAVA_HOME") if k in os.environ}}


def test_the_mount_lab_installs_its_parts_on_first_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`make demo` no longer builds the mount lab; its first use does (the checkout's
    scripts/lab-deps.sh mounts), and a machine without the checkout gets the one-line fix."""
    from replmon.lab import mounts
    from replmon.lab.servers import LabError

    monkeypatch.setenv("REPLMON_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("REPLMON_MOUNTPOINT_BIN", raising=False)
    fake = tmp_path / "lab-deps.sh"  # what the real script's `mounts` leaves behind, and its argument
    fake.write_text('[ "$1" = mounts ] || exit 2\nbin="$REPLMON_CACHE/cargo-target/release"\nmkdir -p "$bin"\n'
                    'printf "#!/bin/sh\\n" > "$bin/replmon-mountpoint"\nchmod +x "$bin/replmon-mountpoint"\n')
    monkeypatch.setattr(mounts, "LAB_DEPS", fake)
    assert mounts.mountpoint_binary() == tmp_path / "cache" / "cargo-target" / "release" / "replmon-mountpoint"
    (tmp_path / "cache" / "cargo-target" / "release" / "replmon-mountpoint").unlink()
    monkeypatch.setattr(mounts, "LAB_DEPS", tmp_path / "absent.sh")
    with pytest.raises(LabError, match="run `make lab-deps`"):
        mounts.mountpoint_binary()


def test_the_remote_target_request_is_what_mc_replicate_add_sends(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab sets the source's replication target without mc, with one signed
    ``PUT /minio/admin/v3/set-remote-target?bucket=B`` whose body is madmin-go's BucketTarget JSON
    encrypted with the caller's secret key (madmin-go EncryptData; minio.crypto decrypts it back),
    and takes the ARN MinIO answers as a JSON string. The lab tests check the rule it feeds on a
    real MinIO; this checks the request's shape without a server."""
    import hashlib
    import io
    import json
    import urllib.request
    from typing import Any, cast

    from minio.crypto import decrypt

    from replmon.lab import minio_admin

    sent: list[urllib.request.Request] = []

    class Answer(io.BytesIO):
        def __enter__(self) -> Answer:
            return self

        def __exit__(self, *exc: object) -> None:
            self.close()

    def urlopen(req: urllib.request.Request, timeout: float) -> Answer:
        sent.append(req)
        return Answer(b'"arn:minio:replication::abc:probe-replica"')

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    keys = ("replmon-admin", "s3cr3t-for-the-test")
    target = minio_admin.remote_target("probe-source", "127.0.0.1:9001", keys, "probe-replica", 100 * 2**20)
    arn = minio_admin.set_remote_target("http://127.0.0.1:9000", keys, "probe-source", target)

    assert arn == "arn:minio:replication::abc:probe-replica"
    (req,) = sent
    assert (req.get_method(), req.full_url) == ("PUT", "http://127.0.0.1:9000/minio/admin/v3/set-remote-target?bucket=probe-source")
    headers = {k.lower(): v for k, v in req.header_items()}
    body = cast(bytes, req.data)
    assert headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=replmon-admin/")
    assert "/us-east-1/s3/aws4_request" in headers["authorization"]
    assert headers["x-amz-content-sha256"] == hashlib.sha256(body).hexdigest()  # the body is signed
    assert keys[1].encode() not in body and b"probe-replica" not in body  # encrypted, secret included
    from urllib3 import HTTPResponse

    plain: dict[str, Any] = json.loads(decrypt(HTTPResponse(io.BytesIO(body), preload_content=False), keys[1]))
    assert plain == {
        "sourcebucket": "probe-source", "endpoint": "127.0.0.1:9001", "targetbucket": "probe-replica",
        "credentials": {"accessKey": "replmon-admin", "secretKey": "s3cr3t-for-the-test"},
        "secure": False, "path": "auto", "api": "s3v4", "type": "replication",
        "bandwidthlimit": 104857600,  # bytes/s: MinIO refuses under 100 MB/s
        "replicationSync": False, "healthCheckDuration": 60_000_000_000, "disableProxy": False,
    }
