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


def test_the_metrics_insights_alarm_line_is_a_range_with_its_assumed_basis_named() -> None:
    """AWS's pricing page (as stored: pricing.json cloudwatch_mi_alarms) says Metrics Insights alarms
    are charged by the metrics they analyze, not at what rate or proration. The line is priced on the
    assumed basis (hours with data: RpoSeconds and StallSeconds at a healthy route) and `replmon cost`
    shows it beside the other plausible basis (each of the group's alarms bills each route a month)."""
    from replmon.cost.estimate import pricing
    from replmon.cost.fleet import MI_ASSUMED, MI_BASES, MI_LINE

    rate = pricing()["prices"]["cloudwatch_per_mi_alarm_metric_month"]
    assert "ASSUMED" in pricing()["sources"]["cloudwatch_mi_alarms"] and MI_ASSUMED in MI_BASES
    est = fleet_estimate(10, CLASSES)
    (r,) = est.ranges
    line = next(x for x in est.per_route_lines if x.item == MI_LINE)
    assert r.bases == {"hours-with-data": pytest.approx(2 * rate), "every-alarm-whole-month": pytest.approx(len(FLEET_ALARMS) * rate)}
    assert line.dollars == pytest.approx(r.bases[MI_ASSUMED]) and (r.low, r.high) == (min(r.bases.values()), max(r.bases.values()))
    assert est.per_route_range == pytest.approx((est.per_route, est.per_route - r.low + r.high))
    doc = json.loads(cli("cost", "--routes", "1,40", "--format", "json").stdout)
    assert doc["price_ranges"][0]["assumed_basis"] == MI_ASSUMED and doc["assumptions"]["mi_alarm_basis"] == MI_ASSUMED
    lo, hi = doc["fleet"][0]["marginal_usd_per_route_month_range"]
    assert lo == doc["fleet"][0]["marginal_usd_per_route_month"] and hi == pytest.approx(lo + r.high - r.low, abs=0.011)
    table = cli("cost", "--routes", "1,40")
    assert f"${r.low:.2f} per route a month on the assumed basis (hours-with-data)" in " ".join(table.stderr.split())
    assert f"${r.high:.2f} on every-alarm-whole-month" in " ".join(table.stderr.split())


def test_the_heartbeats_hourly_expectation_is_priced_as_one_query_of_72_hour_items() -> None:
    """signals/expectation.py learn_expectation reads the route's 72 hour items of the learning window
    in one strongly consistent Query (not 72 h of records: 4,320 at a heartbeat a minute); the model
    prices that Query, ceil(72 x hour item bytes / 4 KB) read units, at the Heartbeat's re-learning
    cadence. (DynamoDB units are modelled, not counted by the deployed cost test: its line says so.)"""
    from replmon.cost.estimate import pricing
    from replmon.cost.fleet import HEARTBEAT_PREFIX, expectation_read_units, heartbeat_lines, learnings_per_month
    from replmon.signals.expectation import LEARN_HOURS, learn_expectation

    class Hours:
        def __init__(self) -> None:
            self.reads: list[tuple[str, str, str]] = []

        def roll_items(self, route: str, first_sk: str, last_sk: str) -> list[dict[str, object]]:
            self.reads.append((route, first_sk, last_sk))
            return [{"hx_0000050": 4.0} for _ in range(LEARN_HOURS)]

    store = Hours()
    learned = learn_expectation(store, "r", 1_795_428_000.0, floor=20.0, cap=450.0)
    assert len(store.reads) == 1 and learned.items_read == LEARN_HOURS == 72
    a = pricing()["assumptions"]
    assert expectation_read_units(a) == -(-72 * a["hour_item_bytes"] // 4096)
    assert 0.9 * 720 <= learnings_per_month() <= 720  # hourly, each route at its own offset of up to 10 minutes
    line = next(x for x in heartbeat_lines(60, cross_region=False, rtc=False, source_region=None) if "DynamoDB" in x.item)
    beats = 30 * 24 * 60
    learning = line.quantity - (a["heartbeat_write_units"] + a["heartbeat_read_units"]) * beats
    assert learning == pytest.approx(learnings_per_month() * expectation_read_units(a))
    assert learning < 720 * 4320 * a["record_bytes"] / 4096 / 2 / 20  # 72 h of records cost 30x more
    assert line.item.startswith(HEARTBEAT_PREFIX) and "not counted" in line.item
