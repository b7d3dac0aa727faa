"""Every failure is named where it is seen: a latency store lost mid-run (each route's records not
in the store said beside its verdict, the store's endpoint and error on stderr), a full disk named
ENOSPC with its path whichever step met it. No lab servers: a store on a closed loopback port is a
store that was killed."""

from __future__ import annotations

import errno
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.config import Config

from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.spool import DirectorySpool
from replmon.cli.common import run_verdicts
from replmon.cli.render import headline_lines
from replmon.cli.runend import disk_faults, failure_faults, kept_by_route, record_fault
from replmon.core.files import LOW_SPACE_BYTES, low_space
from replmon.local.accounting import account, run_records
from replmon.local.aslrun import ExecutionResult, Invocation
from replmon.probe.state import ProbeState
from replmon.probe.steps import record_step
from replmon.wiring import Deps
from tests.test_store import Capture, completed_state


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed): connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dead_store() -> tuple[DynamoLatencyStore, str]:
    url = f"http://127.0.0.1:{closed_port()}"
    client = boto3.client("dynamodb", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=1, read_timeout=1))
    return DynamoLatencyStore("latency", client), url


def spooled_run(dead_store: tuple[DynamoLatencyStore, str], spool: Path, routes: list[str]) -> ExecutionResult:
    """The invocations a run makes when the store is gone: PlanProbes' plan, then each probe's
    RecordResult (the real step, against the dead store) spooling its record."""
    store, _ = dead_store
    deps = Deps(stores=lambda e: None, store=store, metrics=Capture(), spool=DirectorySpool(spool))  # type: ignore[arg-type,return-value]
    states = []
    for i, name in enumerate(routes):
        st = completed_state()
        st.update(probe_id=f"p{i}", route={**st["route"], "name": name})
        states.append(st)
    invocations = [Invocation("PlanProbes", {}, None, {"probes": states})]
    invocations += [Invocation("RecordResult", st, None, record_step(st, deps)) for st in states]
    return ExecutionResult("SUCCEEDED", {"results": [inv.result for inv in invocations[1:]]}, None, None, invocations)


def test_a_record_the_store_did_not_take_carries_the_stores_error_and_endpoint(dead_store: Any, tmp_path: Path) -> None:
    _, url = dead_store
    execution = spooled_run(dead_store, tmp_path / "spool", ["a"])
    result = execution.invocations[-1].result
    assert result["recorded"] == "spooled"
    assert url in result["spooled_because"] and "latency" in result["spooled_because"], result["spooled_because"]
    assert ProbeState.model_validate(result).spooled_because == result["spooled_because"]  # it travels in the state
    assert len(list((tmp_path / "spool").rglob("*.json"))) == 1


def test_a_store_lost_during_a_fleet_run_is_named_on_stderr_and_beside_each_route(dead_store: Any, tmp_path: Path) -> None:
    """`lab run --routes N` with the store killed: the faults say the store at its endpoint did not
    take the records (and why), every route measured OK says NOT RECORDED in its headline and in
    the JSON document's route (record_fault), not a silent OK."""
    _, url = dead_store
    routes = ["app-01", "app-02"]
    execution = spooled_run(dead_store, tmp_path / "spool", routes)
    acc = account(execution)
    lines = acc.lines(str(tmp_path / "spool"), store=url)
    assert acc.could_not_record and len(lines) == 1
    assert lines[0].startswith(f"store unreachable: 2 record(s) spooled for replay in {tmp_path / 'spool'}: the latency store at {url}")
    assert "Could not connect" in lines[0] or "onnection refused" in lines[0], lines[0]

    records = run_records(execution, None, 90)
    kept = kept_by_route(records, acc)
    verdicts = run_verdicts(records, routes, len(routes), True, 900.0)
    for v in verdicts:
        v.extra["recorded"], v.extra["record_fault"] = kept[v.route], record_fault(kept[v.route])
    assert [str(v.verdict) for v in verdicts] == ["ok", "ok"]  # replication measured fine ...
    text = "\n".join(headline_lines(verdicts))
    assert text.count("not recorded: 1 of 1 record(s) spooled for replay") == 2, text  # ... and said not to be in the store
    doc = [v.to_json() for v in verdicts]
    assert all(d["recorded"] == {"spooled": 1} and d["record_fault"].startswith("not recorded") for d in doc)


def test_a_route_whose_records_are_all_held_has_no_record_fault() -> None:
    assert record_fault({"stored": 3, "duplicate": 1}) is None
    assert record_fault({}) is None
    assert record_fault({"stored": 1, "lost": 1, "spooled": 2}) == \
        "not recorded: 3 of 4 record(s) (1 lost, 2 spooled for replay) (the store did not take them)"


