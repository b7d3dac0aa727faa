"""The local Metrics Insights evaluator (local/insights.py) against AWS's documented queries and alarm
semantics, then against the EMF replmon's own code prints: two routes, one late, and exactly that
route's contributor in ALARM.

AWS contracts encoded here:
- "Query components and syntax in CloudWatch Metrics Insights"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-querylanguage.html):
  the grammar, functions AVG/COUNT/MAX/MIN/SUM, SCHEMA = exactly that dimension set, WHERE with = != AND,
  a GROUP BY key a metric lacks gives the group ``Other``, ORDER BY ascending by default, LIMIT <= 500,
  case-insensitive keywords, double-quoted identifiers with other characters.
- "Metrics Insights sample queries"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-queryexamples.html):
  the sample queries below, verbatim.
- "Create an alarm based on a Multi Time Series Metrics Insights query"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/multi-time-series-alarm.html),
  "Alarm data queries" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-data-queries.html),
  "Configuring how CloudWatch alarms treat missing data"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html),
  section "Missing Data in CloudWatch Metrics Insights alarms":
  each series a contributor; GROUP BY and ORDER BY required; a series no longer returned goes OK ("No
  data was returned for this contributor") whatever TreatMissingData says, which applies per
  datapoint; an empty result makes the alarm INSUFFICIENT_DATA; > 500 series is PARTIAL_DATA; at
  most 100 contributors in ALARM; only the latest 3 hours evaluate. And its section "How alarm state
  is evaluated when data is missing": each evaluation retrieves the *evaluation range* (more
  datapoints than EvaluationPeriods: 5 for 3 in its tables); with at least EvaluationPeriods real
  datapoints in it the most recent real ones are judged and TreatMissingData is ignored, with fewer
  every real one is judged and the missing ones are filled in per TreatMissingData
  (test_the_evaluation_range_rows_of_awss_tables).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from replmon.adapters.metrics import EmfMetrics
from replmon.core.registry import group_of
from replmon.core.telemetry import ROUTE, SERVICE
from replmon.fleet.alarms import FLEET_ALARMS
from replmon.local.insights import (
    NO_DATA_REASON,
    OTHER,
    AlarmEvaluator,
    InsightsError,
    Notification,
    Point,
    evaluate,
    parse,
    points_from_emf,
    template_alarms,
)
from replmon.signals.health import RouteHealth, publish_health
from replmon.signals.slo import Rpo, SloStatus
from tests.cfnutil import default_transformed

#: "Metrics Insights sample queries", verbatim.
AWS_SAMPLES = (
    'SELECT SUM(RequestCount) FROM SCHEMA("AWS/ApplicationELB", LoadBalancer)',
    'SELECT MAX(ActiveConnectionCount) FROM SCHEMA("AWS/ApplicationELB", LoadBalancer) GROUP BY LoadBalancer ORDER BY SUM() DESC LIMIT 10',
    "SELECT COUNT(CallCount) FROM SCHEMA(\"AWS/Usage\", Class, Resource, Service, Type) WHERE Type = 'API' "
    "GROUP BY Service, Resource ORDER BY COUNT() DESC LIMIT 20",
    "SELECT COUNT(CallCount) FROM SCHEMA(\"AWS/Usage\", Class, Resource, Service, Type) WHERE Type = 'API' AND Service = 'CloudWatch' "
    "GROUP BY Resource ORDER BY COUNT() DESC",
    'SELECT SUM(ProvisionedWriteCapacityUnits) FROM SCHEMA("AWS/DynamoDB", TableName) GROUP BY TableName ORDER BY MAX() DESC LIMIT 10',
)
T0 = 1_790_000_100.0  # a period start (a multiple of 300)


def pt(metric: str, value: float, t: float = T0, ns: str = "AWS/ApplicationELB", **dims: str) -> Point:
    return Point(ns, metric, dims, t, value)


def test_awss_sample_queries_parse() -> None:
    parsed = [parse(q) for q in AWS_SAMPLES]
    assert parsed[1].function == "MAX" and parsed[1].order == ("SUM", True) and parsed[1].limit == 10
    assert parsed[2].schema == ("Class", "Resource", "Service", "Type") and parsed[2].group_by == ("Service", "Resource")
    assert parsed[3].where == (("Type", "=", "API"), ("Service", "=", "CloudWatch")) and parsed[3].limit is None
    assert parse(AWS_SAMPLES[1].lower().replace("activeconnectioncount", "ActiveConnectionCount")
                 .replace("aws/applicationelb", "AWS/ApplicationELB").replace("loadbalancer", "LoadBalancer")) == parsed[1]


def test_the_top_load_balancers_sample_ranks_by_its_order_function_over_exactly_its_schema() -> None:
    q = parse(AWS_SAMPLES[1])
    points = [pt("ActiveConnectionCount", v, T0 + 60 * i, LoadBalancer=lb) for i, (lb, v) in
              enumerate([("a", 5), ("a", 5), ("b", 8), ("c", 1), ("c", 1), ("c", 1), ("c", 1), ("c", 1), ("c", 1), ("c", 1), ("c", 1), ("c", 1)])]
    points.append(pt("ActiveConnectionCount", 99, LoadBalancer="d", AvailabilityZone="us-east-1a"))  # another dimension set
    r = evaluate(q, points, T0, T0 + 900, 900)
    assert list(r.series) == [("a",), ("c",), ("b",)]  # ranked by ORDER BY's SUM (10, 9, 8), not by MAX; d not in the SCHEMA
    assert r.series[("a",)] == [5] and r.series[("b",)] == [8] and r.series[("c",)] == [1]  # each period: SELECT's MAX


def test_where_and_group_by_other_and_default_ascending_order() -> None:
    usage = [pt("CallCount", 1, ns="AWS/Usage", Class="None", Resource=res, Service=svc, Type=typ)
             for res, svc, typ in [("GetMetricData", "CloudWatch", "API"), ("GetMetricData", "CloudWatch", "API"),
                                   ("PutObject", "S3", "API"), ("ListMetrics", "CloudWatch", "Resource")]]
    r = evaluate(parse(AWS_SAMPLES[3]), usage, T0, T0 + 300, 300)
    assert r.series == {("GetMetricData",): [2.0]}
    lone = [pt("Latency", 3, ns="App", Route="x"), pt("Latency", 1, ns="App", Route="y"), pt("Latency", 7, ns="App")]
    r = evaluate(parse("select max(Latency) from App group by Route order by max()"), lone, T0, T0 + 300, 300)
    assert list(r.series) == [("y",), ("x",), (OTHER,)]  # ascending by default; no Route -> Other
    neq = evaluate(parse("SELECT SUM(Latency) FROM App WHERE Route != 'x'"), lone, T0, T0 + 300, 300)
    assert neq.series == {(): [8.0]}


@pytest.mark.parametrize(("query", "message"), [
    ("SELECT P99(Latency) FROM App", "not one of AVG"),
    ("SELECT MAX(Latency) FROM AWS/EC2", "double quotes"),
    ("SELECT MAX(Latency) FROM App WHERE Route = 'a' OR Route = 'b'", "AND only"),
    ("SELECT MAX(Latency) FROM App WHERE Route LIKE 'a'", "= and != only"),
    ("SELECT MAX(Latency) FROM App WHERE Route = a", "single quotes"),
    ("SELECT MAX(Latency) FROM App LIMIT 501", "maximum is 500"),
    ("SELECT MAX(Latency) FROM App HAVING x", "unsupported clause"),
])
def test_anything_outside_the_subset_is_refused_by_name(query: str, message: str) -> None:
    with pytest.raises(InsightsError, match=message):
        parse(query)


def alarm(query: str = "SELECT MAX(Rpo) FROM SCHEMA(App, Route) GROUP BY Route ORDER BY MAX() DESC", **kw: Any) -> AlarmEvaluator:
    return AlarmEvaluator(parse(query), kw.pop("period", 60), kw.pop("threshold", 10.0), "GreaterThanThreshold", **kw)


def rpo(route: str, value: float, minute: int) -> Point:
    return Point("App", "Rpo", {"Route": route}, T0 + 60 * minute, value)


def test_contributors_m_of_n_vanished_series_go_ok_and_an_empty_result_is_insufficient_data() -> None:
    a = alarm(evaluation_periods=3, datapoints_to_alarm=2, treat_missing="notBreaching")
    data = [rpo("a", 50, 0), rpo("a", 50, 1), rpo("b", 50, 0), rpo("b", 1, 1), rpo("b", 1, 2), rpo("a", 1, 2)]
    s = a.step(T0 + 180, data)
    assert s.state == "ALARM" and s.in_alarm() == [{"Route": "a"}]  # a: 2 of 3 breaching; b: 1 of 3
    # minutes -1..3 (the evaluation range, 5): a's missing minute 3 is skipped, its 3 most recent real
    # datapoints (minutes 0-2: 50, 50, 1) judged: still 2 of 3 breaching
    s = a.step(T0 + 240, [*data, rpo("b", 1, 3)])
    assert s.contributors[("a",)].state == "ALARM"
    s = a.step(T0 + 300, [*data, rpo("b", 1, 3), rpo("a", 1, 4)])  # a's 3 most recent: 50, 1, 1
    assert s.contributors[("a",)].state == "OK" and s.state == "OK"
    s = a.step(T0 + 60 * 9, [rpo("b", 1, 7)])  # a returns nothing any more
    assert s.contributors[("a",)].state == "OK" and s.contributors[("a",)].reason == NO_DATA_REASON
    assert a.step(T0 + 3600, []).state == "INSUFFICIENT_DATA"
    breaching = alarm(evaluation_periods=2, datapoints_to_alarm=2, treat_missing="breaching")
    assert breaching.step(T0 + 120, [rpo("a", 50, 0)]).in_alarm() == [{"Route": "a"}]  # a missing minute breaches


#: "Configuring how CloudWatch alarms treat missing data", "How alarm state is evaluated when data is
#: missing" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html):
#: the rows of its two tables (Period 5 min, evaluation range 5, oldest first; 0 within, X breaching,
#: - missing) with the states for BREACHING and NOT BREACHING. (The rows its "premature alarm state"
#: section covers, for MISSING and IGNORE, are not modelled: no replmon alarm treats missing data so.)
AWS_TABLE_ROWS = [
    # DatapointsToAlarm 3 of EvaluationPeriods 3
    (3, "0 - X - -", "OK", "OK"),  # "the one existing data point is not breaching" ... (the page's second row, read with its text)
    (3, "- - - - -", "ALARM", "OK"),  # all missing (a Metrics Insights query then returns no series: the contributor goes OK)
    (3, "0 X X - X", "ALARM", "ALARM"),  # 3 real in range: the most recent 3, the missing one skipped
    (3, "- - X - -", "ALARM", "OK"),
    # 2 of 3
    (2, "0 X 0 X X", "ALARM", "ALARM"),
    (2, "0 0 X 0 X", "ALARM", "ALARM"),
    (2, "- - - - 0", "ALARM", "OK"),
    (2, "- - X - -", "ALARM", "OK"),
]


@pytest.mark.parametrize(("m", "row", "breaching", "not_breaching"), AWS_TABLE_ROWS)
def test_the_evaluation_range_rows_of_awss_tables(m: int, row: str, breaching: str | None, not_breaching: str | None) -> None:
    from replmon.local.insights import judge

    values = [None if c == "-" else 50.0 if c == "X" else 1.0 for c in row.split()]
    got = {tm: judge(values, 3, m, tm, lambda v: v > 10) for tm in ("breaching", "notBreaching")}
    assert [None if v is None else v[0] for v in got.values()] == [breaching, not_breaching]


def test_a_series_that_stops_stays_in_alarm_while_its_last_datapoint_is_in_the_evaluation_range() -> None:
    """The same page: "CloudWatch alarms might repeatedly re-evaluate the last set of data points for a
    period of time after the metric has stopped flowing". A 5-minute alarm (EvaluationPeriods 1): a
    route's breaching series stops; its contributor stays ALARM until the last datapoint leaves the
    range (2 more periods), so a sparse signal that just stops clears late; an explicit 0 clears it
    at the next evaluation, whatever the range's size."""
    def stops(zero: bool, extra: int) -> int:
        a = alarm(period=300, treat_missing="notBreaching", extra_range_periods=extra)
        data = [Point("App", "Rpo", {"Route": "a"}, T0 + 5, 50.0)] + ([Point("App", "Rpo", {"Route": "a"}, T0 + 305, 0.0)] if zero else [])
        for k in range(1, 8):
            if a.step(T0 + 300 * k + 1, data).in_alarm() == []:
                return k
        return -1

    assert [stops(False, extra) for extra in (0, 1, 2, 3)] == [2, 3, 4, 5]
    assert [stops(True, extra) for extra in (0, 1, 2, 3)] == [2, 2, 2, 2]


