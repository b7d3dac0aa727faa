"""The docs agree with the code: alarm counts, what pages and how often, and the composite alarm that
is no more, in README.md, docs/*.md, docs/verification.json and the CHANGELOG's unreleased section,
checked against template.yaml, the generated docs/ALARMS.md and `replmon cost`'s model.

AWS limits the README states (CloudWatch User Guide, "Create alarms on Metrics Insights queries" and
"Metrics Insights service quotas": a Metrics Insights alarm evaluates only the last 3 hours, at most
500 time series and 10,000 metrics (more: PARTIAL_DATA), at most 100 contributors in ALARM; 200
Metrics Insights alarms per account and Region by default):
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-alarms.html
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/cloudwatch-metrics-insights-limits.html
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replmon.local.template import load_template
from tests.conftest import ROOT, TEMPLATE

GENERATED = re.compile(r"^BENCH")  # rendered from docs/bench/*.json, figures only


def unreleased() -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    return text.split("## Unreleased", 1)[1].split("\n## ", 1)[0]


def prose() -> dict[str, str]:
    """Every hand-written page a reader takes as current, joined per line break into one text."""
    pages = {"README.md": (ROOT / "README.md").read_text(), "CHANGELOG.md (Unreleased)": unreleased(),
             "docs/verification.json": (ROOT / "docs" / "verification.json").read_text()}
    for p in sorted((ROOT / "docs").glob("*.md")):
        if not GENERATED.match(p.name):
            pages[f"docs/{p.name}"] = p.read_text()
    return {k: " ".join(v.split()) for k, v in pages.items()}


def fleet_alarms() -> tuple[int, int]:
    """(Metrics Insights alarms per RouteGroup, RouteGroup sets the template holds)."""
    res = load_template(TEMPLATE)["Resources"]
    per_group = [k for k, r in res.items() if k.endswith("G00Alarm") and "SELECT" in json.dumps(r.get("Properties", {}).get("Metrics", []))]
    sets = [k for k in res if re.fullmatch(r"RpoAboveTargetG\d\dAlarm", k)]
    return len(per_group), len(sets)


def test_every_alarm_count_in_the_docs_is_the_templates() -> None:
    per_group, groups = fleet_alarms()
    assert per_group >= 10 and groups == 8
    found = []
    for page, text in prose().items():
        for pat, want in ((r"(\d+) (?:fleet |Metrics Insights )?alarms per group", per_group),
                          (r"its own (\d+) (?:Metrics Insights )?alarms", per_group),
                          (r"(\d+) (?:Metrics Insights alarms )?at 8 groups", per_group * groups),
                          (r"8 groups \((\d+)(?: Metrics Insights)? alarms\)", per_group * groups)):
            found += [(page, m.group(0), want) for m in re.finditer(pat, text)]
    assert [f for f in found if int(re.search(r"\d+", f[1].replace("8 groups", "")).group()) != f[2]] == []  # type: ignore[union-attr]
    assert {f[0] for f in found} >= {"README.md", "docs/DEPLOY.md", "docs/ALARMS.md"}
    assert f"{per_group} Metrics Insights alarms per group, {per_group * groups} at 8 groups" in prose()["README.md"]


def test_the_cost_model_prices_the_templates_alarms() -> None:
    from tests.test_cli import cli

    doc = json.loads(cli("cost", "--routes", "1", "--format", "json").stdout)
    assert doc["assumptions"]["metrics_insights_alarms_per_group"] == fleet_alarms()[0]


def page_alarms() -> set[str]:
    """Page-severity alarms that reach the page topic, from the generated table (docs/ALARMS.md)."""
    text = (ROOT / "docs" / "ALARMS.md").read_text()
    return set(re.findall(r"^\| `(\w+)G00Alarm` \([^|]*\) \| page \| page topic", text, re.M))


def test_the_readme_names_exactly_the_alarms_that_page() -> None:
    pagers = page_alarms()
    assert pagers == {"RouteStalled", "RpoAboveTarget", "RpoUnbounded"}
    section = prose()["README.md"].split("## What pages you", 1)[1].split("## ", 1)[0]
    listed = set(re.findall(r"Three alarms page, per route: ([^.]*)\.", section)[0].replace("`", "").replace(" and ", ", ").split(", "))
    assert listed == pagers
    assert f"{len(pagers)} alarms page".lower() in section.lower() or "Three alarms page" in section


def test_how_often_a_cause_pages_is_said_as_the_alarms_do_it() -> None:
    """A cause another page alarm sees notifies nobody; a stall past the target pages twice (the generated
    RouteStalled row says RpoAboveTarget pages too). Nowhere may a page say "one cause pages once"."""
    alarms = (ROOT / "docs" / "ALARMS.md").read_text()
    stalled = next(line for line in alarms.splitlines() if line.startswith("| `RouteStalledG00Alarm`"))
    assert "RpoAboveTarget pages too" in stalled
    quiet = set(re.findall(r"^\| `(\w+)G00Alarm` \([^|]*\) \| page \| nobody", alarms, re.M))
    assert quiet == {"ProbeFailed", "ReplicationFailedEvent", "SloFastBurn"}
    readme = prose()["README.md"]
    assert "a stall that outlasts the latency target pages twice, `RouteStalled` and then `RpoAboveTarget`" in readme
    assert "notifies nobody itself" in readme
    said = {page: m.group(0) for page, text in prose().items() for m in re.finditer(r"one cause (?:pages|notifies) once", text, re.I)}
    assert said == {}


def test_no_page_describes_a_composite_alarm_the_template_does_not_have() -> None:
    res = load_template(TEMPLATE)["Resources"]
    assert not [k for k, r in res.items() if r["Type"] == "AWS::CloudWatch::CompositeAlarm"]
    claims = []
    for page, text in prose().items():
        if page.startswith("CHANGELOG"):
            continue  # a history: it may say what there was
        for sentence in re.split(r"(?<=[.;:])\s", text):
            if re.search(r"composite alarm", sentence, re.I) and not re.search(r"\b(cannot|not|no|would|without|instead)\b", sentence):
                claims.append((page, sentence[:160]))
    assert claims == []


@pytest.mark.parametrize("limit", ["200 Metrics Insights alarms per Region", "last 3 hours", "500 time series and 10,000 metrics",
                                   "PARTIAL_DATA", "100 contributors"])
def test_the_readme_states_the_metrics_insights_limits(limit: str) -> None:
    limits = prose()["README.md"].split("## Limits", 1)[1].split("## Uninstall", 1)[0]
    assert limit.split()[0] in limits and (limit in limits or limit.replace(" per Region", "") in limits
                                           or limit.replace("last ", "") in limits), limit


def test_moved_sections_are_not_duplicated(tmp_path: Path) -> None:
    """Nothing moved out of the README is still in it: each long paragraph of docs/LAB.md, docs/FLEET.md and
    docs/CLI.md appears once in the repository's prose."""
    readme = prose()["README.md"]
    for page in ("LAB.md", "FLEET.md", "CLI.md"):
        text = (ROOT / "docs" / page).read_text()
        for para in text.split("\n\n"):
            flat = " ".join(para.split())
            if len(flat) > 200 and not flat.startswith(("<!--", "|", "```")):
                assert flat[:120] not in readme, (page, flat[:80])


