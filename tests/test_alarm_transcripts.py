"""What a pager receives, minute by minute: the template's fleet alarms stepped by the local Metrics
Insights evaluator (local/insights.py) over the EMF the code prints, each contributor's state change
one notification (every notifying fleet alarm has AlarmActions and OKActions).

AWS contracts encoded here:
- "Alarm evaluation" / "Configuring how CloudWatch alarms treat missing data"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html):
  an alarm judges the last EvaluationPeriods periods and goes to ALARM when DatapointsToAlarm of them
  breach (M out of N); with ``notBreaching`` a missing datapoint counts as within the threshold
  (https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/lightsail/aws.sdk.kotlin.services.lightsail.model/-alarm/treat-missing-data.html:
  "Missing data does not count towards the number of times the metric is not within the threshold").
- Its section on Metrics Insights alarms, and "Create an alarm based on a Multi Time Series Metrics
  Insights query" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/multi-time-series-alarm.html):
  each series a contributor, notified on ALARM and on OK; a series the query no longer returns goes
  OK whatever TreatMissingData says.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from replmon.adapters.metrics import EmfMetrics
from replmon.core.telemetry import NAMESPACE, ROUTE, ROUTE_GROUP, SERVICE, SERVICE_DIM
from replmon.local.insights import AlarmEvaluator, Point, points_from_emf, template_alarms
from replmon.signals.health import RouteHealth, publish_health
from replmon.signals.slo import Rpo, SloStatus
from tests.cfnutil import default_transformed

T0 = 1_790_000_000 // 3600 * 3600  # a whole hour
Transcript = list[tuple[int, str, str, str]]  # (minute, alarm, route, ALARM | OK)


def alarm(name: str, **override: Any) -> AlarmEvaluator:
    a = template_alarms(default_transformed(), {"RouteGroups": "1"})[f"{name}G00Alarm"]
    for k, v in override.items():
        setattr(a, k, v)
    return a


def transcript(alarms: dict[str, AlarmEvaluator], minutes: int, points_at: Callable[[int], Iterable[Point]]) -> Transcript:
    """Step every alarm after each minute; each contributor's state change is one notification."""
    points: list[Point] = []
    states: dict[tuple[str, str], str] = {}
    out: Transcript = []
    for minute in range(minutes):
        points += points_at(minute)
        for name, a in alarms.items():
            for key, c in a.step(T0 + (minute + 1) * 60 + 1, points).contributors.items():
                route = key[0]
                if states.get((name, route), "OK") != c.state:
                    out.append((minute, name, route, c.state))
                states[(name, route)] = c.state
    return out


def stall_point(minute: int, seconds: float, route: str = "orders-to-dr") -> Point:
    return Point(NAMESPACE, "StallSeconds", {SERVICE_DIM: SERVICE, ROUTE_GROUP: "g00", ROUTE: route}, T0 + minute * 60 + 5, seconds)


def test_routestalled_is_1_of_3_minutes_missing_data_not_breaching() -> None:
    a = alarm("RouteStalled")
    assert (a.period, a.evaluation_periods, a.datapoints_to_alarm, a.treat_missing) == (60, 3, 1, "notBreaching")


def test_transcript_stall_with_missing_minute() -> None:
    """Healthy 3 minutes, stalled from minute 3 to 10 with minute 6 never emitted (a Heartbeat run
    lost), healthy again from 11: one page at minute 3, one OK after 3 healthy minutes (13)."""
    def series(minute: int) -> list[Point]:
        if minute == 6:
            return []
        return [stall_point(minute, 0.0 if minute < 3 or minute > 10 else 60.0 * (minute - 2))]

    assert transcript({"RouteStalled": alarm("RouteStalled")}, 16, series) == [
        (3, "RouteStalled", "orders-to-dr", "ALARM"), (13, "RouteStalled", "orders-to-dr", "OK")]
    # the one-period alarm it replaces: the missing minute sent OK ("recovered") and the next minute paged again
    old = alarm("RouteStalled", evaluation_periods=1, datapoints_to_alarm=1)
    assert transcript({"RouteStalled": old}, 16, series) == [
        (3, "RouteStalled", "orders-to-dr", "ALARM"), (6, "RouteStalled", "orders-to-dr", "OK"),
        (7, "RouteStalled", "orders-to-dr", "ALARM"), (11, "RouteStalled", "orders-to-dr", "OK")]


