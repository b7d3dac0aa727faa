"""The hub's expert knobs: one JSON stack parameter (``ExpertSettings``, env ``REPLMON_EXPERT``).

template.yaml keeps to the parameters a user sets; every other knob keeps its default
(defaults.json) unless ``ExpertSettings`` names it. Each knob lands in the environment variable
its reader already parses (:data:`TARGETS`), so the handlers, the CLI and the local harness read
one configuration whichever way it was set:

>>> env = overlay({"REPLMON_EXPERT": '{"trials": 3, "probe_classes": "1MiB@30m"}',
...                "REPLMON_FLEET": '{"route_groups": 2, "tick_minutes": 15}'})
>>> env["REPLMON_DEFAULTS"], env["REPLMON_FLEET"]
('{"trials": 3}', '{"route_groups": 2, "tick_minutes": 15, "probe_classes": "1MiB@30m"}')

A bad or unknown key is refused with the field and the fix:

>>> load_expert('{"trails": 3}')
Traceback (most recent call last):
...
replmon.core.errors.ConfigError: invalid ExpertSettings (REPLMON_EXPERT):
  trails: not an expert setting - the keys are probe_sizes, trials, probe_timeout_seconds, max_concurrency, trace_aws_calls, slo_target_percent, slo_period_days, retention_days, opt_out_tag, inventory_workers, probe_classes, heartbeat_seconds, stall_floor_seconds, spread_seconds, fleet_max_route_runs, fleet_max_probes, enroll_tag, fleet_max_routes, fleet_monthly_usd
>>> load_expert('{"trials": 0}')
Traceback (most recent call last):
...
replmon.core.errors.ConfigError: invalid ExpertSettings (REPLMON_EXPERT):
  trials: Input should be greater than or equal to 1 - set ExpertSettings {"trials": ...} to a valid value, or drop the key for the default (1)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError

__all__ = ["ENV", "PARAMETER", "TARGETS", "ExpertSettings", "load_expert", "overlay"]

#: The environment variable template.yaml sets from the parameter (on every function).
ENV = "REPLMON_EXPERT"
#: The stack parameter (errors name it).
PARAMETER = "ExpertSettings"


class ExpertSettings(BaseModel):
    """Every knob with its default and the bounds its stack parameter had."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # a route's request defaults (REPLMON_DEFAULTS; probe/request.py)
    probe_sizes: str = Field(default=DEFAULTS.sizes, min_length=1)  # sizes (10MiB, 1GiB, bytes) or a preset name
    trials: int = Field(default=DEFAULTS.trials, ge=1, le=100)
    probe_timeout_seconds: int = Field(default=DEFAULTS.timeout_seconds, ge=60, le=86_400)  # PENDING this long: STUCK
    max_concurrency: int = Field(default=DEFAULTS.max_concurrency, ge=1, le=100)  # probes in flight per run
    trace_aws_calls: bool = False  # X-Ray subsegments per AWS call (~130 ms more per cold start; entry/runtime.py)
    # the SLO (REPLMON_SLO; signals/slo.py)
    slo_target_percent: float = Field(default=DEFAULTS.slo_target * 100, ge=50, le=99.999)
    slo_period_days: int = Field(default=DEFAULTS.slo_period_days, ge=1, le=90)
    retention_days: int = Field(default=DEFAULTS.retention_days, ge=1, le=3650)  # the latency records' TTL
    # the inventory (REPLMON_INVENTORY; fleet/accounts.py)
    opt_out_tag: str = Field(default=DEFAULTS.opt_out_tag, pattern=r"^[^=]{1,128}=[^=]{0,256}$")
    inventory_workers: int = Field(default=DEFAULTS.inventory_workers, ge=1, le=64)
    # the fleet (REPLMON_FLEET; core/fleetconfig.py validates them again with the tick)
    probe_classes: str = Field(default=DEFAULTS.probe_classes, min_length=1)
    heartbeat_seconds: int = Field(default=DEFAULTS.heartbeat_seconds, ge=10, le=3600)
    stall_floor_seconds: float = Field(default=DEFAULTS.stall_floor_seconds, ge=1, le=3600)
    spread_seconds: int = Field(default=DEFAULTS.spread_seconds, ge=0)
    fleet_max_route_runs: int = Field(default=DEFAULTS.fleet_max_route_runs, ge=1, le=10_000)
    fleet_max_probes: int = Field(default=DEFAULTS.fleet_max_probes, ge=1, le=1_000)  # the Map's result array stays < 256 KiB
    enroll_tag: str = DEFAULTS.enroll_tag
    fleet_max_routes: int = Field(default=DEFAULTS.fleet_max_routes, ge=1, le=10_000)
    fleet_monthly_usd: float = Field(default=DEFAULTS.fleet_monthly_usd, gt=0)