def test_every_dollar_figure_of_the_readme_and_changelog_is_generated_or_checked() -> None:
    """The README's money is in its cost block (tools/render_cost_block.py, tests/test_docs.py) or the ladder's
    warning (tests/test_events.py); the CHANGELOG's unreleased section names only the fleet's cost cap, as
    FleetSettings defaults it. A bench's modelled cost stays on its own page, dated."""
    readme = (ROOT / "README.md").read_text()
    rest = re.sub(r"<!-- cost:start -->.*?<!-- cost:end -->", "", readme, flags=re.S)
    ladder = rest.index("**`probe_crr_ladder.json` replicates")
    rest = rest[:ladder] + rest[rest.index("\n\n", ladder):]
    assert re.findall(r"\$\s?\d[\d,.]*", rest) == []
    from replmon.core.fleetconfig import FleetSettings

    cap = FleetSettings().monthly_usd
    assert set(re.findall(r"\$(\d[\d,]*(?:\.\d+)?)", unreleased())) <= {f"{cap:,.0f}"}


def test_every_parameter_the_docs_set_is_a_templates_parameter() -> None:
    """`Name=value` in README.md and docs/DEPLOY.md (prose and commands) names a parameter of template.yaml
    or of the member template the command deploys: a renamed or moved parameter fails here, not at deploy."""
    known: set[str] = set()
    for t in ("template.yaml", "templates/member-account.yaml", "templates/member-region.yaml"):
        known |= set(load_template(ROOT / t)["Parameters"])
    used = set()
    for page in ("README.md", "docs/DEPLOY.md"):
        text = (ROOT / page).read_text()
        used |= set(re.findall(r"(?<![\w:/.$-])([A-Z][a-z]+(?:[A-Z][A-Za-z0-9]*)+)=(?!=)", text))
        used |= set(re.findall(r"ParameterKey=([A-Za-z0-9]+)", text))
    api_fields = {"ServerSideEncryption", "ChecksumMode", "ChecksumType", "RawMessageDelivery", "OutputKey", "ParameterKey",
                  "ParameterValue"}  # S3, SNS and the AWS CLI's own request fields
    assert len(used - api_fields) >= 8
    assert sorted(used - known - api_fields) == []
