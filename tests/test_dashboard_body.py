"""The fleet dashboard (fleet/dashboard.py, rendered into template.yaml) against CloudWatch's
dashboard body rules, so every widget renders once deployed.

AWS contracts encoded here:
- "Dashboard Body Structure and Syntax"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/CloudWatch-Dashboard-Body-Structure.html):
  a ``widgets`` array of 0 to 500 widgets; a widget's ``x``/``y``/``width``/``height`` on a 24-column
  grid; a metric widget's ``properties.metrics`` is an array of rows, each either
  ``[Namespace, MetricName, DimName, DimValue, ..., {rendering options}]`` or a single
  ``{"expression": ..., "id": ..., "label": ...}`` object; a ``variables`` entry has ``type``
  (``property`` | ``pattern``), ``inputType`` (``input`` | ``radio`` | ``select``), ``id``, and for a
  select filled by a metric search, ``search`` plus ``populateFrom``, a dimension of that search.
- "Metrics Insights quotas"
  (https://docs.amazonaws.cn/en_us/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-limits.md):
  "Each GetMetricData operation can have only one query, but you can have multiple widgets in a
  dashboard, each with one query"; a query returns at most 500 series (LIMIT <= 500).
- GetMetricData (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/cloudwatch/aws.sdk.kotlin.services.cloudwatch.model/-get-metric-data-request/metric-data-queries.html):
  at most 500 MetricDataQuery structures per call (a widget's rows); a query's Id starts with a
  lowercase letter and is unique in the request.
- The same page's log widget: ``properties.query`` is ``SOURCE '<log group>' | <Logs Insights
  query>``, with ``region``, ``title`` and ``view`` (``table``, ``timeSeries``, ``bar``, ``pie``).
- Search expressions (https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_cloudwatch.SearchExpressionProps.html):
  ``SEARCH('{Namespace,Dim,...} MetricName="m" ...', 'Stat', Period)``, up to 500 series each.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from replmon.core.telemetry import ROUTE, SERVICE
from replmon.fleet.dashboard import ROUTE_PICKER_METRICS
from replmon.local.insights import MAX_LIMIT, parse
from replmon.signals.health import RouteHealth, publish_health
from replmon.signals.slo import Rpo, SloStatus
from tests.cfnutil import default_transformed, resolver

MAX_WIDGETS = 500
GRID_COLUMNS = 24
MAX_QUERIES_PER_REQUEST = 500
_ID = re.compile(r"[a-z][a-zA-Z0-9_]*$")
_SEARCH = re.compile(r"""SEARCH\('\{([^}]*)\}( MetricName="\w+"(?: \w+="[^"]*")*)', '(\w+)', (\d+)\)$""")


def body_violations(body: dict[str, Any]) -> list[str]:
    """Every way ``body`` breaks the documented dashboard body rules (empty: it renders)."""
    out = []
    widgets = body.get("widgets")
    if not isinstance(widgets, list) or not 0 <= len(widgets) <= MAX_WIDGETS:
        return [f"widgets: an array of 0..{MAX_WIDGETS} widgets is required"]
    for w in widgets:
        title = w.get("properties", {}).get("title", "?")
        if not (w["x"] >= 0 and 1 <= w["width"] <= GRID_COLUMNS and w["x"] + w["width"] <= GRID_COLUMNS and w["y"] >= 0 and w["height"] >= 1):
            out.append(f"{title} | outside the 24-column grid")
        if w["type"] == "log":  # a Logs Insights widget: SOURCE 'group' | query, a view (the body reference's "log" widget)
            p = w["properties"]
            if not re.match(r"SOURCE '[^']+'( \| SOURCE '[^']+')* \| ", p.get("query", "")) or p.get("view") not in ("table", "timeSeries", "bar", "pie"):
                out.append(f"{title} | a log widget needs query \"SOURCE '<log group>' | ...\" and a view")
            continue
        if w["type"] != "metric":
            continue
        rows = w["properties"]["metrics"]
        if not 1 <= len(rows) <= MAX_QUERIES_PER_REQUEST:
            out.append(f"{title} | {len(rows)} metrics rows (1..{MAX_QUERIES_PER_REQUEST})")
        ids, selects = [], 0
        for row in rows:
            if len(row) == 1 and isinstance(row[0], dict) and "expression" in row[0]:
                expr, rid = row[0]["expression"], row[0].get("id", "")
                ids.append(rid)
                if not _ID.match(rid):
                    out.append(f"{title} | id {rid!r} must start with a lowercase letter")
                if expr.startswith("SELECT "):
                    selects += 1
                    q = parse(expr)  # the grammar (raises on anything else)
                    if q.limit is not None and q.limit > MAX_LIMIT:
                        out.append(f"{title} | LIMIT {q.limit} > {MAX_LIMIT}")
                elif not _SEARCH.match(expr):
                    out.append(f"{title} | expression is neither a Metrics Insights query nor a SEARCH: {expr}")
                continue
            plain = [x for x in row if not isinstance(x, dict)]
            if len(plain) < 2 or len(plain) % 2 or any(not isinstance(x, str) for x in plain) or (
                    any(isinstance(x, dict) for x in row) and not isinstance(row[-1], dict)):
                out.append(f"{title} | row {row} is not [Namespace, MetricName, DimName, DimValue..., {{options}}]")
        if len(ids) != len(set(ids)):
            out.append(f"{title} | duplicate expression ids {ids}")
        if selects > 1:
            out.append(f"{title} | {selects} Metrics Insights queries (one per widget)")
    for v in body.get("variables", []):
        if v.get("type") not in ("property", "pattern") or v.get("inputType") not in ("input", "radio", "select") or not v.get("id"):
            out.append(f"variable {v.get('id')} | type, inputType and id")
        if "search" in v:
            m = re.match(r"\{([^}]*)\}", v["search"])
            if not m or v.get("populateFrom") not in m.group(1).split(",")[1:]:
                out.append(f"variable {v.get('id')} | populateFrom must be a dimension of its search")
        if v.get("type") == "pattern" and json.dumps(body["widgets"]).count(v["pattern"]) == 0:
            out.append(f"variable {v.get('id')} | pattern {v['pattern']!r} appears in no widget")
    return out


def deployed_body() -> dict[str, Any]:
    cfn = default_transformed()
    return json.loads(resolver(cfn).resolve(cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))


def test_every_widget_of_the_deployed_dashboard_follows_the_body_rules() -> None:
    body = deployed_body()
    assert body_violations(body) == []
    selects = [sum(1 for r in w["properties"]["metrics"] if isinstance(r[0], dict) and r[0].get("expression", "").startswith("SELECT"))
               for w in body["widgets"] if w["type"] == "metric" and isinstance(w["properties"]["metrics"][0][0], dict)]
    assert max(selects) == 1 and sum(selects) >= 15


def test_the_check_bites_on_two_queries_in_one_widget_a_bad_id_and_a_bad_row() -> None:
    broken = copy.deepcopy(deployed_body())
    w0, w1 = broken["widgets"][0]["properties"]["metrics"], broken["widgets"][1]["properties"]["metrics"]
    w0.append([{**w1[0][0], "id": "z9"}])  # the layout before: several SELECTs in one widget
    broken["widgets"][1]["properties"]["metrics"] = [[{**w1[0][0], "id": "Bad"}]]
    broken["widgets"][2]["properties"]["metrics"] = [["Replmon", "RpoSeconds", "Route"]]
    broken["variables"][0]["populateFrom"] = "RouteName"
    assert [v.split(" | ", 1)[1][:20] for v in body_violations(broken)] == [
        "2 Metrics Insights q", "id 'Bad' must start ", "row ['Replmon', 'Rpo", "populateFrom must be"]


def test_unbounded_and_no_data_routes_are_named_not_hidden() -> None:
    """RpoSeconds leaves out a route without an RPO input; the top widgets name the unbounded and
    the no-data routes by Route."""
    queries = [parse(r[0]["expression"]) for w in deployed_body()["widgets"] if w["type"] == "metric"
               for r in w["properties"]["metrics"] if isinstance(r[0], dict) and r[0].get("expression", "").startswith("SELECT")]
    named = {q.metric for q in queries if q.group_by == (ROUTE,) and q.order == ("MAX", True) and q.limit == 10}
    assert {"RpoSeconds", "RpoUnbounded", "RouteNoData", "StallSeconds"} <= named


def test_the_route_picker_reads_a_metric_every_collected_route_emits(monkeypatch: Any, capsys: Any) -> None:
    """A bounded, an unbounded and a no-data route (what CollectSignals publishes for each, through
    publish_health): each emits one of the picker's metrics (the 0/1 ones are sparse); RpoSeconds
    alone misses two."""
    from replmon.adapters.metrics import EmfMetrics
    from replmon.local.insights import points_from_emf

    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", SERVICE)
    metrics = EmfMetrics(route_groups=1)
    capsys.readouterr()
    slo = SloStatus(9, 10, 0.9, 0.5, {}, {}, {}, {})
    routes = {"bounded": Rpo(30.0, False, {"recent_probe_latency": 30.0}), "unbounded": Rpo(0.0, True, {}, reasons=["FAILED"]),
              "nodata": Rpo(0.0, False, {})}
    for name, r in routes.items():
        publish_health(metrics, RouteHealth(name, r, slo, no_data=name == "nodata"))
    points = points_from_emf(json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"'))
    (var,) = deployed_body()["variables"]
    assert var["search"].endswith("(" + " OR ".join(f'MetricName="{m}"' for m in ROUTE_PICKER_METRICS) + ")")
    assert var["populateFrom"] == ROUTE
    schema = set(re.match(r"\{([^}]*)\}", var["search"]).group(1).split(",")[1:])  # type: ignore[union-attr]

    def routes_in_picker(metric: str) -> set[str]:
        return {p.dimensions[ROUTE] for p in points if p.metric == metric and set(p.dimensions) == schema}

    assert set().union(*(routes_in_picker(m) for m in ROUTE_PICKER_METRICS)) == set(routes)
    assert routes_in_picker("RpoSeconds") == {"bounded"}


def test_each_route_s_expectation_and_detection_bound_are_a_table_of_the_heartbeat_s_log() -> None:
    """The E / detection-bound widget queries the Heartbeat's log group (the LogGroupName
    HeartbeatLogGroup is given) for the line the Heartbeat prints when a route learns E (probe/heartbeat.py
    EXPECTATION_LEARNED); tests/test_heartbeat.py checks the line carries every field it reads."""
    from replmon.probe.heartbeat import EXPECTATION_LEARNED

    cfn = default_transformed()
    group = resolver(cfn).resolve(cfn["Resources"]["HeartbeatLogGroup"]["Properties"]["LogGroupName"])
    logs = [w for w in deployed_body()["widgets"] if w["type"] == "log"]
    assert len(logs) == 1
    query = logs[0]["properties"]["query"]
    assert query.startswith(f"SOURCE '{group}' | filter message = '{EXPECTATION_LEARNED}' | stats ")
    assert "by route" in query
