"""Passive signals on real servers: MinIO's own notifications through the ingest handler, replica
events narrowing real probes' intervals, and Toxiproxy faults on the replication path (lab chaos).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from replmon.core.keys import probe_object_key
from replmon.core.record import ProbeStatus
from replmon.lab.chaos import run_chaos
from replmon.lab.lab import PREFIX, Lab
from replmon.local.execution import run_request
from replmon.probe.request import load_request

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with Lab(tmp_path_factory.mktemp("signals") / "lab") as running:
        yield running
    assert all(not s.running for s in running.servers.values())


def test_real_minio_events_are_stored_and_narrow_each_probe_interval(lab: Lab) -> None:
    dead_before = list(lab.event_path.dead)  # the malformed notification's test may have run first
    # the registry's route of the lab's bucket pair: an event maps to the registry route its buckets are
    res = run_request(load_request({"routes": [lab.route()], "sizes": "1MiB,32MiB", "trials": 2, "max_concurrency": 1, "timeout_seconds": 60,
                       "poll": {"floor_seconds": 0.5, "use_history": False}}), lab.deps(), function_deps=lab.function_deps())
    assert lab.event_path.drain(15)
    assert res.execution.status == "SUCCEEDED" and all(r.status is ProbeStatus.COMPLETED for r in res.records)
    store = lab.store()
    # Every probe's completed-replication event, as MinIO sent it, is counted once under the lab's
    # route: a dedupe marker per event (16 shards by object key) and the hour item's eC counter.
    keys = {probe_object_key(PREFIX, r.run_id, r.route, r.probe_id) for r in res.records}
    markers = [m for n in range(16) for m in store.partition_items(f"lab#seen/{n}") if m["key"] in keys]
    assert {m["key"] for m in markers} == keys  # MinIO may send two completions (two event times) for one object
    assert {m["kind"] for m in markers} == {"OperationCompletedReplication"}
    counted = sum(v for h in store.roll_items("lab", "h#", "h#~") for k, v in h.items() if k.startswith("eC_"))
    assert counted >= len(keys)
    # The poll's interval (RecordResult's input) contains the narrowed one, which is 2 x the skew wide.
    polls = {i.event["probe_id"]: i.event["poll"] for i in res.execution.invocations if i.function == "RecordResult"}
    for r in res.records:  # this run's (other tests probe this route too)
        item = store.get_item(r.route, r.sort_key)
        assert item is not None and item.get("interval_from") == "poll+event", item
        p = polls[r.probe_id]
        assert r.latency_lo is not None and r.latency_hi is not None
        assert p.get("last_pending", 0.0) - 1e-6 <= r.latency_lo <= r.latency_hi <= p["first_final"] + 1e-6
        assert r.latency_hi - r.latency_lo <= 2 * lab.event_skew + 1e-6
    assert lab.event_path.dead == dead_before
    assert lab.leftovers() == {"source": [], "destination": []}


def test_a_malformed_notification_goes_to_the_dead_letter_list_and_blocks_nothing(lab: Lab) -> None:
    before = len(lab.event_path.dead)
    req = urllib.request.Request(lab.event_path.url, data=b'{"Records": [{"eventName": "s3:Replication:Nope"}]}', method="POST")
    with urllib.request.urlopen(req, timeout=5):
        pass
    res = run_request(load_request({"routes": [lab.route("events2")], "sizes": "1MiB", "trials": 1, "max_concurrency": 1, "timeout_seconds": 60,
                       "poll": {"floor_seconds": 0.5, "use_history": False}}), lab.deps(), function_deps=lab.function_deps())
    deadline = time.time() + 30  # three receives, a 1 s visibility timeout each, then the redrive
    while len(lab.event_path.dead) < before + 1 and time.time() < deadline:
        time.sleep(0.5)
    assert lab.event_path.drain(20)
    assert len(lab.event_path.dead) == before + 1
    [bad] = [m for m in lab.event_path.dead if "Nope" in m["Body"]]
    assert int(bad["Attributes"]["ApproximateReceiveCount"]) >= lab.event_path.max_receives
    [r] = res.records
    item = lab.store().get_item("events2", r.sort_key)
    assert item is not None and item.get("interval_from") == "poll+event"  # the good one went through


def test_lab_chaos_latency_breaches_with_the_alarm_thresholds_and_recovers(lab: Lab) -> None:
    phases = run_chaos(lab, "latency", target_seconds=2.0, probes=2)
    assert [p.breached for p in phases] == [False, True, False], [p.row() for p in phases]
    fault = phases[1]
    assert all(s == "COMPLETED" for s in fault.statuses) and min(x for x in fault.latencies if x) > 4.0  # 4 s toxic
    assert fault.health["rpo"]["seconds"] > 4.0 and fault.health["slo"]["alerts"]["page"]
    assert phases[2].health["rpo"]["seconds"] < 2.0 and not phases[2].health["slo"]["alerts"]["page"]
    assert lab.toxiproxy.toxics("replication") == []
    assert lab.leftovers() == {"source": [], "destination": []}


def test_a_hung_replication_path_leaves_probes_stuck_then_recovers(lab: Lab) -> None:
    """Toxiproxy's timeout toxic holds every byte of replication (not the server: HEADs and
    deletes still answer): probes end STUCK or FAILED (MinIO gives up on a target that timed out),
    the RPO is unbounded or above target; once healed, replication resumes and the route recovers."""
    phases = run_chaos(lab, "hang", target_seconds=2.0, probes=2, timeout=10)
    assert [p.breached for p in phases] == [False, True, False], [p.row() for p in phases]
    assert set(phases[1].statuses) <= {"STUCK", "FAILED"}
    assert any("resumed" in n for n in phases[1].notes), phases[1].notes
    assert lab.leftovers() == {"source": [], "destination": []}


def test_a_hung_route_stalls_pages_with_evidence_and_recovers_through_the_real_heartbeat(lab: Lab) -> None:
    """Stall detection in the lab: the real Heartbeat function (its own least-privilege MinIO user, lab cadence
    T = 10 s, floor 2 s) on a healthy route; Toxiproxy hangs replication: STALLED within 2E + T and the
    template's RouteStalled alarm (evaluated on the emitted StallSeconds) in ALARM; one message with the
    evidence; healed: HEALTHY and the alarm OK, one recovery message; nothing before the fault."""
    from replmon.lab.stallbench import LAB_FLOOR, LAB_PERIOD, heartbeat_deps, heartbeat_driver, one_fault
    from replmon.local.aslrun import load_handler

    route = lab.route(f"stall-{int(time.time())}")
    rep = one_fault(lab, route, "hang", heartbeat_deps(lab), heartbeat_driver(load_handler("Heartbeat"), periods=1),
                    warmup_periods=2, tail_periods=1)
    assert rep["errors"] == [] and rep["before_fault_transitions"] == 0 and rep["alarms_before_fault"] == 0, rep
    assert rep["stalled_s"] is not None and rep["stalled_s"] <= 2 * LAB_FLOOR + LAB_PERIOD + 2, rep
    assert rep["alarm_s"] is not None and rep["alarm_s"] >= rep["stalled_s"], rep
    assert rep["healthy_s"] is not None and rep["alarm_ok_s"] is not None, rep
    assert rep["messages"] == [f"replmon STALLED: route {route['name']}", f"replmon recovered: route {route['name']}"], rep
    evidence = rep["evidence"]
    assert evidence["pending_heartbeats"] >= 1 and evidence["expected_latency_seconds"] == LAB_FLOOR
    assert evidence["source"]["bucket"] == route["source"]["bucket"]
    assert lab.toxiproxy.toxics("replication") == []
    # what `replmon lab chaos --stall --format json` prints is this, under docs/output.schema.json
    import jsonschema

    schema = json.loads((Path(__file__).resolve().parents[1] / "docs" / "output.schema.json").read_text())
    jsonschema.validate({"schema_version": 1, "command": "lab chaos", "stall": True, "fault": "hang", "stalled_and_recovered": True, **rep},
                        schema)


def test_the_lab_chaos_command_exits_0_when_it_breaches_and_recovers(tmp_path: Path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "replmon.cli", "lab", "chaos", "--dir", str(tmp_path / "lab"), "--probes", "1",
                        "--format", "json"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["breached_and_recovered"] and [p["breached"] for p in doc["phases"]] == [False, True, False]
    assert doc["verdict"] == "ok" and doc["command"] == "lab chaos"  # the healed route, judged as `replmon report` judges it
    assert doc["left_behind"] == {"source": [], "destination": []}


def test_replmon_report_shows_rpo_slo_and_budget_per_route(lab: Lab) -> None:
    import subprocess
    import sys

    # Its own probes on both routes: the test passes alone or in any order, not on
    # data an earlier test happened to leave.
    for name in ("events", "events2"):
        own = run_request(load_request({"routes": [lab.route(name)], "sizes": "1MiB", "trials": 1, "max_concurrency": 1,
                                        "timeout_seconds": 60, "poll": {"floor_seconds": 0.5, "use_history": False}}),
                          lab.deps(), function_deps=lab.function_deps())
        assert [r.status for r in own.records] == [ProbeStatus.COMPLETED]

    r = subprocess.run([sys.executable, "-m", "replmon.cli", "report", "--route", "events", "--route", "events2", "--hours", "1",
                        "--dynamodb-endpoint", lab.servers["dynamodb"].url, "--target", "2", "--format", "json"],
                       capture_output=True, text=True, timeout=120, env={**__import__("os").environ, "AWS_ACCESS_KEY_ID": "lab",
                                                                        "AWS_SECRET_ACCESS_KEY": "lab"})
    assert r.returncode == 0, r.stderr
    health = {h["route"]: h for h in json.loads(r.stdout)["health"]}
    assert set(health) == {"events", "events2"}
    for h in health.values():
        assert h["slo"]["judged_probes"] >= 1 and h["slo"]["attainment_percent"] == 100 and h["slo"]["budget_left_percent"] == 100
        assert 0 < h["rpo_seconds"] < 2 and not h["rpo_unbounded"]
        assert "rtc_replication_latency" in h["rpo_missing_inputs"]  # the lab has no RTC: missing, not zero
