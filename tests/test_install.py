"""`pip install replmon` (no extras) gives a working `replmon` for report, cost, routes, events,
presets and fio parse, without moto (and its cfn-lint, docker, sympy); the `local` extra adds moto
for `replmon probe` (the real state machine under moto's interpreter); the `lab` extra adds local
and the lab (its charts, the SQS server, knees). A command whose extra is missing names it and exits 2.

Two tests: one in `make test-fast` runs the commands with the extras' modules made unimportable
(fast, no network); one (`build`: it downloads from the package index) installs the built wheel
into a fresh venv without extras and runs the same commands there, offline.
"""

from __future__ import annotations

import email
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

#: What only the extras bring: moto (`replmon[local]`), the charts, knees, MinIO's admin client and
#: the lab's SQS server (`replmon[lab]`: moto[server] -> flask).
LAB_ONLY = ("matplotlib", "ruptures", "flask", "minio", "moto")
EVENT = ROOT / "events" / "s3" / "replication_missed_threshold.json"
OFFLINE = {"REPLMON_CACHE": "/nonexistent", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "NO_PROXY": "*", "PIP_NO_INDEX": "1"}

#: Blocks the lab extra's modules (an ImportError as if they were not installed).
BLOCKER = f"""
import importlib.abc, sys
class _LabOnly(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if any(name == b or name.startswith(b + ".") for b in {LAB_ONLY!r}):
            raise ModuleNotFoundError(f"No module named {{name!r}} (an extra)", name=name)
        return None
sys.meta_path.insert(0, _LabOnly())
"""

#: Runs each command of ``sys.argv[1]`` (JSON) through the console entry in one interpreter (one
#: start-up, not ten) and prints {command: exit code, or the exception that escaped}.
DRIVER = """
import contextlib, io, json, sys, traceback
import replmon.local.execution, replmon.local.template, replmon.wiring  # what every command's path imports
from replmon.cli import main
codes = {}
for args in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(args)
            code = "returned"
        except SystemExit as exc:
            code = exc.code
        except BaseException:
            code = traceback.format_exc()[-1500:]
    text = err.getvalue()
    codes[" ".join(args)] = code if "Traceback" not in text and "No module named" not in text else text[-1500:]
print(json.dumps(codes))
"""

#: (arguments, expected exit code): each command of a plain install, run offline.
COMMANDS: list[tuple[list[str], int]] = [
    (["--help"], 0),
    (["probe", "--help"], 0),
    (["report", "--help"], 0),
    (["routes", "--help"], 0),
    (["fio", "parse", "--help"], 0),
    (["cost", "--format", "json"], 0),
    (["presets", "--format", "json"], 0),
    (["events", "parse", str(EVENT)], 0),
    # report reaches the store (nothing listens on port 9): exit 3, one line, no ImportError
    (["report", "--route", "r", "--dynamodb-endpoint", "http://127.0.0.1:9", "--format", "json"], 3),
    # the commands that need an extra: exit 2, naming it (the next test checks the line)
    (["probe", "--source-bucket", "s", "--dest-bucket", "d", "--sizes", "1KiB"], 2),
    (["lab", "run"], 2),
]


def fio_output(tmp: Path) -> Path | None:
    fio = shutil.which("fio")
    if fio is None:
        return None
    out = subprocess.run([fio, f"--directory={tmp}", "--output-format=json", "--name=w", "--rw=write", "--bs=64k", "--size=1M"],
                         capture_output=True, text=True, timeout=120, check=True)
    (tmp / "fio.json").write_text(out.stdout)
    return tmp / "fio.json"


def check_commands(python: str, cwd: Path, prelude: str = "", extra_env: dict[str, str] | None = None) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}, **OFFLINE, **(extra_env or {})}
    commands = list(COMMANDS)
    fio = fio_output(cwd)
    if fio is not None:
        commands.append((["fio", "parse", str(fio), "--format", "json"], 0))
    r = subprocess.run([python, "-c", prelude + DRIVER, json.dumps([args for args, _ in commands])], capture_output=True, text=True,
                       timeout=300, cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.splitlines()[-1])
    assert got == {" ".join(args): code for args, code in commands}


def test_the_cli_needs_nothing_from_the_lab_extra(tmp_path: Path) -> None:
    """The commands of a plain install, with the lab extra's modules unimportable in this venv."""
    check_commands(sys.executable, tmp_path, BLOCKER, {"PYTHONPATH": str(ROOT / "src")})
    r = subprocess.run([sys.executable, "-c", BLOCKER + "import moto"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode != 0 and "(an extra)" in r.stderr  # the blocker does block


@pytest.mark.parametrize(("args", "extra", "module"), [
    (["probe", "--source-bucket", "s", "--dest-bucket", "d", "--sizes", "1KiB"], "local", "moto"),
    (["lab", "run"], "lab", "moto"),
    (["lab", "up"], "lab", "moto"),
])
def test_a_command_without_its_extra_names_it_and_exits_2(tmp_path: Path, args: list[str], extra: str, module: str) -> None:
    """`lab run` without the lab extra used to fail with "server exited with 1": now one line naming
    the extra, before any server starts or the store is reached."""
    code = f"from replmon.cli import main\nmain({args!r})"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}, **OFFLINE,
           "PYTHONPATH": str(ROOT / "src"), "REPLMON_LAB_DIR": str(tmp_path / "lab")}
    r = subprocess.run([sys.executable, "-c", BLOCKER + code], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"needs the {extra} extra" in r.stderr and f"pip install 'replmon[{extra}]'" in r.stderr and module in r.stderr, r.stderr
    assert not (tmp_path / "lab").exists()  # nothing started


def test_an_import_an_extra_brings_reached_unchecked_still_names_the_extra(tmp_path: Path) -> None:
    """The console entry's last guard: a ModuleNotFoundError of an extra's module (a path no command
    checked) is one line naming the extra, exit 2 - not exit 5 with a traceback log."""
    code = ("import sys, replmon.cli.app\na = sys.modules['replmon.cli.app']\n"
            "def boom(*args, **kwargs):\n    import ruptures  # noqa\n"
            "a.app = boom\n"
            "a.main(['fio', 'knee'])")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}, **OFFLINE,
           "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", BLOCKER + code], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "replmon fio knee needs the lab extra (ruptures not installed): pip install 'replmon[lab]'" in r.stderr, r.stderr


