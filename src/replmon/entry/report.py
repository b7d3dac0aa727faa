"""Lambda entry point of Report: report_step of replmon.probe.steps, or with ``{"fleet": true}`` every
registry route riskiest first (fleet/risk.py, as ``replmon report --fleet``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replmon.entry.runtime import lambda_handler
from replmon.fleet.risk import fleet_report
from replmon.probe.steps import report_step
from replmon.wiring import Deps


def report(event: Mapping[str, Any] | None, deps: Deps) -> dict[str, Any]:
    event = dict(event or {})
    if event.pop("fleet", False) is not True:
        return report_step(event, deps)
    if deps.registry is None:
        raise RuntimeError("fleet: no route registry wired (REPLMON_TABLE): the Report function reads it from the latency table")
    hours = float(event.pop("hours", 24.0))
    if event:
        raise ValueError(f"fleet: unexpected {sorted(event)}; {{\"fleet\": true}} takes only \"hours\"")
    return fleet_report(deps.store, deps.registry, slo=deps.slo, rpo_window_seconds=deps.rpo_window, now=deps.clock.now(), hours=hours,
                        fleet=deps.fleet)


handler = lambda_handler(report)
