"""A group holds at most HEARTBEAT_ROUTES_PER_GROUP heartbeat routes (fleet/caps.py): the Heartbeat
serves the first that many in the caps' order, PlanProbes counts the rest in RoutesOverCap (the
caps' ticket) and names them, and `replmon fleet put` refuses one more, naming the field and the fix."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.registry import RouteSpec, load_route_spec
from replmon.fleet.caps import (
    HEARTBEAT_CAP,
    HEARTBEAT_ROUTES_PER_GROUP,
    check_heartbeat_room,
    heartbeat_left_out,
    heartbeat_routes_within_cap,
)

ACCOUNT = "111111111111"


def spec(i: int, *, heartbeat: bool = True, origin: str = "explicit") -> RouteSpec:
    return load_route_spec({"name": f"route-{i:04d}", "origin": origin, "group": "g00",
                            "source": {"account": ACCOUNT, "bucket": f"src-{i:04d}", "region": "us-east-1"},
                            "destinations": [{"account": ACCOUNT, "bucket": f"dst-{i:04d}", "region": "us-west-2"}],
                            **({} if heartbeat else {"probe": {"heartbeat": False}})})


class Registry:
    def __init__(self, specs: list[RouteSpec]) -> None:
        self.specs = specs

    def routes(self, group: str) -> list[RouteSpec]:
        return [s for s in self.specs if s.group == group]


def test_the_heartbeat_serves_the_first_routes_of_a_group_past_its_cap_and_logs_the_rest(caplog: Any) -> None:
    from replmon.probe.heartbeat import heartbeat_routes

    specs = [spec(i) for i in range(HEARTBEAT_ROUTES_PER_GROUP + 3)] + [spec(9000 + i, heartbeat=False) for i in range(5)]
    deps = SimpleNamespace(registry=Registry(specs[::-1]), fleet=FleetSettings(route_groups=1), defaults={})
    with caplog.at_level("ERROR", logger="replmon"):
        served = heartbeat_routes("g00", deps)  # type: ignore[arg-type]
    assert [h.route.name for h in served] == [f"route-{i:04d}" for i in range(HEARTBEAT_ROUTES_PER_GROUP)]
    [line] = [r for r in caplog.records if "past the group's cap" in r.getMessage()]
    assert line.routes == "route-0500, route-0501, route-0502" and "RouteGroups" in line.fix  # type: ignore[attr-defined]


def test_the_plan_names_and_counts_the_routes_past_a_groups_heartbeat_cap() -> None:
    routes = [SimpleNamespace(spec=spec(i)) for i in range(HEARTBEAT_ROUTES_PER_GROUP + 2)]
    out = heartbeat_left_out(routes)  # type: ignore[arg-type]
    assert [(x.route, x.cap) for x in out] == [("route-0500", HEARTBEAT_CAP), ("route-0501", HEARTBEAT_CAP)]
    assert heartbeat_left_out(routes[:HEARTBEAT_ROUTES_PER_GROUP]) == []  # type: ignore[arg-type]


def test_fleet_put_refuses_a_heartbeat_route_the_group_has_no_room_for() -> None:
    full = [spec(i) for i in range(HEARTBEAT_ROUTES_PER_GROUP)]
    with pytest.raises(ConfigError, match=r"probe\.heartbeat: group g00 already holds 500 heartbeat routes.*RouteGroups"):
        check_heartbeat_room(spec(HEARTBEAT_ROUTES_PER_GROUP), full)
    check_heartbeat_room(spec(HEARTBEAT_ROUTES_PER_GROUP, heartbeat=False), full)  # no heartbeat: room enough
    check_heartbeat_room(spec(7), full)  # an edit of a route already there
    assert heartbeat_routes_within_cap(full)[1] == []


def test_a_full_group_fits_the_work_deadline_on_the_heartbeats_cpu_share() -> None:
    """The CPU a steady invocation took per route in the lab (docs/bench/bench-fleet.json, written by
    `replmon lab bench-fleet --heartbeat-routes 500`), times the cap, fits WORK_SECONDS on the CPU
    share the template's MemorySize buys: "At 1,769 MB, a function has the equivalent of one vCPU"
    (https://docs.aws.amazon.com/lambda/latest/dg/resource-model.html)."""
    import json

    from replmon.local.template import load_template
    from replmon.probe.heartbeat import WORK_SECONDS

    memory = int(load_template()["Resources"]["HeartbeatFunction"]["Properties"]["MemorySize"])
    doc = json.loads((Path(__file__).resolve().parents[1] / "docs" / "bench" / "bench-fleet.json").read_text())
    scale = doc["heartbeat_scale"]
    assert scale["routes"] >= HEARTBEAT_ROUTES_PER_GROUP
    steady = scale["invocations"][-1]  # the first is a cold start (every route's state and expectation loaded)
    cpu_per_route = steady["cpu_s"] / steady["routes_served"]
    assert cpu_per_route * HEARTBEAT_ROUTES_PER_GROUP <= WORK_SECONDS * memory / 1769
