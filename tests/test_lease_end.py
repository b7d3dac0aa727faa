"""Leases always end: a run that cannot give its lease back says so (exit 5, with the lease's
expiry), and a holder that no longer runs does not block the next run - the real ASL under moto,
the lease in (moto's) DynamoDB through adapters/leases.py.

AWS contracts encoded here:
- a lease is taken from a dead holder with a conditional write on that holder (``#h = :dead``):
  DynamoDB evaluates the condition atomically with the update and refuses it with
  ConditionalCheckFailedException when it no longer holds ("Working with items and attributes",
  condition expressions, https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html),
  so a holder whose lease changed meanwhile is never displaced;
- an execution runs while DescribeExecution answers RUNNING or PENDING_REDRIVE (its status is one
  of RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED, PENDING_REDRIVE; an unknown ARN answers
  ExecutionDoesNotExist, https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html),
  and has ended only when SUCCEEDED or its ``redriveStatus`` is NOT_REDRIVABLE: a FAILED, TIMED_OUT
  or ABORTED execution can be redriven within 14 days, keeps its ARN, continues from its failed step
  and reports RUNNING again (https://docs.aws.amazon.com/step-functions/latest/dg/redrive-executions.html,
  https://docs.aws.amazon.com/goto/WebAPI/states-2016-11-23/RedriveExecution), so before its lease
  expires such a holder is "cannot tell" and the expiry decides. moto's DescribeExecution returns
  no ``redriveStatus``: those answers come from botocore's Stubber, which checks them against the
  service model.
"""

from __future__ import annotations

import errno
import subprocess
import sys
import time
from typing import Any

import pytest

from replmon.adapters.leases import DynamoLeases
from replmon.core.errors import StoreUnavailable
from replmon.core.partitions import LEASE, live_partition
from tests.conftest import TABLE, Env, route
from tests.fakes import Scenario


def dead_pid() -> str:
    """The pid of a process that has ended (a run whose process is gone)."""
    return subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()


class DiskFull(DynamoLeases):
    """The store's disk fills at the end of the run: every release (EndProbe's and EndRouteRun's, and
    the runner's own) fails as DynamoDB Local on a full disk answers, or with the OSError itself."""

    def __init__(self, table: str, client: Any, raise_os_error: bool = False) -> None:
        super().__init__(table, client)
        self.raise_os_error = raise_os_error
        self.attempts = 0

    def _fail(self) -> None:
        self.attempts += 1
        if self.raise_os_error:
            raise OSError(errno.ENOSPC, "No space left on device", "/var/lib/dynamodb/shared-local-instance.db")
        raise StoreUnavailable(f"{TABLE}: InternalServerError: disk full (ENOSPC)")

    def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
        self._fail()
        return False

    def end_probe(self, route: str, run: str, probe_id: str, now: float) -> bool | None:
        self._fail()
        return None


