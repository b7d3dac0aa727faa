"""Issue 19.3: one run per route at a time - the real ASL's BeginRouteRun/EndRouteRun under moto's
interpreter, the lease in (moto's) DynamoDB through adapters/leases.py.

AWS contracts encoded here (aws-contracts.md):
- C19.18: an execution name or ListExecutions(RUNNING) is no lease - StartExecution with a used name
  fails for 90 days, and ListExecutions "is eventually consistent. The results are best effort"
  (StartExecution / ListExecutions API reference,
  https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html,
  https://docs.aws.amazon.com/step-functions/latest/apireference/API_ListExecutions.html).
  So the lease is a DynamoDB conditional write, and two concurrent runs get exactly one lease.
- C19.21: conditional writes fail with ConditionalCheckFailedException and are evaluated atomically
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
