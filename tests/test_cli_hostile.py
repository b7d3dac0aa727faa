"""Inputs checked at the edge, and stdout that holds one JSON document: every path flag a directory
(or a file path whose directory) replmon can write in, or exit 2; a damaged DynamoDB Local file
named before any server starts; `--format json` in failure paths prints one document or nothing,
and no log line ever reaches stdout (tests/test_hostile_inputs.py: payloads, routes files, lab
state files and the catch-all)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replmon.cli.common import CliError, check_output_file
from replmon.cli.exitcodes import COMMANDS
from replmon.lab.lab import MARKER
from replmon.lab.servers import DDB_LOCAL_FILE, SQLITE_HEADER, LabError, check_dynamodb_data
from tests.conftest import ROOT
from tests.test_cli import AWS_LESS, cli
from tests.test_hostile_inputs import PAYLOAD, one_error_line

E = "http://127.0.0.1:9"  # nothing listens: connection refused at once


def _json_or_nothing(stdout: str) -> None:
    """All of stdout is one JSON document, or stdout is empty."""
    if stdout.strip():
        json.loads(stdout)


@pytest.mark.parametrize(("command", "args"), [
    ("probe", ["probe", "--source-bucket", "src-bucket", "--dest-bucket", "dst-bucket", "--source-endpoint", E, "--dest-endpoint", E,
               "--dynamodb-endpoint", E, "--spool-dir", "{tmp}/spool"]),
    ("probe", ["probe", "--source-bucket", "src-bucket", "--dest-bucket", "dst-bucket", "--source-endpoint", E, "--dest-endpoint", E,
               "--dynamodb-endpoint", E, "--spool-dir", "{tmp}/file"]),
    ("report", ["report", "--route", "r", "--dynamodb-endpoint", E]),
    ("report", ["report", "--route", "r", "--dynamodb-endpoint", E, "--charts", "{tmp}/file"]),
    ("routes", ["routes", "--source-bucket", "src-bucket", "--source-endpoint", E]),
    ("preflight", ["preflight", "--source-bucket", "src-bucket", "--source-endpoint", E, "--dest-endpoint", E]),
    ("events parse", ["events", "parse", "{tmp}/bad"]),
    ("events parse", ["events", "parse", "{tmp}/payload.json", "--routes-file", "{tmp}/bad"]),
    ("events parse", ["events", "parse", "{tmp}"]),
    ("fio parse", ["fio", "parse", "{tmp}/bad"]),
    ("fio targets", ["fio", "targets", "{tmp}/missing"]),
    ("spool list", ["spool", "list", "--spool-dir", "{tmp}/file"]),
    ("lab up", ["lab", "up", "--dir", "{tmp}/file"]),
    ("lab preflight", ["lab", "preflight", "--dir", "{tmp}/nolab"]),
], ids=["probe-unreachable", "probe-spool-file", "report-unreachable", "report-charts-file", "routes-unreachable", "preflight-unreachable",
        "events-not-utf8", "events-routes-not-utf8", "events-a-directory", "fio-parse-not-text", "fio-targets-missing", "spool-list-file",
        "lab-up-file", "lab-preflight-no-lab"])
def test_json_in_a_failure_path_is_one_document_or_nothing(tmp_path: Path, command: str, args: list[str]) -> None:
    (tmp_path / "file").write_text("not a directory")
    (tmp_path / "bad").write_bytes(b"\xff\xfe{")
    (tmp_path / "payload.json").write_text(PAYLOAD)
    r = cli(*[a.format(tmp=tmp_path) for a in args], "--format", "json")
    assert r.returncode != 0 and r.returncode in COMMANDS[command], (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    _json_or_nothing(r.stdout)
    if not r.stdout.strip():
        one_error_line(r.stderr)  # no document: then one line says why


def test_a_log_line_while_a_command_runs_goes_to_stderr_never_before_the_json() -> None:
    """The handlers' Powertools logger writes to stdout only in Lambda (its default there). Imported by
    any command (a local run, `report --fleet`...), it writes to stderr: a real process, as a
    shell pipes it, so the stream the logger holds is the process's own."""
    script = (
        "import logging, sys\n"
        "import replmon.entry.runtime  # the handlers' logger, as a local run imports it\n"
        "import replmon.signals.event_ingest as ingest\n"
        "real = ingest.plan_ingest\n"
        "def noisy(*a, **k):\n"
        "    logging.getLogger('replmon').error('a log line while the command runs')\n"
        "    return real(*a, **k)\n"
        "ingest.plan_ingest = noisy\n"
        "from replmon.cli import main\n"
        "main(['events', 'parse', '-', '--format', 'json'])\n")
    r = subprocess.run([sys.executable, "-c", script], input=PAYLOAD, capture_output=True, text=True, timeout=120, cwd=ROOT, env=AWS_LESS)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["command"] == "events parse"  # all of stdout: one document
    assert "a log line while the command runs" in r.stderr


