"""Every replmon alarm watches a metric that is really emitted, and can really notify.

- CloudWatch matches a metric by namespace, name and the *exact* set of dimensions; Powertools
  Metrics adds ``service`` when POWERTOOLS_SERVICE_NAME is set (Powertools docs, Metrics:
  "service ... added as a default dimension"). The EMF comes from each function's own metric
  code, run with the environment template.yaml gives that function (tests/contract.py).
- CloudWatch can publish to an encrypted topic only through a customer managed key whose policy
  lets cloudwatch.amazonaws.com use it (SNS developer guide, "Enable compatibility between event
  sources from AWS services and encrypted topics"); alias/aws/sns cannot.
- The page alarms' contributor events reach the page topic through EventBridge rules
  (fleet/alarms.py _page_rule): the same holds for events.amazonaws.com, and the topic's policy must
  let it publish ("Using resource-based policies for Amazon EventBridge",
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html: SNS targets
  use the topic's resource-based policy; "Why isn't my Amazon SNS topic receiving the EventBridge
  notifications?", https://aws.amazon.com/premiumsupport/knowledge-center/sns-not-getting-eventbridge-notification/:
  events.amazonaws.com with sns:Publish, and an encrypted topic's customer managed key letting EventBridge use it).
- Names must not collide between two stacks in one account and region (schedule names are unique
  per schedule group): no fixed physical name unless it carries the stack's name.
- A Metrics Insights alarm (fleet/alarms.py) reads ``FROM SCHEMA(namespace, keys...)``, which
  matches only metrics with *exactly* those dimension keys ("Query components and syntax in
  CloudWatch Metrics Insights",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-querylanguage.html);
  a GROUP BY key a matched metric lacks gives the group ``Other``. Each query is parsed with
  local/insights.py and checked against the EMF: namespace, metric, SCHEMA set (with ``service``),
  GROUP BY and WHERE keys inside it, WHERE values really emitted.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from replmon.core import telemetry
from replmon.local.insights import parse
from replmon.local.template import load_template
from tests.cfnutil import ACCOUNT, REGION, default_transformed, resolver, transformed
from tests.conftest import TEMPLATE
from tests.contract import ContractRun
from tests.iam import simulate

Emitted = set[tuple[str, str, frozenset[tuple[str, str]]]]


def emitted(run: ContractRun) -> Emitted:
    """(namespace, metric, {(dimension, value)}) for every metric in every EMF blob printed."""
    out: Emitted = set()
    for _fn, blob in run.emf:
        for directive in blob["_aws"]["CloudWatchMetrics"]:
            for dims in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    out.add((directive["Namespace"], metric["Name"], frozenset((d, str(blob[d])) for d in dims)))
    return out


def alarm_gaps(cfn: dict[str, Any], seen: Emitted) -> list[str]:
    """Alarms on replmon's namespace whose (namespace, metric, dimensions) nobody emits."""
    r = resolver(cfn)
    gaps = []
    namespace = load_template(TEMPLATE)["Mappings"]["Telemetry"]["Metrics"]["Namespace"]
    for name, res in cfn["Resources"].items():
        if res["Type"] != "AWS::CloudWatch::Alarm" or not r.exists(name):
            continue
        p = r.resolve(res["Properties"])
        if "Metrics" in p:  # a Metrics Insights alarm: metrics_insights_gaps
            continue
        if p["Namespace"] != namespace:
            continue
        key = (p["Namespace"], p["MetricName"], frozenset((d["Name"], str(d["Value"])) for d in p.get("Dimensions", [])))
        if key not in seen:
            gaps.append(f"{name}: {key[0]}/{key[1]} {sorted(key[2])} is never emitted")
    return gaps


