"""The alarm table, written from template.yaml so it cannot drift: every alarm, its severity (its
``Severity`` tag), where it notifies, when it fires (its metric, statistic, threshold and window,
or its composite rule), likely causes and what to do (its ``Metadata.Runbook``). Rendered into
docs/ALARMS.md between ``<!-- alarms:start -->`` and ``<!-- alarms:end -->``.

    python tools/alarm_table.py          # check: exit 1 if the block is stale
    python tools/alarm_table.py --write  # rewrite the block

tests/test_alarm_table.py checks the block is current and the template's routing behind it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from replmon.local.template import load_template  # noqa: E402
from replmon.signals.verdict import FINDING_ALARMS, FINDING_KINDS  # noqa: E402

TEMPLATE = ROOT / "template.yaml"
TARGET = ROOT / "docs" / "ALARMS.md"
BLOCK = re.compile(r"(<!-- alarms:start -->\n)(.*?)(<!-- alarms:end -->)", re.S)
ALARM_TYPES = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
OPS = {"GreaterThanThreshold": ">", "GreaterThanOrEqualToThreshold": ">=", "LessThanThreshold": "<",
       "LessThanOrEqualToThreshold": "<="}
#: The topic-choosing condition in an action, as the table names it.
TOPICS = {"CreatePageTopic": "page topic", "CreateTicketTopic": "ticket topic"}


def alarms(template: dict[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    t = template or load_template(TEMPLATE)
    return {k: v for k, v in t["Resources"].items() if v["Type"] in ALARM_TYPES}


def severity(res: dict[str, Any]) -> str | None:
    return next((tag["Value"] for tag in res["Properties"].get("Tags", []) if tag.get("Key") == "Severity"), None)


def topics(res: dict[str, Any]) -> list[str]:
    """Where an alarm's ALARM actions go: the page or ticket topic (by the condition that picks it)."""
    out = []
    for action in res["Properties"].get("AlarmActions", []):
        cond = action.get("Fn::If", [None])[0] if isinstance(action, dict) else None
        out.append(TOPICS.get(str(cond), str(action)))
    return out


CONTRIBUTOR_EVENT = "CloudWatch Alarm Contributor State Change"


def forwarded(template: dict[str, Any]) -> dict[str, list[str]]:
    """Alarms whose contributor state changes an EventBridge rule forwards (fleet/alarms.py
    _page_rule), by alarm: where to (the topic, as :data:`TOPICS` names it) through which rule."""
    out: dict[str, list[str]] = {}
    for rule, res in template["Resources"].items():
        pattern = res["Properties"].get("EventPattern", {}) if res["Type"] == "AWS::Events::Rule" else {}
        if pattern.get("detail-type") != [CONTRIBUTOR_EVENT]:
            continue
        for ref in pattern.get("resources", []):
            got = ref.get("Fn::GetAtt") if isinstance(ref, dict) else None
            name = (got if isinstance(got, str) else ".".join(got or [])).removesuffix(".Arn")
            for target in res["Properties"]["Targets"]:
                cond = target["Arn"].get("Fn::If", [None])[0] if isinstance(target["Arn"], dict) else None
                out.setdefault(name, []).append(f"{TOPICS.get(str(cond), str(target['Arn']))}, per route only ({rule})")
    return out


def parents(name: str, all_alarms: dict[str, dict[str, Any]]) -> list[str]:
    """The composite alarms whose rule names ``name``."""
    return [k for k, v in all_alarms.items() if f"${{{name}}}" in str(v["Properties"].get("AlarmRule", ""))]


def _value(v: Any, params: dict[str, Any]) -> str:
    if isinstance(v, dict) and "Ref" in v:
        p = params.get(v["Ref"], {})
        return f"`{v['Ref']}` ({p.get('Default')})" if p else f"`{v['Ref']}`"
    return f"{v:g}" if isinstance(v, float) else str(v)


def route_group(res: dict[str, Any]) -> str | None:
    """A fleet alarm's RouteGroup tag (fleet/alarms.py: one Metrics Insights alarm per signal and group)."""
    return next((tag["Value"] for tag in res["Properties"].get("Tags", []) if tag.get("Key") == "RouteGroup"), None)


