"""Hostile inputs get their documented exit code and one clear line, never a traceback (and never
exit 1, which a gate script reads as late replication, unless the command's table says so):
`events parse` payloads, `--routes-file`, every lab state file, lab folders that are files, a
--spool-dir that cannot take a record, and whatever nothing else named (cli/app.main: exit 5 and
the path of a log holding the traceback)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replmon.lab import session
from replmon.lab.lab import FOLDERS, MARKER, claim_directory
from replmon.lab.servers import Pidfile
from tests.test_cli import cli

PAYLOAD = json.dumps({"Records": [{"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": "us-east-1", "eventName": "ObjectCreated:Put",
                                   "eventTime": "2026-11-26T00:00:00.000Z",
                                   "s3": {"bucket": {"name": "dst-bucket"}, "object": {"key": "k", "size": 1, "sequencer": "0A"}}}]})
DEEP = "[" * 200_000 + "]" * 200_000
ROUTE = {"name": "r", "source": {"bucket": "src-bucket"}, "destinations": [{"bucket": "dst-bucket"}]}


def one_error_line(stderr: str) -> str:
    """The one line a failing command prints: 'error: ...', and no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize(("content", "code", "says"), [
    (DEEP.encode(), 2, "nested too deep"),
    (b"\xff\xfe{\"Records\": []}", 2, "not UTF-8"),
    (b"{not json", 2, "not JSON"),
], ids=["200k-deep", "not-utf8", "not-json"])
def test_events_parse_refuses_a_payload_in_one_line(tmp_path: Path, content: bytes, code: int, says: str) -> None:
    """A file that is not JSON text is a usage error (2), never 1: exit 1 for `events parse` is "a
    record failed to parse (IngestEvents would retry it)" (cli/exitcodes.py), and this file holds none."""
    (tmp_path / "p.json").write_bytes(content)
    r = cli("events", "parse", str(tmp_path / "p.json"))
    assert r.returncode == code and says in one_error_line(r.stderr)


@pytest.mark.parametrize(("content", "says"), [
    (b'{"routes": 5}', '"routes" is a JSON int'),
    (b'"routes"', "is a JSON str"),
    (DEEP.encode(), "nested too deep"),
    (b"\xff", "not UTF-8"),
    (b'{"routes": [{"name": "r"}]}', "source"),
], ids=["routes-5", "a-string", "200k-deep", "not-utf8", "no-source"])
def test_a_routes_file_that_is_not_routes_is_a_usage_error(tmp_path: Path, content: bytes, says: str) -> None:
    (tmp_path / "p.json").write_text(PAYLOAD)
    (tmp_path / "routes.json").write_bytes(content)
    r = cli("events", "parse", str(tmp_path / "p.json"), "--routes-file", str(tmp_path / "routes.json"))
    assert r.returncode == 2 and says in one_error_line(r.stderr)


@pytest.mark.parametrize("folder", ["tmp", "logs", "dynamodb", "spool", "runs"])
@pytest.mark.parametrize("command", [["lab", "run"], ["lab", "up"]])
def test_a_lab_folder_that_is_a_file_is_named_before_anything_starts(tmp_path: Path, folder: str, command: list[str]) -> None:
    root = tmp_path / "lab"
    root.mkdir()
    (root / MARKER).write_text("{}")
    (root / folder).write_text("not a folder")
    r = cli(*command, "--dir", str(root))
    line = one_error_line(r.stderr)
    assert r.returncode == 2 and f"{root / folder} is a file where the lab keeps its {folder} folder" in line
    assert sorted(p.name for p in root.iterdir()) == sorted([MARKER, folder])  # nothing started, nothing written


@pytest.mark.parametrize("name", ["servers.json", "lab-up.json"])
@pytest.mark.parametrize("content", [b"", b"{", b"5", b"[1, 2]", b'[{"pid": "x"}]', b'{"pid": 1, "endpoints": 3}', b"\xff\xfe",
                                     DEEP.encode(), b'[{"pid": 1, "start_ticks": 1, "name": "init"}]'],
                         ids=["empty", "cut", "number", "list", "pid-text", "pid-1", "not-utf8", "200k-deep", "init"])
