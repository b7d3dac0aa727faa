"""A deployment's fleet settings: what every fleet function reads, as one validated object
(``REPLMON_FLEET``, JSON: template.yaml builds it from RouteGroups, ScheduleRateMinutes and
MemberExternalId; core/expert.py lays the ExpertSettings parameter's fleet knobs over it).

Every field defaults to defaults.json; errors name the template parameter or expert key and the fix:

>>> s = load_fleet_settings({"route_groups": 2, "probe_classes": "1MiB@15m,1GiB@1d"})
>>> (s.groups, str(s.classes), s.tick_seconds, s.max_route_runs_for(1))
(['g00', 'g01'], '1MiB@15m,1GiB@1d', 900, 100)
>>> load_fleet_settings({"route_groups": 9})
Traceback (most recent call last):
...
replmon.core.errors.ConfigError: invalid fleet settings (REPLMON_FLEET):
  route_groups (RouteGroups): Input should be less than or equal to 8
>>> load_fleet_settings({"probe_classes": "1MiB@20m"})
Traceback (most recent call last):
...
replmon.core.errors.ConfigError: invalid fleet settings (REPLMON_FLEET):
  (input): ExpertSettings probe_classes: 1MiB@20m: a cadence must be a whole multiple of the ScheduleRateMinutes tick (15 min)

Three settings say who is probed and how much (ExpertSettings enroll_tag, fleet_max_routes, fleet_monthly_usd).
A discovered route is probed only when its source bucket carries ``enroll_tag`` (or a person
wrote it with ``replmon fleet put``); the planner plans at most ``max_routes`` probe-mode routes
whose modelled cost (``replmon cost``) stays within ``monthly_usd`` (fleet/caps.py):

>>> s = load_fleet_settings({})
>>> (s.enroll, s.enrolled({"replmon:enroll": "true"}), s.enrolled({}), s.max_routes, s.monthly_usd)
(('replmon:enroll', 'true'), True, False, 100, 1000.0)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from replmon.core.cadence import ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError, describe
from replmon.core.registry import MAX_ROUTE_GROUPS, group_names

__all__ = ["ENV", "PARAMETER_OF", "FleetSettings", "load_fleet_settings"]

#: The environment variable template.yaml sets on every fleet function (JSON of these fields).
ENV = "REPLMON_FLEET"
#: Each field's template parameter (errors name it).
PARAMETER_OF = {
    "route_groups": "RouteGroups", "tick_minutes": "ScheduleRateMinutes", "member_external_id": "MemberExternalId",
    "plan_bucket": "PlanBucket",
    # the ExpertSettings parameter's keys (core/expert.py TARGETS)
    "probe_classes": "ExpertSettings probe_classes", "spread_seconds": "ExpertSettings spread_seconds",
    "max_route_runs": "ExpertSettings fleet_max_route_runs", "max_probes": "ExpertSettings fleet_max_probes",
    "heartbeat_seconds": "ExpertSettings heartbeat_seconds", "stall_floor_seconds": "ExpertSettings stall_floor_seconds",
    "enroll_tag": "ExpertSettings enroll_tag", "max_routes": "ExpertSettings fleet_max_routes", "monthly_usd": "ExpertSettings fleet_monthly_usd",
    # fixed in template.yaml (the member roles' names): the CLI's --member-role-prefix
    "member_role_prefix": "member_role_prefix",
}


class FleetSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    route_groups: int = Field(default=DEFAULTS.route_groups, ge=1, le=MAX_ROUTE_GROUPS)
    probe_classes: str = DEFAULTS.probe_classes
    tick_minutes: int = Field(default=DEFAULTS.schedule_rate_minutes, ge=1, le=1440)
    spread_seconds: int = Field(default=DEFAULTS.spread_seconds, ge=0)
    max_route_runs: int = Field(default=DEFAULTS.fleet_max_route_runs, ge=1, le=10_000)
    max_probes: int = Field(default=DEFAULTS.fleet_max_probes, ge=1, le=1_000)  # the Map result bound (tests/test_payload_bounds.py)
    heartbeat_seconds: int = Field(default=DEFAULTS.heartbeat_seconds, ge=10, le=3600)
    stall_floor_seconds: float = Field(default=DEFAULTS.stall_floor_seconds, ge=1, le=3600)
    member_role_prefix: str = Field(default=DEFAULTS.member_role_prefix, pattern=r"^[\w+=,.@-]{1,40}$")
    member_external_id: str | None = None
    plan_bucket: str | None = None  # the stack's PlanBucket (PlanFleet, the state machine's ItemReader)
    enroll_tag: str = DEFAULTS.enroll_tag  # key=value on a source bucket: its discovered route is probed
    max_routes: int = Field(default=DEFAULTS.fleet_max_routes, ge=1, le=10_000)  # probe-mode routes planned at most
    monthly_usd: float = Field(default=DEFAULTS.fleet_monthly_usd, gt=0)  # the planned routes' modelled monthly cost, at most

    @model_validator(mode="before")
    @classmethod
    def _spread_within_tick(cls, data: Any) -> Any:
        """Unset, the spread is the default or half the tick if that is shorter (a 5-minute tick works as is)."""
        if isinstance(data, dict) and "spread_seconds" not in data:
            tick = data.get("tick_minutes", DEFAULTS.schedule_rate_minutes)
            if isinstance(tick, int) and tick > 0:
                data = {**data, "spread_seconds": min(DEFAULTS.spread_seconds, tick * 30)}
        return data

    @field_validator("enroll_tag")
    @classmethod
    def _tag(cls, value: str) -> str:
        if not re.fullmatch(r"[^=]{1,128}=[^=]{1,256}", value):
            raise ValueError("enroll_tag must be key=value (e.g. replmon:enroll=true): a tag key up to 128 characters, '=', "
                             "and a non-empty value")
        return value

    @model_validator(mode="after")
    def _fits(self) -> FleetSettings:
        self.classes.check_tick(self.tick_seconds, parameter="ExpertSettings probe_classes")  # names it and ScheduleRateMinutes
        if self.spread_seconds >= self.tick_seconds:
            raise ValueError(f"ExpertSettings spread_seconds ({self.spread_seconds}) must be below the ScheduleRateMinutes tick "
                             f"({self.tick_seconds} s): a route-run starts within its tick")
        return self

    @property
    def classes(self) -> ProbeClasses:
        return ProbeClasses.parse(self.probe_classes, parameter="ExpertSettings probe_classes")

    @property
    def tick_seconds(self) -> int:
        return self.tick_minutes * 60

    @property
    def groups(self) -> list[str]:
        return group_names(self.route_groups)

    @property
    def enroll(self) -> tuple[str, str]:
        key, _, value = self.enroll_tag.partition("=")
        return key, value

    def enrolled(self, tags: Mapping[str, str]) -> bool:
        """Does a source bucket with these tags ask for its discovered route to be probed?"""
        key, value = self.enroll
        return tags.get(key) == value

    def max_route_runs_for(self, max_route_concurrency: int) -> int:
        """Route-runs in flight at once so that probes in flight stay <= FleetMaxProbes."""
        return max(1, min(self.max_route_runs, self.max_probes // max(1, max_route_concurrency)))


def load_fleet_settings(raw: Mapping[str, Any]) -> FleetSettings:
    """Validate ``REPLMON_FLEET`` (or the CLI's equivalent); :class:`ConfigError` names each bad field's parameter."""
    try:
        return FleetSettings.model_validate(dict(raw))
    except ValidationError as exc:
        lines = [describe({**e, "loc": (f"{e['loc'][0]} ({PARAMETER_OF[str(e['loc'][0])]})",) if e["loc"] and str(e["loc"][0]) in PARAMETER_OF
                           else e["loc"]}) for e in exc.errors()]
        raise ConfigError(f"invalid fleet settings ({ENV}):\n" + "\n".join(lines)) from None