def test_a_steps_os_error_keeps_its_errno_and_path_and_the_run_names_enospc(tmp_path: Path) -> None:
    """A handler's unhandled error is recorded with its message, as Lambda's errorMessage carries
    it: a full disk met by any step is named ENOSPC with its path, not "the execution did not succeed"."""
    from replmon.local.aslrun import LocalStateMachine

    target = tmp_path / "spool" / "r" / "x.json"

    def full(event: Any, context: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    sm = LocalStateMachine.__new__(LocalStateMachine)  # only its Lambda-invoke path: no state machine needed
    sm.invocations, sm._active = [], 0
    import threading

    sm._active_lock = threading.Condition()
    sm._call = lambda name, event: full(event, None)  # type: ignore[method-assign]
    headers: dict[str, str] = {}
    body = sm._invoke(None, "RecordResult", None, "{}", {}, headers)
    assert headers["x-amz-function-error"] == "Unhandled" and b"No space left on device" in body
    [inv] = sm.invocations
    assert inv.error == "OSError" and inv.failure is not None and str(target) in inv.failure  # type as Lambda reports it, and its message
    execution = SimpleNamespace(invocations=sm.invocations, status="FAILED", error="OSError", cause=body.decode())
    lines = failure_faults(execution)
    assert lines[0] == f"ENOSPC (disk full): {target} (met by RecordResult)", lines
    assert lines[-1] == f"the run's execution ended FAILED: OSError: [Errno 28] No space left on device: '{target}'"  # its message, not JSON


def test_a_full_file_system_is_named_with_its_path(tmp_path: Path) -> None:
    """A disk that is full when the run starts fails a server's write (MinIO, DynamoDB Local) with
    a message that may not say so: the lab directory's file system is named full by its free space."""
    full = SimpleNamespace(f_bavail=10, f_frsize=4096, f_blocks=25_600)
    roomy = SimpleNamespace(f_bavail=LOW_SPACE_BYTES // 4096 + 1, f_frsize=4096, f_blocks=10**6)
    line = low_space(tmp_path, lambda p: full)
    assert line is not None and line.startswith(f"ENOSPC (disk full): {tmp_path}: 40960 bytes free of 100.0 MiB")
    assert low_space(tmp_path, lambda p: roomy) is None

    def unreadable(p: str) -> Any:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", p)

    assert low_space(tmp_path / "missing", unreadable) is None  # no finding, never a traceback
    assert disk_faults([tmp_path]) == ([] if low_space(tmp_path) is None else [low_space(tmp_path)])


def test_report_names_records_one_window_length_before_a_window_too_short() -> None:
    """A mistyped window (--hours 3 for a route that last probed 5 h ago): NO DATA, and why - the
    records 2 h before the window are named, on stderr and in the JSON's faults. Farther than one
    window length (or the hour), nothing is said."""
    import json
    import re

    from moto import mock_aws

    from replmon.adapters import clients
    from replmon.core.record import ProbeStatus
    from replmon.local.tables import ensure_table
    from tests.test_operator_cli import probe, report

    with mock_aws():
        client = clients.dynamodb(clients.STORE, region="us-east-1", keys=("testing", "testing"))
        ensure_table(client, "t")
        store = DynamoLatencyStore("t", client)
        for i in range(2):
            store.put_once(probe("stopped", i, ProbeStatus.COMPLETED, 5.0, ago=5 * 3600 + i))
            store.put_once(probe("long-gone", 10 + i, ProbeStatus.COMPLETED, 5.0, ago=7 * 3600 + 60 + i))
        r = report("t", "--route", "stopped", "--hours", "3", "--format", "json")
        [line] = json.loads(r.stdout)["faults"]
        m = re.match(r"route stopped: no record in the window, but 2 dated (\d),(\d{3}) s before it", line)
        # 2 h before the window, less the records' 1 s apart, plus however long the report took to start on this machine
        assert r.returncode == 4 and m and 7_190 <= int(m[1] + m[2]) <= 7_200 + 600, line
        assert "a wider --hours includes them" in line and line in " ".join(r.stderr.split())
        gone = report("t", "--route", "long-gone", "--hours", "3", "--format", "json")
        assert gone.returncode == 4 and json.loads(gone.stdout)["faults"] == []


def test_a_failed_runs_headline_names_its_cause_not_only_did_not_succeed(tmp_path: Path) -> None:
    """A disk full as the run starts: DynamoDB Local answers InternalFailure ("an unknown error"),
    the leases cannot be taken and the execution fails. The headline's finding names the full disk
    the run found, then the execution's end."""
    from replmon.cli.runend import run_cause
    from replmon.signals.verdict import with_run_cause

    ended = ("the run's execution ended FAILED: StoreUnavailable: no route's lease could be taken: replmon-latency: "
             "InternalFailure: The request processing has failed because of an unknown error, exception or failure.")
    full = f"ENOSPC (disk full): {tmp_path}: 892928 bytes free of 512.0 MiB; free some space (or choose another --dir) and run again"
    [v] = run_verdicts([], ["lab"], 2, False, 900.0)
    [finding] = [f for f in v.findings if f.kind == "run_failed"]
    assert finding.detail == "the run's execution did not succeed"
    named = with_run_cause(v, run_cause([ended, full]))
    assert [f.detail for f in named.findings if f.kind == "run_failed"] == [f"the run's execution did not succeed: {full[:240]}"]
    assert "ENOSPC (disk full)" in "\n".join(headline_lines([named]))
    only_ended = with_run_cause(v, run_cause([ended]))
    assert any(f.detail.startswith("the run's execution did not succeed: StoreUnavailable: no route's lease") for f in only_ended.findings)
    assert with_run_cause(v, run_cause(["store unreachable: ..."])) == v  # no cause among the lines: unchanged
