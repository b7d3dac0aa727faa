"""(f) The lease store fails at the end of a run (its disk full): the EndRouteRun Lambda, with the
environment and role template.yaml gives it, cannot give the lease back; the execution ends all the
same, and the next tick's BeginRouteRun asks Step Functions (DescribeExecution, IAM-evaluated on
the execution resource) about the holder: SUCCEEDED, so the route is probed, not skipped for the
lease's remaining hours. An execution's status is RUNNING, SUCCEEDED, FAILED, TIMED_OUT, ABORTED or
PENDING_REDRIVE (https://docs.aws.amazon.com/step-functions/latest/apireference/API_DescribeExecution.html)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from replmon.core.errors import StoreUnavailable
from tests.deployed.scenario import ROUTE, deployed, uploads

pytestmark = pytest.mark.deployed


class DiskFull:
    """The EndRouteRun function's lease store, its writes failing as a full disk fails them."""

    def __init__(self, leases: Any) -> None:
        self.leases_store, self.attempts = leases, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.leases_store, name)

    def release(self, *a: Any, **k: Any) -> bool:
        self.attempts += 1
        raise StoreUnavailable("replmon-latency: InternalServerError: disk full (ENOSPC)")

    def end_probe(self, *a: Any, **k: Any) -> bool | None:
        self.attempts += 1
        raise StoreUnavailable("replmon-latency: InternalServerError: disk full (ENOSPC)")


@pytest.fixture(scope="module")
def unreleased() -> Iterator[dict[str, Any]]:
    with deployed() as stack:
        full = DiskFull(stack.deps("EndRouteRun").leases)
        stack._deps["EndRouteRun"] = dataclasses.replace(stack.deps("EndRouteRun"), leases=full)
        first = stack.schedule("ProbeStateMachine").next
        stack.advance(first - stack.clock.now() + 1)
        stack.advance(minutes=4)  # the run probes, fails to give its lease back, ends
        lease = stack.deps("BeginRouteRun").leases.leases([ROUTE]).get(ROUTE)
        seen: dict[str, Any] = {"stack": stack, "first": first, "attempts": full.attempts,
                                "held": (lease.holder, lease.until) if lease else None, "at": stack.clock.now()}
        second = stack.schedule("ProbeStateMachine").next
        stack.advance(second - stack.clock.now() + 1)
        stack.advance(minutes=2)
        seen["second"] = second
        yield seen


def test_f_a_lease_the_end_of_a_run_could_not_give_back_does_not_block_the_next_tick(unreleased: dict[str, Any]) -> None:
    stack = unreleased["stack"]
    holder, until = unreleased["held"]
    assert unreleased["attempts"] > 0 and holder and ":execution:" in holder, unreleased["held"]
    assert until > unreleased["second"] + 600, "the lease would have expired by the next tick anyway: nothing shown"
    assert uploads(stack, ROUTE, since=unreleased["second"]) >= 1, "the route was skipped behind the ended run's lease"
    assert not [p for p in stack.points("RunSkipped", Route=ROUTE) if p.timestamp >= unreleased["second"]]
    assert not stack.denied(), stack.denied()
