"""One run per route at a time - the real ASL's BeginRouteRun/EndRouteRun under moto's
interpreter, the lease in (moto's) DynamoDB through adapters/leases.py.

AWS contracts encoded here:
- an execution name or ListExecutions(RUNNING) is no lease - StartExecution with a used name
  fails for 90 days, and ListExecutions "is eventually consistent. The results are best effort"
  (StartExecution / ListExecutions API reference,
  https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html,
  https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html).
  So the lease is a DynamoDB conditional write, and two concurrent runs get exactly one lease.
- conditional writes fail with ConditionalCheckFailedException and are evaluated atomically
  with the write ("Working with items and attributes", condition expressions,
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html).
"""

from __future__ import annotations

import threading
from typing import Any

from replmon.core.partitions import LEASE, live_partition, runs_partition, skip_sort_key
from replmon.fleet.lease import LEASE_MARGIN_SECONDS, begin_run
from replmon.local.aslrun import LocalStateMachine, state_machine_handlers
from replmon.wiring import injected
from tests.conftest import TABLE, Env, route
from tests.fakes import Scenario

PAYLOAD = {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}}


class Gate:
    """Holds the first PollReplication until opened: a run that is still running."""

    def __init__(self, handler: Any) -> None:
        self.handler, self.entered, self.open, self.calls = handler, threading.Event(), threading.Event(), 0

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.open.wait(60), "gate never opened"
        return self.handler(event, context)


def item(env: Env, pk: str, sk: str) -> dict[str, Any] | None:
    return env.ddb.get_item(TableName=TABLE, Key={"route": {"S": pk}, "at": {"S": sk}}).get("Item")


def skips(env: Env) -> list[tuple[str, float, dict[str, str]]]:
    return [c for c in env.counted if c[0] == "RunSkipped"]


def test_overlapping_runs_the_second_skips_the_route_counted_and_the_next_runs(env: Env) -> None:
    env.fake.default = Scenario(latency=2.0)
    handlers = state_machine_handlers()
    gate = handlers["PollReplication"] = Gate(handlers["PollReplication"])
    with injected(env.deps), LocalStateMachine(handlers, clock=env.clock) as sm:
        first = sm.start({**PAYLOAD, "run_id": "20261123T100000Z-first"})
        assert gate.entered.wait(60)  # the first run holds the lease and is probing
        lease = item(env, live_partition("primary"), LEASE)
        assert lease is not None and lease["holder"]["S"] == first

        second = sm.run({**PAYLOAD, "run_id": "20261123T101500Z-second"}, timeout=60)
        assert second.status == "SUCCEEDED", second.cause
        assert second.output["skipped"] == [{"route": "primary", "held_by": first, "until": float(lease["until"]["N"])}]
        assert not [i for i in second.invocations if i.function == "UploadProbe"]  # nothing probed
        # Recorded and counted, never silent.
        skip = item(env, runs_partition("primary"), skip_sort_key("20261123T101500Z-second"))
        assert skip is not None and skip["holder"]["S"] == first and skip["classes"] == {"L": [{"S": "1MiB"}]}
        assert skips(env) == [("RunSkipped", 1, {"Route": "primary"})]

        gate.open.set()
        done = sm.wait(first, timeout=60)
        assert done.status == "SUCCEEDED", done.cause
        assert done.output["lease_end"] == {"released": ["primary"], "not_held": []}
        assert "holder" not in item(env, live_partition("primary"), LEASE)  # type: ignore[operator]

        third = sm.run({**PAYLOAD, "run_id": "20261123T103000Z-third"}, timeout=60)
        assert third.status == "SUCCEEDED", third.cause
        assert third.output["skipped"] == [] and third.output["results"] == {"probes": 1}
        assert len(skips(env)) == 1