def test_in_lambda_the_handlers_logs_keep_powertools_default_stream() -> None:
    """AWS_LAMBDA_FUNCTION_NAME is set by Lambda in every function's environment (reserved variable:
    https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html); there the logs stay on
    stdout, Powertools' default, which Lambda sends to CloudWatch Logs."""
    script = "from replmon.entry.runtime import logger\nlogger.error('in lambda')\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={**AWS_LESS, "AWS_LAMBDA_FUNCTION_NAME": "replmon-Probe"})
    assert "in lambda" in r.stdout and "in lambda" not in r.stderr


# ------------------------------------------------------------------ files replmon writes
def test_an_output_file_flag_is_a_file_path_whose_directory_takes_a_file(tmp_path: Path) -> None:
    check_output_file(tmp_path / "report.md", "--output")
    check_output_file(None, "--output")
    for path, says in ((tmp_path, "is a directory; give a file path"), (tmp_path / "no" / "x.md", "does not exist"),
                       (Path("/proc/self/x.md"), "not writable|cannot write in")):
        with pytest.raises(CliError) as caught:
            check_output_file(path, "--output")
        assert caught.value.code == 2 and str(caught.value).startswith("--output: ")
        assert re.search(says, str(caught.value)), str(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == []  # the check's file is removed


def test_lab_fio_markdown_is_checked_before_the_lab_starts(tmp_path: Path) -> None:
    r = cli("lab", "fio", "--dir", str(tmp_path / "lab"), "--markdown", str(tmp_path / "no" / "LAB.md"))
    assert r.returncode == 2 and "--markdown: directory" in one_error_line(r.stderr)
    assert not (tmp_path / "lab").exists()


def test_lab_fio_credits_whose_baseline_is_not_below_the_burst_are_refused_before_the_lab_starts(tmp_path: Path) -> None:
    """mountpoint-credits earns its credits at --throttle-mibps and spends them above it: a baseline
    at or over the burst is no credit model (replmon.lab.credits.BurstCredits refuses it)."""
    r = cli("lab", "fio", "--preset", "burst-write", "--mount", "mountpoint-credits", "--burst-mibps", "5", "--throttle-mibps", "5",
            "--dir", str(tmp_path / "lab"))
    assert r.returncode == 2 and "--throttle-mibps 5: " in one_error_line(r.stderr) and "below --burst-mibps (5)" in r.stderr
    assert not (tmp_path / "lab").exists()


def test_bench_mounts_dir_that_is_a_file_is_usage(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    r = cli("lab", "bench-mounts", "--dir", str(tmp_path / "file"), "--output", str(tmp_path / "B.md"))
    assert r.returncode == 2 and "--dir: " in one_error_line(r.stderr) and "is a file" in r.stderr


def test_bench_ingest_never_empties_a_directory_it_did_not_make(tmp_path: Path) -> None:
    """It emptied its --dir whatever it held (`--dir ~` would have been a loss); now it claims the
    directory as every lab command does, and empties only its own dynamodb/ folder."""
    (tmp_path / "mine.txt").write_text("keep me")
    r = cli("lab", "bench-ingest", "--dir", str(tmp_path), "--output", str(tmp_path / "B.md"))
    assert r.returncode == 2 and "not made by `replmon lab`" in one_error_line(r.stderr)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


# ------------------------------------------------------------------ DynamoDB Local's database file
def _lab_with_db(tmp_path: Path, content: bytes) -> Path:
    root = tmp_path / "lab"
    (root / "dynamodb").mkdir(parents=True)
    (root / MARKER).write_text("{}")
    (root / "dynamodb" / DDB_LOCAL_FILE).write_bytes(content)
    return root


@pytest.mark.parametrize("command", [["lab", "run"], ["lab", "up"]])
def test_a_corrupt_dynamodb_local_file_is_named_before_any_server_starts(tmp_path: Path, command: list[str]) -> None:
    root = _lab_with_db(tmp_path, b"\x00garbage where a database was" * 10)
    r = cli(*command, "--dir", str(root))
    line = one_error_line(r.stderr)
    assert r.returncode == 2, r.stderr
    assert f"{root / 'dynamodb' / DDB_LOCAL_FILE} is not a SQLite database" in line and f"move {root / 'dynamodb'} away" in line
    assert not (root / "servers.json").exists() and not (root / "logs").exists()  # nothing started


def test_a_real_sqlite_file_and_an_empty_one_are_dynamodb_local_data(tmp_path: Path) -> None:
    """The SQLite file format begins with "SQLite format 3\\0" (https://www.sqlite.org/fileformat.html,
    "The Database Header"); with -sharedDb DynamoDB Local keeps its tables in shared-local-instance.db
    (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/DynamoDBLocal.UsageNotes.html)."""
    data = tmp_path / "dynamodb"
    data.mkdir()
    check_dynamodb_data(data)  # none yet: a new lab
    (data / DDB_LOCAL_FILE).write_bytes(b"")
    check_dynamodb_data(data)  # an empty file is an empty database to SQLite
    (data / DDB_LOCAL_FILE).unlink()
    with sqlite3.connect(data / DDB_LOCAL_FILE) as db:
        db.execute("create table t (x)")
    db.close()
    check_dynamodb_data(data)
    assert (data / DDB_LOCAL_FILE).read_bytes().startswith(SQLITE_HEADER)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=64) | st.binary(max_size=48).map(lambda b: SQLITE_HEADER + b))