def test_partial_data_past_500_series_and_at_most_100_contributors_in_alarm() -> None:
    a = alarm()
    s = a.step(T0 + 60, [rpo(f"r{i:03d}", 50, 0) for i in range(501)])
    assert s.evaluation_state == "PARTIAL_DATA" and len(s.contributors) == 500
    assert len(s.in_alarm()) == 100


def test_sns_notifications_at_alarm_level_and_at_contributor_level() -> None:
    """"Acting on alarm changes"
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Acting_Alarm_Changes.html):
    for a Metrics Insights alarm over several series, SNS notifications run at alarm level *and* at
    contributor level; a contributor is only ALARM or OK (a series exists only with data). The alarm
    notifies when it as a whole changes (its first contributor in ALARM, its last out); each
    contributor when it changes. A contributor first seen breaching notifies ALARM; first seen OK,
    nothing."""
    a = alarm()
    s = a.step(T0 + 60, [rpo("a", 50, 0), rpo("b", 1, 0)])
    assert s.notifications == [Notification("alarm", "ALARM"), Notification("contributor", "ALARM", {"Route": "a"})]
    s = a.step(T0 + 120, [rpo("a", 50, 1), rpo("b", 50, 1)])  # b joins: the alarm is ALARM already
    assert s.notifications == [Notification("contributor", "ALARM", {"Route": "b"})]
    s = a.step(T0 + 180, [rpo("a", 1, 2), rpo("b", 50, 2)])
    assert s.notifications == [Notification("contributor", "OK", {"Route": "a"})]
    s = a.step(T0 + 240, [rpo("a", 1, 3), rpo("b", 1, 3)])  # the last one out: the alarm is OK too
    assert s.notifications == [Notification("alarm", "OK"), Notification("contributor", "OK", {"Route": "b"})]
    assert a.step(T0 + 300, [rpo("a", 1, 4), rpo("b", 1, 4)]).notifications == []  # no change, no notification


