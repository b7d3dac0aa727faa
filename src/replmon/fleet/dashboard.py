"""The fleet dashboard (docs/design/fleet.md 9): one dashboard whatever the number of routes, rendered into
template.yaml by tools/render_fleet.py (edit this file, never the generated block).

- **Worst routes first**: Metrics Insights queries over every RouteGroup, ``GROUP BY Route ORDER BY
  ... LIMIT 10``: RPO, stall, page burn, error budget left (lowest first), failures.
- **Fleet totals**: how many routes report an RPO, are unbounded or stalled; probes and heartbeats
  per group; collector and heartbeat runs.
- **Drill-down**: the route widgets below follow the dashboard's ``Route`` variable (a *pattern*
  variable: it replaces the stack's own ``RouteName`` everywhere in the body - a property variable
  would not reach the SEARCH expressions), whose choices are every route CollectSignals judged
  (``RpoSeconds``, ``RpoUnbounded`` or ``RouteNoData``: one of them for each, every run).
- **Each route's E and detection bound**: a Logs Insights table over the Heartbeat's log group (the
  line each route prints when it learns E, hourly), longest bound first; no per-route metric.
- **One Metrics Insights query per widget** (AWS, "Metrics Insights quotas": each GetMetricData
  request runs one query, and a dashboard may hold many widgets, each with its own); unbounded and
  no-data routes have their own top-10 widgets, since RpoSeconds leaves them out.

A Metrics Insights query in a widget reads at most 10,000 metrics and returns at most 500 series
(AWS, "Metrics Insights quotas"); ``LIMIT 10`` after ``ORDER BY`` sorts all the series it read, so
the top 10 are right up to 10,000 matched metrics (2,000+ routes per metric name at ~5 series per
route and metric). Every metric and dimension set here is one replmon emits
(tests/test_alarm_contract.py checks it against a contract run's EMF).

>>> body = dashboard_body()
>>> [w["properties"]["title"] for w in body["widgets"][:2]]
['Worst RPO now (s): top 10 routes', 'Stalled routes (StallSeconds): top 10']
>>> body["variables"][0]["pattern"], body["variables"][0]["populateFrom"]
('${RouteName}', 'Route')
>>> max(sum(1 for row in w["properties"].get("metrics", []) if isinstance(row[0], dict) and row[0]["expression"].startswith("SELECT"))
...     for w in body["widgets"])
1
"""

from __future__ import annotations

import json
from typing import Any

from replmon.fleet.alarms import END, replace_block

__all__ = ["DASHBOARD_START", "dashboard_body", "render_dashboard", "render_dashboard_into"]

DASHBOARD_START = "  # >>> generated: fleet dashboard (tools/render_fleet.py from src/replmon/fleet/dashboard.py; do not edit)"

ROUTE_SCHEMA = 'SCHEMA("${Ns}", RouteGroup, Route, service)'
GROUP_SCHEMA = 'SCHEMA("${Ns}", RouteGroup, service)'
PERIOD = 300
ROUTE = "${RouteName}"  # the stack's own route: the drill-down's default, replaced by the Route variable
WIDTH, HEIGHT = 12, 6
#: The Route variable's choices: the metrics one of which every collected route (probe or passive
#: mode, bounded, unbounded or without data) carries on every CollectSignals run (signals/health.py
#: publish_health): RpoSeconds (any RPO input, kept when unbounded), RpoUnbounded and RouteNoData
#: (both sparse: emitted only at 1); RpoSeconds alone would leave out the unbounded and no-data
#: routes. A search term may join terms with OR (AWS, "CloudWatch search expression syntax",
#: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/search-expression-syntax.html).
ROUTE_PICKER_METRICS = ("RpoSeconds", "RpoUnbounded", "RouteNoData")


def top(metric: str, fn: str = "MAX", order: str = "DESC", limit: int = 10) -> str:
    return f"SELECT {fn}({metric}) FROM {ROUTE_SCHEMA} GROUP BY Route ORDER BY {fn}() {order} LIMIT {limit}"


def total(metric: str, fn: str = "SUM", schema: str = ROUTE_SCHEMA, group_by: str | None = None) -> str:
    return f"SELECT {fn}({metric}) FROM {schema}" + (f" GROUP BY {group_by}" if group_by else "")


def search(metric: str, stat: str, dims: str = "service,RouteGroup,Route", extra: str = "") -> str:
    """A SEARCH for one route's series (the drill-down): ``{ns,dims} MetricName="m" service="svc" Route="r"``."""
    return f"SEARCH('{{${{Ns}},{dims}}} MetricName=\"{metric}\" service=\"${{Svc}}\" Route=\"{ROUTE}\"{extra}', '{stat}', {PERIOD})"