def metrics_insights_gaps(cfn: dict[str, Any], seen: Emitted) -> list[str]:
    """Metrics Insights alarms whose query matches nothing the code emits, or groups by a key it lacks."""
    r = resolver(cfn)
    gaps, checked = [], 0
    for name, res in cfn["Resources"].items():
        if res["Type"] != "AWS::CloudWatch::Alarm" or "Metrics" not in res["Properties"] or not r.exists(name):
            continue
        checked += 1
        (m,) = r.resolve(res["Properties"]["Metrics"])
        q = parse(m["Expression"])
        sets = {frozenset(d for d, _ in dims) for ns, metric, dims in seen if ns == q.namespace and metric == q.metric}
        if q.schema is None or frozenset(q.schema) not in sets:
            gaps.append(f"{name}: {q.namespace}/{q.metric} SCHEMA {q.schema} is not a dimension set it is emitted with {sorted(map(sorted, sets))}")
            continue
        if not q.group_by or not set(q.group_by) <= set(q.schema) or q.order is None:
            gaps.append(f"{name}: GROUP BY {q.group_by} / ORDER BY {q.order}: each key must be in the SCHEMA, ORDER BY present")
        for key, op, value in q.where:
            emitted_values = {v for ns, metric, dims in seen if metric == q.metric for d, v in dims if d == key}
            if key not in q.schema or (op == "=" and value not in emitted_values):
                gaps.append(f"{name}: WHERE {key} {op} '{value}' matches nothing emitted ({sorted(emitted_values)})")
    assert checked >= 10
    return gaps


def test_every_replmon_alarm_watches_an_emitted_metric(contract: ContractRun) -> None:
    seen = emitted(contract)
    assert alarm_gaps(default_transformed(), seen) == []
    assert metrics_insights_gaps(default_transformed(), seen) == []
    # The functions' environment names the same namespace and service as telemetry.py.
    assert {ns for ns, _, _ in seen} == {telemetry.NAMESPACE}
    assert all(("service", telemetry.SERVICE) in dims for _, _, dims in seen)


def test_the_check_fails_for_an_alarm_without_the_service_dimension(contract: ContractRun) -> None:
    """The defect this guards: alarms naming only Route never match Powertools' metrics."""
    t = copy.deepcopy(load_template(TEMPLATE))
    dims = t["Resources"]["PendingBytesAlarm"]["Properties"]["Dimensions"]
    t["Resources"]["PendingBytesAlarm"]["Properties"]["Dimensions"] = [d for d in dims if d["Name"] != "service"]
    assert [g.split(":")[0] for g in alarm_gaps(transformed(t), emitted(contract))] == ["PendingBytesAlarm"]


@pytest.mark.parametrize(("breakage", "expected"), [
    ("SCHEMA(\"Replmon\", RouteGroup, Route, service)", "SCHEMA(\"Replmon\", RouteGroup, Route)"),  # Powertools' service forgotten
    ("SCHEMA(\"Replmon\", RouteGroup, Route, service)", "SCHEMA(\"Replmon\", Route, service)"),  # today's set, not the fleet's
    ("GROUP BY Route", "GROUP BY SizeClass"),  # a key the schema lacks: one group "Other"
    ("WHERE RouteGroup = 'g00'", "WHERE RouteGroup = 'G00'"),  # identifiers and values are case-sensitive
])
def test_the_metrics_insights_check_bites(contract: ContractRun, breakage: str, expected: str) -> None:
    t = copy.deepcopy(load_template(TEMPLATE))
    (m,) = t["Resources"]["RpoAboveTargetG00Alarm"]["Properties"]["Metrics"]
    assert breakage in m["Expression"]
    m["Expression"] = m["Expression"].replace(breakage, expected)
    assert [g.split(":")[0] for g in metrics_insights_gaps(transformed(t), emitted(contract))] == ["RpoAboveTargetG00Alarm"]


def test_every_metric_telemetry_names_is_emitted_with_its_dimension_sets(contract: ContractRun) -> None:
    """telemetry.METRICS is what the code emits: each metric, each of its dimension sets."""
    seen = {(m, frozenset(d for d, _ in dims)) for _, m, dims in emitted(contract)}
    local_only = {"ProbeInterrupted"}  # a local run's signal; Lambda never interrupts itself
    for spec in telemetry.METRICS.values():
        if spec.name in local_only or spec.name.startswith("Fio"):  # the mount stack's: tests/test_mounts_contract.py
            continue
        for ds in spec.dimension_sets:
            assert (spec.name, frozenset(ds)) in seen, f"{spec.name} {ds} never emitted"


def _refs(value: Any) -> set[str]:
    """Every Ref inside a value (an action may be ``Fn::If [CreatePageTopic, Ref PageTopic, Ref PageTopicArn]``)."""
    if isinstance(value, dict):
        return ({value["Ref"]} if "Ref" in value else set()) | {r for v in value.values() for r in _refs(v)}
    if isinstance(value, list):
        return {r for v in value for r in _refs(v)}
    return set()