def condition(res: dict[str, Any], params: dict[str, Any]) -> str:
    p = res["Properties"]
    if "Metrics" in p:  # a Metrics Insights alarm: with GROUP BY Route, each route is a contributor
        (m,) = p["Metrics"]
        n, datapoints = p.get("EvaluationPeriods", 1), p.get("DatapointsToAlarm", p.get("EvaluationPeriods", 1))
        span = f"{m['Period'] // 60} min" if n == 1 else f"{datapoints} of {n} periods of {m['Period']} s"
        query = m["Expression"].replace("'g00'", "'gNN'")
        return (f"{'per route: ' if 'GROUP BY Route' in query else ''}`{query}` {OPS[p['ComparisonOperator']]} {_value(p['Threshold'], params)} over {span}; "
                f"missing data: {p.get('TreatMissingData', 'missing')}")
    if "AlarmRule" in p:
        rule = p["AlarmRule"].get("Fn::Sub", p["AlarmRule"]) if isinstance(p["AlarmRule"], dict) else p["AlarmRule"]
        return re.sub(r'"?\$\{(\w+)\}"?', r"\1", str(rule))
    periods, datapoints = p.get("EvaluationPeriods", 1), p.get("DatapointsToAlarm")
    if datapoints or not isinstance(periods, int):
        span = f"{_value(datapoints or periods, params)} of {_value(periods, params)} periods of {p['Period']} s"
    else:
        window = int(p["Period"]) * periods
        span = f"{window // 60} min" if window % 60 == 0 else f"{window} s"
    ns = p.get("Namespace")
    ns = "Replmon" if isinstance(ns, dict) else ns
    # dimensions that say more than "this route" (e.g. the event type): literal values only
    extra = [f"{d['Name']}={d['Value']}" for d in p.get("Dimensions", []) if isinstance(d.get("Value"), str) and d["Name"] != "RuleId"]
    metric = f"`{p['MetricName']}`" + (f" ({', '.join(extra)})" if extra else "")
    text = (f"{ns} {metric} {p['Statistic']} {OPS[p['ComparisonOperator']]} {_value(p['Threshold'], params)} "
            f"over {span}; missing data: {p.get('TreatMissingData', 'missing')}")
    return text


def render(template: dict[str, Any] | None = None) -> str:
    t = template or load_template(TEMPLATE)
    def covered_note(res: dict[str, Any]) -> str:
        """A fleet alarm that notifies nobody: its description names the alarms that page for its cause."""
        text = str(res["Properties"].get("AlarmDescription", ""))
        return "nobody: " + text.split("also raises ", 1)[1].split(",", 1)[0] + " pages" if "also raises " in text else "nobody"

    all_alarms = alarms(t)
    rules = forwarded(t)
    params = t.get("Parameters", {})
    per_group = [a for a in all_alarms.values() if route_group(a) == "g00"]
    fleet = [a for a in per_group if "Metrics" in a["Properties"]]  # Metrics Insights (HeartbeatRun is a standard alarm per group)
    shown = {k: v for k, v in all_alarms.items() if route_group(v) in (None, "g00")}
    groups = len({route_group(a) for a in all_alarms.values()} - {None})
    lines = [f"{len(shown) - len(per_group)} stack alarms, {len(per_group) - len(fleet)} per-group standard alarm(s) and "
             f"{len(fleet)} fleet alarms (Metrics Insights, one contributor per route; "
             f"one set per RouteGroup, up to {groups} sets = {len(fleet) * groups} Metrics Insights alarms); "
             f"{sum(severity(a) == 'page' for a in shown.values())} of the {len(shown)} kinds are page severity.", "",
             "| alarm | severity | notifies | fires when | likely causes | what to do |", "| --- | --- | --- | --- | --- | --- |"]
    order = {"page": 0, "ticket": 1}
    for name, res in sorted(shown.items(), key=lambda kv: (order.get(str(severity(kv[1])), 2), not (topics(kv[1]) or kv[0] in rules), kv[0])):
        runbook = res.get("Metadata", {}).get("Runbook", {})
        via = topics(res) + rules.get(name, []) or [f"through {p}" for p in parents(name, all_alarms)] or [covered_note(res)]
        only = f" (only with {res['Condition']})" if res.get("Condition") else ""
        if route_group(res):
            only = f" (and G01..G{groups - 1:02d}Alarm while RouteGroups > 01..{groups - 1:02d})"
        cells = [f"`{name}`{only}", str(severity(res)), ", ".join(via), condition(res, params),
                 runbook.get("Causes", ""), runbook.get("Action", "")]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join([*lines, "", *findings()]) + "\n"


def findings() -> list[str]:
    """The CLI's verdict findings (signals/verdict.py) beside the alarm that watches the same cause:
    a finding's severity is that alarm's tag (tests/test_verdict.py checks they agree)."""
    lines = ["The headline of `replmon probe`, `lab run` and `report` names the same causes; each finding kind has "
             "its alarm's severity:", "", "| finding kind | severity | effect on the verdict | alarm |", "| --- | --- | --- | --- |"]
    for kind, (sev, effect) in FINDING_KINDS.items():
        alarm = FINDING_ALARMS[kind]
        lines.append(f"| `{kind}` | {sev} | {effect} | " + (f"`{alarm}`" if alarm else "none (a CLI run's own state)") + " |")
    return lines


def main(argv: list[str]) -> int:
    text = TARGET.read_text()
    m = BLOCK.search(text)
    if not m:
        raise SystemExit(f"{TARGET}: no <!-- alarms:start --> block")
    if m.group(2) == render():
        return 0
    if "--write" in argv:
        TARGET.write_text(text[:m.start(2)] + render() + text[m.end(2):])
        return 0
    print(f"stale: {TARGET} (python tools/alarm_table.py --write)")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