def test_a_contributor_that_disappears_notifies_ok_once() -> None:
    """"Configuring how CloudWatch alarms treat missing data", section on Metrics Insights alarms
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html):
    a contributor whose series the query no longer returns goes OK ("No data was returned for this
    contributor") whatever TreatMissingData says: one OK notification, then it is gone."""
    a = alarm(treat_missing="breaching")
    first = [rpo("a", 50, 0), rpo("b", 50, 0)]
    assert Notification("contributor", "ALARM", {"Route": "a"}) in a.step(T0 + 60, first).notifications
    # a stopped emitting: its last datapoint is still in the evaluation range (EvaluationPeriods 1 + 2)
    # for two more minutes, and it is the most recent real one: ALARM, whatever TreatMissingData says
    for minute in (1, 2):
        assert a.step(T0 + 60 * (minute + 1), [*first, rpo("b", 50, minute)]).notifications == []
    s = a.step(T0 + 240, [*first, rpo("b", 50, 3)])  # minute 0 left the range: a's series is not returned
    assert s.notifications == [Notification("contributor", "OK", {"Route": "a"})]
    assert s.contributors[("a",)].reason == NO_DATA_REASON
    s = a.step(T0 + 300, [rpo("b", 50, 4)])
    assert s.notifications == [] and ("a",) not in s.contributors


