"""The answer first: a route's verdict, its RPO now and what is failing, from a
run's records or from the route's health; one exit code for a set of routes; the in-memory table
an ad-hoc probe runs with behaves as the DynamoDB adapter does."""

from __future__ import annotations

import pytest

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.cli.exitcodes import COMMANDS, Exit, combine, markdown
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.health import RouteHealth
from replmon.signals.slo import SloSpec, rpo, slo_status
from replmon.signals.verdict import FINDING_KINDS, RpoVerdict, judge_health, judge_run, overall

NOW = 1_800_000_000.0


def rec(status: ProbeStatus, hi: float | None = 1.0, *, route: str = "r", size: str = "1MiB", ago: float = 60.0, lo: float | None = None,
        n: int = 0) -> ProbeRecord:
    t = NOW - ago
    return ProbeRecord(route=route, probe_id=f"p{n}-{status}-{hi}", run_id="20270115T080000Z-abcdef", planned_at=t - 1, size_bytes=2**20,
                       size_class=size, trial=1, status=status, put_end=t,
                       latency_lo=lo if lo is not None else (None if hi is None else hi * 0.9), latency_hi=hi, target_seconds=900.0)


def test_a_run_within_target_is_ok_and_its_rpo_is_the_largest_upper_bound() -> None:
    v = judge_run("r", [rec(ProbeStatus.COMPLETED, 2.0), rec(ProbeStatus.COMPLETED, 5.5, n=1)], target_seconds=900, planned=2, now=NOW)
    assert (v.verdict, v.rpo_seconds, v.rpo_bound, v.within_target, v.judged, v.findings) == (RpoVerdict.OK, 5.5, "upper", 2, 2, ())


@pytest.mark.parametrize(("records", "planned", "ok", "verdict", "kinds"), [
    ([rec(ProbeStatus.COMPLETED, 1000.0)], 1, True, RpoVerdict.BREACH, ["rpo_over_target"]),
    ([rec(ProbeStatus.FAILED, None)], 1, True, RpoVerdict.BREACH, ["probe_failed"]),
    # a STUCK probe is a ticket (as ProbeStuckAlarm); what pages is the RPO it raises over the target
    ([rec(ProbeStatus.STUCK, None, lo=7200.0)], 1, True, RpoVerdict.BREACH, ["rpo_over_target", "probe_stuck"]),
    ([rec(ProbeStatus.STUCK, None, lo=7200.0), rec(ProbeStatus.ERROR, None, n=1)], 2, True, RpoVerdict.BREACH,
     ["rpo_over_target", "probe_stuck", "probe_error"]),
    ([rec(ProbeStatus.STUCK, None, lo=300.0)], 1, True, RpoVerdict.NOT_MEASURED, ["probe_stuck"]),
    ([rec(ProbeStatus.ERROR, None)], 1, True, RpoVerdict.NOT_MEASURED, ["probe_error"]),
    ([rec(ProbeStatus.COMPLETED)], 2, True, RpoVerdict.NOT_MEASURED, ["records_missing"]),
    ([rec(ProbeStatus.COMPLETED)], 1, False, RpoVerdict.NOT_MEASURED, ["run_failed"]),
])
def test_a_runs_verdict_names_what_is_failing(records: list[ProbeRecord], planned: int, ok: bool, verdict: RpoVerdict, kinds: list[str]) -> None:
    v = judge_run("r", records, target_seconds=900, planned=planned, execution_ok=ok, now=NOW)
    assert v.verdict is verdict and [f.kind for f in v.findings] == kinds
    assert all(FINDING_KINDS[f.kind] == (f.severity, f.effect) for f in v.findings)


def test_a_failed_probe_makes_the_rpo_unbounded_and_a_stuck_one_a_lower_bound() -> None:
    assert judge_run("r", [rec(ProbeStatus.FAILED, None)], target_seconds=900, now=NOW).rpo_bound == "unbounded"
    stuck = judge_run("r", [rec(ProbeStatus.STUCK, None, lo=30.0), rec(ProbeStatus.COMPLETED, 2.0, n=1)], target_seconds=10, now=NOW)
    assert (stuck.rpo_seconds, stuck.rpo_bound) == (30.0, "lower")


def health(records: list[ProbeRecord], *, window: float = 3600.0, spec: SloSpec | None = None, events: dict[str, int] | None = None,
           in_flight: tuple[float, ...] = ()) -> dict[str, object]:
    spec = spec or SloSpec(threshold_seconds=900.0)
    r = rpo(NOW, window, records, in_flight, None, 0)
    return RouteHealth("r", r, slo_status(records, NOW, spec), [], events or {}).to_json(spec)


def test_a_route_with_nothing_in_the_window_is_no_data_never_rpo_0() -> None:
    """`replmon report --route <typo>` once showed RPO 0.0 s and exit 0."""
    v = judge_health(health([]), [], target_seconds=900, rpo_window_seconds=3600, now=NOW)
    assert (v.verdict, v.rpo_seconds, v.rpo_bound) == (RpoVerdict.NO_DATA, None, "none")
    old = [rec(ProbeStatus.COMPLETED, 5.0, ago=5 * 3600)]  # a probe 5 h ago: the history exists, "now" does not
    v = judge_health(health(old), old, target_seconds=900, rpo_window_seconds=3600, now=NOW)
    assert v.verdict is RpoVerdict.NO_DATA and v.judged == 1


