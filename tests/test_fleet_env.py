"""Every function's REPLMON_FLEET (Globals, or its own), as template.yaml resolves it, is settings the
function accepts at the least tick (ScheduleRateMinutes 5) with a spread below it: a function-level
REPLMON_FLEET replaces the Globals' one whole, so each must carry tick_minutes with spread_seconds
(CollectSignals carried the tick alone and refused its settings: the default 450 s spread is past a
300 s tick)."""

from __future__ import annotations

import json

import pytest

from replmon.core.fleetconfig import ENV, load_fleet_settings
from replmon.local.cfn import Resolver
from replmon.local.template import TEMPLATE, load_template

T = load_template(TEMPLATE)
FUNCTIONS = [n for n, r in T["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_functions_fleet_settings_are_valid_at_a_five_minute_tick(function: str) -> None:
    r = Resolver(T, {"ScheduleRateMinutes": 5, "SpreadSeconds": 120, "MemberAccounts": ["444455556666"]}, region="us-east-1",
                 account="123456789012", stack="replmon")
    own = (T["Resources"][function]["Properties"].get("Environment") or {}).get("Variables", {})
    raw = own.get(ENV, T["Globals"]["Function"]["Environment"]["Variables"].get(ENV))
    if raw is None:
        pytest.skip("no REPLMON_FLEET")
    settings = json.loads(str(r.resolve(raw)))
    if "tick_minutes" in settings:
        assert "spread_seconds" in settings, f"{function}: REPLMON_FLEET has tick_minutes without spread_seconds"
    load_fleet_settings(settings)
