"""The fleet's Metrics Insights alarms (fleet/alarms.py): generated into template.yaml, shaped the way
CloudWatch and CloudFormation accept them, inside AWS's documented limits.

AWS contracts encoded here:
- "Create an alarm based on a Multi Time Series Metrics Insights query"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/multi-time-series-alarm.html) and
  "Alarm data queries" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-data-queries.html):
  a multi-time-series query needs GROUP BY and ORDER BY; each returned series is a contributor;
  standard resolution only (periods are multiples of 60 s); only the latest 3 hours evaluate;
  more than 500 series or 10,000 matched metrics is PARTIAL_DATA; at most 100 contributors in ALARM.
- "Limits" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-limits.html):
  200 Metrics Insights alarms per account and Region by default.
- "Query components and syntax in CloudWatch Metrics Insights"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-querylanguage.html):
  LIMIT at most 500; the SCHEMA's keys are the exact dimension set (the EMF check is in
  tests/test_alarm_contract.py).
- "AWS::CloudWatch::Alarm MetricDataQuery"
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-cloudwatch-alarm-metricdataquery.html)
  and PutMetricAlarm's Period: an alarm on an expression gives the period in its Metrics entry (not
  at the top), each entry has Expression or MetricStat but not both, an Expression is 1-2,048
  characters, and one entry has ReturnData true.
- "Alarm actions" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-actions.html):
  a multi-time-series alarm's SNS notifications are per contributor and carry its GROUP BY
  attributes (the Route), which a composite alarm over it could not (it sees alarm-level state).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from replmon.core.registry import MAX_ROUTE_GROUPS, MAX_ROUTES_PER_GROUP, group_names
from replmon.core.telemetry import CONTINUOUS, FLEET_METRICS, METRICS, NAMESPACE, ROUTE, ROUTE_GROUP, SPARSE, SWITCHED
from replmon.fleet import alarms as fa
from replmon.local.insights import parse
from replmon.local.template import load_template
from tests.cfnutil import default_transformed, resolver
from tests.conftest import ROOT, TEMPLATE, tool_module

#: Alarms that still name RouteName, until their replacement lands (docs/ALARMS.md says so too).
#: ("No probe completed" for the stack's route is gone: RouteNoData, emitted for every probe-mode
#: route on every collector run, tickets a route without data, the stack's own among them.)
STILL_PER_ROUTE = {
    # RtcBytesPending retires (core/telemetry.py RETIRING): S3's own metric, alarmed in the member Region.
    "PendingBytesAlarm": "RtcBytesPending",
}


def tool() -> ModuleType:
    return tool_module("render_fleet")  # type: ignore[no-any-return]


#: Metrics Insights alarms that are not per route (no RouteGroup shard): fleet-wide counts.
FLEET_WIDE_MI = {"UnmappedEventAlarm"}


def mi_alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The per-route (sharded) Metrics Insights alarms."""
    return {k: v for k, v in template["Resources"].items()
            if v["Type"] == "AWS::CloudWatch::Alarm" and "Metrics" in v["Properties"] and k not in FLEET_WIDE_MI}


def test_template_yaml_holds_exactly_what_the_renderer_writes() -> None:
    text = TEMPLATE.read_text()
    assert fa.render_into(text) == text, "template.yaml is stale: python tools/render_fleet.py --write"
    assert tool().main([]) == 0
    stale = text.replace("ORDER BY MAX() DESC LIMIT 500", "ORDER BY MAX() DESC LIMIT 10", 1)
    assert fa.render_into(stale) == text  # a hand edit inside the block is overwritten, and detected
    with pytest.raises(ValueError, match="generated"):
        fa.render_into(text.replace(fa.RESOURCES_START, "  # gone"))


def test_one_alarm_per_signal_and_group_none_per_route() -> None:
    t = load_template(TEMPLATE)
    alarms = mi_alarms(t)
    assert len(alarms) == len(fa.FLEET_ALARMS) * MAX_ROUTE_GROUPS == fa.alarm_count(MAX_ROUTE_GROUPS)
    assert fa.alarm_count(MAX_ROUTE_GROUPS) + len(FLEET_WIDE_MI) <= fa.MI_ALARMS_PER_REGION  # 121 of the 200 a Region allows
    # No other alarm names one route: routes are contributors.
    per_route = {name for name, res in t["Resources"].items()
                 if res["Type"] == "AWS::CloudWatch::Alarm" and "RouteName" in str(res["Properties"])}
    assert per_route == set(STILL_PER_ROUTE)
    # g00 always; g01.. only while RouteGroups says so.
    for groups in (1, 3, MAX_ROUTE_GROUPS):
        r = resolver(default_transformed())
        r.params["RouteGroups"] = str(groups)
        live = {k for k in alarms if r.exists(k)}
        assert live == {fa.logical_id(a, g) for a in fa.FLEET_ALARMS for g in group_names(groups)}, groups