def test_at_most_100_contributors_notify_alarm() -> None:
    """"Create an alarm based on a Multi Time Series Metrics Insights query"
    (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/multi-time-series-alarm.html) and
    the missing-data page above: at most 100 contributors are in ALARM. 150 series breach at once:
    100 ALARM notifications, the worst 100 by the query's ORDER BY; when those recover, the next
    ones still breaching take their place."""
    def rpo_seconds(i: int, value: float, t: float) -> Point:
        return pt("RpoSeconds", value, t, "Replmon", RouteGroup="g00", Route=f"r{i:03d}", service=SERVICE)

    a = template_alarm("RpoAboveTargetG00Alarm")
    late = [rpo_seconds(i, 1000.0 + i, T0 + 5) for i in range(150)]
    s = a.step(T0 + 301, late)
    alarmed = [n.attributes["Route"] for n in s.notifications if n.level == "contributor" and n.state == "ALARM"]
    assert alarmed == [f"r{i:03d}" for i in range(149, 49, -1)]
    recovered = [rpo_seconds(i, 40.0 if i >= 50 else 1000.0 + i, T0 + 305) for i in range(150)]  # the worst 100 recover
    s = a.step(T0 + 601, late + recovered)
    changed = {(n.state, n.attributes["Route"]) for n in s.notifications if n.level == "contributor"}
    assert {r for st, r in changed if st == "OK"} == {f"r{i:03d}" for i in range(50, 150)}
    assert {r for st, r in changed if st == "ALARM"} == {f"r{i:03d}" for i in range(50)}


