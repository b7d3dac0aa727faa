"""Every planned probe is stored, spooled, or reported lost with its cause; files are
written whole or not at all (no zero-byte or .tmp files after a full disk); a run that could not
record ends with its own exit code (5) and one line per cause - never a traceback."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from replmon.cli.common import INFRASTRUCTURE, MEASURED_FAILURE, NOT_RECORDED, OK, run_exit_code
from replmon.cli.runend import write_run_files
from replmon.core.files import disk_full, write_atomic
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.route import Route
from replmon.local.accounting import account, cause_of, probe_faults, run_records
from replmon.local.aslrun import ExecutionResult, Invocation
from replmon.probe.state import ProbeState
from tests.conftest import route

FULL = OSError(errno.ENOSPC, "No space left on device")


def _fail_fsync(_fd: int) -> None:
    raise FULL


def test_a_full_disk_leaves_no_partial_and_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's zero-byte `.tmp` files in the spool: the write fails as a whole, the old file stays."""
    target = tmp_path / "r.json"
    write_atomic(target, b"old")
    monkeypatch.setattr(os, "fsync", _fail_fsync)
    with pytest.raises(OSError) as caught:
        write_atomic(target, b"new")
    assert disk_full(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and target.read_bytes() == b"old"


def test_an_atomic_file_is_the_owners_alone(tmp_path: Path) -> None:
    assert oct(write_atomic(tmp_path / "secret", b"x").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize(("text", "cause"), [
    ("ClientError: An error occurred (XMinioStorageFull) when calling the PutObject operation", "disk full"),
    ("OSError: [Errno 28] No space left on device", "disk full"),
    ("EndpointConnectionError: Could not connect to the endpoint URL: http://127.0.0.1:9/", "store unreachable"),
    ("StoreUnavailable: latency store did not answer", "store unreachable"),
    ("ValueError: size_class", "other"),
])
def test_each_cause_is_named_in_the_operators_words(text: str, cause: str) -> None:
    assert cause_of(text) == cause


def state(n: int, **extra: Any) -> dict[str, Any]:
    return ProbeState(probe_id=f"p{n}", run_id="20261122T000000Z-r", planned_at=1.0, route=Route(**route()), size_bytes=1,
                      size_class="1B", trial=n, timeout_seconds=60, target_seconds=10, **extra).dump()


def execution() -> ExecutionResult:
    """Four planned probes: one stored, one spooled after the store refused it, one lost (store and
    spool both refused: a full disk), one whose upload failed before any record was made."""
    invocations = [
        Invocation("PlanProbes", {}, None, {"probes": [state(n) for n in range(1, 5)]}),
        Invocation("RecordResult", state(1), None, {"recorded": "stored"}),
        Invocation("RecordResult", state(2), "StoreUnavailable: Could not connect to the endpoint URL"),
        Invocation("RecordResult", state(2), None, {"recorded": "spooled"}),
        Invocation("RecordResult", state(3), "OSError: [Errno 28] No space left on device"),
        Invocation("Cleanup", state(3, record_error={"Error": "OSError", "Cause": "[Errno 28] No space left on device"}), None, {}),
        Invocation("UploadProbe", state(4), "ClientError: XMinioStorageFull"),
    ]
    return ExecutionResult("SUCCEEDED", {"results": []}, None, None, invocations)


def test_every_planned_probe_is_accounted_for_with_its_cause() -> None:
    acc = account(execution())
    assert {pid: o.recorded for pid, o in acc.outcomes.items()} == {"p1": "stored", "p2": "spooled", "p3": "lost", "p4": "lost"}
    assert acc.outcomes["p2"].durable and not acc.outcomes["p3"].durable
    assert "No space left" in (acc.outcomes["p3"].cause or "")
    assert "UploadProbe failed" in (acc.outcomes["p4"].cause or "")
    assert acc.could_not_record
    lines = acc.lines("/spool")
    assert lines == [
        "disk full: 2 record(s) LOST, neither stored nor spooled (OSError: [Errno 28] No space left on device)",
        "store unreachable: 1 record(s) spooled for replay in /spool: the latency store did not take them: "
        "StoreUnavailable: Could not connect to the endpoint URL; the next run replays them (nothing lost)",
    ]
    doc = acc.to_json()
    assert doc["recorded"] == {"stored": 1, "spooled": 1, "lost": 2} and len(doc["lost"]) == 2


def test_a_run_whose_records_are_all_stored_could_record() -> None:
    ex = execution()
    ex.invocations = ex.invocations[:2]
    ex.invocations[0] = Invocation("PlanProbes", {}, None, {"probes": [state(1)]})
    acc = account(ex)
    assert not acc.could_not_record and acc.lines() == []


def test_the_table_is_built_from_the_runs_own_records_when_the_store_is_gone() -> None:
    records = run_records(execution(), None, retention_days=90)
    assert [r.probe_id for r in records] == ["p1", "p2", "p3"]  # p4 never reached RecordResult: its line says so


def record(status: ProbeStatus, reason: str | None = None) -> ProbeRecord:
    return ProbeRecord(route="r", probe_id="p", run_id="20261122T000000Z-x", planned_at=0.0, size_bytes=1, size_class="1B", trial=1,
                       status=status, latency_lo=1.0, latency_hi=1.1, failure_reason=reason)


def test_probes_not_measured_for_a_named_cause_are_one_line_per_cause() -> None:
    records = [record(ProbeStatus.ERROR, "ClientError: XMinioStorageFull"), record(ProbeStatus.ERROR, "OSError: [Errno 28] ENOSPC"),
               record(ProbeStatus.ERROR, "ValueError: odd"), record(ProbeStatus.COMPLETED)]
    assert probe_faults(records) == ["disk full: 2 probe(s) could not be measured (ClientError: XMinioStorageFull)"]


@pytest.mark.parametrize(("status", "could_not_record", "code"), [
    (ProbeStatus.COMPLETED, False, OK),
    (ProbeStatus.COMPLETED, True, NOT_RECORDED),
    (ProbeStatus.FAILED, True, MEASURED_FAILURE),  # late or failing replication is the news
    (ProbeStatus.ERROR, True, NOT_RECORDED),  # a record not in the store ranks before an unmeasured probe
    (ProbeStatus.ERROR, False, INFRASTRUCTURE),
])
def test_could_not_record_has_its_own_exit_code(status: ProbeStatus, could_not_record: bool, code: int) -> None:
    assert run_exit_code([record(status)], 1, True, could_not_record) == code


def test_a_run_file_on_a_full_disk_is_one_line_not_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", _fail_fsync)
    data, _chart, faults = write_run_files([record(ProbeStatus.COMPLETED)], tmp_path, "20261122T000000Z-x", "t")
    assert data is None
    assert faults[0].startswith("ENOSPC (disk full): run file ") and faults[0].endswith("not written; the 1 record(s) are in the table above")
    assert all(p.stat().st_size > 0 for p in tmp_path.rglob("*") if p.is_file())  # no empty leftovers
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_run_id_that_would_leave_the_lab_directory_is_refused(tmp_path: Path) -> None:
    data, _chart, faults = write_run_files([record(ProbeStatus.COMPLETED)], tmp_path / "lab", "../../escape", "t")
    assert data is None and "would leave" in faults[0]
    assert not (tmp_path / "escape.json").exists()