def test_a_damaged_lab_state_file_is_no_traceback(tmp_path: Path, name: str, content: bytes) -> None:
    root = tmp_path / "lab"
    root.mkdir()
    (root / MARKER).write_text("{}")
    (root / name).write_bytes(content)
    r = cli("lab", "down", "--dir", str(root))
    assert r.returncode == 0 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"no lab was up in {root} ({name} damaged, naming no process: ignored)"  # named, in one line


def test_lab_up_claims_a_new_or_empty_directory_before_writing_in_it(tmp_path: Path) -> None:
    """The supervisor's Lab claims the directory `lab up` prepared: before the fix, `up` made logs/
    first, and the Lab then refused the directory as foreign (not empty, no marker)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for root in (tmp_path / "new" / "lab", empty):
        session.check_directory(root)
        session.claim(root)
        assert (root / MARKER).exists() and (root / "logs").is_dir()
        claim_directory(root).close()  # what `lab serve` does first: accepted


def test_a_spool_dir_that_cannot_take_a_record_is_refused_at_the_edge(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    probe = ["probe", "--source-bucket", "src-bucket", "--dest-bucket", "dst-bucket", "--source-endpoint", "http://127.0.0.1:9",
             "--dest-endpoint", "http://127.0.0.1:9", "--dynamodb-endpoint", "http://127.0.0.1:9", "--format", "json"]
    for spool, says in ((tmp_path / "file", "is a file"), (Path("/proc/replmon-spool"), "cannot make"),
                        (Path("/proc/self"), "not writable|cannot write in")):
        r = cli(*probe, "--spool-dir", str(spool))
        assert r.returncode == 2 and re.search(says, one_error_line(r.stderr)) and r.stdout == "", (spool, r.stderr)


def test_what_nothing_else_named_is_exit_5_one_line_and_a_log(tmp_path: Path) -> None:
    def boom(*a: object, **k: object) -> None:
        raise KeyError("the unexpected")

    with mock.patch("replmon.cli.events._routes_from", boom):
        (tmp_path / "p.json").write_text(PAYLOAD)
        r = cli("events", "parse", str(tmp_path / "p.json"), env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
    line = one_error_line(r.stderr)
    assert r.returncode == 5 and line.startswith("error: could not record or run: KeyError: 'the unexpected'")
    log = Path(line.rsplit("the traceback is in ", 1)[1])
    assert log.parent == tmp_path / "state" / "replmon" / "logs" and "Traceback" in log.read_text() and "boom" in log.read_text()


# ------------------------------------------------------------------ properties: arbitrary bytes
QUICK = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
BYTES = st.one_of(st.binary(max_size=300), st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                                                         lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                                                         max_leaves=12).map(lambda v: json.dumps(v).encode()))


@QUICK
@given(content=BYTES)
def test_events_parse_takes_any_bytes(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "p.json").write_bytes(content)
    r = cli("events", "parse", str(tmp_path / "p.json"), "--format", "json")
    assert "Traceback" not in r.stderr
    try:
        json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError):  # not JSON text: a usage error, one line, nothing on stdout
        assert r.returncode == 2 and r.stdout == "" and one_error_line(r.stderr)
    else:  # a payload: each record stored, acknowledged, ignored or failed (1), in one JSON document
        assert r.returncode in (0, 1) and json.loads(r.stdout)["command"] == "events parse"


@QUICK
@given(content=BYTES | st.just(json.dumps({"routes": [ROUTE]}).encode()))
def test_a_routes_file_takes_any_bytes(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "p.json").write_text(PAYLOAD)
    (tmp_path / "routes.json").write_bytes(content)
    r = cli("events", "parse", str(tmp_path / "p.json"), "--routes-file", str(tmp_path / "routes.json"))
    assert r.returncode in (0, 2) and "Traceback" not in r.stderr
    if r.returncode == 2:
        one_error_line(r.stderr)


@QUICK
@given(name=st.sampled_from(["servers.json", "lab-up.json", ".lock", MARKER, "lab.env", "lab.secret"]), content=BYTES)
def test_every_lab_state_file_takes_any_bytes(tmp_path_factory: pytest.TempPathFactory, name: str, content: bytes) -> None:
    root = tmp_path_factory.mktemp("lab")
    (root / MARKER).write_text("{}")
    (root / name).write_bytes(content)
    assert session.read(root) is None or session.read(root).pid > 1  # type: ignore[union-attr]
    assert set(session.damaged(root)) <= {root / "servers.json", root / "lab-up.json"}  # lab down's note reads both
    assert session.holder(root) is None  # no lab holds it, whatever .lock holds
    assert Pidfile(root / "servers.json").stop_stale() == []  # nothing it names is a live server of ours
    session.check_directory(root)
    claim_directory(root).close()
    assert not any((root / f).exists() for f in FOLDERS)


# ------------------------------------------------------------------ failures named where they are seen
def test_a_full_disk_is_named_enospc_with_its_path_wherever_it_is_met(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from replmon.cli.runend import failure_faults
    from replmon.core.files import write_atomic
    from replmon.lab.lab import Lab
    from replmon.lab.servers import LabError
    from replmon.local.aslrun import ExecutionResult, Invocation

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("replmon.core.files.os.fsync", full)
    with pytest.raises(OSError) as caught:  # a write's ENOSPC names no file by itself: write_atomic names the target
        write_atomic(tmp_path / "spool.json", b"{}")
    assert f"No space left on device: '{tmp_path / 'spool.json'}'" in str(caught.value)
    with pytest.raises(LabError, match=rf"^lab: ENOSPC \(disk full\): {tmp_path / 'lab'}/"):
        Lab(tmp_path / "lab").__enter__()  # the lab's first file (its marker) on a full disk
    spool = str(tmp_path / "spool" / "r" / "x.json")
    run = ExecutionResult("FAILED", None, "States.TaskFailed", f"OSError: [Errno 28] No space left on device: '{spool}'", [
        Invocation("RecordResult", {}, f"OSError: [Errno 28] No space left on device: '{spool}'"),
        Invocation("UploadProbe", {}, "ClientError: An error occurred (XMinioStorageFull) when calling the PutObject operation")])
    lines = failure_faults(run)
    assert lines[0] == f"ENOSPC (disk full): {spool} (met by RecordResult)"
    assert lines[1].startswith("ENOSPC (disk full): ClientError: An error occurred (XMinioStorageFull)")
    assert lines[-1].startswith("the run's execution ended FAILED: States.TaskFailed: OSError: [Errno 28]")


def test_handler_logs_go_to_stderr_in_a_local_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`--format json` prints one JSON document: the handlers' Powertools logs (a record lost, a
    spool write refused) go to stderr in a local run, never before the document on stdout."""
    import logging
    import sys

    from replmon.entry.runtime import logger, quiet_handler_logs

    quiet_handler_logs()
    handlers = [h for h in logging.getLogger(logger.name).handlers if isinstance(h, logging.StreamHandler)]
    assert handlers and all(h.stream is not sys.stdout for h in handlers)  # stderr as it is when a line is written
    logger.error("record lost: neither stored nor spooled")
    out, err = capsys.readouterr()
    assert out == "" and "record lost" in err


def test_a_fleet_runs_routes_say_where_their_records_are() -> None:
    """`lab run --routes N` with the store lost: every route measured OK, its records spooled - said per route."""
    from replmon.cli.runend import kept_by_route
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.local.accounting import Outcome, RunAccount

    def rec(route: str, pid: str) -> ProbeRecord:
        return ProbeRecord(route=route, probe_id=pid, run_id="20261126T000000Z-abc", planned_at=1.0, size_bytes=1, size_class="1B",
                           trial=1, status=ProbeStatus.COMPLETED)

    acc = RunAccount({"a1": Outcome("a1", "stored"), "b1": Outcome("b1", "spooled", "the store was unavailable"),
                      "b2": Outcome("b2", "spooled")})
    assert kept_by_route([rec("a", "a1"), rec("b", "b1"), rec("b", "b2")], acc) == {"a": {"stored": 1}, "b": {"spooled": 2}}
    assert acc.could_not_record and acc.lines("/lab/spool")[0].startswith("store unreachable: 2 record(s) spooled for replay in /lab/spool")