@pytest.fixture
def fast(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    return on_test_clock(env, monkeypatch)


def on_test_clock(env: Env, monkeypatch: pytest.MonkeyPatch) -> Env:
    """run_request's state machine on the test's clock: Retry backoffs advance it instead of sleeping."""
    from contextlib import contextmanager

    from replmon.local.aslrun import LocalStateMachine, state_machine_handlers
    from replmon.wiring import injected

    @contextmanager
    def machine(deps: Any, **_: Any) -> Any:  # inside the env's mock_aws, not a second one
        with injected(deps), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
            yield sm

    monkeypatch.setattr("replmon.local.execution.local_state_machine", machine)
    return env


def request(name: str = "primary") -> Any:
    from replmon.probe.request import load_request

    return load_request({"routes": [route(name=name)], "sizes": ["1MiB"], "poll": {"use_history": False}})


@pytest.mark.parametrize("raise_os_error", [False, True], ids=["store-error", "ENOSPC"])
def test_a_run_that_cannot_give_its_lease_back_says_so_with_its_expiry_and_exit_5(fast: Env, monkeypatch: pytest.MonkeyPatch,
                                                                                   raise_os_error: bool) -> None:
    """The reported failure: the disk fills at the end of a run, the lease stays, and the run said
    nothing and exited 0. Now the run names the route, the error and the lease's expiry (exit 5,
    "could not record"); and the next run, once this run's process is gone, is not blocked."""
    import dataclasses

    from replmon.cli.exitcodes import Exit
    from replmon.local.execution import run_request

    env = fast
    env.fake.default = Scenario(latency=2.0)
    full = DiskFull(TABLE, env.ddb, raise_os_error)
    gone = dead_pid()
    with monkeypatch.context() as m:  # the first run's lease names a process that is gone by the second run
        m.setattr("replmon.fleet.lease.local_owner", lambda: {"host": __import__("socket").gethostname(), "pid": gone})
        first = run_request(request(), dataclasses.replace(env.deps, leases=full))
    assert first.execution.status == "SUCCEEDED", first.execution.cause  # the probes measured; only the release failed
    assert full.attempts > 2  # EndProbe, EndRouteRun (with their retries), then the runner itself
    lease = env.leases.leases(["primary"])["primary"]
    assert lease.holder and lease.until and lease.until > env.clock.now() + 3600  # the lease stands: the report's 2 h 17 min
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(lease.until))
    [line] = first.account.leases_kept
    assert line.startswith("lease of route primary not released (") and f"until {until}" in line
    assert "ENOSPC" in line and "replmon fleet release primary" in line
    if raise_os_error:
        assert "ENOSPC (disk full): /var/lib/dynamodb/shared-local-instance.db" in line
    assert first.account.could_not_record and line in first.account.lines()  # stderr and JSON faults
    assert Exit.NOT_RECORDED == 5

    second = run_request(request(), env.deps)  # a new run: the first one's process is gone
    assert second.skipped == [] and len(second.records) == 1
    assert env.leases.leases(["primary"])["primary"].holder is None  # released at its end this time


def test_a_run_whose_store_cannot_even_be_read_still_names_its_leases_expiry(fast: Env) -> None:
    """The store is gone entirely: the expiry comes from the run's own BeginRouteRun output."""
    import dataclasses

    from replmon.local.execution import run_request

    env = fast
    class Gone(DiskFull):
        reads = 0

        def leases(self, routes: Any) -> Any:
            Gone.reads += 1
            if Gone.reads > 1:  # BeginRouteRun read it; after the probes the store is gone
                raise StoreUnavailable(f"{TABLE}: EndpointConnectionError")
            return super().leases(routes)

    env.fake.default = Scenario(latency=2.0)
    run = run_request(request(), dataclasses.replace(env.deps, leases=Gone(TABLE, env.ddb)))
    begin = next(i.result for i in run.execution.invocations if i.function == "BeginRouteRun")
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(begin["lease"]["until"]))
    [line] = run.account.leases_kept
    assert f"until {until}" in line


def test_end_route_run_tries_every_route_then_fails_naming_those_it_could_not_release(env: Env) -> None:
    """One route's release failing does not leave the run's other routes held: each is tried, then
    the step fails (retried by the state machine) naming the routes still held."""
    from replmon.fleet.lease import end_run

    for name in ("a", "b", "c"):
        assert env.leases.acquire(name, "arn:me", 0.0, 9e9, {}, run="r") is not None

    class OneFull(DynamoLeases):
        def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
            if route == "b":
                raise StoreUnavailable(f"{TABLE}: InternalServerError: disk full (ENOSPC)")
            return super().release(route, run_id, now, run=run)

    deps = __import__("dataclasses").replace(env.deps, leases=OneFull(TABLE, env.ddb))
    with pytest.raises(StoreUnavailable, match=r"^lease of route b not released: .*ENOSPC"):
        end_run({"holder": "arn:me", "routes": ["a", "b", "c"], "run_id": "r"}, deps)
    held = env.leases.leases(["a", "b", "c"])
    assert (held["a"].holder, held["b"].holder, held["c"].holder) == (None, "arn:me", None)


