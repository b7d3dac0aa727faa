"""Every function's REPLMON_FLEET (Globals, or its own), as template.yaml resolves it, is settings the
function accepts at the least tick (ScheduleRateMinutes 5) with a spread below it: a function-level
REPLMON_FLEET replaces the Globals' one whole, so each must carry tick_minutes, and the expert knobs
(ExpertSettings: spread_seconds here) are laid over every one (core/expert.py)."""

from __future__ import annotations

import json

import pytest

from replmon.core.expert import ENV as EXPERT_ENV
from replmon.core.expert import overlay
from replmon.core.fleetconfig import ENV, load_fleet_settings
from replmon.local.cfn import Resolver
from replmon.local.template import TEMPLATE, load_template

T = load_template(TEMPLATE)
FUNCTIONS = [n for n, r in T["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_functions_fleet_settings_are_valid_at_a_five_minute_tick(function: str) -> None:
    r = Resolver(T, {"ScheduleRateMinutes": 5, "ExpertSettings": json.dumps({"spread_seconds": 120}), "MemberAccounts": ["444455556666"]}, region="us-east-1",
                 account="123456789012", stack="replmon")
    own = (T["Resources"][function]["Properties"].get("Environment") or {}).get("Variables", {})
    raw = own.get(ENV, T["Globals"]["Function"]["Environment"]["Variables"].get(ENV))
    if raw is None:
        pytest.skip("no REPLMON_FLEET")
    expert = str(r.resolve(T["Globals"]["Function"]["Environment"]["Variables"][EXPERT_ENV]))
    settings = json.loads(overlay({ENV: str(r.resolve(raw)), EXPERT_ENV: expert})[ENV])
    assert settings["tick_minutes"] == 5 and settings["spread_seconds"] == 120, function  # the tick and the expert knob, together
    load_fleet_settings(settings)
