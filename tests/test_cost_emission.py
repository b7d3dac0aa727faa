"""What a route costs in CloudWatch is what it emits: per route only the series an alarm or a
dashboard widget reads per route, the 0/1 and burn signals only when non-zero, the error budget in
hours = 0 mod 6, group-level counts without the route (signals/health.py publish_health,
core/telemetry.py). CloudWatch bills a custom metric for each hour it receives data ("Amazon
CloudWatch pricing", https://aws.amazon.com/cloudwatch/pricing/), so a series not emitted costs
nothing; its alarm treats the missing datapoint as not breaching (fleet/alarms.py)."""

from __future__ import annotations

from typing import Any

import pytest

from replmon.core.telemetry import FLEET_METRICS, METRICS, PER_GROUP, ROUTE, SPARSE
from replmon.fleet.alarms import FLEET_ALARMS
from replmon.signals.health import RouteHealth, publish_health
from replmon.signals.slo import Rpo, SloStatus

BUDGET_HOUR = 6 * 3600 * 300_000  # hour = 0 mod 6
OTHER_HOUR = BUDGET_HOUR + 3600


class Capture:
    def __init__(self) -> None:
        self.counted: list[tuple[str, float, dict[str, str]]] = []

    def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
        self.counted.append((metric, value, dict(dimensions or {})))

    def names(self) -> set[str]:
        return {m for m, _, d in self.counted if ROUTE in d}


def slo(burn: float) -> SloStatus:
    return SloStatus(99, 100, 0.99, 0.5, {"1h": burn, "5m": burn}, {}, {}, {"page": burn, "ticket": burn})


@pytest.mark.parametrize("now, budget", [(BUDGET_HOUR + 300, True), (OTHER_HOUR + 300, False)])
def test_a_healthy_route_emits_its_rpo_and_the_budget_in_one_hour_of_six(now: float, budget: bool) -> None:
    m = Capture()
    publish_health(m, RouteHealth("r", Rpo(30.0, False, {"recent_probe_latency": 30.0}), slo(0.0), no_data=False), now)
    assert m.names() == {"RpoSeconds"} | ({"ErrorBudgetRemaining"} if budget else set())


def test_the_sparse_signals_are_emitted_at_1_and_the_burn_when_above_0() -> None:
    m = Capture()
    publish_health(m, RouteHealth("late", Rpo(900.0, True, {"recent_probe_latency": 900.0}, reasons=["FAILED"]), slo(20.0),
                                  no_data=False), OTHER_HOUR)
    publish_health(m, RouteHealth("silent", Rpo(0.0, False, {}), slo(0.0), no_data=True), OTHER_HOUR)
    assert {(x, v, d[ROUTE]) for x, v, d in m.counted if ROUTE in d} == {
        ("RpoSeconds", 900.0, "late"), ("RpoUnbounded", 1, "late"), ("SloBurnPage", 20.0, "late"), ("SloBurnTicket", 20.0, "late"),
        ("RouteNoData", 1, "silent")}
    for name in ("RpoUnbounded", "RouteNoData", "SloBurnPage", "SloBurnTicket"):
        assert FLEET_METRICS[name].cadence == SPARSE
        alarm = next(a for a in FLEET_ALARMS if a.metric == name)  # a 0 never breaches: its absence is the same OK
        assert alarm.op in (">", ">=") and (alarm.threshold if isinstance(alarm.threshold, int | float) else 1) > 0


def test_counts_nobody_reads_per_route_are_group_level() -> None:
    for name in ("ProbeCompleted", "ReplicaArrivals", "IntervalNarrowedByEvent"):
        assert METRICS[name].dimension_sets == (("service", *PER_GROUP),), name
