"""One source for defaults and names: defaults.json and telemetry.py against template.yaml."""

from __future__ import annotations

import json

from replmon.core import telemetry
from replmon.core.defaults import DEFAULTS, FIXED_SETTINGS, TEMPLATE_PARAMETERS
from replmon.local.template import load_template
from replmon.probe.request import ProbeRequest, load_request
from tests.conftest import TEMPLATE

ROUTE = {"name": "r", "source": {"bucket": "src-bucket"}, "destinations": [{"bucket": "dst-bucket"}]}


def test_template_parameter_defaults_are_the_defaults() -> None:
    p = load_template(TEMPLATE)["Parameters"]
    for name, attr in TEMPLATE_PARAMETERS.items():
        assert str(p[name]["Default"]) == str(getattr(DEFAULTS, attr)).removesuffix(".0"), name


def test_fixed_settings_are_the_defaults() -> None:
    """What resource properties read (a Lambda timeout, a schedule, an alarm threshold) is fixed in
    the template's Fixed mapping at defaults.json's value, and is no parameter any more."""
    t = load_template(TEMPLATE)
    fixed = t["Mappings"]["Fixed"]["Settings"]
    assert set(fixed) == set(FIXED_SETTINGS)
    for name, attr in FIXED_SETTINGS.items():
        assert str(fixed[name]) == str(getattr(DEFAULTS, attr)), name
        assert name not in t["Parameters"], name


def test_expert_settings_default_to_the_defaults() -> None:
    from replmon.core.expert import ExpertSettings

    e = ExpertSettings()
    assert (e.probe_sizes, e.trials, e.probe_timeout_seconds, e.max_concurrency) == (
        DEFAULTS.sizes, DEFAULTS.trials, DEFAULTS.timeout_seconds, DEFAULTS.max_concurrency)
    assert (e.slo_target_percent, e.slo_period_days, e.retention_days) == (
        round(DEFAULTS.slo_target * 100, 6), DEFAULTS.slo_period_days, DEFAULTS.retention_days)
    assert (e.probe_classes, e.heartbeat_seconds, e.stall_floor_seconds, e.spread_seconds) == (
        DEFAULTS.probe_classes, DEFAULTS.heartbeat_seconds, DEFAULTS.stall_floor_seconds, DEFAULTS.spread_seconds)
    assert (e.fleet_max_route_runs, e.fleet_max_probes, e.opt_out_tag, e.inventory_workers) == (
        DEFAULTS.fleet_max_route_runs, DEFAULTS.fleet_max_probes, DEFAULTS.opt_out_tag, DEFAULTS.inventory_workers)


def test_the_configuration_model_uses_the_defaults() -> None:
    req = load_request({"routes": [ROUTE]})
    assert (req.trials, req.timeout_seconds, req.target_seconds, req.max_concurrency) == (
        DEFAULTS.trials, DEFAULTS.timeout_seconds, DEFAULTS.target_seconds, DEFAULTS.max_concurrency)
    assert req.sizes == load_request({"routes": [ROUTE], "sizes": DEFAULTS.sizes}).sizes
    assert req.poll.inline_budget_seconds == DEFAULTS.poll.inline_budget_seconds
    assert ProbeRequest.model_fields["trials"].default == DEFAULTS.trials


def test_poll_timeout_has_one_source_in_the_template() -> None:
    """PollReplication's timeout and the limit PlanProbes checks the inline budget against are
    the same fixed value."""
    t = load_template(TEMPLATE)
    one = {"Fn::FindInMap": ["Fixed", "Settings", "PollFunctionTimeoutSeconds"]}
    assert t["Resources"]["PollReplicationFunction"]["Properties"]["Timeout"] == one
    env = t["Globals"]["Function"]["Environment"]["Variables"]
    assert env["REPLMON_POLL_FUNCTION_TIMEOUT"] == one


def test_telemetry_names_are_the_templates() -> None:
    t = load_template(TEMPLATE)
    names = t["Mappings"]["Telemetry"]["Metrics"]
    assert (names["Namespace"], names["Service"]) == (telemetry.NAMESPACE, telemetry.SERVICE)
    env = t["Globals"]["Function"]["Environment"]["Variables"]
    assert env["POWERTOOLS_SERVICE_NAME"] == {"Fn::FindInMap": ["Telemetry", "Metrics", "Service"]}
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == {"Fn::FindInMap": ["Telemetry", "Metrics", "Namespace"]}


def test_defaults_file_is_plain_json_with_a_comment() -> None:
    from importlib import resources

    raw = json.loads(resources.files("replmon.core").joinpath("defaults.json").read_text())
    assert "_comment" in raw and raw["timeout_seconds"] == DEFAULTS.timeout_seconds


def test_expert_values_cannot_break_the_json_they_are_laid_into() -> None:
    """ExpertSettings reaches REPLMON_FLEET through json (core/expert.py overlay), never a !Sub splice:
    a quote in a value stays inside its string."""
    from replmon.core.expert import overlay

    env = overlay({"REPLMON_EXPERT": json.dumps({"enroll_tag": 'a"}=b'}), "REPLMON_FLEET": '{"route_groups": 1}'})
    assert json.loads(env["REPLMON_FLEET"]) == {"route_groups": 1, "enroll_tag": 'a"}=b'}
