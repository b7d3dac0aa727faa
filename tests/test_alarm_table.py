"""Alarms an on-call rotation can live with: two severities on two topics, existing
topics accepted, one notification per cause, and one complete alarm table generated from the
template (docs/ALARMS.md).

AWS contracts encoded here:
- "Composite alarms" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-combining.html):
  a composite alarm's rule combines other alarms' states
  (``ALARM()``, AND/OR, composites of composites) and it takes its own SNS actions; the
  underlying alarms need none, so children without actions and actions on the composite give one
  notification for one cause.
- "AWS::CloudWatch::Alarm Tag" / "AWS::CloudWatch::CompositeAlarm Tag"
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-properties-cloudwatch-alarm-tag.html,
  https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-properties-cloudwatch-compositealarm-tag.html):
  alarms take Key/Value tags; cfn-lint (`make lint`) validates them against the resource schema.
- SNS topics encrypted with a key CloudWatch can use: tests/test_alarm_contract.py (both topics).
"""

from __future__ import annotations

import copy
import re
from types import ModuleType
from typing import Any

from replmon.local.template import load_template
from tests.cfnutil import default_transformed, resolver
from tests.conftest import ROOT, TEMPLATE, tool_module

TOPIC_CONDITION = {"page": "CreatePageTopic", "ticket": "CreateTicketTopic"}


def tool() -> ModuleType:
    return tool_module("alarm_table")  # type: ignore[no-any-return]


def notifies(template: dict[str, Any], name: str) -> bool:
    """SNS actions of its own, or its contributor events forwarded by a rule (fleet/alarms.py _page_rule)."""
    return bool(template["Resources"][name]["Properties"].get("AlarmActions")) or name in tool().forwarded(template)


def routing_problems(template: dict[str, Any]) -> list[str]:
    """Every alarm: a page/ticket severity, a runbook, and notifications on its own severity's topic
    only - or none, when a composite alarm of the same severity notifies for it. A page fleet alarm
    has no SNS actions (they would notify at alarm level too): a rule forwards its contributor
    events to the page topic."""
    t = tool()
    alarms = t.alarms(template)
    rules = t.forwarded(template)
    problems = []
    for name, res in alarms.items():
        sev = t.severity(res)
        if sev not in TOPIC_CONDITION:
            problems.append(f"{name}: Severity tag {sev!r}, not page or ticket")
            continue
        runbook = res.get("Metadata", {}).get("Runbook", {})
        if not (runbook.get("Causes") and runbook.get("Action")):
            problems.append(f"{name}: no Metadata.Runbook Causes and Action")
        actions = res["Properties"].get("AlarmActions")
        if name in rules:
            if actions or sev != "page" or not all(r.startswith(t.TOPICS["CreatePageTopic"]) for r in rules[name]):
                problems.append(f"{name}: contributor events forwarded {rules[name]} with SNS actions {actions} as {sev}")
        elif actions:
            picked = [a.get("Fn::If", [None])[0] if isinstance(a, dict) else a for a in actions]
            if picked != [TOPIC_CONDITION[sev]]:
                problems.append(f"{name}: {sev} alarm notifies {picked}")
            if res["Properties"].get("OKActions") != actions:
                problems.append(f"{name}: OK goes elsewhere than ALARM")
        elif (cover := fleet_cover(name)) is not None:  # a fleet alarm whose cause always raises another page (fleet/alarms.py)
            quiet = [c for c in cover if c not in alarms or not notifies(template, c) or t.severity(alarms[c]) != sev]
            if not cover or quiet:
                problems.append(f"{name}: no actions, and its covering alarms {quiet or cover} do not notify as {sev}")
        else:
            parents = t.parents(name, alarms)
            if not parents or any(t.severity(alarms[p]) != sev for p in parents):
                problems.append(f"{name}: no actions and no composite of severity {sev} notifies for it")
    return problems


def fleet_cover(name: str) -> list[str] | None:
    """The alarms that notify for fleet alarm ``name`` of its group (``covered_by``), None for any other alarm."""
    from replmon.core.registry import MAX_ROUTE_GROUPS, group_names
    from replmon.fleet.alarms import FLEET_ALARMS, logical_id

    by_name = {a.name: a for a in FLEET_ALARMS}
    for a in FLEET_ALARMS:
        for g in group_names(MAX_ROUTE_GROUPS):
            if logical_id(a, g) == name and a.covered_by:
                return [logical_id(by_name[c], g) for c in a.covered_by]
    return None


def duplicate_notifications(template: dict[str, Any]) -> list[str]:
    """Alarms that notify although a composite above them (at any depth) already does: one cause, two mails."""
    t = tool()
    alarms = t.alarms(template)

    def below(name: str) -> set[str]:
        rule = str(alarms[name]["Properties"].get("AlarmRule", ""))
        direct = set(re.findall(r"\$\{(\w+)\}", rule)) & set(alarms)
        return direct | {d for c in direct for d in below(c)}

    return sorted(f"{child} notifies and so does {name}" for name, res in alarms.items() if notifies(template, name)
                  for child in below(name) if notifies(template, child))