def test_a_dead_runs_lease_expires_after_its_bound_and_the_route_runs_again(env: Env) -> None:
    env.fake.default = Scenario(latency=2.0)
    handlers = state_machine_handlers()
    gate = handlers["PollReplication"] = Gate(handlers["PollReplication"])
    with injected(env.deps), LocalStateMachine(handlers, clock=env.clock) as sm:
        dead = sm.start({**PAYLOAD, "run_id": "20261123T100000Z-dead"})
        assert gate.entered.wait(60)
        sm.stop(dead, "States.Timeout", "the run died")  # EndRouteRun never runs
        until = float(item(env, live_partition("primary"), LEASE)["until"]["N"])  # type: ignore[index]
        # The bound: the run's worst case (one 1MiB probe at the default timeout) plus the margin.
        assert until - env.clock.now() > LEASE_MARGIN_SECONDS

        blocked = sm.run({**PAYLOAD, "run_id": "20261123T101500Z-blocked"}, timeout=60)
        assert blocked.output["skipped"][0]["held_by"] == dead

        env.clock.advance(until - env.clock.now() + 1)
        after = sm.run({**PAYLOAD, "run_id": "20261123T200000Z-after"}, timeout=60)
        assert after.status == "SUCCEEDED", after.cause
        assert after.output["skipped"] == [] and after.output["results"] == {"probes": 1}
        assert after.output["lease_end"]["released"] == ["primary"]
        gate.open.set()
        sm.wait_idle(30)


def test_a_run_that_outlasts_its_lease_keeps_its_route_while_it_still_runs(env: Env) -> None:
    """S2 of review 19: expiry alone would hand the route to the next tick while the overrunning
    run still probes it. BeginRouteRun asks Step Functions (DescribeExecution, moto's) about an
    expired lease's holder: RUNNING -> skipped as if held; once the run ended -> taken.
    (DescribeExecution API reference, ExecutionDoesNotExist / status RUNNING,
    https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html)"""
    from replmon.adapters.executions import StepFunctionsExecutions

    env.fake.default = Scenario(latency=2.0)
    handlers = state_machine_handlers()
    gate = handlers["PollReplication"] = Gate(handlers["PollReplication"])
    with injected(env.deps), LocalStateMachine(handlers, clock=env.clock) as sm:
        env.deps.executions = StepFunctionsExecutions(sm.sfn)
        slow = sm.start({**PAYLOAD, "run_id": "20261123T100000Z-slow"})
        assert gate.entered.wait(60)
        until = float(item(env, live_partition("primary"), LEASE)["until"]["N"])  # type: ignore[index]
        env.clock.advance(until - env.clock.now() + 60)  # past its lease, and still running

        later = sm.run({**PAYLOAD, "run_id": "20261123T200000Z-later"}, timeout=60)
        assert later.status == "SUCCEEDED", later.cause
        assert later.output["skipped"] == [{"route": "primary", "held_by": slow, "until": until}]
        assert not [i for i in later.invocations if i.function == "UploadProbe"]
        assert skips(env) == [("RunSkipped", 1, {"Route": "primary"})]

        gate.open.set()
        assert sm.wait(slow, timeout=60).status == "SUCCEEDED"
        # It ended and gave its lease back (not_held: its lease had expired, nobody took it).
        after = sm.run({**PAYLOAD, "run_id": "20261123T201500Z-after"}, timeout=60)
        assert after.output["skipped"] == [] and after.output["results"] == {"probes": 1}


def test_an_expired_lease_of_an_ended_or_unknown_run_is_taken() -> None:
    from replmon.adapters.leases import MemoryLeases
    from replmon.core.clock import ManualClock
    from replmon.fleet.lease import begin_run

    class Status:
        def __init__(self, answers: dict[str, bool | None]) -> None:
            self.answers, self.asked = answers, []  # type: list[str]

        def running(self, holder: str) -> bool | None:
            self.asked.append(holder)
            return self.answers.get(holder)

    class D:
        def __init__(self) -> None:
            self.leases, self.clock, self.metrics = MemoryLeases(), ManualClock(start=1000.0), type("M", (), {"count": lambda *a, **k: None})()
            self.executions = Status({"ended": False, "unknown": None, "runs": True})

    d = D()
    for name, holder in (("a", "ended"), ("b", "unknown"), ("c", "runs")):
        assert d.leases.acquire(name, holder, 0.0, 500.0, {}) is not None  # expired at 500
    assert d.leases.acquire("d", "fresh", 900.0, 5000.0, {}) is not None  # not expired: asked too (an ended holder frees it)
    plan = {"run_id": "r", "bound_seconds": 10.0, "routes": [route(name=n) for n in "abcd"],
            "probes": [{"route": route(name=n), "size_class": "1MiB"} for n in "abcd"]}
    out = begin_run({"plan": plan, "execution": "me"}, d)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == ["a", "b"]
    assert [s["route"] for s in out["skipped"]] == ["c", "d"]
    assert sorted(d.executions.asked) == ["ended", "fresh", "runs", "unknown"]
    # A run holding many routes is asked about once.
    d2 = D()
    for n in "abcd":
        assert d2.leases.acquire(n, "runs", 0.0, 500.0, {}) is not None
    out = begin_run({"plan": plan, "execution": "me"}, d2)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == [] and d2.executions.asked == ["runs"]