def test_any_bytes_as_dynamodb_local_data_pass_or_are_named(tmp_path_factory: pytest.TempPathFactory, content: bytes) -> None:
    data = tmp_path_factory.mktemp("lab") / "dynamodb"
    data.mkdir()
    (data / DDB_LOCAL_FILE).write_bytes(content)
    try:
        check_dynamodb_data(data)
    except LabError as exc:
        assert str(exc).startswith(f"--dir {data.parent}: ") and "\n" not in str(exc)  # exit 2, one line
        assert content and not content.startswith(SQLITE_HEADER)
    else:
        assert not content or content.startswith(SQLITE_HEADER)


def test_the_crash_log_directory_is_where_the_docs_say(tmp_path: Path) -> None:
    from replmon.cli.app import crash_log_dir

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_STATE_HOME", str(tmp_path))
        assert crash_log_dir() == tmp_path / "replmon" / "logs"
        mp.delenv("XDG_STATE_HOME")
        assert crash_log_dir() == Path.home() / ".local" / "state" / "replmon" / "logs"
    docs = (ROOT / "docs" / "CLI.md").read_text()
    assert "$XDG_STATE_HOME/replmon/logs/replmon-error-" in docs and "~/.local/state/replmon/logs/" in docs


# ------------------------------------------------------------------ the lab's other state files
def _up_lab(root: Path) -> Path:
    """A lab that is up as far as its state file says: this process stands in for its supervisor."""
    from replmon.lab import session
    from replmon.lab.servers import _start_ticks

    root.mkdir(exist_ok=True)
    (root / MARKER).write_text("{}")
    (root / session.STATE).write_text(json.dumps({"pid": os.getpid(), "start_ticks": _start_ticks(os.getpid()), "bandwidth": "100MiB",
                                                  "endpoints": {"source": E, "destination": E, "dynamodb": E, "access_key_id": "k"}}))
    return root