def test_a_deployed_run_that_could_not_release_does_not_block_the_next_once_its_execution_ended(env: Env) -> None:
    """The deployed path: EndProbe and EndRouteRun (the EndRouteRun Lambda) fail to release, the
    state machine catches it and the execution ends. The next execution's BeginRouteRun asks Step
    Functions (DescribeExecution, moto's) about the holder: ended, so it takes the lease before its
    expiry, conditional on that holder."""
    import dataclasses

    from replmon.adapters.executions import StepFunctionsExecutions
    from replmon.local.aslrun import LocalStateMachine, state_machine_handlers
    from replmon.wiring import injected

    env.fake.default = Scenario(latency=2.0)
    payload = {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}}
    full = dataclasses.replace(env.deps, leases=DiskFull(TABLE, env.ddb))
    with injected(full), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
        first = sm.run({**payload, "run_id": "20261123T100000Z-first"}, timeout=300)
        executions = StepFunctionsExecutions(sm.sfn)
        assert first.status == "SUCCEEDED", first.cause  # EndRouteRun's failure is caught: the run itself measured
        assert "not released" in str((first.output or {}).get("lease_end"))  # what EndRouteRun said, in the output
        held = env.leases.leases(["primary"])["primary"]
        assert held.holder and held.until and held.until > env.clock.now() + 3600  # not released, far from its expiry
        assert executions.running(held.holder) is False
        full.executions = executions  # the BeginRouteRun Lambda's wiring (wiring.py: StepFunctionsExecutions)
        second = sm.run({**payload, "run_id": "20261123T101500Z-second"}, timeout=300)
    assert second.status == "SUCCEEDED" and second.output["skipped"] == [] and second.output["results"] == {"probes": 1}
    lease = env.ddb.get_item(TableName=TABLE, Key={"route": {"S": live_partition("primary")}, "at": {"S": LEASE}})["Item"]
    assert lease["holder"]["S"].endswith(":20261123T101500Z-second")  # taken from the ended run (and, the disk still full, kept)


def test_a_holder_pending_redrive_still_counts_as_running() -> None:
    """Only SUCCEEDED, or a failed execution Step Functions says cannot be redriven, has ended; a
    FAILED, TIMED_OUT or ABORTED one that can be redriven (same ARN, RUNNING again) is "cannot tell"."""
    from botocore.stub import Stubber

    from replmon.adapters.executions import StepFunctionsExecutions

    client = __import__("boto3").client("stepfunctions", region_name="us-east-1")
    arn = "arn:aws:states:us-east-1:123456789012:execution:sm:run"
    redrivable = {"redriveStatus": "REDRIVABLE"}
    spent = {"redriveStatus": "NOT_REDRIVABLE", "redriveStatusReason": "Execution redrivable period exceeded"}
    answers: list[tuple[str, dict[str, str], bool | None]] = [
        ("RUNNING", {"redriveStatus": "NOT_REDRIVABLE", "redriveStatusReason": "Execution is RUNNING and cannot be redriven"}, True),
        ("PENDING_REDRIVE", {}, True),
        ("SUCCEEDED", {"redriveStatus": "NOT_REDRIVABLE", "redriveStatusReason": "Execution is SUCCEEDED and cannot be redriven"}, False),
        ("SUCCEEDED", {}, False),
        ("FAILED", redrivable, None), ("TIMED_OUT", redrivable, None), ("ABORTED", redrivable, None),
        ("FAILED", {"redriveStatus": "REDRIVABLE_BY_MAP_RUN"}, None),
        ("FAILED", {}, None),  # not said: cannot tell
        ("FAILED", spent, False), ("TIMED_OUT", spent, False), ("ABORTED", spent, False),
    ]
    with Stubber(client) as stub:
        for status, redrive, _ in answers:
            stub.add_response("describe_execution", {"executionArn": arn, "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:sm",
                                                     "status": status, "startDate": 0, **redrive}, {"executionArn": arn})
        got = [StepFunctionsExecutions(client).running(arn) for _ in answers]
    assert got == [expected for *_, expected in answers]