def test_a_retried_begin_holds_the_same_lease_and_counts_a_skip_once(env: Env) -> None:
    plan = {"run_id": "20261123T100000Z-r", "bound_seconds": 100.0, "routes": [route(), route(name="other")],
            "probes": [{"route": route(), "size_class": "1MiB"}, {"route": route(name="other"), "size_class": "64MiB"}]}
    first = begin_run({"plan": plan, "execution": "exec-1"}, env.deps)
    again = begin_run({"plan": plan, "execution": "exec-1"}, env.deps)  # Lambda retried the step
    assert first["lease"]["routes"] == again["lease"]["routes"] == ["primary", "other"]
    assert again["probe_count"] == 2 and again["skipped"] == []

    later = {**plan, "run_id": "20261123T101500Z-r"}
    for _ in range(2):  # the skipping step retried: one record, one count
        out = begin_run({"plan": later, "execution": "exec-2"}, env.deps)
        assert out["probe_count"] == 0 and out["lease"]["routes"] == [] and [s["route"] for s in out["skipped"]] == ["primary", "other"]
    assert sorted(c[2]["Route"] for c in skips(env)) == ["other", "primary"]
    # Only the holder gives a lease back; a free lease can be taken by anyone.
    assert not env.leases.release("primary", "exec-2", env.clock.now())
    assert env.leases.release("primary", "exec-1", env.clock.now())
    assert begin_run({"plan": later, "execution": "exec-2"}, env.deps)["lease"]["routes"] == ["primary"]
    leases = env.leases.leases(["primary", "other", "never-ran"])
    assert leases["primary"].holder == "exec-2" and leases["other"].holder == "exec-1" and "never-ran" not in leases


def test_a_local_run_counts_probes_from_the_maps_count_and_reports_skips() -> None:
    from replmon.local.aslrun import ExecutionResult, Invocation
    from replmon.local.execution import ProbeRun

    skipped = [{"route": "primary", "held_by": "arn:...:other", "until": 1.0}]
    done = ExecutionResult("SUCCEEDED", {"results": {"probes": 2}, "skipped": []}, None, None,
                           [Invocation("Cleanup", {"probe_id": "p1"}, None, {})])
    assert (ProbeRun("r", done, [], 1.0).planned, ProbeRun("r", done, [], 1.0).failed_iterations) == (2, 1)
    none = ExecutionResult("SUCCEEDED", {"run_id": "r", "skipped": skipped}, None, None, [])
    run = ProbeRun("r", none, [], 1.0)
    assert run.planned == 0 and run.failed_iterations == 0 and run.skipped == skipped


class RouteGate:
    """Holds every PollReplication of one route until opened: that route hangs, the others run."""

    def __init__(self, handler: Any, route: str) -> None:
        self.handler, self.route, self.entered, self.open = handler, route, threading.Event(), threading.Event()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        if event.get("route", {}).get("name") == self.route:
            self.entered.set()
            assert self.open.wait(60), "gate never opened"
        return self.handler(event, context)


def wait_released(env: Env, route: str, timeout: float = 60.0) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lease = item(env, live_partition(route), LEASE)
        if lease is not None and "holder" not in lease:
            return lease
        time.sleep(0.02)
    raise AssertionError(f"the lease of {route} was not released within {timeout} s: {item(env, live_partition(route), LEASE)}")


