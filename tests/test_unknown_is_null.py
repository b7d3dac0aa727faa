"""Unknown is null, never 0: a route whose every probe FAILED (or that has no data) prints
``rpo_seconds: null``; the schema (docs/output.schema.json) says so and rejects 0 for it."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from replmon.cli.output import envelope
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.verdict import judge_run
from tests.conftest import ROOT

SCHEMA = json.loads((ROOT / "docs" / "output.schema.json").read_text())
NOW = 1_795_000_600.0


def rec(i: int, status: ProbeStatus, hi: float | None = None) -> ProbeRecord:
    return ProbeRecord(route="r", probe_id=f"p{i}", run_id="20261126T000000Z-abc", planned_at=NOW - 300, size_bytes=1,
                       size_class="1B", trial=i, status=status, put_end=NOW - 299, latency_lo=None if hi is None else hi - 1,
                       latency_hi=hi)


def route_errors(doc: dict[str, Any]) -> list[str]:
    v = jsonschema.Draft202012Validator({"$ref": "#/$defs/route", "$defs": SCHEMA["$defs"]})
    return [e.message for e in v.iter_errors(doc)]


@pytest.mark.parametrize(("records", "bound"), [
    ([rec(1, ProbeStatus.FAILED), rec(2, ProbeStatus.FAILED)], "unbounded"),  # every probe failed: nothing bounds it
    ([rec(1, ProbeStatus.ERROR)], "none"),  # not measured
    ([], "none"),  # no data
])
def test_rpo_seconds_is_null_when_nothing_bounds_it(records: list[ProbeRecord], bound: str) -> None:
    v = judge_run("r", records, target_seconds=60, now=NOW)
    doc = v.to_json()
    assert doc["rpo_seconds"] is None and doc["rpo_bound"] == bound
    assert route_errors(doc) == []
    env = envelope("probe", [v], 1, 60.0)
    assert env["routes"][0]["rpo_seconds"] is None


def test_a_bounded_rpo_is_a_number_and_the_schema_refuses_a_made_up_zero() -> None:
    v = judge_run("r", [rec(1, ProbeStatus.COMPLETED, 4.0), rec(2, ProbeStatus.FAILED)], target_seconds=60, now=NOW)
    assert v.rpo_seconds == 4.0 and v.rpo_bound == "unbounded"  # the largest bounded input, the RPO itself unbounded
    ok = judge_run("r", [rec(1, ProbeStatus.COMPLETED, 4.0)], target_seconds=60, now=NOW).to_json()
    assert ok["rpo_seconds"] == 4.0 and ok["rpo_bound"] == "upper" and route_errors(ok) == []
    assert route_errors({**ok, "rpo_bound": "none", "rpo_seconds": 0.0})  # unknown printed as 0: refused
    assert route_errors({**ok, "rpo_bound": "upper", "rpo_seconds": None})  # a bound without its number: refused


def test_a_reports_health_of_a_route_without_data_is_null_not_0() -> None:
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.signals.health import health_output, route_health
    from replmon.signals.slo import slo_spec

    spec = slo_spec({})
    h = health_output(route_health(MemoryLatencyTable(), "r", NOW, spec, 3600).to_json(spec))
    v = jsonschema.Draft202012Validator({"$ref": "#/$defs/health", "$defs": SCHEMA["$defs"]})
    assert h["rpo_seconds"] is None and h["slo"]["attainment_percent"] is None and list(v.iter_errors(h)) == []
