"""Names are validated once, at the edge, with one pattern; every path built from a name
stays under its root (defence in depth behind the edge check)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replmon.adapters.spool import DirectorySpool
from replmon.core.names import NAME_RE, PathEscape, check_name, contained
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.local.template import load_template
from replmon.mounts.runner import DirSink
from replmon.mounts.targets import Target, TargetError
from tests.conftest import ROOT

BAD_NAMES = [".", "..", "a/b", "../x", "a\x00b", "-flag", "", "x" * 65, "a..b", "with space", "route#sig", "é"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_bad_name_is_refused_with_the_accepted_form(name: str) -> None:
    with pytest.raises(ValueError, match=r"1-64 letters, digits"):
        check_name(name)


def test_a_trailing_newline_is_refused_by_every_check() -> None:
    """Python's ``$`` also matches before a final newline ("re - Regular expression operations",
    https://docs.python.org/3/library/re.html: "$ Matches the end of the string or just before the
    newline at the end of the string"): every check matches the whole value. The AWS forms checked:
    "General purpose bucket naming rules" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html:
    lowercase letters, numbers, dots and hyphens only)."""
    from replmon.core import names

    with pytest.raises(ValueError, match=r"1-64 letters, digits"):
        check_name("primary\n")
    for check, good in [(names.check_bucket, "dr-source-bucket"), (names.check_region, "us-east-1"),
                        (names.check_endpoint_url, "http://127.0.0.1:9000"), (names.check_account, "123456789012"),
                        (names.check_role_arn, "arn:aws:iam::123456789012:role/r"),
                        (names.check_kms_key_arn, "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab")]:
        assert check(good) == good
        with pytest.raises(ValueError):
            check(good + "\n")


@pytest.mark.parametrize("name", ["primary", "use1-to-usw2", "r.1", "A_b-9", "x" * 64])
def test_good_names_pass(name: str) -> None:
    assert check_name(name) == name


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=70))
def test_any_name_the_pattern_accepts_stays_under_its_root(tmp_path_factory: pytest.TempPathFactory, name: str) -> None:
    """Property: whatever passes check_name, joined under a root, resolves under that root; and
    whatever contained() accepts has no '..', '/' or NUL."""
    root = tmp_path_factory.getbasetemp() / "root"
    try:
        check_name(name)
    except ValueError:
        return
    path = contained(root, name, "x.json")
    assert root.resolve() in path.parents
    assert "/" not in name and "\x00" not in name and ".." not in name


@pytest.mark.parametrize("parts", [("..",), (".",), ("a", ".."), ("a/../../b",), ("a\x00",), ("",)])
def test_contained_refuses_a_path_that_would_leave_its_root(tmp_path: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(PathEscape, match="would leave"):
        contained(tmp_path, *parts)


def test_contained_refuses_a_symbolic_link_out_of_its_root(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(PathEscape, match="symbolic link"):
        contained(tmp_path / "root", "link", "x.json")


def record(route: str) -> ProbeRecord:
    return ProbeRecord(route=route, probe_id="p", run_id="20261122T000000Z-x", planned_at=1.0, size_bytes=1, size_class="1B",
                       trial=1, status=ProbeStatus.COMPLETED)


@pytest.mark.parametrize("route", ["..", "."])
def test_the_spool_never_writes_outside_its_directory(tmp_path: Path, route: str) -> None:
    """The issue's silent loss: a route named '..' spooled its record outside the spool, where replay never looked."""
    spool = DirectorySpool(tmp_path / "spool")
    with pytest.raises(PathEscape):
        spool.spool(record(route))
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) == []


def test_a_spooled_record_is_replayed_from_where_it_was_written(tmp_path: Path) -> None:
    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(record("use1-to-usw2"))
    [(handle, back)] = list(spool.drain(10))
    assert back.route == "use1-to-usw2" and Path(handle).parent.parent == (tmp_path / "spool").resolve()
    assert oct(Path(handle).stat().st_mode & 0o777) == "0o600"


def test_a_spool_file_that_is_not_a_record_is_quarantined_not_replayed(tmp_path: Path) -> None:
    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(record("r"))
    (tmp_path / "spool" / "r" / "junk.json").write_text("{not json")
    assert [r.route for _, r in spool.drain(10)] == ["r"]
    assert spool.quarantined == ["r/junk.json: not JSON (Expecting property name enclosed in double quotes, line 1 column 2)"]
    assert (tmp_path / "spool" / "_quarantine" / "r" / "junk.json").exists()


@pytest.mark.parametrize("name", ["..", "a/b", "-x"])
def test_a_mount_target_name_is_checked(name: str) -> None:
    with pytest.raises(TargetError, match="name"):
        Target.from_json({"name": name, "kind": "local", "mount_point": "/tmp"})


def test_the_fio_result_sink_writes_under_its_root_only(tmp_path: Path) -> None:
    sink = DirSink(str(tmp_path / "results"))
    sink.put("t/burst-vs-baseline/run/fio/01.json", b"{}")
    assert (tmp_path / "results" / "t" / "burst-vs-baseline" / "run" / "fio" / "01.json").read_bytes() == b"{}"
    with pytest.raises(PathEscape):
        sink.put("../escaped.json", b"{}")
    assert not (tmp_path / "escaped.json").exists()


def test_the_template_accepts_the_same_route_names_as_the_code() -> None:
    """CloudFormation's AllowedPattern (Java regex) is the same pattern: a stack parameter the CLI
    would refuse cannot be deployed either."""
    pattern = load_template()["Parameters"]["RouteName"]["AllowedPattern"]
    assert pattern == NAME_RE.pattern


REPLMON = [sys.executable, "-m", "replmon.cli"]
LOCAL = ["--source-bucket", "src-bucket", "--dest-bucket", "dst-bucket", "--source-endpoint", "http://127.0.0.1:9",
         "--dest-endpoint", "http://127.0.0.1:9", "--dynamodb-endpoint", "http://127.0.0.1:9"]


@pytest.mark.parametrize(("args", "flag"), [(["probe", "--route", "..", *LOCAL], "--route"),
                                            (["report", "--route", "a/b", "--dynamodb-endpoint", "http://127.0.0.1:9"], "--route")])
def test_the_cli_refuses_a_bad_name_in_one_line_naming_the_flag(tmp_path: Path, args: list[str], flag: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"REPLMON_CACHE": "/nonexistent", "AWS_REGION": "us-east-1"}
    r = subprocess.run([*REPLMON, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}: must be 1-64 letters"), r.stderr
    assert list(tmp_path.iterdir()) == []

