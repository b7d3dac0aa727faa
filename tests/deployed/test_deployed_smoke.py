"""The harness in a test's own body: the stack's own route, probed through the handlers on its
schedule with every call allowed, and its RPO read by the collector (what pytest's output capture
does between a test's phases does not hide the handlers' EMF)."""

from __future__ import annotations

import pytest

from tests.deployed.scenario import deployed

pytestmark = pytest.mark.deployed


def test_the_stacks_own_route_runs_on_its_schedule_with_every_call_allowed() -> None:
    with deployed(fleet=False) as stack:
        fired = [name for _, name in stack.advance(minutes=6)]
        assert fired.count("ProbeStateMachine.Schedule") == 1 and fired.count("CollectSignalsFunction.Schedule") == 1
        assert fired.count("HeartbeatFunction.Group00") == 6
        assert [r.status.value for r in stack.deps("Report").store.query("primary", 0, 4e9)] == ["COMPLETED"]
        assert stack.points("RpoSeconds", Route="primary") and stack.points("ProbeCompleted", RouteGroup="g00")
        assert stack.denied() == []
        assert {c.function for c in stack.calls} >= {"PlanProbes", "BeginRouteRun", "UploadProbe", "PollReplication", "RecordResult",
                                                     "Cleanup", "Housekeeping", "EndRouteRun", "Heartbeat", "CollectSignals"}