def alarm_topics(cfn: dict[str, Any]) -> set[str]:
    """The stack's own topics any alarm or composite alarm publishes to (a parameter's topic ARN is the user's)."""
    topics = set()
    for res in cfn["Resources"].values():
        if res["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm"):
            for actions in ("AlarmActions", "OKActions", "InsufficientDataActions"):
                topics |= {r for r in _refs(res["Properties"].get(actions, [])) if r in cfn["Resources"]}
    return topics


def rule_topics(cfn: dict[str, Any]) -> set[str]:
    """The stack's own topics an EventBridge rule targets."""
    return {r for res in cfn["Resources"].values() if res["Type"] == "AWS::Events::Rule"
            for t in res["Properties"].get("Targets", []) for r in _refs(t["Arn"]) if r in cfn["Resources"]}


def topic_problems(cfn: dict[str, Any]) -> list[str]:
    """Topics alarms (or rules) publish to that CloudWatch (or EventBridge) could not publish to."""
    r = resolver(cfn)
    problems, checks = [], []
    publishers = [(t, "cloudwatch.amazonaws.com") for t in sorted(alarm_topics(cfn))] + [(t, "events.amazonaws.com") for t in sorted(rule_topics(cfn))]
    for topic, principal in publishers:
        if principal == "events.amazonaws.com":  # EventBridge also needs the topic's own policy
            arn = r.resolve({"Ref": topic})
            docs = [r.resolve(res["Properties"]["PolicyDocument"]) for res in cfn["Resources"].values()
                    if res["Type"] == "AWS::SNS::TopicPolicy" and {"Ref": topic} in res["Properties"]["Topics"]]
            answer = simulate([{"id": "0", "principal": principal, "action": "sns:Publish", "resource": arn, "accountId": ACCOUNT,
                                "context": {"aws:SourceAccount": ACCOUNT}, "resourcePolicy": docs[0]}])["0"] if docs else {"result": "no policy"}
            if answer["result"] != "Allowed":
                problems.append(f"{topic}: its policy does not let {principal} sns:Publish ({answer['result']})")
        res = cfn["Resources"][topic]
        assert res["Type"] == "AWS::SNS::Topic", topic
        key = res["Properties"].get("KmsMasterKeyId")
        if key is None:
            continue  # unencrypted: CloudWatch can publish
        if not (isinstance(key, dict) and "Ref" in key and cfn["Resources"].get(key["Ref"], {}).get("Type") == "AWS::KMS::Key"):
            problems.append(f"{topic}: encrypted with {key!r}, not a customer managed key of this stack")
            continue
        policy = r.resolve(cfn["Resources"][key["Ref"]]["Properties"]["KeyPolicy"])
        for action in ("kms:Decrypt", "kms:GenerateDataKey"):
            checks.append((topic, principal, action, policy))
    results = simulate([{"id": str(i), "principal": who, "action": a,
                         "resource": f"arn:aws:kms:{REGION}:{ACCOUNT}:key/alarm-key", "accountId": ACCOUNT,
                         "context": {"aws:SourceAccount": ACCOUNT}, "resourcePolicy": p} for i, (_, who, a, p) in enumerate(checks)])
    for i, (topic, who, action, _) in enumerate(checks):
        if results[str(i)]["result"] != "Allowed":
            problems.append(f"{topic}: the key policy does not let {who} {action} ({results[str(i)]['result']})")
    return problems


def test_every_alarm_topic_can_be_published_to_by_cloudwatch() -> None:
    assert alarm_topics(default_transformed()) == {"TicketTopic"}  # page alarms: contributor events through rules
    assert rule_topics(default_transformed()) == {"PageTopic"}
    assert topic_problems(default_transformed()) == []


@pytest.mark.parametrize("breakage", ["aws-managed-key", "key-policy-without-cloudwatch", "key-policy-without-events", "no-topic-policy"])
def test_the_topic_check_fails_on_keys_cloudwatch_cannot_use(breakage: str) -> None:
    t = copy.deepcopy(load_template(TEMPLATE))
    st = t["Resources"]["AlarmTopicKey"]["Properties"]["KeyPolicy"]["Statement"]
    if breakage == "aws-managed-key":
        t["Resources"]["PageTopic"]["Properties"]["KmsMasterKeyId"] = "alias/aws/sns"
    elif breakage == "no-topic-policy":
        del t["Resources"]["PageTopicPolicy"]
    else:
        sid = "CloudWatchAlarmsPublish" if breakage == "key-policy-without-cloudwatch" else "FleetPageRulesPublish"
        t["Resources"]["AlarmTopicKey"]["Properties"]["KeyPolicy"]["Statement"] = [s for s in st if s["Sid"] != sid]
    assert topic_problems(transformed(t))