def _expr(i: int, expression: str, label: str = "") -> list[dict[str, Any]]:
    return [{"expression": expression, "id": f"e{i}", "label": label}]


def _plain(metric: str, stat: str, *dims: str) -> list[Any]:
    return ["${Ns}", metric, "service", "${Svc}", *dims, {"stat": stat}]


#: (title, stat, rows): each row an expression (``str``, with its label) or a plain metric (``list``).
#: A widget holds at most one Metrics Insights query (``SELECT``): CloudWatch runs one per
#: GetMetricData request, one request per widget; SEARCH expressions and plain metrics may share one.
FLEET: list[tuple[str, str, list[Any]]] = [
    ("Worst RPO now (s): top 10 routes", "Maximum", [(top("RpoSeconds"), "")]),
    ("Stalled routes (StallSeconds): top 10", "Maximum", [(top("StallSeconds"), "")]),
    # RpoSeconds is only a lower bound (or absent) for these: they are named here, not hidden
    ("Unbounded routes (RpoUnbounded = 1 first): top 10", "Maximum", [(top("RpoUnbounded"), "")]),
    ("Routes without data (RouteNoData = 1 first): top 10", "Maximum", [(top("RouteNoData"), "")]),
    ("Fastest page burn (SloBurnPage, min of 1h/5m): top 10", "Maximum", [(top("SloBurnPage"), "")]),
    ("Least error budget left (%): lowest 10", "Minimum", [(top("ErrorBudgetRemaining", "MIN", "ASC"), "")]),
    ("Fleet: RpoSeconds data points per 5 min (routes with an RPO input; no data: none, not 0)", "SampleCount",
     [(total("RpoSeconds", "COUNT"), "RpoSeconds data points")]),
    # summed per 5 min: routes x collector runs in it (one run at the fixed CollectorRateMinutes 5)
    ("Fleet: unbounded routes x collector runs per 5 min (RpoUnbounded)", "Maximum", [(total("RpoUnbounded"), "RpoUnbounded")]),
    ("Fleet: no-data routes x collector runs per 5 min (RouteNoData)", "Maximum",
     [(total("RouteNoData"), "RouteNoData")]),
    ("Fleet: StallSeconds data points per 5 min (heartbeat routes x 5)", "SampleCount",
     [(total("StallSeconds", "COUNT"), "StallSeconds data points")]),
    ("Fleet: failed probes by route (top 10)", "Sum", [(top("ProbeFailed", "SUM"), "")]),
    ("Fleet: stuck probes by route (top 10)", "Sum", [(top("ProbeStuck", "SUM"), "")]),
    ("Fleet: probes completed (all routes)", "Sum",
     [(total("ProbeCompleted", schema=GROUP_SCHEMA), "ProbeCompleted")]),
    ("Fleet: heartbeat runs per RouteGroup", "Sum", [(total("HeartbeatRun", schema=GROUP_SCHEMA, group_by="RouteGroup"), "")]),
    ("Fleet: collector runs", "Sum", [(total("CollectorHeartbeat", schema='SCHEMA("${Ns}", service)'), "CollectorHeartbeat")]),
]

ROUTE_WIDGETS: list[tuple[str, str, list[Any]]] = [
    ("Route: probe latency by size class (hi, s)", "Maximum", [
        (search("ReplicationLatencySeconds", "Maximum", "service,RouteGroup,Route,SizeClass"), "")]),
    ("Route: RPO (s; a gap = no data), no data, unbounded, stall (s)", "Maximum", [
        (search("RpoSeconds", "Maximum"), "RpoSeconds"), (search("RouteNoData", "Maximum"), "RouteNoData"),
        (search("RpoUnbounded", "Maximum"), "RpoUnbounded"),
        (search("StallSeconds", "Maximum"), "StallSeconds")]),
    ("Route: SLO: error budget left (%) and burn pairs (page: min 1h/5m, ticket: min 6h/30m)", "Maximum", [
        (search("ErrorBudgetRemaining", "Minimum"), "ErrorBudgetRemaining"), (search("SloBurnPage", "Maximum"), "SloBurnPage"),
        (search("SloBurnTicket", "Maximum"), "SloBurnTicket")]),
    ("Route: RTC pending bytes and operations (drawn while above 0)", "Maximum", [
        _plain("RtcBytesPending", "Maximum", "Route", ROUTE), _plain("RtcOperationsPending", "Maximum", "Route", ROUTE)]),
    ("Route: failures and events", "Maximum", [
        (search("ProbeFailed", "Sum"), "ProbeFailed"), (search("ProbeStuck", "Sum"), "ProbeStuck"),
        *[(search("ReplicationEvents", "Sum", "service,RouteGroup,Route,Event", f' Event="{e}"'), f"ReplicationEvents {e}")
          for e in ("OperationFailedReplication", "OperationMissedThreshold", "OperationReplicatedAfterThreshold")]]),
    ("Route: probe and collector health", "Maximum", [
        *[(search(m, "Sum"), m) for m in ("ProbeError", "RecordSpooled", "RecordLost", "CleanupFailed", "RunSkipped")],
        _plain("CollectorHeartbeat", "SampleCount"), (search("RtcReadFailed", "Sum"), "RtcReadFailed")]),
]


