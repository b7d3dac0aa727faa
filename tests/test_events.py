"""events/: each file is a valid input for its function (or the state machine) and runs there."""

from __future__ import annotations

import json
import re
from typing import Any

import boto3
import pytest

from replmon.local.aslrun import LambdaContext, load_handler
from replmon.probe.latency_report import ReportRequest
from replmon.probe.state import ProbeState
from replmon.wiring import injected
from tests.conftest import ROOT, Env

EVENTS = ROOT / "events"


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


#: Every file of events/ (events/s3/ holds S3's notifications, fed to IngestEvents by
#: tests/test_passive.py and tests/test_event_properties.py) and the target the README names for it.
TARGETS = {
    "probe_route": "ProbeStateMachine", "probe_now": "ProbeStateMachine", "fleet_tick": "ProbeStateMachine",
    "probe_custom_route": "ProbeStateMachine", "probe_crr_ladder": "ProbeStateMachine",
    "report": "ReportFunction", "report_fleet": "ReportFunction", "collect_signals": "CollectSignalsFunction",
    "ingest_events": "IngestEventsFunction", "housekeeping": "HousekeepingFunction", "upload_probe": "UploadProbeFunction",
    "poll_replication": "PollReplicationFunction", "record_result": "RecordResultFunction", "cleanup": "CleanupFunction",
}


def test_the_readme_lists_every_event_of_the_folder_with_its_target() -> None:
    readme = (ROOT / "README.md").read_text()
    listed = dict(re.findall(r"^\| `events/([a-z_]+)\.json` \| (\w+) \|", readme, re.M))
    assert listed == TARGETS
    assert {p.stem for p in EVENTS.glob("*.json")} == set(TARGETS)
    assert set(re.findall(r"events/([a-z_]+)\.json", readme)) == set(TARGETS)  # no other mention of a file that is not there


@pytest.fixture
def registry_env(env: Env) -> Env:
    """The stack's own route (RouteName's default, ``primary``) as the registry holds it."""
    from replmon.core.route import Route
    from replmon.fleet.stack_route import spec_of_route, upsert_stack_route
    from tests.conftest import route
    from tests.test_fleet_plan import fleet_env

    upsert_stack_route(fleet_env(env), spec_of_route(Route.model_validate(route()), groups=1))
    return env


@pytest.mark.parametrize("name", sorted(k for k, v in TARGETS.items() if v == "ProbeStateMachine"))
def test_state_machine_inputs_plan_through_plan_probes(registry_env: Env, name: str) -> None:
    """Each state machine input through PlanProbes' handler, on a registry holding the stack's route."""
    with injected(registry_env.deps):
        out = load_handler("PlanProbes")(load(f"{name}.json"), LambdaContext("PlanProbes"))
    probes = out["probes"] or []
    if "plan" in out:  # the ladder's 140 probes go to the plan bucket
        probes = json.loads(boto3.client("s3", region_name="us-east-1").get_object(
            Bucket=out["plan"]["bucket"], Key=out["plan"]["key"])["Body"].read())
    routes = {p["route"]["name"] for p in probes}
    if name == "fleet_tick":
        assert set(out["route_classes"]) == {"primary"}  # its classes never ran: all due
    elif name == "probe_custom_route":
        assert routes == {"use1-to-apse1"}
        assert all(p["route"]["source"]["role_arn"] and p["route"]["destinations"][0]["role_arn"] for p in probes)
    else:
        assert routes == {"primary"}
    if name == "probe_crr_ladder":
        assert len(probes) == 140 and sum(p["size_bytes"] for p in probes) / 2**40 > 1.5  # the README's warning: ~1.6 TiB