def test_a_stalled_route_holds_only_its_own_lease_the_others_are_released_at_their_end_and_run_next(env: Env) -> None:
    """Per-route leases: each probe's EndProbe (inside the Map, after its Cleanup) adds it to its
    lease's set of ended probes and the route's last one releases the lease, while the stalled
    route's probe still polls. A Distributed Map's iterations are child workflow executions, each with
    its own history, and the Map state ends only when every iteration has ended ("Redriving Map Runs":
    a Map Run is the set of child workflow executions a Distributed Map state starts,
    https://docs.aws.amazon.com/step-functions/latest/dg/redrive-map-run.html): a release at the
    Map's end would wait for the stalled one. The child reads its route and run id
    from its own input (each iteration's input is its item, not the parent's state; the context
    object's $$. paths are readable in Parameters, "Accessing execution data from the Context object",
    https://docs.amazonaws.cn/en_us/step-functions/latest/dg/input-output-contextobject.md). The set
    makes a retried EndProbe count once: UpdateItem ADD on a set is a union ("UpdateExpression",
    https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/dynamodb/aws.sdk.kotlin.services.dynamodb.model/-update-item-request/update-expression.html)."""
    env.fake.default = Scenario(latency=2.0)
    handlers = state_machine_handlers()
    gate = handlers["PollReplication"] = RouteGate(handlers["PollReplication"], "stalled")
    ends: list[tuple[dict[str, Any], Any]] = []  # every EndRouteRun call of every run, with its result
    end_route_run = handlers["EndRouteRun"]

    def recorded_end(event: dict[str, Any], context: Any) -> Any:
        out = end_route_run(event, context)
        ends.append((event, out))
        return out

    handlers["EndRouteRun"] = recorded_end
    both = {**PAYLOAD, "routes": [route(name="stalled"), route(name="healthy")], "sizes": ["1KiB", "2KiB"], "max_concurrency": 4}
    with injected(env.deps), LocalStateMachine(handlers, clock=env.clock) as sm:
        first = sm.start({**both, "run_id": "20261123T100000Z-first"})
        assert gate.entered.wait(60)
        healthy = wait_released(env, "healthy")  # at its own end, while the run still runs
        assert set(healthy) >= {"finished", "run"} and "done" not in healthy and "probes" in healthy
        stalled = item(env, live_partition("stalled"), LEASE)
        assert stalled is not None and stalled["holder"]["S"] == first and stalled["probes"] == {"N": "2"}

        second = sm.run({**both, "run_id": "20261123T101500Z-second"}, timeout=60)
        assert second.status == "SUCCEEDED", second.cause
        assert [s["route"] for s in second.output["skipped"]] == ["stalled"]  # only the stalled route is held
        probed = {i.event["route"]["name"] for i in second.invocations if i.function == "UploadProbe"}
        assert probed == {"healthy"} and second.output["results"] == {"probes": 2}
        assert second.output["lease_end"] == {"released": ["healthy"], "not_held": []}
        assert "holder" not in item(env, live_partition("healthy"), LEASE)  # type: ignore[operator]

        gate.open.set()
        done = sm.wait(first, timeout=60)
        assert done.status == "SUCCEEDED", done.cause
        # stalled was released by its own last probe; healthy's lease is the second run's history now
        assert done.output["lease_end"] == {"released": ["stalled"], "not_held": ["healthy"]}
        assert "holder" not in item(env, live_partition("stalled"), LEASE)  # type: ignore[operator]
        first_ends = [(e, out) for e, out in ends if e.get("run_id") == "20261123T100000Z-first" and "probe_id" in e]
        # one EndProbe per probe of the first run (a retried one counts once: the set); each route released once
        assert len({e["probe_id"] for e, _ in first_ends}) == 4, first_ends
        assert sorted(out["route"] for _, out in first_ends if out["released"]) == ["healthy", "stalled"], first_ends


def test_a_retried_end_probe_counts_once_and_never_frees_another_runs_lease(env: Env) -> None:
    from replmon.adapters.leases import DynamoLeases

    leases = DynamoLeases(TABLE, env.ddb)
    assert leases.acquire("r", "arn:exec:1", 0.0, 4e9, {}, run="run-1", probes=2) is not None
    assert leases.end_probe("r", "run-1", "p1", 1.0) is False
    assert leases.end_probe("r", "run-1", "p1", 1.0) is False  # a retry: still one of two
    assert leases.end_probe("r", "run-0", "p2", 1.0) is None  # another run's probe: not its lease
    assert leases.end_probe("r", "run-1", "p2", 2.0) is True
    assert leases.leases(["r"])["r"].holder is None
    assert leases.end_probe("r", "run-1", "p2", 3.0) is None  # released already
    assert leases.release("r", "arn:exec:1", 4.0, run="run-1")  # EndRouteRun: released by its probes, counts as released
    assert leases.acquire("r", "arn:exec:2", 5.0, 4e9, {}, run="run-2", probes=1) is not None
    assert not leases.release("r", "arn:exec:1", 6.0, run="run-1"), "run-1's end must not free run-2's lease"
    assert leases.end_probe("r", "run-1", "p9", 6.0) is None and leases.leases(["r"])["r"].holder == "arn:exec:2"