def test_an_unexpired_lease_of_a_redrivable_failed_execution_is_not_taken() -> None:
    """BeginRouteRun finds a route's lease held, unexpired, by a FAILED execution that can still be
    redriven: the route is skipped (a redrive would probe it again under the same ARN). Held by one
    whose redrive period is over (NOT_REDRIVABLE): taken before its expiry. Expired: taken either way."""
    from botocore.stub import Stubber

    from replmon.adapters.executions import StepFunctionsExecutions
    from replmon.adapters.leases import MemoryLeases
    from replmon.core.clock import ManualClock
    from replmon.fleet.lease import begin_run
    from tests.conftest import route as a_route

    client = __import__("boto3").client("stepfunctions", region_name="us-east-1")
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:sm"

    class D:
        def __init__(self) -> None:
            self.leases, self.clock, self.metrics = MemoryLeases(), ManualClock(start=1000.0), type("M", (), {"count": lambda *a, **k: None})()
            self.executions, self.plans = StepFunctionsExecutions(client), None

    d = D()
    holders = {"a": "arn:aws:states:us-east-1:123456789012:execution:sm:redrivable",
               "b": "arn:aws:states:us-east-1:123456789012:execution:sm:spent",
               "c": "arn:aws:states:us-east-1:123456789012:execution:sm:expired"}
    assert d.leases.acquire("a", holders["a"], 900.0, 5000.0, {}) is not None
    assert d.leases.acquire("b", holders["b"], 900.0, 5000.0, {}) is not None
    assert d.leases.acquire("c", holders["c"], 0.0, 500.0, {}) is not None
    redrive = {"a": {"redriveStatus": "REDRIVABLE"},
               "b": {"redriveStatus": "NOT_REDRIVABLE", "redriveStatusReason": "Execution redrivable period exceeded"},
               "c": {"redriveStatus": "REDRIVABLE"}}
    plan = {"run_id": "r", "bound_seconds": 10.0, "routes": [a_route(name=n) for n in "abc"],
            "probes": [{"route": a_route(name=n), "size_class": "1MiB"} for n in "abc"]}
    with Stubber(client) as stub:
        for n in "abc":
            stub.add_response("describe_execution", {"executionArn": holders[n], "stateMachineArn": machine, "status": "FAILED",
                                                     "startDate": 0, **redrive[n]}, {"executionArn": holders[n]})
        out = begin_run({"plan": plan, "execution": "me"}, d)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == ["b", "c"]
    assert [(s["route"], s["held_by"]) for s in out["skipped"]] == [("a", holders["a"])]


def test_fleet_release_ends_a_dead_runs_lease_and_says_when_its_record_cannot_be_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """`replmon fleet release ROUTE` on the reported lease (a run whose disk filled, held for hours):
    ended, recorded with who, when and whose. The store refusing the record after the release: said,
    exit 5; the store refusing the release itself: said, the lease not released, exit 3."""
    import boto3
    from moto import mock_aws

    from replmon.core.partitions import runs_partition
    from replmon.local.tables import ensure_table
    from tests.conftest import TEMPLATE
    from tests.test_fleet_cli import ARGS, run

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        leases = DynamoLeases(TABLE, ddb)
        holder = "arn:aws:states:us-east-1:123456789012:execution:sm:disk-full"
        assert leases.acquire("primary", holder, 0.0, time.time() + 8220, {}, run="r") is not None  # 2 h 17 min
        ok = run("fleet", *ARGS, "release", "primary")
        assert ok.exit_code == 0 and f"lease of {holder}" in ok.output and "recorded in primary#runs" in ok.output, ok.output
        kept = ddb.query(TableName=TABLE, KeyConditionExpression="#pk = :pk", ExpressionAttributeNames={"#pk": "route"},
                         ExpressionAttributeValues={":pk": {"S": runs_partition("primary")}})["Items"]
        [record] = [i for i in kept if i["at"]["S"].endswith("#released")]
        assert record["holder"]["S"] == holder and "@" in record["released_by"]["S"] and float(record["released_at"]["N"]) > 0

        assert leases.acquire("primary", holder, 0.0, time.time() + 8220, {}, run="r") is not None
        real = DynamoLeases.record_release

        def full(self: DynamoLeases, *a: Any) -> None:
            raise StoreUnavailable(f"{TABLE}: InternalServerError: disk full (ENOSPC)")

        monkeypatch.setattr(DynamoLeases, "record_release", full)
        unrecorded = run("fleet", *ARGS, "release", "primary")
        assert unrecorded.exit_code == 5 and "released by" in unrecorded.output
        assert "record of it could not be written to primary#runs" in unrecorded.output and "ENOSPC" in unrecorded.output
        assert leases.leases(["primary"])["primary"].holder is None  # released all the same

        monkeypatch.setattr(DynamoLeases, "record_release", real)
        assert leases.acquire("primary", holder, 0.0, time.time() + 8220, {}, run="r") is not None
        monkeypatch.setattr(DynamoLeases, "release", DiskFull.release)
        monkeypatch.setattr(DynamoLeases, "_fail", DiskFull._fail, raising=False)
        monkeypatch.setattr(DynamoLeases, "raise_os_error", False, raising=False)
        monkeypatch.setattr(DynamoLeases, "attempts", 0, raising=False)
        refused = run("fleet", *ARGS, "release", "primary")
        assert refused.exit_code == 3 and "the lease of route primary is not released" in refused.output, refused.output