def test_a_damaged_lab_secret_is_one_line_for_lab_preflight(tmp_path: Path) -> None:
    """lab.secret not the secret: named, exit 3, before any endpoint is contacted."""
    from replmon.lab import session

    root = _up_lab(tmp_path / "lab")
    for content in (b"\xff\xfe", b"", b"two words\n"):
        (root / session.SECRET).write_bytes(content)
        r = cli("lab", "preflight", "--dir", str(root))
        assert r.returncode == 3 and f"the lab's secret ({root / session.SECRET}) is damaged" in one_error_line(r.stderr)


def test_a_lock_file_of_any_bytes_held_by_another_lab_names_it(tmp_path: Path) -> None:
    import fcntl

    from replmon.lab.lab import claim_directory

    root = tmp_path / "lab"
    root.mkdir()
    (root / MARKER).write_text("{}")
    (root / ".lock").write_bytes(b"\xff\xfe\x00")
    with (root / ".lock").open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another lab holds the directory
        with pytest.raises(LabError, match=r"--dir .* is in use by another replmon lab \(pid .*\); wait for it"):
            claim_directory(root)


@pytest.mark.parametrize(("content", "says"), [
    (b"\xff# report", "is not UTF-8 text"),
    (b"# r\n<!-- lab-fio:mountpoint-xregion:start -->\ncut here", "without <!-- lab-fio:mountpoint-xregion:end --> after it"),
], ids=["not-utf8", "section-cut"])
def test_lab_fio_markdown_it_could_not_rewrite_is_refused_before_the_run(tmp_path: Path, content: bytes, says: str) -> None:
    (tmp_path / "LAB.md").write_bytes(content)
    r = cli("lab", "fio", "--dir", str(tmp_path / "lab"), "--markdown", str(tmp_path / "LAB.md"))
    assert r.returncode == 2 and says in one_error_line(r.stderr) and not (tmp_path / "lab").exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=40) | st.text(alphabet="abcXYZ019-_", min_size=1, max_size=40).map(str.encode))
def test_any_bytes_as_the_lab_secret(tmp_path_factory: pytest.TempPathFactory, content: bytes) -> None:
    """lab preflight reads lab.secret: any bytes end in its documented code 3 (damaged, or the lab's
    endpoints unreachable here) with no traceback."""
    from replmon.lab import session

    root = _up_lab(tmp_path_factory.mktemp("lab") / "lab")
    (root / session.SECRET).write_bytes(content)
    r = cli("lab", "preflight", "--dir", str(root), "--format", "json")
    assert r.returncode == 3 and "Traceback" not in r.stderr, r.stderr
    _json_or_nothing(r.stdout)


