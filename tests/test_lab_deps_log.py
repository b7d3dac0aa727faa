"""`make demo`'s output starts with its answer: scripts/lab-deps.sh keeps a build's own output (Go's
hundreds of `go: downloading` lines) in a log under the cache, names it on one line, and shows its
tail only when the build fails. A fake `go` stands in for the real one (no network, no build)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import ROOT

FAKE_GO = """#!/usr/bin/env bash
# install <module>@<version>: 300 lines of chatter, then the binary named after the module's last part
for i in $(seq 1 300); do echo "go: downloading example.com/dep$i v1.0.$i" >&2; done
[ -n "${FAKE_GO_FAIL:-}" ] && { echo "go: build failed: something specific" >&2; exit 1; }
mod=${2%@*}; name=${mod##*/}
printf '#!/bin/sh\\n' > "$GOBIN/$name"; chmod +x "$GOBIN/$name"
"""


def run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "fakebin"
    fake.mkdir(exist_ok=True)
    (fake / "go").write_text(FAKE_GO)
    (fake / "go").chmod(0o755)
    return subprocess.run(["bash", str(ROOT / "scripts" / "lab-deps.sh"), "toxiproxy"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "REPLMON_CACHE": str(tmp_path / "cache"), **env})


def test_a_build_s_chatter_goes_to_a_log_it_names(tmp_path: Path) -> None:
    r = run(tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    log = tmp_path / "cache" / "logs" / "go-install-toxiproxy-server.log"
    assert "go: downloading" not in r.stderr and len(r.stderr.splitlines()) == 2, r.stderr
    assert str(log) in r.stderr
    assert log.read_text().count("go: downloading") == 300
    assert r.stdout.strip() == str(tmp_path / "cache")  # the cache directory, as before
    assert (tmp_path / "cache" / "bin" / "toxiproxy-server").exists()
    again = run(tmp_path)  # built: nothing on stderr at all
    assert again.returncode == 0 and again.stderr == ""


def test_a_failed_build_shows_the_log_s_tail_and_fails(tmp_path: Path) -> None:
    r = run(tmp_path, FAKE_GO_FAIL="1")
    assert r.returncode != 0
    assert "toxiproxy-server failed" in r.stderr and "go: build failed: something specific" in r.stderr
    assert len(r.stderr.splitlines()) < 40  # the tail, not the 300 lines