#: Each knob -> (the environment variable its reader parses, the key in that JSON; None: the value itself).
TARGETS: dict[str, tuple[str, str | None]] = {
    "probe_sizes": ("REPLMON_DEFAULTS", "sizes"),
    "trials": ("REPLMON_DEFAULTS", "trials"),
    "probe_timeout_seconds": ("REPLMON_DEFAULTS", "timeout_seconds"),
    "max_concurrency": ("REPLMON_DEFAULTS", "max_concurrency"),
    "trace_aws_calls": ("REPLMON_TRACE_AWS_CALLS", None),
    "slo_target_percent": ("REPLMON_SLO", "target_percent"),
    "slo_period_days": ("REPLMON_SLO", "period_days"),
    "retention_days": ("REPLMON_RETENTION_DAYS", None),
    "opt_out_tag": ("REPLMON_INVENTORY", "opt_out_tag"),
    "inventory_workers": ("REPLMON_INVENTORY", "workers"),
    "probe_classes": ("REPLMON_FLEET", "probe_classes"),
    "heartbeat_seconds": ("REPLMON_FLEET", "heartbeat_seconds"),
    "stall_floor_seconds": ("REPLMON_FLEET", "stall_floor_seconds"),
    "spread_seconds": ("REPLMON_FLEET", "spread_seconds"),
    "fleet_max_route_runs": ("REPLMON_FLEET", "max_route_runs"),
    "fleet_max_probes": ("REPLMON_FLEET", "max_probes"),
    "enroll_tag": ("REPLMON_FLEET", "enroll_tag"),
    "fleet_max_routes": ("REPLMON_FLEET", "max_routes"),
    "fleet_monthly_usd": ("REPLMON_FLEET", "monthly_usd"),
}


def _problem(error: Mapping[str, Any]) -> str:
    field = ".".join(str(part) for part in error["loc"]) or "(input)"
    if error["type"] == "extra_forbidden":
        return f"{field}: not an expert setting - the keys are {', '.join(ExpertSettings.model_fields)}"
    default = ExpertSettings.model_fields[field].default if field in ExpertSettings.model_fields else None
    return (f"{field}: {error['msg']} - set {PARAMETER} {{\"{field}\": ...}} to a valid value, or drop the key "
            f"for the default ({default})")


def load_expert(text: str | None) -> ExpertSettings:
    """``ExpertSettings`` parsed and validated; empty means every default."""
    try:
        raw = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid {PARAMETER} ({ENV}): not JSON ({exc.msg} at character {exc.pos}) - "
                          'give a JSON object such as {"trials": 2}, or {} for every default') from None
    if not isinstance(raw, dict):
        raise ConfigError(f"invalid {PARAMETER} ({ENV}): a JSON object is needed, not {type(raw).__name__} - "
                          'e.g. {"trials": 2}, or {} for every default')
    try:
        return ExpertSettings.model_validate(raw)
    except ValidationError as exc:
        lines = [f"  {_problem(e)}" for e in exc.errors()]
        raise ConfigError(f"invalid {PARAMETER} ({ENV}):\n" + "\n".join(lines)) from None


def overlay(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` with the knobs ``REPLMON_EXPERT`` sets laid into the variables their readers parse
    (a knob it leaves out keeps what ``env`` says, else the reader's default)."""
    settings = load_expert(env.get(ENV))
    out = dict(env)
    for field in sorted(settings.model_fields_set, key=list(TARGETS).index):
        var, key = TARGETS[field]
        value = getattr(settings, field)
        if key is None:
            out[var] = str(value).lower() if isinstance(value, bool) else str(value)
            continue
        doc = json.loads(out.get(var) or "{}")
        doc[key] = value
        out[var] = json.dumps(doc)
    return out