def test_a_holder_that_no_longer_runs_does_not_block_the_next_run() -> None:
    """A local run's lease carries its host and pid: once that process is gone, the next run takes the
    lease before it expires (conditional on that holder). An execution that ended likewise; a live one
    blocks; another machine's local run is left to its expiry."""
    import socket
    import subprocess
    import sys

    from replmon.adapters.leases import MemoryLeases
    from replmon.core.clock import ManualClock
    from replmon.core.ports import Lease
    from replmon.fleet.lease import begin_run, holder_ended, local_owner

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dead_pid = gone.stdout.strip()
    host = socket.gethostname()
    assert holder_ended(Lease("x", "h", 9e9, {}, {"host": host, "pid": dead_pid}), None) is True
    assert holder_ended(Lease("x", "h", 9e9, {}, local_owner()), None) is False
    # Written without its start time (a lease from before they carried it): a live pid cannot be told to be the run.
    assert holder_ended(Lease("x", "h", 9e9, {}, {"host": host, "pid": str(__import__("os").getpid())}), None) is None
    assert holder_ended(Lease("x", "h", 9e9, {}, {"host": "elsewhere", "pid": dead_pid}), None) is None

    class Status:
        def running(self, holder: str) -> bool | None:
            return {"arn:ended": False, "arn:live": True}.get(holder)

    class D:
        def __init__(self) -> None:
            self.leases, self.clock, self.executions = MemoryLeases(), ManualClock(start=1000.0), Status()
            self.metrics = type("M", (), {"count": lambda *a, **k: None})()
            self.plans = None

    d = D()
    for name, holder, owner in (("local", "arn:local", {"host": host, "pid": dead_pid}), ("ended", "arn:ended", None),
                                ("live", "arn:live", None), ("remote", "arn:remote", {"host": "elsewhere", "pid": dead_pid})):
        assert d.leases.acquire(name, holder, 900.0, 9e9, {}, owner=owner) is not None  # far from expiry
    plan = {"run_id": "r", "bound_seconds": 10.0, "routes": [route(name=n) for n in ("local", "ended", "live", "remote")],
            "probes": [{"route": route(name=n), "size_class": "1MiB"} for n in ("local", "ended", "live", "remote")]}
    out = begin_run({"plan": plan, "execution": "arn:me"}, d)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == ["local", "ended"]
    assert [s["route"] for s in out["skipped"]] == ["live", "remote"]


def test_a_local_run_that_cannot_give_its_lease_back_says_so_with_its_expiry() -> None:
    from types import SimpleNamespace

    from replmon.adapters.leases import MemoryLeases
    from replmon.core.errors import StoreUnavailable
    from replmon.local.accounting import RunAccount
    from replmon.local.execution import release_leases

    class Full(MemoryLeases):
        def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
            raise StoreUnavailable("latency: disk full (ENOSPC)")

    leases = Full()
    leases.acquire("primary", "arn:me", 0.0, 1790003600.0, {})
    kept = release_leases(SimpleNamespace(leases=leases), ["primary"], "arn:me", "r")  # type: ignore[arg-type]
    assert kept == ["lease of route primary not released (StoreUnavailable: latency: disk full (ENOSPC)); it blocks the route's "
                    "runs until 2026-09-21 15:13:20 UTC, or until replmon fleet release primary"]
    acc = RunAccount(leases_kept=kept)
    assert acc.could_not_record and kept[0] in acc.lines()  # exit 5 ("could not record"), the line on stderr and in JSON


def test_every_probe_ends_through_end_probe_and_the_maps_result_stays_the_cleanup_summary() -> None:
    """Both Maps (inline probes and the plan bucket's ItemReader): every path out of a child's Cleanup
    reaches EndProbe (the route's lease) and the child's output is only the Cleanup summary, as before
    (tests/test_payload_bounds.py bounds it). The Map's result array holds one output per child, and a
    Distributed Map's Map Run fails if any one child workflow execution fails or times out (the
    tolerated failure percentage defaults to zero: "Tolerated failure threshold for Distributed Map
    state", https://docs.aws.amazon.com/step-functions/latest/dg/maprun-fail-threshold.html): EndProbe
    catches its own failure, so a lost release never fails the run's probes (EndRouteRun or the
    lease's expiry gives it back)."""
    import json

    from replmon.local.template import DEFINITION

    states = json.loads(DEFINITION.read_text())["States"]
    for mapname, sfx in (("Probes", ""), ("ProbesFromPlan", "FromPlan")):
        child = states[mapname]["ItemProcessor"]["States"]
        assert child[f"Cleanup{sfx}"]["Next"] == child[f"CleanupAbandoned{sfx}"]["Next"] == f"EndProbe{sfx}"
        assert not [n for n, st in child.items() if st.get("End") and n not in (f"EndProbe{sfx}", f"LeaseKeptToRunEnd{sfx}")]
        end = child[f"EndProbe{sfx}"]
        assert end["Parameters"]["FunctionName"] == "${EndRouteRunFunctionArn}"
        assert end["Parameters"]["Payload"] == {"route": {"name.$": "$.route.name"}, "run_id.$": "$.run_id", "probe_id.$": "$.probe_id"}
        assert end["ResultPath"] is None and end["OutputPath"] == "$.cleanup.summary"
        assert end["Catch"] == [{"ErrorEquals": ["States.ALL"], "ResultPath": None, "Next": f"LeaseKeptToRunEnd{sfx}"}]
        assert child[f"LeaseKeptToRunEnd{sfx}"]["OutputPath"] == "$.cleanup.summary"
        assert states[mapname]["ResultSelector"] == {"probes.$": "States.ArrayLength($)"}
    for name in ("EndRouteRun", "ReleaseAfterFailure"):
        assert states[name]["Parameters"]["Payload"]["run_id.$"] == "$.run_id"