def test_the_readme_states_the_ladders_cost_and_duration_as_replmon_cost_models_them() -> None:
    from tests.test_cli import cli

    readme = " ".join((ROOT / "README.md").read_text().split())
    args = ["cost", "--sizes", "crr-ladder", "--max-concurrency", str(load("probe_crr_ladder.json")["max_concurrency"]),
            "--cross-region", "--format", "json"]
    east, tokyo = (json.loads(cli(*a).stdout) for a in (args, [*args, "--source-region", "ap-northeast-1"]))
    assert f"**${east['usd_per_run']:,.2f} and about {east['run_seconds'] / 3600:.1f} h**" in readme
    assert f"({east['replicated_gib_per_run']:,.1f} GiB replicated, from {east['transfer_source_region']})" in readme
    assert f"**${tokyo['usd_per_run']:,.2f}**" in readme
    assert "replicates about 1.6 TiB per route per invoke" in readme and round(east["replicated_gib_per_run"] / 1024, 1) == 1.6


def test_collect_signals_event_runs_its_handler(registry_env: Env) -> None:
    with injected(registry_env.deps):
        out = load_handler("CollectSignals")(load("collect_signals.json"), LambdaContext("CollectSignals"))
        with pytest.raises(Exception, match="group: 'g99' is not a RouteGroup"):
            load_handler("CollectSignals")({"group": "g99"}, LambdaContext("CollectSignals"))
    assert [r["route"] for r in out["routes"]] == ["primary"]


def test_ingest_event_runs_its_handler(registry_env: Env) -> None:
    with injected(registry_env.deps):
        out = load_handler("IngestEvents")(load("ingest_events.json"), LambdaContext("IngestEvents"))
    assert out == {"batchItemFailures": []}


def test_report_fleet_event_runs_the_report_handler(registry_env: Env) -> None:
    with injected(registry_env.deps):
        out = load_handler("Report")(load("report_fleet.json"), LambdaContext("Report"))
    assert [(r["route"], r["verdict"]) for r in out["fleet"]] == [("primary", "no_data")]


@pytest.mark.parametrize("name", ["upload_probe.json", "poll_replication.json", "record_result.json", "cleanup.json"])
def test_probe_state_events_validate(name: str) -> None:
    state = ProbeState.model_validate(load(name))
    assert state.route.name == "primary"


def test_report_event_runs_the_report_handler(env: Env) -> None:
    ReportRequest.model_validate(load("report.json"))
    with injected(env.deps):
        out = load_handler("Report")(load("report.json"), LambdaContext("Report"))
    assert out["probes"] == 0 and out["summaries"] == []


def test_record_result_event_runs_its_handler_once(env: Env) -> None:
    handler = load_handler("RecordResult")
    with injected(env.deps):
        assert handler(load("record_result.json"), LambdaContext("RecordResult"))["recorded"] == "stored"
        assert handler(load("record_result.json"), LambdaContext("RecordResult"))["recorded"] == "duplicate"


def test_housekeeping_event_runs_its_handler(env: Env) -> None:
    event = load("housekeeping.json")
    for r in event["routes"]:  # the lab's buckets, so the sweep lists real (moto) buckets
        r["source"]["bucket"], r["destinations"][0]["bucket"] = "probe-source", "probe-replica"
    with injected(env.deps):
        out = load_handler("Housekeeping")(event, LambdaContext("Housekeeping"))
    assert out == {"spool": {"replayed": 0, "duplicates": 0, "left": 0, "quarantined": []}, "swept": 0}


def test_every_optional_state_field_survives_a_round_trip() -> None:
    """Steps pass ``state.dump()`` (None fields dropped) to the next step's parser: an optional
    field without a default would make the next step fail (and lose the record)."""
    from pydantic import BaseModel

    from replmon.probe.state import DestinationCheck, Poll, Upload

    for model in (ProbeState, Upload, DestinationCheck, Poll):
        for name, f in model.model_fields.items():
            if not f.is_required():
                continue
            assert "None" not in str(f.annotation), f"{model.__name__}.{name} is optional but has no default"
    state = ProbeState.model_validate(load("record_result.json"))
    assert state.poll is not None and state.upload is not None
    state.upload.version_id, state.poll.destinations[0].status = None, None
    assert isinstance(ProbeState.model_validate(state.dump()), BaseModel)