def test_a_reports_verdict_from_health() -> None:
    late = [rec(ProbeStatus.COMPLETED, 1200.0)]
    v = judge_health(health(late), late, target_seconds=900, rpo_window_seconds=3600, now=NOW)
    assert v.verdict is RpoVerdict.BREACH and v.rpo_seconds == 1200.0 and [f.kind for f in v.findings][:1] == ["rpo_over_target"]
    # The same probes judged against a looser --target: OK.
    assert judge_health(health(late, spec=SloSpec(threshold_seconds=2000.0)), late, target_seconds=2000, rpo_window_seconds=3600,
                        now=NOW).verdict is RpoVerdict.OK
    failed = [rec(ProbeStatus.FAILED, None)]
    v = judge_health(health(failed), failed, target_seconds=900, rpo_window_seconds=3600, now=NOW)
    assert v.verdict is RpoVerdict.BREACH and v.findings[0].kind == "rpo_unbounded" and v.rpo_bound == "unbounded"
    # An in-flight probe alone bounds the RPO: data, not "no data".
    v = judge_health(health([], in_flight=(NOW - 30,)), [], target_seconds=900, rpo_window_seconds=3600, now=NOW)
    assert v.verdict is RpoVerdict.OK and v.rpo_seconds == 30.0


def test_missed_threshold_events_and_the_ticket_burn_are_shown_but_do_not_page() -> None:
    ok = [rec(ProbeStatus.COMPLETED, 2.0)]
    v = judge_health(health(ok, events={"OperationMissedThreshold": 2}), ok, target_seconds=900, rpo_window_seconds=3600, now=NOW)
    assert v.verdict is RpoVerdict.OK and [(f.kind, f.severity, f.effect) for f in v.findings] == [("missed_threshold_events", "ticket", "none")]


def test_the_page_burn_alert_is_a_breach() -> None:
    """Probes over the SLO threshold in both page windows: the page pair fires (1 h and 5 min at 14.4x)."""
    bad = [rec(ProbeStatus.COMPLETED, 50.0, ago=a, n=i) for i, a in enumerate((60, 600, 1200))]
    spec = SloSpec(threshold_seconds=10.0)
    v = judge_health(health(bad, spec=spec), bad, target_seconds=100, rpo_window_seconds=3600, now=NOW)
    assert v.verdict is RpoVerdict.BREACH and "slo_page_burn" in [f.kind for f in v.findings]


def test_several_routes_give_the_most_urgent_exit_code() -> None:
    assert combine([Exit.OK, Exit.NO_DATA]) == 4 and combine([Exit.NO_DATA, Exit.BREACH, Exit.INFRASTRUCTURE]) == 1
    assert combine([Exit.OK, Exit.INFRASTRUCTURE, Exit.NO_DATA]) == 3 and combine([]) == 0
    assert overall([]) is RpoVerdict.NO_DATA


def test_the_exit_code_table_covers_every_code_and_the_report_gate() -> None:
    table = markdown()
    for code in Exit:
        assert f"| {int(code)} |" in table
    assert set(COMMANDS["report"]) >= {Exit.OK, Exit.BREACH, Exit.NO_DATA, Exit.INFRASTRUCTURE}


def test_the_memory_table_keeps_the_stores_contract() -> None:
    t = MemoryLatencyTable()
    a = rec(ProbeStatus.COMPLETED, 2.0)
    assert t.put_once(a) and not t.put_once(a)
    assert [r.probe_id for r in t.query("r", NOW - 3600, NOW)] == [a.probe_id] and t.query("other", 0, NOW) == []
    assert t.query("r", NOW - 3600, NOW - 10) == []  # the key is the run id's stamped time (NOW): outside this range
    assert t.narrow_interval(a, 1.9, 1.95, NOW) and not t.narrow_interval(a, 1.9, 1.95, NOW)  # conditional on the interval read
    got = t.get_record("r", a.sort_key)
    assert got is not None and (got.latency_lo, got.latency_hi) == (1.9, 1.95)
    assert t.add_arrival("r#arrivals", "k", "created_at", 5.0, 9) and not t.add_arrival("r#arrivals", "k", "created_at", 6.0, 9)
    assert t.add_arrival("r#arrivals", "k", "created_at", 4.0, 9) and t.get_item("r#arrivals", "k")["created_at"] == 4.0  # type: ignore[index]


def test_every_findings_severity_is_its_alarms_severity_tag() -> None:
    """One severity per cause: the CLI's headline pages exactly where the deployed
    stack's alarm for the same cause pages (its ``Severity`` tag in template.yaml). A STUCK probe
    is a ticket in both; the RPO it raises pages through RpoAboveTargetG00Alarm / rpo_over_target."""
    from replmon.local.template import load_template
    from replmon.signals.verdict import FINDING_ALARMS
    from tests.conftest import TEMPLATE

    resources = load_template(TEMPLATE)["Resources"]
    assert set(FINDING_ALARMS) == set(FINDING_KINDS)
    tags = {name: next((t["Value"] for t in resources[name]["Properties"].get("Tags", []) if t["Key"] == "Severity"), None)
            for name in filter(None, FINDING_ALARMS.values())}
    assert {k: str(FINDING_KINDS[k][0]) for k, a in FINDING_ALARMS.items() if a} == {k: tags[a] for k, a in FINDING_ALARMS.items() if a}
    # a finding that pages must be a breach (the verdict's exit code 1), never "shown only"
    assert all(effect == "breach" for sev, effect in FINDING_KINDS.values() if sev == "page")
    assert FINDING_KINDS["probe_stuck"][0] == "ticket" and FINDING_ALARMS["probe_stuck"] == "ProbeStuckG00Alarm"