def test_every_query_is_a_multi_time_series_query_aws_accepts() -> None:
    for name, res in mi_alarms(load_template(TEMPLATE)).items():
        p = res["Properties"]
        assert not {"MetricName", "Namespace", "Statistic", "Period", "Dimensions"} & set(p), name  # the period is the query's
        (m,) = p["Metrics"]
        assert m["ReturnData"] is True and "MetricStat" not in m and 1 <= len(m["Expression"]) <= 2048, name
        q = parse(m["Expression"])
        assert q.group_by == (ROUTE,) and q.order is not None and q.order[1], name  # DESC: the worst 500 are evaluated
        assert q.limit == fa.MAX_SERIES_PER_QUERY, name
        assert m["Period"] % 60 == 0 and m["Period"] * p["EvaluationPeriods"] <= fa.MAX_EVALUATED_SECONDS, name
        assert p["DatapointsToAlarm"] <= p["EvaluationPeriods"] and p["TreatMissingData"] == "notBreaching", name
        assert p.get("AlarmActions") == p.get("OKActions"), name  # contributor-level ALARM and OK notifications (none: covered_by)
        group = next(tag["Value"] for tag in p["Tags"] if tag["Key"] == ROUTE_GROUP)
        assert (ROUTE_GROUP, "=", group) in q.where and q.namespace == NAMESPACE, name


def test_the_metrics_the_alarms_read_are_emitted_with_the_fleet_schema() -> None:
    """Switched metrics (core/telemetry.py SWITCHED) carry RouteGroup; each alarm's SCHEMA is its metric's set."""
    for a in fa.FLEET_ALARMS:
        assert a.metric in SWITCHED, a.metric
        assert METRICS[a.metric].dimension_sets == (("service", *a.schema),), a.name
        assert parse(fa.query(a, "g00")).schema == fa.schema_dimensions(a)
    # The continuous ones keep every route a contributor; the 0/1 and burn signals are sparse: emitted while
    # above 0, and one explicit 0 when they fall back (signals/health.py publish_health), so the contributor
    # goes OK at the next evaluation instead of when its last datapoint leaves the evaluation range.
    assert {"RpoSeconds", "StallSeconds"} <= {n for n, m in FLEET_METRICS.items() if m.cadence == CONTINUOUS}
    assert {"SloBurnPage", "SloBurnTicket", "RouteNoData", "RpoUnbounded"} <= {n for n, m in FLEET_METRICS.items() if m.cadence == SPARSE}


def test_past_500_routes_the_fleet_shards_by_group() -> None:
    """500 series per query: RouteGroups (<= 8) x 500 routes (core/registry.py MAX_ROUTES_PER_GROUP); past
    that a group's alarms see PARTIAL_DATA and evaluate its worst 500 (ORDER BY ... DESC), as ALARMS.md says."""
    assert fa.route_capacity(1) == MAX_ROUTES_PER_GROUP == fa.MAX_SERIES_PER_QUERY
    assert fa.route_capacity() == 4000
    docs = (ROOT / "docs" / "ALARMS.md").read_text()
    assert "500 routes" in docs and "RouteGroups" in docs and "PARTIAL_DATA" in docs and "100 contributors" in docs


def test_the_burn_pair_metric_is_over_its_factor_exactly_when_both_windows_are() -> None:
    """SloBurnPage / SloBurnTicket = min(long, short): one alarm on it is the old composite's AND."""
    import random

    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.signals.slo import DEFAULT_PAIRS, SloSpec, slo_status

    rng, now, spec = random.Random(18), 1_790_000_000.0, SloSpec(threshold_seconds=60.0, target=0.999)
    fired = set()
    for case in range(200):
        records = []
        for i in range(rng.randint(0, 40)):
            at = now - rng.uniform(0, 8 * 3600)
            status = rng.choice([ProbeStatus.COMPLETED] * 6 + [ProbeStatus.FAILED, ProbeStatus.STUCK])
            hi = rng.choice([5.0, 90.0]) if status is ProbeStatus.COMPLETED else None
            records.append(ProbeRecord(route="r", probe_id=f"p{case}-{i}", run_id="x", planned_at=at, size_bytes=1, size_class="1B",
                                       trial=1, status=status, put_end=at, latency_lo=hi and hi - 1, latency_hi=hi, target_seconds=60.0))
        s = slo_status(records, now, spec)
        for pair in DEFAULT_PAIRS:
            burn = s.pair_burn[pair.name]
            assert s.alerts[pair.name] == (burn is not None and burn > pair.factor), (case, pair.name)
            fired |= {pair.name} if s.alerts[pair.name] else set()
    assert fired == {"page", "ticket"}  # both pairs fired in some histories: the check is not vacuous


@pytest.mark.parametrize("groups", [1, 3])
def test_every_emitting_function_knows_route_groups_so_its_metrics_land_in_an_existing_alarm_set(groups: int) -> None:
    """RouteGroup = group_of(Route, RouteGroups) in adapters/metrics.py: the functions get RouteGroups
    through REPLMON_FLEET (Globals), and wiring.from_env hands it to EmfMetrics."""
    import json

    from replmon import wiring
    from replmon.adapters.metrics import EmfMetrics
    from tests.cfnutil import function_environment

    cfn = default_transformed()
    r = resolver(cfn)
    r.params["RouteGroups"] = str(groups)
    for fn in ("RecordResult", "CollectSignals", "IngestEvents", "Cleanup", "Housekeeping"):
        env = function_environment(cfn, fn, r)
        assert json.loads(env["REPLMON_FLEET"])["route_groups"] == groups, fn
    deps = wiring.from_env({**env, "AWS_DEFAULT_REGION": "us-east-1"})
    assert isinstance(deps.metrics, EmfMetrics) and deps.metrics.route_groups == groups
