"""The lab fleet's parts that need no server (lab/fleet.py): the prober user's policy is the member
account's prober role, and the fleet alarm names exactly the contributors whose StallSeconds breach."""

from __future__ import annotations

from replmon.core.telemetry import NAMESPACE, ROUTE, ROUTE_GROUP, SERVICE, SERVICE_DIM
from replmon.lab.fleet import fleet_alarm_transitions, prober_policy
from replmon.lab.lab import PREFIX
from replmon.local.insights import Point


def test_the_prober_user_gets_the_member_templates_prober_statements_without_the_account_condition() -> None:
    policy = prober_policy()
    statements = policy["Statement"]
    actions = {a for st in statements for a in st["Action"]}
    # what the Heartbeat and the state machine's functions call on a registry route's buckets
    assert {"s3:PutObject", "s3:GetObjectVersion", "s3:DeleteObjectVersion", "s3:ListBucket"} <= actions
    assert all(a.startswith("s3:") for a in actions)  # MinIO has no KMS: those statements are not sent
    writes = next(st for st in statements if "s3:PutObject" in st["Action"] and "s3:DeleteObjectVersion" in st["Action"])
    assert writes["Resource"] == f"arn:aws:s3:::*/{PREFIX}*"  # data only under the probe prefix, any bucket (by pattern)
    for st in statements:
        assert "s3:ResourceAccount" not in str(st.get("Condition", {}))
    listing = next(st for st in statements if "s3:ListBucket" in st["Action"])
    assert listing["Condition"]["StringLike"]["s3:prefix"][0] == f"{PREFIX}*"  # the prefix condition is kept


def _points(route: str, values: list[tuple[float, float]]) -> list[Point]:
    dims = {SERVICE_DIM: SERVICE, ROUTE_GROUP: "g00", ROUTE: route}
    return [Point(NAMESPACE, "StallSeconds", dims, t, v) for t, v in values]


def test_the_fleet_alarm_names_only_the_route_whose_stall_seconds_breach() -> None:
    start, period = 1_795_428_000.0, 10.0
    ticks = [start + 5 + period * i for i in range(30)]  # 30 lab periods = 30 alarm minutes
    points = []
    for route in ("app-01", "app-02", "app-03"):
        points += _points(route, [(t, 0.0) for t in ticks])
    # app-02 stalls for lab periods 10-14
    points = [p for p in points if not (p.dimensions[ROUTE] == "app-02" and 10 <= (p.timestamp - start - 5) / period < 15)]
    points += _points("app-02", [(ticks[i], 3.0 + i) for i in range(10, 15)])
    alarms = fleet_alarm_transitions(points, start, ticks[-1], period)
    assert sorted(alarms) == ["app-02"]
    (on, first_state), (off, second_state) = alarms["app-02"]
    assert (first_state, second_state) == ("ALARM", "OK")
    assert ticks[10] <= on <= ticks[11] + period and ticks[15] <= off <= ticks[16] + period