def test_alarms_aws_would_refuse_are_refused() -> None:
    with pytest.raises(InsightsError, match="GROUP BY and ORDER BY"):
        alarm("SELECT MAX(Rpo) FROM SCHEMA(App, Route) GROUP BY Route")
    with pytest.raises(InsightsError, match="3 hours"):
        alarm(period=3600, evaluation_periods=4)
    with pytest.raises(InsightsError, match="multiples of 60"):
        alarm(period=30)


# ------------------------------------------------------------------------------ the template's alarms over replmon's EMF
@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What template.yaml gives every function: Powertools then adds ``service`` to every dimension set."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", SERVICE)


def emf(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]


def health(route: str, rpo_s: float, page: float, ticket: float) -> RouteHealth:
    return RouteHealth(route, Rpo(rpo_s, False, {"recent_probe_latency": rpo_s}), SloStatus(9, 10, 0.9, 0.5, {}, {}, {}, {"page": page, "ticket": ticket}))


def template_alarm(name: str, groups: int = 1) -> AlarmEvaluator:
    alarms = template_alarms(default_transformed(), {"RouteGroups": str(groups)})
    # one alarm per (fleet alarm, RouteGroup), and UnmappedEventAlarm (grouped by Reason: no route to group)
    assert len(alarms) == len(FLEET_ALARMS) * groups + 1 and "UnmappedEventAlarm" in alarms
    return alarms[name]


@pytest.mark.usefixtures("lambda_env")
def test_the_templates_alarms_put_exactly_the_late_routes_contributor_in_alarm(capsys: pytest.CaptureFixture[str]) -> None:
    metrics = EmfMetrics(route_groups=1)
    capsys.readouterr()
    publish_health(metrics, health("orders-to-dr", 2400.0, 20.0, 8.0))  # late: RPO 40 min, burning fast
    publish_health(metrics, health("logs-to-dr", 30.0, 0.0, 0.0))
    metrics.count("ProbeFailed", 1, {ROUTE: "logs-to-dr"})
    points = points_from_emf(emf(capsys))
    now = max(p.timestamp for p in points) // 300 * 300 + 301
    verdicts = {name: template_alarm(name).step(now, points) for name in
                ("RpoAboveTargetG00Alarm", "SloFastBurnG00Alarm", "SloSlowBurnG00Alarm", "ProbeFailedG00Alarm", "RpoUnboundedG00Alarm")}
    assert {n: v.in_alarm() for n, v in verdicts.items()} == {
        "RpoAboveTargetG00Alarm": [{"Route": "orders-to-dr"}], "SloFastBurnG00Alarm": [{"Route": "orders-to-dr"}],
        "SloSlowBurnG00Alarm": [{"Route": "orders-to-dr"}], "ProbeFailedG00Alarm": [{"Route": "logs-to-dr"}],
        "RpoUnboundedG00Alarm": []}
    assert set(verdicts["RpoAboveTargetG00Alarm"].contributors) == {("orders-to-dr",), ("logs-to-dr",)}  # both evaluated
    assert verdicts["ProbeFailedG00Alarm"].contributors.keys() == {("logs-to-dr",)}  # sparse: only who emitted


