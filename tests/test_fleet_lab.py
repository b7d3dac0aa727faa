"""The lab fleet on real servers: N replicated bucket pairs found by the inventory (and
the buckets it must refuse, with their reasons), probed through the real state machine as the
member prober (an ad-hoc run over the routes found, not the registry planner); one route's replication hung while the real Heartbeat serves the whole group - the
fleet alarm RouteStalledG00Alarm (the template's query, evaluated by local/insights.py) names that route's
contributor and no other."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from replmon.lab.fleetlab import NOT_REPLICATED, REFUSED, UNREPLICATED, fleet_fault, route_bucket, setup_fleet
from replmon.lab.lab import SOURCE_BUCKET, Lab

pytestmark = pytest.mark.lab
SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "output.schema.json").read_text())


def test_a_hung_route_of_a_lab_fleet_is_the_only_contributor_the_fleet_alarm_puts_in_alarm(tmp_path: Path) -> None:
    from replmon.lab.stallbench import LAB_FLOOR, LAB_PERIOD
    from replmon.local.aslrun import load_handler

    with Lab(tmp_path / "lab") as lab:
        fleet = setup_fleet(lab, 6)
        reasons = {s["bucket"]: s["reason"] for s in fleet.survey}
        # the inventory's own verdicts, each refused bucket with the reason it must give; the lab's own pair is
        # found, not enrolled (untagged: probes are opt-in; the lab's route is its registry's explicit item)
        assert reasons == {**{route_bucket(i): "OK" for i in range(1, 7)}, **REFUSED, UNREPLICATED: NOT_REPLICATED,
                           SOURCE_BUCKET: "NOT_ENROLLED"}
        assert [r["name"] for r in fleet.routes] == [route_bucket(i) for i in range(1, 7)]
        rep = fleet_fault(fleet, "app-04", "hang", load_handler("Heartbeat"), warmup_periods=2, tail_periods=1, progress=lambda _: None)
        assert lab.toxiproxy.toxics("replication-app-04") == []
    assert rep["errors"] == [] and rep["heartbeat_faults"] == {"ProbeError": 0, "CleanupFailed": 0}, rep
    assert rep["contributors"] == 6 and rep["in_alarm"] == ["app-04"] and rep["other_routes_stalled"] == [], rep
    assert rep["alarms_before_fault"] == 0 and rep["before_fault_transitions"] == 0, rep
    assert rep["stalled_s"] is not None and rep["stalled_s"] <= 2 * LAB_FLOOR + LAB_PERIOD + 2, rep
    assert rep["alarm_s"] is not None and rep["alarm_s"] >= rep["stalled_s"], rep
    assert rep["healthy_s"] is not None and rep["alarm_ok_s"] is not None, rep
    assert rep["named_only_the_faulted_route"], rep
    assert rep["messages"] == ["replmon STALLED: route app-04", "replmon recovered: route app-04"], rep
    assert rep["evidence"]["source"]["bucket"] == "app-04"
    # every settled heartbeat deleted on both sides; nothing ever written to a refused bucket
    assert rep["left_behind"] == {"source": [], "destination": []}, rep["left_behind"]
    jsonschema.validate({"schema_version": 1, "command": "lab chaos", "stall": True, "fleet": True, "survey": fleet.survey, **rep}, SCHEMA)


def test_lab_run_with_routes_probes_every_route_the_inventory_found_and_leaves_nothing(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "replmon.cli", "lab", "run", "--routes", "4", "--dir", str(tmp_path / "lab"), "--format", "json"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert [v["route"] for v in doc["routes"]] == ["app-01", "app-02", "app-03", "app-04"]
    assert all(v["verdict"] == "ok" for v in doc["routes"]) and doc["planned_probes"] == 4
    assert sorted({rec["route"] for rec in doc["records"]}) == ["app-01", "app-02", "app-03", "app-04"]
    assert all(rec["status"] == "COMPLETED" for rec in doc["records"])
    assert doc["left_behind"] == {"source": [], "destination": []}
    assert {s["bucket"]: s["reason"] for s in doc["survey"]}["app-rule-disabled"] == "RULE_DISABLED"
    regions = {s["bucket"]: (s.get("source_region"), s.get("destinations")) for s in doc["survey"]}
    assert regions["app-02"] == ("us-east-1", ["app-02-dr (eu-west-1)"])  # two Region names, as the registry labels them