def test_a_fleet_plan_in_the_plan_bucket_gives_each_lease_its_routes_probe_count() -> None:
    """The planner names each route's probe count (route_probes): BeginRouteRun need not read the plan
    object to know when a route's last probe has ended."""
    from replmon.adapters.leases import MemoryLeases
    from replmon.core.clock import ManualClock

    class D:
        def __init__(self) -> None:
            self.leases, self.clock, self.executions, self.plans = MemoryLeases(), ManualClock(start=1000.0), None, None
            self.metrics = type("M", (), {"count": lambda *a, **k: None})()

    d = D()
    plan = {"run_id": "r", "bound_seconds": 10.0, "tick": "t", "tick_start": 900.0, "routes": [], "probes": [],
            "plan": {"bucket": "b", "key": "k", "items": 5}, "route_classes": {"a": ["1KiB"], "b": ["1KiB", "1MiB"]},
            "route_probes": {"a": 2, "b": 3}}
    out = begin_run({"plan": plan, "execution": "arn:me"}, d)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == ["a", "b"] and out["route_probes"] == {"a": 2, "b": 3}
    assert d.leases.end_probe("a", "r", "p1", 1001.0) is False and d.leases.end_probe("a", "r", "p2", 1001.0) is True
    assert [d.leases.end_probe("b", "r", f"p{i}", 1001.0) for i in range(3)] == [False, False, True]


def test_one_routes_lease_refused_marks_only_that_route_the_table_down_fails_the_begin() -> None:
    """DynamoDB throttles per partition (a hot item): one route's refused lease skips only that route,
    counted RunSkipped and named; every route refused is the table, not a route: BeginRouteRun raises
    (its Retry, then the run fails: ExecutionsFailedAlarm)."""
    import pytest

    from replmon.adapters.leases import MemoryLeases
    from replmon.core.clock import ManualClock
    from replmon.core.errors import StoreUnavailable

    class Hot(MemoryLeases):
        def __init__(self, hot: set[str]) -> None:
            super().__init__()
            self.hot = hot

        def acquire(self, route: str, *a: Any, **k: Any) -> Any:
            if route in self.hot:
                raise StoreUnavailable("latency: ProvisionedThroughputExceededException")
            return super().acquire(route, *a, **k)

    class D:
        def __init__(self, hot: set[str]) -> None:
            self.leases, self.clock, self.executions, self.plans = Hot(hot), ManualClock(start=1000.0), None, None
            self.counted: list[tuple[Any, ...]] = []
            self.metrics = type("M", (), {"count": lambda _s, *a, **k: self.counted.append((*a, k))})()

    plan = {"run_id": "r", "bound_seconds": 10.0, "routes": [route(name=n) for n in "ab"],
            "probes": [{"route": route(name=n), "size_class": "1MiB"} for n in "ab"]}
    d = D({"a"})
    out = begin_run({"plan": dict(plan), "execution": "arn:me"}, d)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == ["b"] and [p["route"]["name"] for p in out["probes"]] == ["b"]
    assert out["unleased"] == [{"route": "a", "error": "latency: ProvisionedThroughputExceededException"}]
    assert d.counted == [("RunSkipped", {"dimensions": {"Route": "a"}})]
    with pytest.raises(StoreUnavailable):
        begin_run({"plan": dict(plan), "execution": "arn:me"}, D({"a", "b"}))  # type: ignore[arg-type]