def test_a_local_holder_whose_pid_now_names_another_process_has_ended() -> None:
    """A lease names its local run by host, pid and the process's start time (proc(5),
    /proc/<pid>/stat field 22): a live process under that pid that started at another time is not
    the run, so the lease does not block."""
    import os
    import socket

    from replmon.core.ports import Lease
    from replmon.fleet.lease import holder_ended, local_owner, process_started

    me = local_owner()
    assert me["pid"] == str(os.getpid()) and me.get("started") == process_started(os.getpid())
    assert holder_ended(Lease("r", "arn:me", 9e9, {}, me), None) is False
    reused = {**me, "started": str(int(me["started"]) - 1)} if me.get("started") else None
    if reused is not None:  # a system with /proc
        assert holder_ended(Lease("r", "arn:old", 9e9, {}, reused), None) is True
    gone = {"host": socket.gethostname(), "pid": dead_pid()}
    assert holder_ended(Lease("r", "arn:gone", 9e9, {}, gone), None) is True


def test_a_local_holder_pid_held_by_another_users_process_is_told_by_its_start_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Signalling another user's process is refused (EPERM, kill(2)), but its /proc/<pid>/stat is
    readable by every user (proc(5)): a live pid another user holds is the run only if it started
    when the lease says; without a start time on the lease it cannot be told (None: the expiry decides)."""
    import socket

    from replmon.core.ports import Lease
    from replmon.fleet import lease as lease_mod

    def refused(pid: int, sig: int) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(lease_mod.os, "kill", refused)
    init_started = lease_mod.process_started(1)
    assert init_started, "no /proc/1/stat on this system"
    host = socket.gethostname()
    assert lease_mod.holder_ended(Lease("r", "arn:x", 9e9, {}, {"host": host, "pid": "1", "started": init_started}), None) is False
    reused = str(int(init_started) + 12345)  # the run started at another time: the pid now names another process
    assert lease_mod.holder_ended(Lease("r", "arn:x", 9e9, {}, {"host": host, "pid": "1", "started": reused}), None) is True
    assert lease_mod.holder_ended(Lease("r", "arn:x", 9e9, {}, {"host": host, "pid": "1"}), None) is None


def test_a_failed_release_of_a_lease_this_run_does_not_hold_is_no_fault() -> None:
    from types import SimpleNamespace

    from replmon.adapters.leases import MemoryLeases
    from replmon.local.execution import release_leases

    class Flaky(MemoryLeases):
        def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
            raise StoreUnavailable(f"{TABLE}: InternalServerError")

    leases = Flaky()
    leases.acquire("mine", "arn:me", 0.0, 1790003600.0, {})
    leases.acquire("theirs", "arn:other", 0.0, 1790003600.0, {})
    kept = release_leases(SimpleNamespace(leases=leases), ["mine", "theirs", "never"], "arn:me", "r")  # type: ignore[arg-type]
    assert [line.split(" not released")[0] for line in kept] == ["lease of route mine"]


def test_an_interrupted_run_names_the_leases_it_could_not_give_back() -> None:
    from replmon.local.execution import Salvage, salvage_summary

    line = "lease of route primary not released (ENOSPC (disk full): /lab/dynamodb); it blocks the route's runs until ..."
    assert salvage_summary(Salvage("SIGINT", "r", leases_kept=[line]))[-1] == f"  {line}"