NAME_PROPERTIES = ("Name", "TableName", "BucketName", "QueueName", "TopicName", "FunctionName", "RoleName", "StateMachineName",
                   "AliasName", "LogGroupName", "GroupName", "ScheduleName", "KeyName", "RuleName", "AlarmName", "DashboardName",
                   "ClusterName", "ServiceName", "Family", "LayerName")


def fixed_names(cfn: dict[str, Any]) -> list[str]:
    """Resources whose physical name does not carry the stack's name (a second stack would collide)."""
    r = resolver(cfn)
    r.pseudo["AWS::StackName"] = "STACKNAME-MARKER"
    bad = []
    for logical, res in cfn["Resources"].items():
        for prop in NAME_PROPERTIES:
            if prop in res.get("Properties", {}) and r.exists(logical):
                value = str(r.resolve(res["Properties"][prop]))
                if "STACKNAME-MARKER" not in value:
                    bad.append(f"{logical}.{prop} = {value!r}")
    return bad


def test_no_fixed_physical_names() -> None:
    assert fixed_names(default_transformed()) == []


def test_the_name_check_fails_on_a_fixed_schedule_name() -> None:
    """SAM names a ScheduleV2 schedule after its logical id unless OmitName is set."""
    t = copy.deepcopy(load_template(TEMPLATE))
    del t["Resources"]["ProbeStateMachine"]["Properties"]["Events"]["Schedule"]["Properties"]["OmitName"]
    assert [b.split(".")[0] for b in fixed_names(transformed(t))] == ["ProbeStateMachineSchedule"]


def test_every_alarm_notifies_on_ok_too_and_the_heartbeat_only_pages_when_scheduled() -> None:
    t = load_template(TEMPLATE)
    alarms = {k: v for k, v in t["Resources"].items() if v["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")}
    from tests.test_alarm_table import fleet_cover, tool

    # a page fleet alarm: its contributor events, ALARM and OK alike (no state in the rule's pattern), through a rule
    forwarded = tool().forwarded(t)
    rules = [v["Properties"]["EventPattern"] for v in t["Resources"].values() if v["Type"] == "AWS::Events::Rule"]
    assert forwarded and all("detail" not in p for p in rules)
    children = {k for k, v in alarms.items() if "AlarmActions" not in v["Properties"] and k not in forwarded}
    composed = " ".join(str(v["Properties"].get("AlarmRule")) for v in alarms.values())

    covered = {k for k in children if fleet_cover(k)}
    for name, a in alarms.items():
        if name in covered:  # a fleet alarm whose cause raises another page (fleet/alarms.py covered_by): one page per cause
            continue
        if name in forwarded:
            assert "AlarmActions" not in a["Properties"] and "OKActions" not in a["Properties"], name
            continue
        if name in children:  # a child notifies through its composite alarm only (one notification per cause)
            assert "${" + name + "}" in composed, f"{name} has no actions and is in no composite alarm"
            continue
        assert a["Properties"].get("OKActions") == a["Properties"]["AlarmActions"], name
    # No composites: a composite over multi-time-series alarms sees alarm-level state only and its
    # notification would not name the route; each fleet alarm notifies per contributor (fleet/alarms.py).
    assert children == covered and {k[:-len("G00Alarm")] for k in covered if k.endswith("G00Alarm")} == {
        "SloFastBurn", "ProbeFailed", "ReplicationFailedEvent"}
    assert "HeartbeatAlarm" not in alarms  # a route without probes: RouteNoData, per route, every route
    assert alarms["CollectorHeartbeatAlarm"]["Condition"] == "ScheduleEnabled"
    assert t["Conditions"]["ScheduleEnabled"] == {"Fn::Equals": [{"Ref": "ScheduleState"}, "ENABLED"]}
    cfn = default_transformed()
    disabled = resolver(cfn)
    disabled.params["ScheduleState"] = "DISABLED"
    assert not disabled.exists("CollectorHeartbeatAlarm") and resolver(cfn).exists("CollectorHeartbeatAlarm")


