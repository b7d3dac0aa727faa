"""The lab's set-up (issues 22.6, 22.10): servers start with a minimal environment; the mount lab's
parts are installed on its first use, not by `make demo`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def test_a_lab_server_gets_a_minimal_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 22.10: the shell's AWS and replmon secrets never reach a lab server (MinIO, DynamoDB
    Local, Toxiproxy, mc)."""
    from replmon.lab.servers import server_env

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "from-the-shell")
    monkeypatch.setenv("REPLMON_SECRET_ACCESS_KEY", "from-the-shell")
    monkeypatch.setenv("GITHUB_TOKEN", "from-the-shell")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = server_env({"MINIO_ROOT_USER": "lab"}, tmp_path)
    assert env == {"PATH": "/usr/bin", "TMPDIR": str(tmp_path), "MINIO_ROOT_USER": "lab", **{k: os.environ[k] for k in
                   ("HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "JAVA_HOME") if k in os.environ}}


def test_the_mount_lab_installs_its_parts_on_first_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Issue 22.6: `make demo` no longer builds the mount lab; its first use does (the checkout's
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