def _widget(n: int, title: str, stat: str, rows: list[Any], counter: list[int]) -> dict[str, Any]:
    metrics = []
    for row in rows:
        if isinstance(row, tuple):
            counter[0] += 1
            metrics.append(_expr(counter[0], row[0], row[1]))
        else:
            metrics.append(row)
    return {"type": "metric", "x": (n % 2) * WIDTH, "y": (n // 2) * HEIGHT, "width": WIDTH, "height": HEIGHT,
            "properties": {"title": title, "region": "${AWS::Region}", "view": "timeSeries", "stat": stat, "period": PERIOD,
                           "metrics": metrics}}


#: Each route's learned expectation E and stall detection bound (signals/stall.py detection_bound),
#: from the line the Heartbeat prints each hour a route learns (probe/heartbeat.py EXPECTATION_LEARNED):
#: a Logs Insights widget, not a metric: a per-route series of E would cost more a month than the
#: widget's scans (priced per GB scanned, only when the dashboard is viewed), and nothing alarms on E.
EXPECTATION_TITLE = "Routes: learned expectation E and stall detection bound (s; T + 2(E + 15) + 60, before CloudWatch ingestion and alarm evaluation lag), longest first"
EXPECTATION_QUERY = ("SOURCE '${HeartbeatLog}' | filter message = 'route expectation learned'"
                     " | stats latest(expectation_seconds) as E, latest(detection_bound_seconds) as bound,"
                     " latest(heartbeat_seconds) as T, latest(expectation_samples) as heartbeats by route"
                     " | sort bound desc | limit 100")


def _log_widget(n: int, title: str, query: str) -> dict[str, Any]:
    return {"type": "log", "x": 0, "y": (n // 2 + n % 2) * HEIGHT, "width": 2 * WIDTH, "height": HEIGHT,
            "properties": {"title": title, "region": "${AWS::Region}", "view": "table", "query": query}}


def dashboard_body() -> dict[str, Any]:
    counter = [0]
    widgets = [_widget(n, t, s, rows, counter) for n, (t, s, rows) in enumerate(FLEET + ROUTE_WIDGETS)]
    widgets.append(_log_widget(len(widgets), EXPECTATION_TITLE, EXPECTATION_QUERY))
    variable = {"type": "pattern", "pattern": ROUTE, "inputType": "select", "id": "route", "label": "Route",
                "visible": True, "search": "{${Ns},service,RouteGroup,Route} (" + " OR ".join(f'MetricName="{m}"' for m in ROUTE_PICKER_METRICS) + ")", "populateFrom": "Route"}
    return {"start": "-PT6H", "widgets": widgets, "variables": [variable]}


def render_dashboard() -> str:
    """The Dashboard resource as template.yaml holds it (JSON in a single-quoted YAML scalar under !Sub)."""
    body = json.dumps(dashboard_body(), separators=(",", ":")).replace("'", "''")
    return "\n".join([
        DASHBOARD_START,
        "  # Built from src/replmon/fleet/dashboard.py: worst routes first, fleet totals, then one route (the Route variable).",
        "  Dashboard:",
        "    Type: AWS::CloudWatch::Dashboard",
        "    Properties:",
        "      DashboardBody: !Sub",
        f"        - '{body}'",
        "        - Ns: !FindInMap [Telemetry, Metrics, Namespace]",
        "          Svc: !FindInMap [Telemetry, Metrics, Service]",
        '          HeartbeatLog: !Sub "/replmon/${AWS::StackName}/Heartbeat"',  # HeartbeatLogGroup's LogGroupName (a test compares them)
        END,
        "",
    ])


def render_dashboard_into(template_text: str) -> str:
    return replace_block(template_text, DASHBOARD_START, render_dashboard())