def dashboard_gaps(cfn: dict[str, Any], seen: Emitted) -> list[str]:
    """Dashboard widgets' replmon metrics that nobody emits with those dimensions."""
    import json as _json

    r = resolver(cfn)
    body = _json.loads(r.resolve(cfn["Resources"]["Dashboard"]["Properties"]["DashboardBody"]))
    gaps, checked = [], 0
    for w in body["widgets"]:
        for row in w["properties"].get("metrics", []):  # a log widget has a Logs Insights query, no metrics
            if len(row) == 1 and row[0].get("expression", "").startswith("SELECT "):
                # a Metrics Insights query: SCHEMA's keys must be exactly a dimension set the metric is
                # emitted with (SCHEMA matches only metrics with exactly those keys)
                from replmon.local.insights import parse

                q = parse(row[0]["expression"])
                checked += 1
                if q.namespace != telemetry.NAMESPACE or not any(n == q.metric and frozenset(d for d, _ in ds) == frozenset(q.schema)
                                                                 for _, n, ds in seen):
                    gaps.append(f"{w['properties']['title']}: {q.metric} {sorted(q.schema)} is never emitted")
                continue
            if len(row) == 1 and "expression" in row[0]:
                # SEARCH('{ns,dim,...} MetricName="m" dim="v" ...'): the schema's dimension set must be
                # one the code emits the metric with, and the fixed values must be emitted values.
                import re as _re

                m = _re.match(r"""SEARCH\('\{([^}]*)\} MetricName="(\w+)"((?: \w+="[^"]*")*)', '\w+', \d+\)$""", row[0]["expression"])
                assert m, row[0]["expression"]
                ns, *dim_names = m.group(1).split(",")
                # Route="..." is the Route variable's pattern (any route the picker offers): the route
                # does not matter, the dimension set and the other fixed values do.
                name = m.group(2)
                fixed = frozenset(x for x in _re.findall(r'(\w+)="([^"]*)"', m.group(3)) if x[0] != "Route")
                checked += 1
                if not any(n == name and frozenset(d for d, _ in ds) == frozenset(dim_names) and fixed <= ds for _, n, ds in seen):
                    gaps.append(f"{w['properties']['title']}: {name} {sorted(dim_names)} is never emitted")
                continue
            ns, name, *rest = [x for x in row if not isinstance(x, dict)]
            if ns != telemetry.NAMESPACE:
                continue
            dims = frozenset(zip(rest[::2], rest[1::2], strict=True))
            checked += 1
            if any(d == "SizeClass" for d, _ in dims):
                # The dashboard's size classes are the default sizes; the contract probes others:
                # the dimension *names* must match, and the route and service values.
                names = {(n, frozenset(d for d, _ in ds)) for _, n, ds in seen}
                fixed = frozenset((d, v) for d, v in dims if d != "SizeClass")
                if (name, frozenset(d for d, _ in dims)) not in names or not any(n == name and fixed <= ds for _, n, ds in seen):
                    gaps.append(f"{w['properties']['title']}: {name} {sorted(dims)} is never emitted")
            elif (ns, name, dims) not in seen:
                gaps.append(f"{w['properties']['title']}: {name} {sorted(dims)} is never emitted")
    assert checked > 20
    return gaps


def test_every_dashboard_metric_is_emitted_with_its_dimensions(contract: ContractRun) -> None:
    assert dashboard_gaps(default_transformed(), emitted(contract)) == []
    # and the check bites: a widget without the service dimension names a metric nobody emits
    t = copy.deepcopy(load_template(TEMPLATE))
    body = t["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    body[0] = body[0].replace('"RtcBytesPending","service","${Svc}",', '"RtcBytesPending",')
    body[0] = body[0].replace('{${Ns},service,RouteGroup,Route} MetricName=\\"RpoSeconds\\"', '{${Ns},service,Route} MetricName=\\"RpoSeconds\\"')
    body[0] = body[0].replace('SELECT MAX(StallSeconds) FROM SCHEMA(\\"${Ns}\\", RouteGroup, Route, service)',
                              'SELECT MAX(StallSeconds) FROM SCHEMA(\\"${Ns}\\", Route, service)')
    assert [g.rsplit(": ", 1)[1].split()[0] for g in dashboard_gaps(transformed(t), emitted(contract))] == ["StallSeconds", "RpoSeconds", "RtcBytesPending"]
