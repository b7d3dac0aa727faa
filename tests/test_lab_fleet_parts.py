"""The lab fleet's parts that need no server (lab/fleetlab.py): its MinIO users hold the member
account's role statements (only the account condition MinIO cannot know is dropped), and the fleet
alarm names exactly the contributors whose StallSeconds breach - of the series its query returns."""

from __future__ import annotations

from typing import Any

import pytest

from replmon.core.telemetry import NAMESPACE, ROUTE, ROUTE_GROUP, SERVICE, SERVICE_DIM
from replmon.lab.fleetlab import MEMBER_TEMPLATE, member_policy, named_only
from replmon.lab.stallbench import ALARM, contributor_transitions
from replmon.local.cfn import Resolver
from replmon.local.insights import Point
from replmon.local.template import load_template


@pytest.mark.parametrize("role", ["ProberRole", "InventoryRole"])
def test_the_lab_users_hold_the_member_roles_s3_statements_but_the_account_condition(role: str) -> None:
    """Each S3 statement of the role in templates/member-account.yaml, resolved as the lab resolves it,
    is in the user's policy with the same actions and resources; its conditions differ only by the
    missing s3:ResourceAccount (MinIO's one account)."""
    t = load_template(MEMBER_TEMPLATE)
    r = Resolver(t, {"HubAccountId": "111111111111", "ProbePrefix": "replmon-probes/"}, account="111111111111")
    template = [st for p in t["Resources"][role]["Properties"]["Policies"] for st in r.resolve(p["PolicyDocument"]["Statement"])
                if any(str(a).startswith("s3:") for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]))]
    got = member_policy(role)["Statement"]
    assert len(got) == len(template) >= 2
    for mine, theirs in zip(got, template, strict=True):
        actions = theirs["Action"] if isinstance(theirs["Action"], list) else [theirs["Action"]]
        assert mine["Action"] == [a for a in actions if a.startswith("s3:")] and mine["Resource"] == theirs["Resource"]
        want = {op: {k: v for k, v in kv.items() if k != "s3:ResourceAccount"} for op, kv in (theirs.get("Condition") or {}).items()}
        assert mine.get("Condition", {}) == {op: kv for op, kv in want.items() if kv}
    if role == "ProberRole":  # probe data only under the probe prefix, of any bucket (by pattern)
        assert any(st["Resource"] == "arn:aws:s3:::*/replmon-probes/*" and "s3:DeleteObjectVersion" in st["Action"] for st in got)


def _points(route: str, values: list[tuple[float, float]], group: str = "g00", service: bool = True) -> list[Point]:
    dims = {**({SERVICE_DIM: SERVICE} if service else {}), ROUTE_GROUP: group, ROUTE: route}
    return [Point(NAMESPACE, "StallSeconds", dims, t, v) for t, v in values]


def test_the_fleet_alarm_names_only_the_route_whose_stall_seconds_breach_among_its_own_series() -> None:
    start, period = 1_795_428_000.0, 10.0
    ticks = [start + 5 + period * i for i in range(30)]  # 30 lab periods = 30 alarm minutes
    points: list[Point] = []
    for route in ("app-01", "app-03"):
        points += _points(route, [(t, 0.0) for t in ticks])
    points += _points("app-02", [(t, 3.0 + i if 10 <= i < 15 else 0.0) for i, t in enumerate(ticks)])  # stalls for 5 periods
    points += _points("other-group", [(t, 50.0) for t in ticks], group="g01")  # another group's alarm
    points += _points("no-service", [(t, 50.0) for t in ticks], service=False)  # not what the functions emit
    alarms, series = contributor_transitions(points, start, ticks[-1], period, ALARM)
    assert series == {"app-01", "app-02", "app-03"}
    assert sorted(alarms) == ["app-02"]
    (on, first_state), (off, second_state) = alarms["app-02"]
    assert (first_state, second_state) == ("ALARM", "OK")
    # OK once the last breaching period has left the alarm's N-period window (RouteStalled: 1 of 3)
    from replmon.fleet.alarms import FLEET_ALARMS

    n = next(a.evaluation_periods for a in FLEET_ALARMS if a.name == "RouteStalled")
    assert ticks[10] <= on <= ticks[11] + period and ticks[15 + n - 1] <= off <= ticks[15 + n] + period


def _rep(**changes: Any) -> dict[str, Any]:
    rep = {"routes": 3, "contributors": 3, "faulted_route": "app-02", "before_fault_transitions": 0, "alarms_before_fault": 0,
           "stalled_s": 5.0, "alarm_s": 7.0, "healthy_s": 9.0, "alarm_ok_s": 20.0, "in_alarm": ["app-02"], "other_routes_stalled": [],
           "errors": [], "heartbeat_faults": {"ProbeError": 0, "CleanupFailed": 0}, "left_behind": {"source": [], "destination": []}}
    return rep | changes


@pytest.mark.parametrize("change", [{}, {"contributors": 2}, {"alarms_before_fault": 1}, {"before_fault_transitions": 1},
                                    {"alarm_s": None}, {"alarm_ok_s": None}, {"in_alarm": ["app-01", "app-02"]},
                                    {"other_routes_stalled": ["app-03"]}, {"errors": ["boom"]},
                                    {"heartbeat_faults": {"ProbeError": 0, "CleanupFailed": 2}},
                                    {"left_behind": {"source": ["app-02/replmon-probes/hb"], "destination": []}}])
def test_a_fleet_fault_passes_only_when_the_faulted_route_alone_was_named_and_nothing_else_went_wrong(change: dict[str, Any]) -> None:
    assert named_only(_rep(**change)) is (change == {})


@pytest.mark.parametrize(("metric", "dims"), [("StallSeconds", {"Route": "app-07"}), ("ProbeError", {"Route": "app-07"}),
                                              ("HeartbeatRun", {"RouteGroup": "g00"})])
def test_the_labs_recorder_stores_what_the_real_emf_adapter_prints(metric: str, dims: dict[str, str],
                                                                   capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet alarm is evaluated over the Recorder's points: they carry exactly the dimensions of the
    EMF documents adapters/metrics.py prints (Powertools adds ``service`` from POWERTOOLS_SERVICE_NAME)."""
    import json

    from replmon.adapters.metrics import EmfMetrics
    from replmon.lab.stallbench import Recorder
    from replmon.local.insights import points_from_emf

    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "replmon")
    EmfMetrics().count(metric, 2.0, dims)
    printed = points_from_emf(json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip())
    recorder = Recorder()
    recorder.count(metric, 2.0, dims)
    assert [(p.metric, p.dimensions, p.value) for p in recorder.points] == [(p.metric, p.dimensions, p.value) for p in printed]
    assert printed and all(p.dimensions.get("service") == "replmon" for p in printed)