def test_every_alarm_has_a_severity_a_runbook_and_notifies_its_severitys_topic() -> None:
    t = load_template(TEMPLATE)
    assert routing_problems(t) == []
    alarms = tool().alarms(t)
    page = {k for k, v in alarms.items() if tool().severity(v) == "page" and notifies(t, k)}
    # The page topic hears from three fleet alarms only, one notification per route (contributor) and
    # cause: the other page alarms' causes raise these too (fleet/alarms.py covered_by). A stall that
    # outlasts the latency target pages RpoAboveTarget too: the RPO is then over target for any cause.
    # None of them has SNS actions: their contributor events reach the page topic through a rule.
    assert not [k for k in page if alarms[k]["Properties"].get("AlarmActions")]
    assert {k[: -len("G00Alarm")] for k in page if k.endswith("G00Alarm")} == {"RpoAboveTarget", "RpoUnbounded", "RouteStalled"}
    assert all(tool().route_group(alarms[k]) for k in page)


def test_one_cause_notifies_once() -> None:
    """Composite alarms de-duplicate single-route alarms; a fleet alarm has no composite above it (its
    notifications are per contributor, naming the route, which a composite's would not)."""
    t = load_template(TEMPLATE)
    assert duplicate_notifications(t) == []
    broken = copy.deepcopy(t)  # the check bites: a composite over a fleet alarm that notifies itself
    broken["Resources"]["RoutePageAlarm"] = {"Type": "AWS::CloudWatch::CompositeAlarm", "Properties": {
        "AlarmRule": {"Fn::Sub": 'ALARM("${RpoAboveTargetG00Alarm}")'}, "Tags": [{"Key": "Severity", "Value": "page"}],
        "AlarmActions": [{"Fn::If": ["CreatePageTopic", {"Ref": "PageTopic"}, {"Ref": "PageTopicArn"}]}]}}
    assert duplicate_notifications(broken) == ["RpoAboveTargetG00Alarm notifies and so does RoutePageAlarm"]
    mislabelled = copy.deepcopy(t)
    mislabelled["Resources"]["ProbeStuckG00Alarm"]["Properties"]["Tags"] = [{"Key": "Severity", "Value": "page"}]
    assert routing_problems(mislabelled) == ["ProbeStuckG00Alarm: page alarm notifies ['CreateTicketTopic']"]
    paged_twice = copy.deepcopy(t)  # a page alarm with SNS actions besides its rule: alarm level would page too
    paged_twice["Resources"]["RouteStalledG00Alarm"]["Properties"]["AlarmActions"] = broken["Resources"]["RoutePageAlarm"]["Properties"]["AlarmActions"]
    assert [p.split(":")[0] for p in routing_problems(paged_twice)] == ["RouteStalledG00Alarm"]


def test_existing_topics_are_used_and_no_topic_is_created() -> None:
    """PagerDuty / Opsgenie / Chatbot subscribe to a topic the team already has: give its ARN."""
    cfn = default_transformed()
    page, ticket = "arn:aws:sns:us-east-1:123456789012:oncall-page", "arn:aws:sns:us-east-1:123456789012:oncall-ticket"
    own = resolver(cfn)
    assert own.exists("PageTopic") and own.exists("TicketTopic")
    r = resolver(cfn)
    r.params.update({"PageTopicArn": page, "TicketTopicArn": ticket, "AlarmEmail": "oncall@example.com"})
    assert not r.exists("PageTopic") and not r.exists("TicketTopic")
    assert not r.exists("PageEmailSubscription") and not r.exists("TicketEmailSubscription")
    res = cfn["Resources"]
    assert r.resolve(res["FleetPagesG00Rule"]["Properties"]["Targets"][0]["Arn"]) == page
    assert r.resolve(res["HeartbeatFunction"]["Properties"]["Environment"]["Variables"]["REPLMON_EVIDENCE_TOPIC_ARN"]) == ticket
    assert r.resolve(res["ProbeStuckG00Alarm"]["Properties"]["OKActions"]) == [ticket]
    assert r.resolve(cfn["Outputs"]["PageTopicArn"]["Value"]) == page and r.resolve(cfn["Outputs"]["TicketTopicArn"]["Value"]) == ticket
    mailed = resolver(cfn)
    mailed.params["AlarmEmail"] = "oncall@example.com"
    assert mailed.exists("PageEmailSubscription") and mailed.exists("TicketEmailSubscription")


def test_the_alarm_table_in_the_docs_is_generated_from_the_template() -> None:
    assert tool().main([]) == 0, "docs/ALARMS.md is stale: python tools/alarm_table.py --write"
    text = (ROOT / "docs" / "ALARMS.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `") and "Alarm`" in line.split("|")[1]]
    all_alarms = tool().alarms(load_template(TEMPLATE))
    one_set = [a for a in all_alarms.values() if tool().route_group(a) in (None, "g00")]  # fleet alarms: g00's row stands for every group
    assert len(rows) == len(one_set) >= 20
    from replmon.signals.verdict import FINDING_KINDS  # the CLI findings beside their alarms (tests/test_verdict.py)

    assert all(f"| `{kind}` | {sev} | {effect} |" in text for kind, (sev, effect) in FINDING_KINDS.items())
    for doc in ("README.md", "docs/DEPLOY.md"):
        assert "ALARMS.md" in (ROOT / doc).read_text(), doc
