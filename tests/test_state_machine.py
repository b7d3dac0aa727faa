"""The real statemachines/replication_probe.asl.json under moto's interpreter, real handlers in-process."""

from __future__ import annotations

from typing import Any

import pytest

from replmon.aslrun import LocalStateMachine, handlers_for
from replmon.record import ProbeStatus
from tests.conftest import DST, SRC, Env, all_versions, route
from tests.fakes import Scenario

MiB = 2**20


def run(env: Env, payload: dict[str, Any]) -> Any:
    with LocalStateMachine(handlers_for(env.deps), clock=env.clock) as sm:
        return sm.run(payload, timeout=120)


def records(env: Env) -> list[Any]:
    return env.store.query("primary", 0, 4_000_000_000)


def test_pending_then_completed_after_several_polls(env: Env) -> None:
    env.fake.default = Scenario(latency=42.0)
    result = run(env, {"routes": [route()], "sizes": ["1MiB"], "poll": {"use_history": False}})
    assert result.status == "SUCCEEDED", result.cause
    [rec] = records(env)
    assert rec.status is ProbeStatus.COMPLETED
    # The interval brackets the true latency and is no wider than the policy's bound (1 s here).
    assert rec.latency_lo < 42.0 <= rec.latency_hi
    assert rec.width <= 1.0 + 0.01
    assert rec.bound_met, (rec.width, rec.bound_seconds)
    # First HEAD at once, then one per second: about 43 HEADs, all counted.
    assert 42 <= rec.head_count <= 45
    assert rec.head_count == env.fake.heads[next(iter(env.fake.heads))]
    polls = [i for i in result.invocations if i.function == "PollReplication"]
    assert 3 <= len(polls) < rec.head_count  # inline polling: several HEADs per invocation, several invocations
    assert all_versions(env.s3, SRC) == [] and all_versions(env.s3, DST) == []
    assert [p.status for p in env.published] == [ProbeStatus.COMPLETED]