def test_report_charts_without_the_lab_extra_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    """A plain install's `report --charts` (matplotlib comes with the lab extra only)
    ends in one line naming the extra and exit 2 (a usage error), never a traceback, and before
    reaching the store (nothing listens on port 9)."""
    code = ("from replmon.cli import main\n"
            f"main(['report', '--route', 'r', '--charts', {str(tmp_path)!r}, '--dynamodb-endpoint', 'http://127.0.0.1:9'])")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON", "VIRTUAL_ENV"))}, **OFFLINE,
           "PYTHONPATH": str(ROOT / "src")}
    r = subprocess.run([sys.executable, "-c", BLOCKER + code], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--charts" in r.stderr and "pip install 'replmon[lab]'" in r.stderr and "matplotlib" in r.stderr


def wheel(out: Path) -> Path:
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    [built] = out.glob("replmon-*.whl")
    return built


def requirements(built: Path) -> dict[str, set[str]]:
    """Distribution names from the wheel's METADATA Requires-Dist, by extra ("" for the base install)."""
    import re

    with zipfile.ZipFile(built) as z:
        meta = email.message_from_bytes(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))))
    by_extra: dict[str, set[str]] = {}
    for req in meta.get_all("Requires-Dist") or []:
        name = re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()  # type: ignore[union-attr]
        extra = re.search(r"""extra == ["']([\w-]+)["']""", req)
        by_extra.setdefault(extra.group(1) if extra else "", set()).add(name)
    return by_extra


def test_the_wheels_base_install_leaves_moto_and_the_lab_to_extras(tmp_path: Path) -> None:
    """The wheel's metadata: a plain install pulls neither moto (with cfn-lint, docker, sympy) nor
    the lab's packages; `local` is moto; `lab` is local plus the lab's."""
    by_extra = requirements(wheel(tmp_path / "dist"))
    base = by_extra[""]
    assert base == {"aws-lambda-powertools", "aws-xray-sdk", "boto3", "typer", "rich", "pyyaml"}, base
    assert by_extra["local"] == {"moto"}
    assert {"replmon", "matplotlib", "minio", "moto", "ruptures"} == by_extra["lab"]


@pytest.mark.build
def test_the_built_wheel_without_extras_runs_the_cli_offline(tmp_path: Path) -> None:
    """Install the wheel into a fresh venv from the package index without extras (the only network
    use), then run every command of a plain install with the index switched off."""
    built = wheel(tmp_path / "dist")
    by_extra = requirements(built)
    assert "moto" not in by_extra[""] and {"matplotlib", "ruptures"} <= by_extra["lab"]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "-c", str(ROOT / "requirements.lock"), str(built)],  # CI's versions, no resolver backtracking
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    for module in ("matplotlib", "ruptures", "flask", "moto", "cfnlint", "docker", "sympy"):  # no extra came along
        assert not list((venv / "lib").glob(f"python3*/site-packages/{module}")), module
    check_commands(str(venv / "bin" / "python"), tmp_path)
    r = subprocess.run([str(venv / "bin" / "replmon"), "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, **OFFLINE})
    assert r.returncode == 0 and "probe" in r.stdout, r.stderr[-2000:]  # the console script itself


def pins(text: str) -> dict[str, str]:
    """``name==version`` pins of a requirements text or pyproject's quoted lists, by normalized name."""
    import re

    found = re.findall(r'^\s*"?([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([0-9][^",;\s#]*)', text, flags=re.MULTILINE)
    return {name.lower().replace("_", "-"): version for name, version in found}


def test_the_lock_agrees_with_every_pin_and_covers_every_dependency() -> None:
    """`make` installs with ``-c requirements.lock``: a pin the lock contradicts would make a fresh
    machine's install fail (or differ from CI's). Change a dependency, then `make lock`."""
    import tomllib

    lock = pins((ROOT / "requirements.lock").read_text())
    declared = {**pins((ROOT / "pyproject.toml").read_text()), **pins((ROOT / "requirements-dev.txt").read_text())}
    assert {n: v for n, v in declared.items() if lock.get(n) != v} == {}, "run `make lock`"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    import re

    wanted = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("_", "-")  # type: ignore[union-attr]
              for r in [*project["dependencies"], *(d for extra in project["optional-dependencies"].values() for d in extra)]}
    assert wanted - set(lock) - {"replmon"} == set(), "run `make lock`"  # replmon[local]: an extra of itself
