"""`replmon cost --routes N`: the fleet's monthly cost, per route and in total, from
the same single-route model and the metric and alarm definitions the code uses (cost/fleet.py).
Modelled; the figures are the command's, never typed here."""

from __future__ import annotations

import json

import pytest

from replmon.core.cadence import ProbeClasses
from replmon.core.defaults import DEFAULTS
from replmon.cost.fleet import fleet_estimate, metric_months_per_route
from replmon.fleet.alarms import FLEET_ALARMS
from tests.test_cli import cli

CLASSES = ProbeClasses.parse(DEFAULTS.probe_classes)


def test_the_cost_is_linear_in_routes_with_one_marginal_cost_per_route() -> None:
    one, hundred, thousand = (fleet_estimate(n, CLASSES, heartbeat_seconds=None) for n in (1, 100, 1000))
    assert one.per_route == pytest.approx(thousand.per_route) and one.fixed == pytest.approx(thousand.fixed)
    assert thousand.total - hundred.total == pytest.approx(900 * one.per_route)
    assert thousand.total / 1000 < one.total  # the fixed part spreads over the routes
    # with heartbeats the Heartbeat function's time grows with the routes of a group (32 HEADs at a
    # time), up to its 45 s deadline (probe/heartbeat.py WORK_SECONDS)
    beat = [next(x for x in fleet_estimate(n, CLASSES, route_groups=2).fixed_lines if x.item.startswith("Heartbeat invocations"))
            for n in (2, 64, 640)]
    assert beat[0].dollars == pytest.approx(beat[1].dollars) and beat[1].dollars < beat[2].dollars
    assert all(float(x.item.split(", ")[1].split(" s ")[0]) <= 45.0 for x in beat), [x.item for x in beat]
    assert beat[0].quantity == 2 * 30 * 24 * 60  # one invocation per group a minute


def test_heartbeat_lines_are_what_a_heartbeat_a_minute_does() -> None:
    """Per route, per month at HeartbeatSeconds = 60: 43,200 heartbeats, each one source PUT and one
    replica PUT (billed at the destination), HEADs (pricing.json heartbeat_heads), 1 KiB of RTC'd and
    (cross-Region) transferred bytes; plus the StallSeconds metric and one RouteStalled alarm-metric."""
    from replmon.cost.estimate import pricing
    from replmon.cost.fleet import HEARTBEAT_PREFIX, heartbeat_lines, heartbeat_play

    p, a = pricing()["prices"], pricing()["assumptions"]
    lines = {x.item.removeprefix(HEARTBEAT_PREFIX): x for x in heartbeat_lines(60, cross_region=True, rtc=True, source_region=None)}
    beats = 30 * 24 * 60
    assert lines["S3 PUT (source and replica)"].quantity == 2 * beats
    assert lines["S3 PUT (source and replica)"].dollars == pytest.approx(2 * beats / 1000 * p["s3_put_copy_post_list_per_1000"])
    heads = heartbeat_play(a["replication_base_seconds"], a["head_seconds"])[1]  # played from the code, the replica's included
    assert 2 <= heads <= 6 and lines["S3 HEAD (source and replica)"].quantity == heads * beats
    assert lines["S3 inter-region transfer"].quantity == pytest.approx(beats / 2**20)
    half = heartbeat_lines(30, cross_region=False, rtc=True, source_region=None)
    assert next(x for x in half if "PUT" in x.item).quantity == 4 * beats and not any("transfer" in x.item for x in half)
    on, off = fleet_estimate(10, CLASSES), fleet_estimate(10, CLASSES, heartbeat_seconds=None)
    assert on.assumptions["metric_months_per_route"]["StallSeconds"] == 1.0
    assert "StallSeconds" not in off.assumptions["metric_months_per_route"]
    assert on.assumptions["mi_metric_months_analyzed_per_route"]["RouteStalled"] == 1.0  # StallSeconds, every hour
    assert "RouteStalled" not in off.assumptions["mi_metric_months_analyzed_per_route"]
    own = sum(x.dollars for x in on.per_route_lines if x.item.startswith(HEARTBEAT_PREFIX))
    assert on.per_route - off.per_route == pytest.approx(own + p["cloudwatch_per_metric_month"] + p["cloudwatch_per_mi_alarm_metric_month"])


def test_metrics_are_billed_for_the_hours_they_are_emitted_in() -> None:
    """CloudWatch bills custom metrics per hour with data: a per-route continuous metric counts 1,
    a class probed every 6 h 1/6 of a month, ErrorBudgetRemaining (hours = 0 mod 6) 4/24, S3's 4
    replication metrics only with RTC; sparse failure metrics nothing in a healthy month."""
    months = metric_months_per_route(CLASSES, rtc=True)
    assert months["RpoSeconds"] == 1.0 and months["ErrorBudgetRemaining"] == pytest.approx(4 / 24)
    assert months["ReplicationLatencySeconds[1MiB]"] == 1.0 and months["ReplicationLatencySeconds[64MiB]"] == pytest.approx(1 / 6)
    assert months["S3 replication metrics (RTC)"] == 4.0 and "ProbeFailed" not in months
    assert "S3 replication metrics (RTC)" not in metric_months_per_route(CLASSES, rtc=False)
    line = next(x for x in fleet_estimate(1, CLASSES).per_route_lines if x.item.startswith("CloudWatch metrics"))
    assert line.quantity == pytest.approx(sum(months.values()))


