"""(d) One route hangs (its UploadProbe never answers): every other route keeps its schedule and its lease."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.deployed.scenario import ROUTE, deployed, uploads

pytestmark = pytest.mark.deployed
OWN = "primary"  # the stack's own route (the StackRoute registry item)


@pytest.fixture(scope="module")
def hung() -> Iterator[dict[str, Any]]:
    """The enrolled member route ``orders-src`` hangs in UploadProbe from the first tick; the stack's
    own route runs beside it; the next tick follows."""
    with deployed() as stack:
        stack.hang(ROUTE)
        first = stack.schedule("ProbeStateMachine").next
        stack.advance(first - stack.clock.now() + 1)
        stack.advance(minutes=5)
        yield {"stack": stack, "first": first}


def test_d_a_hung_route_keeps_its_lease_and_the_other_routes_keep_their_heartbeats(hung: dict[str, Any]) -> None:
    stack, first = hung["stack"], hung["first"]
    # The hung route's lease is its run's: the next tick skips it, counted and named.
    assert [p for p in stack.points("RunSkipped", Route=ROUTE) if p.timestamp > first], "the hung route was not skipped"
    # The other route's heartbeat kept its minute: a StallSeconds point a minute, no stall.
    beats = [p for p in stack.points("StallSeconds", Route=OWN) if p.timestamp >= first]
    assert len(beats) >= 5 and all(p.value == 0 for p in beats)
    assert stack.alarm_state("RouteStalledG00Alarm", OWN) == "OK"


def test_d_one_route_hangs_every_other_route_keeps_its_schedule_and_its_lease(hung: dict[str, Any]) -> None:
    """The lease of the healthy route is released by its own EndProbe inside the Map (not when the
    Map, held by the hung route, ends): it is probed at the next tick, never skipped, nothing pages."""
    stack, first = hung["stack"], hung["first"]
    assert uploads(stack, OWN, since=first + 300) == 1, "the healthy route was not probed at the next tick"
    assert not stack.points("RunSkipped", Route=OWN), "the healthy route was skipped"
    assert not stack.pages(naming=OWN) and not stack.tickets(naming=OWN)