@pytest.fixture
def emf_points(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[[Callable[[EmfMetrics], None], int], list[Point]]:
    """The EMF one CollectSignals run prints (publish_health), stamped at that minute."""
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", SERVICE)

    def run(emit: Callable[[EmfMetrics], None], minute: int) -> list[Point]:
        capsys.readouterr()
        emit(EmfMetrics(route_groups=1))
        blobs = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
        for b in blobs:
            b["_aws"]["Timestamp"] = (T0 + minute * 60 + 5) * 1000
        return points_from_emf(blobs)
    return run


def test_transcript_late_then_unbounded_then_healthy(emf_points: Callable[..., list[Point]]) -> None:
    """A route late for 15 minutes (its probe in flight 20 minutes and more, past the 15-minute
    target), then that probe FAILED after 35 minutes PENDING (unbounded: RpoSeconds stays, the
    FAILED probe's time PENDING its lower bound), then healthy. RpoAboveTarget pages once and sends
    OK only when the route is healthy; RpoUnbounded pages for the new cause: no OK in the middle.
    Each phase's RPO is signals/slo.py rpo over what its window holds; the collector runs every 5
    minutes, the fleet alarms' period."""
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.signals.slo import rpo

    put_end = T0 - 1200.0
    probe = {"route": "orders-to-dr", "probe_id": "p", "run_id": "x", "planned_at": put_end - 1, "size_bytes": 1,
             "size_class": "1B", "trial": 1, "put_end": put_end}
    failed = ProbeRecord(**probe, status=ProbeStatus.FAILED, latency_lo=T0 + 15 * 60 - put_end)
    slo = SloStatus(9, 10, 0.9, 0.5, {}, {}, {}, {})

    def health(minute: int) -> Rpo:
        now = T0 + minute * 60 + 5
        if minute < 15:
            return rpo(now, 3600, [], [put_end], None, 0)
        if minute < 30:
            return rpo(now, 3600, [failed], [], None, 0)
        done = ProbeRecord(**{**probe, "probe_id": "q", "put_end": now - 100}, status=ProbeStatus.COMPLETED, latency_lo=30, latency_hi=40)
        return rpo(now, 3600, [done], [], None, 0)

    def series(minute: int) -> list[Point]:
        if minute % 5:
            return []
        h = RouteHealth("orders-to-dr", health(minute), slo, no_data=False)
        return emf_points(lambda m: publish_health(m, h), minute)

    assert (health(0).seconds, health(15).unbounded, health(15).seconds, health(30).seconds) == (1205.0, True, 2100.0, 40.0)
    alarms = {n: alarm(n) for n in ("RpoAboveTarget", "RpoUnbounded")}
    assert transcript(alarms, 45, series) == [
        (4, "RpoAboveTarget", "orders-to-dr", "ALARM"),  # evaluated once its 5-minute period has ended
        (19, "RpoUnbounded", "orders-to-dr", "ALARM"),
        (34, "RpoAboveTarget", "orders-to-dr", "OK"), (34, "RpoUnbounded", "orders-to-dr", "OK")]


def test_a_failed_probe_bounds_the_rpo_from_below_only_with_a_pending_answer_seen() -> None:
    """signals/slo.py rpo: a FAILED probe's latency_lo (its last PENDING answer) is a lower bound of
    the unbounded RPO; one FAILED at the first answer (latency_lo 0) bounds nothing."""
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.signals.slo import rpo

    def failed(lo: float) -> ProbeRecord:
        return ProbeRecord(route="r", probe_id="p", run_id="x", planned_at=T0 + 600, size_bytes=1, size_class="1B", trial=1,
                           status=ProbeStatus.FAILED, put_end=T0 + 601, latency_lo=lo)

    now = T0 + 3600
    slow, fast = rpo(now, 3600, [failed(2400.0)], [], None, 0), rpo(now, 3600, [failed(0.0)], [], None, 0)
    assert (slow.unbounded, slow.seconds, slow.inputs["recent_probe_latency"]) == (True, 2400.0, 2400.0)
    assert (fast.unbounded, fast.inputs["recent_probe_latency"]) == (True, None)

