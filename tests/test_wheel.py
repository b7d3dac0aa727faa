"""replmon works from an installed wheel, not only from a checkout: the state machine, template
and handler mapping ship as package data. Installed into a fresh venv outside the repository
(its dependencies from the package index), then run against the lab pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from replmon.lab.lab import Lab
from tests.conftest import ROOT

pytestmark = [pytest.mark.lab, pytest.mark.build]  # build: it installs the wheel's dependencies from the package index


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(work / "dist"), str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    [wheel] = (work / "dist").glob("replmon-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("replmon/local/statemachines/replication_probe.asl.json", "replmon/local/template.yaml", "replmon/core/defaults.json",
                   "replmon/probe/ladders.json", "replmon/cost/pricing.json", "replmon/entry/poll_replication.py", "replmon/lab/LoopbackDynamoDB.java"):
        assert needed in names, needed
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", f"{wheel}[lab]"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    yield venv


def run(venv: Path, *args: str, cwd: Path, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}, **(extra_env or {})}
    return subprocess.run([str(venv / "bin" / "replmon"), *args], capture_output=True, text=True, timeout=600, cwd=cwd, env=env)


def test_the_installed_cli_probes_the_lab_pair(installed: Path, tmp_path: Path) -> None:
    help_ = run(installed, "probe", "--help", cwd=tmp_path)
    assert help_.returncode == 0 and "--source-bucket" in help_.stdout
    # The installed package, not the checkout, is what runs.
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import replmon, sys; print(replmon.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert str(installed) in where.stdout and str(ROOT) not in where.stdout
    with Lab(tmp_path / "lab") as lab:
        r = run(installed, "probe", "--route", "wheel", "--source-bucket", "probe-source", "--dest-bucket", "probe-replica",
                "--source-endpoint", lab.servers["source"].url, "--dest-endpoint", lab.servers["destination"].url,
                "--dynamodb-endpoint", lab.servers["dynamodb"].url, "--sizes", "1MiB", "--format", "json", cwd=tmp_path,
                extra_env={"REPLMON_ACCESS_KEY_ID": lab.keys[0], "REPLMON_SECRET_ACCESS_KEY": lab.keys[1]})
        assert r.returncode == 0, r.stderr[-3000:]
        records = json.loads(r.stdout)["records"]
        assert [x["status"] for x in records] == ["COMPLETED"]
        assert lab.leftovers() == {"source": [], "destination": []}
