"""events/: each file is a valid input for its function (or the state machine) and runs there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replmon.local.aslrun import LambdaContext, load_handler
from replmon.probe.latency_report import ReportRequest
from replmon.probe.request import load_request
from replmon.probe.state import ProbeState
from replmon.wiring import injected
from tests.conftest import ROOT, Env

EVENTS = ROOT / "events"
DEFAULTS = {"routes": [{"name": "primary", "source": {"bucket": "probe-source"}, "destinations": [{"bucket": "probe-replica"}]}]}


def load(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.mark.parametrize("name", sorted(p.name for p in EVENTS.glob("probe_*.json")))
def test_state_machine_inputs_validate(name: str) -> None:
    req = load_request(load(name), DEFAULTS)
    assert req.routes and req.sizes


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


def test_every_function_has_an_event() -> None:
    names = {p.stem for p in Path(EVENTS).glob("*.json")}
    assert {"upload_probe", "poll_replication", "record_result", "cleanup", "housekeeping", "report", "probe_now"} <= names


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
