"""One source for defaults and names: defaults.json and telemetry.py against template.yaml."""

from __future__ import annotations

import json

from replmon.core import telemetry
from replmon.core.defaults import DEFAULTS, FLEET_PARAMETERS
from replmon.local.template import load_template
from replmon.probe.request import ProbeRequest, load_request
from tests.conftest import TEMPLATE

ROUTE = {"name": "r", "source": {"bucket": "src-bucket"}, "destinations": [{"bucket": "dst-bucket"}]}


def test_template_parameter_defaults_are_the_defaults() -> None:
    p = load_template(TEMPLATE)["Parameters"]
    pairs = {
        "ProbeSizes": DEFAULTS.sizes, "Trials": DEFAULTS.trials, "ProbeTimeoutSeconds": DEFAULTS.timeout_seconds,
        "LatencyTargetSeconds": DEFAULTS.target_seconds, "MaxConcurrency": DEFAULTS.max_concurrency,
        "PollFunctionTimeoutSeconds": DEFAULTS.poll_function_timeout_seconds, "ScheduleRateMinutes": DEFAULTS.schedule_rate_minutes,
        "RetentionDays": DEFAULTS.retention_days, "RouteName": DEFAULTS.route_name, "ProbePrefix": DEFAULTS.probe_prefix,
        "SeedPrefix": DEFAULTS.seed_prefix, "SloTargetPercent": round(DEFAULTS.slo_target * 100, 6),
        "PendingBytesAlarmBytes": DEFAULTS.pending_bytes_alarm,
    }
    for name, value in pairs.items():
        assert str(p[name]["Default"]) == str(value).removesuffix(".0"), name


def test_the_configuration_model_uses_the_defaults() -> None:
    req = load_request({"routes": [ROUTE]})
    assert (req.trials, req.timeout_seconds, req.target_seconds, req.max_concurrency) == (
        DEFAULTS.trials, DEFAULTS.timeout_seconds, DEFAULTS.target_seconds, DEFAULTS.max_concurrency)
    assert req.sizes == load_request({"routes": [ROUTE], "sizes": DEFAULTS.sizes}).sizes
    assert req.poll.inline_budget_seconds == DEFAULTS.poll.inline_budget_seconds
    assert ProbeRequest.model_fields["trials"].default == DEFAULTS.trials


def test_poll_timeout_has_one_source_in_the_template() -> None:
    """PollReplication's timeout and the limit PlanProbes checks the inline budget against are
    the same parameter."""
    t = load_template(TEMPLATE)
    assert t["Resources"]["PollReplicationFunction"]["Properties"]["Timeout"] == {"Ref": "PollFunctionTimeoutSeconds"}
    env = t["Globals"]["Function"]["Environment"]["Variables"]
    assert env["REPLMON_POLL_FUNCTION_TIMEOUT"] == {"Ref": "PollFunctionTimeoutSeconds"}


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


def test_fleet_parameters_default_to_the_defaults_once_the_template_has_them() -> None:
    """The fleet packages add these parameters (names agreed in the contracts); each one's default
    is defaults.json's. ScheduleRateMinutes and SloTargetPercent exist already."""
    p = load_template(TEMPLATE)["Parameters"]
    assert {"ScheduleRateMinutes", "SloTargetPercent"} <= set(p)
    for name, attr in FLEET_PARAMETERS.items():
        value = getattr(DEFAULTS, attr)
        if name == "SloTargetPercent":
            value = round(value * 100, 6)
        if name in p:
            assert str(p[name]["Default"]) == str(value).removesuffix(".0"), name


def test_probe_classes_cannot_break_the_json_it_is_spliced_into() -> None:
    """ProbeClasses goes into the Globals REPLMON_FLEET JSON by !Sub: its AllowedPattern admits the
    class grammar (core/cadence.py) and nothing that could end a JSON string."""
    import re

    from replmon.core.cadence import ProbeClasses
    from replmon.local.template import load_template
    from tests.conftest import TEMPLATE

    param = load_template(TEMPLATE)["Parameters"]["ProbeClasses"]
    pattern = re.compile(param["AllowedPattern"])
    for good in (param["Default"], "1KiB@5m", "1.5GiB@7dx3,64MiB@6h"):
        assert pattern.fullmatch(good) and ProbeClasses.parse(good)
    for bad in ('1"@1h', "1MiB\\@1h", '1MiB@1h,2"}@1d', "1MiB @1h"):
        assert not pattern.fullmatch(bad), bad
