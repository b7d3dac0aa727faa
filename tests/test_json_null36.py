"""Unknown is null, never 0, in every JSON a route's RPO reaches: the CollectSignals and Report
functions' health (``rpo.seconds``), `replmon report`'s document, and a fleet run's route
(``record_fault`` null when the store holds every record)."""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema
import pytest

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.core.keys import RUN_STAMP
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.health import health_output, route_health
from replmon.signals.slo import rpo, slo_spec
from replmon.signals.verdict import judge_health
from tests.conftest import ROOT

SCHEMA = json.loads((ROOT / "docs" / "output.schema.json").read_text())
NOW = 1_795_000_600.0


def rec(i: int, status: ProbeStatus, lo: float | None = None, hi: float | None = None) -> ProbeRecord:
    run = time.strftime(RUN_STAMP, time.gmtime(NOW - 300)) + "-abc"  # the record's key sorts by the run's stamp
    return ProbeRecord(route="r", probe_id=f"p{i}", run_id=run, planned_at=NOW - 300, size_bytes=1,
                       size_class="1B", trial=i, status=status, put_end=NOW - 299, latency_lo=lo, latency_hi=hi)


def valid(defn: str, doc: dict[str, Any]) -> list[str]:
    v = jsonschema.Draft202012Validator({"$ref": f"#/$defs/{defn}", "$defs": SCHEMA["$defs"]})
    return [e.message for e in v.iter_errors(doc)]


@pytest.mark.parametrize("records", [
    [],  # no data
    [rec(1, ProbeStatus.FAILED, lo=0.0), rec(2, ProbeStatus.FAILED, lo=0.0)],  # every probe FAILED before any PENDING: nothing bounds it
    [rec(1, ProbeStatus.ERROR)],  # measured nothing
])
def test_an_rpo_nothing_bounds_is_null_in_the_functions_json(records: list[ProbeRecord]) -> None:
    r = rpo(NOW, 3600, records, (), None, 0)
    assert r.seconds == 0.0 and not r.bounded  # the number the code compares with ...
    assert r.to_json()["seconds"] is None  # ... is never printed as the RPO


def test_a_bounded_rpo_is_its_number_in_the_functions_json() -> None:
    r = rpo(NOW, 3600, [rec(1, ProbeStatus.COMPLETED, lo=3.0, hi=4.0), rec(2, ProbeStatus.FAILED, lo=0.0)], (), None, 0)
    assert r.bounded and r.unbounded and r.to_json()["seconds"] == 4.0


def test_every_probe_failed_reads_null_through_report_and_its_verdict() -> None:
    """The Report function's health (route_health().to_json, what CollectSignals returns too), the
    output's health and the route verdict all say null for an RPO nothing bounds, and stay schema-valid."""
    store = MemoryLatencyTable()
    for i in range(3):
        store.put_once(rec(i, ProbeStatus.FAILED, lo=0.0))
    spec = slo_spec({})
    h = route_health(store, "r", NOW, spec, 3600).to_json(spec)
    assert h["rpo"]["seconds"] is None and h["rpo"]["unbounded"]
    out = health_output(h)
    assert out["rpo_seconds"] is None and valid("health", out) == []
    v = judge_health(h, store.query("r", 0, NOW + 1), target_seconds=60, rpo_window_seconds=3600, now=NOW).to_json()
    assert v["rpo_seconds"] is None and v["rpo_bound"] == "unbounded" and valid("route", v) == []


def test_a_fleet_runs_route_fields_are_in_the_schema() -> None:
    from replmon.cli.runend import record_fault
    from replmon.signals.verdict import judge_run

    v = judge_run("r", [rec(1, ProbeStatus.COMPLETED, lo=1.0, hi=2.0)], target_seconds=60, now=NOW)
    for kept in ({"stored": 1}, {"spooled": 1}):
        doc = {**v.to_json(), "recorded": kept, "record_fault": record_fault(kept)}
        assert valid("route", doc) == []
        assert (doc["record_fault"] is None) == (kept == {"stored": 1})
    assert valid("route", {**v.to_json(), "record_fault": 0})  # a made-up 0 for "nothing wrong" is refused