def test_alarms_and_transfer_follow_the_fleet_and_the_source_region() -> None:
    est = fleet_estimate(10, CLASSES, cross_region=True, source_region="ap-northeast-1")
    # per metric analyzed: only the continuous series are there to analyze at a healthy route (the
    # sparse ones, failures and 0/1 signals, have no data); RpoSeconds and StallSeconds every hour
    mi = next(x for x in est.per_route_lines if x.item.startswith("Metrics Insights alarms"))
    analyzed = est.assumptions["mi_metric_months_analyzed_per_route"]
    assert analyzed == {"RpoAboveTarget": 1.0, "RouteStalled": 1.0} and mi.quantity == pytest.approx(2.0)
    assert {a.name for a in FLEET_ALARMS} >= set(analyzed)
    transfer = next(x for x in est.per_route_lines if x.item.startswith("S3 inter-region transfer"))
    rtc = next(x for x in est.per_route_lines if x.item == "S3 RTC fee")
    assert transfer.quantity == pytest.approx(rtc.quantity) and transfer.dollars == pytest.approx(0.09 * transfer.quantity)
    assert "(from ap-northeast-1, $0.09/GB)" in transfer.item


def test_cost_routes_prints_each_fleet_size_and_refuses_bad_counts() -> None:
    r = cli("cost", "--routes", "1,10,100,1000", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    rows = doc["fleet"]
    assert [x["routes"] for x in rows] == [1, 10, 100, 1000] and doc["modelled"] is True
    assert len({x["marginal_usd_per_route_month"] for x in rows}) == 1
    assert rows[-1]["usd_per_route_month"] < rows[0]["usd_per_route_month"]
    assert sum(x["usd_per_month"] for x in doc["per_route_lines"]) == pytest.approx(rows[0]["marginal_usd_per_route_month"], abs=0.01)
    bad = cli("cost", "--routes", "ten")
    assert bad.returncode == 2 and "--routes: 'ten' is not a comma-separated list" in bad.stderr
    assert cli("cost", "--routes", "5000").returncode == 2


def test_the_planners_monthly_ceiling_prices_each_route_as_replmon_cost_does() -> None:
    """fleet/caps.py's monthly_usd check: a route's cost is fleet_estimate's per-route share for its
    classes, Regions, RTC and heartbeats; the fixed part is the deployment's at that many routes, so
    routes' costs plus the fixed part are `replmon cost --routes N`'s total."""
    from replmon.cost.fleet import fixed_monthly_usd, route_monthly_usd

    for cross, rtc, beats in ((False, False, None), (True, True, 60), (True, False, 60)):
        one = route_monthly_usd(CLASSES, cross_region=cross, rtc=rtc, source_region="us-east-1" if cross else None,
                                heartbeat_seconds=beats)
        est = fleet_estimate(1, CLASSES, cross_region=cross, rtc=rtc, source_region="us-east-1" if cross else None,
                             heartbeat_seconds=beats)
        assert one == pytest.approx(est.per_route)
    fixed = fixed_monthly_usd(100, CLASSES, route_groups=2)
    total = fleet_estimate(100, CLASSES, cross_region=True, rtc=True, source_region="us-east-1", route_groups=2).total
    assert 100 * route_monthly_usd(CLASSES, cross_region=True, rtc=True, source_region="us-east-1") + fixed == pytest.approx(total)
    # RTC and the transfer make a cross-Region RTC route the dearest of the four
    kinds = {(c, r): route_monthly_usd(CLASSES, cross_region=c, rtc=r, source_region="us-east-1" if c else None)
             for c in (False, True) for r in (False, True)}
    assert max(kinds, key=lambda k: kinds[k]) == (True, True) and min(kinds, key=lambda k: kinds[k]) == (False, False)


def test_the_model_prices_each_function_at_the_memory_the_template_gives_it() -> None:
    """Lambda bills GB-seconds at the function's configured memory: the model's memory for the
    Heartbeat and CollectSignals is template.yaml's MemorySize (the layer carries no template)."""
    from replmon.cost.fleet import pricing
    from replmon.local.template import load_template
    from tests.conftest import TEMPLATE

    resources = load_template(TEMPLATE)["Resources"]
    a = pricing()["assumptions"]
    assert a["heartbeat_memory_mb"] == resources["HeartbeatFunction"]["Properties"]["MemorySize"]
    assert a["collector_memory_mb"] == resources["CollectSignalsFunction"]["Properties"]["MemorySize"]