def test_lab_down_with_a_damaged_state_file_and_a_lab_still_running_says_which_pid(tmp_path: Path) -> None:
    """`lab down` stops only what lab-up.json names; damaged, it names nothing, and the lab that holds
    the directory (its pid in .lock) is said with the way to stop it: exit 3, never "no lab was up"."""
    import fcntl

    from replmon.lab import session

    root = tmp_path / "lab"
    root.mkdir()
    (root / MARKER).write_text("{}")
    (root / session.STATE).write_bytes(b'{"pid": 12')  # cut by a full disk
    with (root / ".lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        r = cli("lab", "down", "--dir", str(root))
    line = one_error_line(r.stderr)
    assert r.returncode == 3 and f"{root / session.STATE} damaged" in line and "(pid 4242)" in line and "kill 4242" in line
    assert r.stdout == ""


def test_lab_up_on_a_directory_another_lab_holds_touches_nothing(tmp_path: Path) -> None:
    import fcntl

    from replmon.lab import session

    root = tmp_path / "lab"
    root.mkdir()
    (root / MARKER).write_text("{}")
    (root / session.SECRET).write_text("the running lab's\n")
    with (root / ".lock").open("a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        r = cli("lab", "up", "--dir", str(root), "--format", "json")
    assert r.returncode == 2 and "is in use by another replmon lab (pid 4242)" in one_error_line(r.stderr) and r.stdout == ""
    assert (root / session.SECRET).read_text() == "the running lab's\n" and not (root / "logs").exists()


# ------------------------------------------------------------------ what nothing else named
@pytest.mark.parametrize(("module", "args"), [
    ("replmon.cli.probe", ["presets"]),
    ("replmon.cli.cost", ["cost", "--sizes", "1MiB"]),
    ("replmon.cli.fio", ["fio", "presets"]),
    ("replmon.cli.events", ["events", "parse", "{tmp}/payload.json"]),
], ids=["presets", "cost", "fio-presets", "events-parse"])
def test_an_error_no_command_named_is_exit_5_in_every_command(tmp_path: Path, module: str, args: list[str]) -> None:
    """cli/app.main's catch-all, whatever the command: one line with the log's path, exit 5, never 1."""
    from unittest import mock

    (tmp_path / "payload.json").write_text(PAYLOAD)

    def broken(*a: object, **k: object) -> None:
        raise ZeroDivisionError("a bug nothing named")

    with mock.patch(f"{module}.emit", broken):
        r = cli(*[a.format(tmp=tmp_path) for a in args], "--format", "json", env={**AWS_LESS, "XDG_STATE_HOME": str(tmp_path / "state")})
    line = one_error_line(r.stderr)
    assert r.returncode == 5 and "ZeroDivisionError: a bug nothing named" in line and r.stdout == ""
    log = Path(line.rsplit("the traceback is in ", 1)[1])
    assert log.parent == tmp_path / "state" / "replmon" / "logs"
    assert "ZeroDivisionError" in log.read_text() and "Traceback (most recent call last)" in log.read_text()


def test_the_crash_log_falls_back_to_the_temporary_directory(tmp_path: Path) -> None:
    import tempfile
    from unittest import mock

    def broken(*a: object, **k: object) -> None:
        raise ZeroDivisionError("a bug nothing named")

    with mock.patch("replmon.cli.probe.emit", broken):
        r = cli("presets", env={**AWS_LESS, "XDG_STATE_HOME": "/proc/replmon-cannot-write"})
    line = one_error_line(r.stderr)
    log = Path(line.rsplit("the traceback is in ", 1)[1])
    try:
        assert r.returncode == 5 and log.parent == Path(tempfile.gettempdir()) and "ZeroDivisionError" in log.read_text()
    finally:
        log.unlink(missing_ok=True)


@pytest.mark.parametrize("args", [["/dev/zero"], ["{tmp}/payload.json", "--routes-file", "/dev/zero"]], ids=["payload", "routes-file"])
def test_events_parse_reads_no_endless_file(tmp_path: Path, args: list[str]) -> None:
    """At most 64 MiB: ten times the 6 MB Lambda delivers in one synchronous invocation
    (https://docs.aws.amazon.com/lambda/latest/dg/API_Invoke.html)."""
    (tmp_path / "payload.json").write_text(PAYLOAD)
    r = cli("events", "parse", *[a.format(tmp=tmp_path) for a in args])
    assert r.returncode == 2 and "larger than 64 MiB" in one_error_line(r.stderr) and "/dev/zero" in r.stderr


@pytest.mark.parametrize("command", [["fio", "parse"], ["fio", "targets"], ["fio", "knee"]])
def test_fio_reads_no_endless_file(command: list[str]) -> None:
    r = cli(*command, "/dev/zero")
    assert r.returncode == 2 and "/dev/zero: larger than 256 MiB" in one_error_line(r.stderr)
