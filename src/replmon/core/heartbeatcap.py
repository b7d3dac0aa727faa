"""How many heartbeat routes one RouteGroup's Heartbeat can serve, and which they are: shared by the
Heartbeat (probe/heartbeat.py), which serves the first that many, and the fleet's caps
(fleet/caps.py), which name the rest at plan time and refuse them at `replmon fleet put`."""

from __future__ import annotations

from collections.abc import Sequence

from replmon.core.registry import Origin, RouteSpec

#: Heartbeat routes one group may hold: its invocation must put and poll them all within the Heartbeat's
#: 45 s work deadline every minute. Measured: docs/BENCH-FLEET.md (the Heartbeat handler, 500 routes in one group).
HEARTBEAT_ROUTES_PER_GROUP = 500
HEARTBEAT_CAP = "heartbeat_routes_per_group"
HEARTBEAT_FIX = ("raise RouteGroups (REPLMON_FLEET route_groups): routes spread over more groups, each its own Heartbeat "
                 "invocation; or set \"probe\": {\"heartbeat\": false} on routes that need no minute-scale stall detection")


def spec_rank(spec: RouteSpec) -> tuple[int, str]:
    return (0 if spec.managed_by == "stack" else 1 if spec.origin is Origin.EXPLICIT else 2), spec.name


def heartbeat_routes_within_cap(specs: Sequence[RouteSpec], cap: int = HEARTBEAT_ROUTES_PER_GROUP) -> tuple[list[RouteSpec], list[RouteSpec]]:
    """One group's heartbeat routes (``spec.heartbeat``), in the caps' order: (the first ``cap``, the rest).

    >>> from replmon.core.registry import load_route_spec
    >>> specs = [load_route_spec({"name": f"r{i}", "origin": "explicit", "group": "g00",
    ...          "source": {"account": "111111111111", "bucket": f"src-{i}", "region": "us-east-1"},
    ...          "destinations": [{"account": "111111111111", "bucket": f"dst-{i}", "region": "us-west-2"}]})
    ...          for i in (3, 1, 2)]
    >>> [[s.name for s in part] for part in heartbeat_routes_within_cap(specs, 2)]
    [['r1', 'r2'], ['r3']]
    """
    beating = sorted((s for s in specs if s.heartbeat), key=spec_rank)
    return beating[:cap], beating[cap:]