@pytest.mark.usefixtures("lambda_env")
def test_with_two_groups_each_route_is_a_contributor_of_its_own_groups_alarm(capsys: pytest.CaptureFixture[str]) -> None:
    routes = ["orders-to-dr", "logs-to-dr", "images-to-dr", "audit-to-dr"]
    assert {group_of(r, 2) for r in routes} == {"g00", "g01"}
    metrics = EmfMetrics(route_groups=2)
    capsys.readouterr()
    for r in routes:
        publish_health(metrics, health(r, 2400.0, 0.0, 0.0))
    points = points_from_emf(emf(capsys))
    now = max(p.timestamp for p in points) // 300 * 300 + 301
    for g in ("g00", "g01"):
        late = template_alarm(f"RpoAboveTarget{g.upper()}Alarm", groups=2).step(now, points).in_alarm()
        assert sorted(c["Route"] for c in late) == sorted(r for r in routes if group_of(r, 2) == g)


@pytest.mark.usefixtures("lambda_env")
def test_one_cause_pages_once_per_route(capsys: pytest.CaptureFixture[str]) -> None:
    """One page per cause with the fleet alarms: every page alarm's state is kept, but one cause notifies
    once for its route. A failing route (a FAILED probe, a failed replication event, the budget
    burning at 20x, the RPO unbounded) pages through RpoUnbounded alone; a late route (RPO 40 min,
    burning at 20x) through RpoAboveTarget alone. The template's notifying alarms, evaluated over
    the EMF the code emits."""
    from replmon.core.telemetry import EVENT

    metrics = EmfMetrics(route_groups=1)
    capsys.readouterr()
    publish_health(metrics, RouteHealth("failing-to-dr", Rpo(2400.0, True, {}, reasons=["probe FAILED"]),
                                        SloStatus(1, 10, 0.1, -5.0, {}, {}, {}, {"page": 20.0, "ticket": 9.0})))
    metrics.count("ProbeFailed", 1, {ROUTE: "failing-to-dr"})
    metrics.count("ReplicationEvents", 3, {ROUTE: "failing-to-dr", EVENT: "OperationFailedReplication"})
    publish_health(metrics, health("late-to-dr", 2400.0, 20.0, 9.0))
    points = points_from_emf(emf(capsys))
    now = max(p.timestamp for p in points) // 300 * 300 + 301
    template = default_transformed()
    from tests.test_alarm_table import notifies

    notifying = {k for k, v in template["Resources"].items() if v["Type"] == "AWS::CloudWatch::Alarm"
                 and notifies(template, k) and "Severity', 'Value': 'page" in str(v["Properties"].get("Tags"))}
    paging: dict[str, list[str]] = {}
    in_alarm: dict[str, list[str]] = {}
    for name, evaluator in template_alarms(template, {"RouteGroups": "1"}).items():
        for c in evaluator.step(now, points).in_alarm():
            in_alarm.setdefault(c["Route"], []).append(name)
            if name in notifying:
                paging.setdefault(c["Route"], []).append(name)
    assert paging == {"failing-to-dr": ["RpoUnboundedG00Alarm"], "late-to-dr": ["RpoAboveTargetG00Alarm"]}
    # ...while every alarm that saw the cause keeps its state (history, dashboard, replmon report)
    assert {"ProbeFailedG00Alarm", "ReplicationFailedEventG00Alarm", "SloFastBurnG00Alarm"} <= set(in_alarm["failing-to-dr"])
    assert "SloFastBurnG00Alarm" in in_alarm["late-to-dr"]
