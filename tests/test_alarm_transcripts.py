"""What a pager receives, minute by minute: the template's fleet alarms stepped by the local Metrics
Insights evaluator (local/insights.py) over the EMF the code prints; each evaluation's notifications
(alarm level and contributor level) delivered where the template sends them: an alarm's SNS actions
(both levels), and the FleetPagesGNNRule EventBridge rules (contributor events only) to the page topic.
A transcript is what arrives on the page topic.

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
- "Acting on alarm changes" (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Acting_Alarm_Changes.html):
  a multi-time-series alarm's SNS notifications run at alarm level and at contributor level; and
  "Amazon CloudWatch events" (https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-cloudwatch.html):
  CloudWatch sends "CloudWatch Alarm Contributor State Change" to EventBridge, apart from "CloudWatch
  Alarm State Change" (durable delivery).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
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
PAGE, TICKET = "page topic", "ticket topic"


def alarm(name: str, **override: Any) -> AlarmEvaluator:
    a = template_alarms(default_transformed(), {"RouteGroups": "1"})[f"{name}G00Alarm"]
    for k, v in override.items():
        setattr(a, k, v)
    return a


def _topic(action: Any) -> str:
    """``!If [CreatePageTopic, !Ref PageTopic, !Ref PageTopicArn]`` -> the page topic."""
    text = json.dumps(action)
    return PAGE if "PageTopic" in text else TICKET if "TicketTopic" in text else text


def deliveries(template: dict[str, Any], logical_id: str) -> dict[tuple[str, str], set[str]]:
    """Where the template sends an alarm's notifications, by (level, state): its AlarmActions /
    OKActions at both levels (SNS actions run at alarm and contributor level), and any EventBridge
    rule matching its contributor events by ARN to that rule's targets."""
    props = template["Resources"][logical_id]["Properties"]
    out: dict[tuple[str, str], set[str]] = {}
    for state, key in (("ALARM", "AlarmActions"), ("OK", "OKActions")):
        for level in ("alarm", "contributor"):
            out[(level, state)] = {_topic(a) for a in props.get(key, [])}
    for res in template["Resources"].values():
        if res["Type"] != "AWS::Events::Rule":
            continue
        pattern = res["Properties"]["EventPattern"]
        got = [r.get("Fn::GetAtt") for r in pattern.get("resources", [])]
        arns = [g if isinstance(g, str) else ".".join(g) for g in got if g]  # !GetAtt X.Arn, or [X, Arn]
        if pattern.get("source") == ["aws.cloudwatch"] and f"{logical_id}.Arn" in arns:
            levels = {"CloudWatch Alarm Contributor State Change": "contributor", "CloudWatch Alarm State Change": "alarm"}
            for kind in pattern["detail-type"]:
                for state in ("ALARM", "OK"):
                    out[(levels[kind], state)] |= {_topic(t["Arn"]) for t in res["Properties"]["Targets"]}
    return out


def transcript(alarms: dict[str, AlarmEvaluator], minutes: int, points_at: Callable[[int], Iterable[Point]],
               topic: str = PAGE) -> Transcript:
    """Step every alarm after each minute; each notification (alarm level: route "") that the
    template delivers to ``topic``, in order."""
    template = default_transformed()
    routing = {name: deliveries(template, f"{name}G00Alarm") for name in alarms}
    points: list[Point] = []
    out: Transcript = []
    for minute in range(minutes):
        points += points_at(minute)
        for name, a in alarms.items():
            for n in a.step(T0 + (minute + 1) * 60 + 1, points).notifications:
                if topic in routing[name][(n.level, n.state)]:
                    out.append((minute, name, n.attributes.get(ROUTE, ""), n.state))
    return out


def stall_point(minute: int, seconds: float, route: str = "orders-to-dr") -> Point:
    return Point(NAMESPACE, "StallSeconds", {SERVICE_DIM: SERVICE, ROUTE_GROUP: "g00", ROUTE: route}, T0 + minute * 60 + 5, seconds)


def test_routestalled_is_1_of_3_minutes_missing_data_not_breaching() -> None:
    a = alarm("RouteStalled")
    assert (a.period, a.evaluation_periods, a.datapoints_to_alarm, a.treat_missing) == (60, 3, 1, "notBreaching")


def test_every_alarm_on_a_sparse_signal_treats_missing_data_as_not_breaching() -> None:
    """A sparse signal (signals/health.py SPARSE_METRICS) is absent while healthy and between its
    transitions: its alarms must count a missing datapoint as within the threshold (``notBreaching``:
    "Configuring how CloudWatch alarms treat missing data", above), so absence never pages, and its
    explicit 0 is what clears them. The fleet alarms and the stack's standard ones alike."""
    from replmon.signals.health import SPARSE_METRICS
    from tests.cfnutil import resolver

    t = default_transformed()
    r = resolver(t)
    seen = {}
    for name, res in t["Resources"].items():
        if res["Type"] != "AWS::CloudWatch::Alarm" or not r.exists(name):
            continue
        props = res["Properties"]
        metric = props.get("MetricName") or next((json.dumps(m.get("Expression", "")) for m in props.get("Metrics", [])), "")
        for sparse in SPARSE_METRICS:
            if sparse == metric or f"({sparse})" in metric:
                seen[name] = props.get("TreatMissingData", "missing")
    assert {"RpoUnboundedG00Alarm", "RouteNoDataG00Alarm", "SloFastBurnG00Alarm", "SloSlowBurnG00Alarm", "PendingBytesAlarm"} <= set(seen)
    assert {n: tm for n, tm in seen.items() if tm != "notBreaching"} == {}


def test_transcript_stall_with_missing_minute() -> None:
    """Healthy 3 minutes, stalled from minute 3 to 10 with minute 6 never emitted (a Heartbeat run
    lost), healthy again from 11: one page at minute 3, one OK after 3 healthy minutes (13)."""
    def series(minute: int) -> list[Point]:
        if minute == 6:
            return []
        return [stall_point(minute, 0.0 if minute < 3 or minute > 10 else 60.0 * (minute - 2))]

    assert transcript({"RouteStalled": alarm("RouteStalled")}, 16, series) == [
        (3, "RouteStalled", "orders-to-dr", "ALARM"), (13, "RouteStalled", "orders-to-dr", "OK")]
    # The one-period alarm it replaces: over its evaluation range (3 periods) one missing minute is
    # bridged by the last real datapoint, but its OK comes after one healthy minute, and three missing
    # minutes (a Heartbeat down briefly) leave no datapoint in the range: OK ("recovered"), then a page again.
    old = alarm("RouteStalled", evaluation_periods=1, datapoints_to_alarm=1)
    assert transcript({"RouteStalled": old}, 16, series) == [
        (3, "RouteStalled", "orders-to-dr", "ALARM"), (11, "RouteStalled", "orders-to-dr", "OK")]

    def gap(minute: int) -> list[Point]:
        return [] if minute in (6, 7, 8) else series(minute)

    assert transcript({"RouteStalled": alarm("RouteStalled", evaluation_periods=1, datapoints_to_alarm=1)}, 16, gap) == [
        (3, "RouteStalled", "orders-to-dr", "ALARM"), (8, "RouteStalled", "orders-to-dr", "OK"),
        (9, "RouteStalled", "orders-to-dr", "ALARM"), (11, "RouteStalled", "orders-to-dr", "OK")]
    assert transcript({"RouteStalled": alarm("RouteStalled")}, 16, gap) == [
        (3, "RouteStalled", "orders-to-dr", "ALARM"), (13, "RouteStalled", "orders-to-dr", "OK")]


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


def collector(emf_points: Callable[..., list[Point]], health_at: Callable[[int], RouteHealth | list[RouteHealth]],
              keep: bool = True, every: int = 5) -> Callable[[int], list[Point]]:
    """CollectSignals every ``every`` minutes: each route's health, published with what the route's last
    run emitted above 0 (signals/collector.py keeps it in the period item: an explicit 0 when a sparse
    signal falls back). ``keep`` False: no memory (the sparse signals just stop)."""
    up: dict[str, frozenset[str]] = {}

    def run(minute: int) -> list[Point]:
        if minute % every:
            return []
        got = health_at(minute)
        healths = got if isinstance(got, list) else [got]

        def emit(m: EmfMetrics) -> None:
            for h in healths:
                h.sparse_up = up.get(h.route, frozenset()) if keep else None
                up[h.route] = publish_health(m, h)
        return emf_points(emit, minute)
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

    assert (health(0).seconds, health(15).unbounded, health(15).seconds, health(30).seconds) == (1205.0, True, 2100.0, 40.0)
    alarms = {n: alarm(n) for n in ("RpoAboveTarget", "RpoUnbounded")}
    series = collector(emf_points, lambda minute: RouteHealth("orders-to-dr", health(minute), slo, no_data=False))
    assert transcript(alarms, 45, series) == [
        (4, "RpoAboveTarget", "orders-to-dr", "ALARM"),  # evaluated once its 5-minute period has ended
        (19, "RpoUnbounded", "orders-to-dr", "ALARM"),
        # the run at 30 emits RpoUnbounded = 0 (it fell back): its period is judged at 34
        (34, "RpoAboveTarget", "orders-to-dr", "OK"), (34, "RpoUnbounded", "orders-to-dr", "OK")]
    # had RpoUnbounded simply stopped, its last 1 (run 25) stays the most recent datapoint in the
    # evaluation range (3 periods) until 44: OK two periods late
    quiet = collector(emf_points, lambda minute: RouteHealth("orders-to-dr", health(minute), slo, no_data=False), keep=False)
    assert transcript({n: alarm(n) for n in alarms}, 45, quiet)[-1] == (44, "RpoUnbounded", "orders-to-dr", "OK")


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



def _route_rpo(minute: int, failure_events: int = 0, in_flight: float | None = None) -> Rpo:
    """signals/slo.py rpo of a route whose probes replicate in 40 s, with ``failure_events``
    OperationFailedReplication events in its window and a probe in flight ``in_flight`` seconds."""
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.signals.slo import rpo

    now = T0 + minute * 60 + 5
    done = ProbeRecord(route="r", probe_id="q", run_id="x", planned_at=now - 101, size_bytes=1, size_class="1B", trial=1,
                       status=ProbeStatus.COMPLETED, put_end=now - 100, latency_lo=30, latency_hi=40)
    return rpo(now, 3600, [done], [] if in_flight is None else [now - in_flight], None, failure_events)


SLO = SloStatus(9, 10, 0.9, 0.5, {}, {}, {}, {})
EVENT_ALARMS = ("RpoAboveTarget", "RpoUnbounded", "ReplicationFailedEvent", "MissedThresholdEvent")


def test_transcript_route_that_only_fails_events(emf_points: Callable[..., list[Point]]) -> None:
    """A route whose probes stay fast (RPO 40 s) while S3 sends 3 OperationFailedReplication events
    at minute 2 (IngestEvents counts them: signals/event_ingest.py, ReplicationEvents by Event). The
    collector (every 5 minutes) reads them in the RPO window (1 h): the route is unbounded until the
    events leave it. The page topic receives one page, RpoUnbounded's contributor, and its OK; the
    ReplicationFailedEvent alarm that sees the same cause notifies nobody (covered by RpoUnbounded),
    RpoAboveTarget stays OK (the route is not late)."""
    from replmon.core.telemetry import EVENT

    event_at = T0 + 2 * 60 + 5

    def health(minute: int) -> RouteHealth:
        now = T0 + minute * 60 + 5
        return RouteHealth("orders-to-dr", _route_rpo(minute, 3 if now - 3600 <= event_at <= now else 0), SLO, no_data=False)

    def with_events(runs: Callable[[int], list[Point]]) -> Callable[[int], list[Point]]:
        def series(minute: int) -> list[Point]:
            out = []
            if minute == 2:  # signals/event_ingest.py: deps.metrics.count("ReplicationEvents", n, {ROUTE: route, EVENT: kind})
                out += emf_points(lambda m: m.count("ReplicationEvents", 3, {ROUTE: "orders-to-dr", EVENT: "OperationFailedReplication"}), 2)
            return out + runs(minute)
        return series

    assert (_route_rpo(5, 3).unbounded, _route_rpo(5, 3).seconds, _route_rpo(65).unbounded) == (True, 40.0, False)
    assert transcript({n: alarm(n) for n in EVENT_ALARMS}, 85, with_events(collector(emf_points, health))) == [
        (9, "RpoUnbounded", "orders-to-dr", "ALARM"),  # the collector's run at minute 5, its period judged at 9
        (69, "RpoUnbounded", "orders-to-dr", "OK"),  # the events left the hour's window at 62: run 65 emits 0, judged at 69
    ]
    # without the 0, the last 1 (run 60) is judged until it leaves the evaluation range: OK at 79
    assert transcript({n: alarm(n) for n in EVENT_ALARMS}, 85, with_events(collector(emf_points, health, keep=False)))[-1] == \
        (79, "RpoUnbounded", "orders-to-dr", "OK")
    # the cause was seen by the event alarm too, which notifies nobody: not a page, not a ticket
    assert [t for t in transcript({n: alarm(n) for n in EVENT_ALARMS}, 85, with_events(collector(emf_points, health)), topic=TICKET)
            if t[1] != "RpoUnbounded"] == []


def test_transcript_150_routes_go_bad_at_once(emf_points: Callable[..., list[Point]]) -> None:
    """150 routes of one group late at once (RPO 1,000 + i seconds for route i, over the 900 s
    target) for 15 minutes, then healthy. At most 100 contributors are in ALARM at once: the page
    topic receives 100 pages, the 100 worst routes (the query's ORDER BY MAX() DESC), and their 100
    OKs; the other 50 are in `replmon report --fleet` and on the dashboard, not paged. Nothing at
    alarm level: the alarm-level ALARM and OK are not forwarded to the page topic."""
    routes = [f"r{i:03d}" for i in range(150)]

    def rpo_at(minute: int, i: int) -> Rpo:  # a probe in flight 1,000 + i seconds while late
        return _route_rpo(minute, in_flight=1000.0 + i if minute < 15 else None)

    collect = collector(emf_points, lambda minute: [RouteHealth(r, rpo_at(minute, i), SLO, no_data=False) for i, r in enumerate(routes)])
    printed = {minute: collect(minute) for minute in range(0, 25, 5)}

    def series(minute: int) -> list[Point]:
        return printed.get(minute, [])

    assert (rpo_at(10, 149).seconds, rpo_at(15, 149).seconds) == (1149.0, 40.0)
    alarms = {"RpoAboveTarget": alarm("RpoAboveTarget")}
    pages = transcript(alarms, 25, series)
    worst = set(routes[50:])
    assert [p for p in pages if p[3] == "ALARM"] == [(4, "RpoAboveTarget", r, "ALARM") for r in reversed(routes[50:])]
    assert sorted(p for p in pages if p[3] == "OK") == sorted((19, "RpoAboveTarget", r, "OK") for r in worst)
    assert len(pages) == 200 and not [p for p in pages if p[2] == ""]
    # the alarm as a whole went ALARM and OK once each: CloudWatch notifies that too, but not here
    a = alarm("RpoAboveTarget")
    seen: list[Point] = []
    levels = []
    for minute in range(25):
        seen += series(minute)
        levels += [n.level for n in a.step(T0 + (minute + 1) * 60 + 1, seen).notifications]
    assert levels.count("alarm") == 2 and levels.count("contributor") == 200


def test_the_heartbeat_evidence_goes_to_the_ticket_topic_and_pages_arrive_as_contributor_events() -> None:
    """One cause, one page: the Heartbeat's evidence goes to the ticket topic (its env and its IAM
    statement), no page alarm has SNS actions (they would also notify at alarm level), and every
    page-severity fleet alarm that notifies reaches the page topic only through a rule forwarding
    its contributor events. ("Acting on alarm changes" and "Amazon CloudWatch events", above.)"""
    from replmon.fleet.alarms import FLEET_ALARMS, paging
    from tests.cfnutil import function_environment, resolver

    t = default_transformed()
    env = function_environment(t, "Heartbeat", resolver(t))
    assert "TicketTopic" in env["REPLMON_EVIDENCE_TOPIC_ARN"] and "REPLMON_PAGE_TOPIC_ARN" not in env
    role = json.dumps(t["Resources"]["HeartbeatFunctionRole"]["Properties"]["Policies"])
    assert "TicketTopic" in role and "PageTopic" not in role
    for a in FLEET_ALARMS:
        routes = deliveries(t, f"{a.name}G00Alarm")
        if paging(a):
            assert routes == {("alarm", "ALARM"): set(), ("alarm", "OK"): set(),
                              ("contributor", "ALARM"): {PAGE}, ("contributor", "OK"): {PAGE}}, a.name
        else:
            assert PAGE not in set().union(*routes.values()), a.name


def test_transcript_sparse_signal_falls_back(emf_points: Callable[..., list[Point]]) -> None:
    """A route through CollectSignals itself (signals/collector.py ``collect`` on an in-memory table):
    its probes replicate in 40 s, one probe FAILED at minute 2 makes it unbounded while that record is
    in the 20-minute RPO window, then it is healthy. RpoUnbounded pages at the end of the first
    period the collector saw the failure in, and sends OK at the end of the period its run emitted
    the one explicit 0 in (the flag kept in the route's period item: signals/slo_rollup.py SPARSE_UP);
    after that the series is quiet again: one datapoint per transition, not per run."""
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.core.partitions import PERIOD, roll_partition
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.core.route import Route
    from replmon.signals.collector import collect
    from replmon.signals.rollup import store_record
    from replmon.signals.slo import SloSpec
    from replmon.signals.slo_rollup import SPARSE_UP

    name, window = "orders-to-dr", 1200.0
    store = MemoryLatencyTable()

    def record(run: str, at: float, status: ProbeStatus, lo: float, hi: float | None) -> ProbeRecord:
        run_id = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(at))}-{run}"  # its key: the run's stamp (core/keys.py)
        return ProbeRecord(route=name, probe_id=f"{run_id}-{name}-1KiB-t1", run_id=run_id, planned_at=at,
                           size_bytes=1024, size_class="1KiB", trial=1, status=status, put_end=at + 1, latency_lo=lo, latency_hi=hi,
                           target_seconds=900)

    for minute in range(0, 60, 5):  # a probe every 5 minutes, 40 s each; the one planned at minute 2 FAILED
        at = T0 + minute * 60 + 1.0
        store_record(store, record(f"{minute:04d}", at, ProbeStatus.COMPLETED, 30.0, 40.0), at + 1, threshold_seconds=900.0)
    failed = T0 + 2 * 60.0
    store_record(store, record("9999", failed, ProbeStatus.FAILED, 0.0, None), failed + 1, threshold_seconds=900.0)
    route = Route.model_validate({"name": name, "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]})
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    kept: dict[int, str | None] = {}
    emitted: list[tuple[int, float]] = []

    def series(minute: int) -> list[Point]:
        if minute % 5 or minute < 5:
            return []
        out = emf_points(lambda m: collect([route], store, None, m, T0 + minute * 60 + 5, spec, window, 1), minute)
        kept[minute] = (store.get_item(roll_partition(name), PERIOD) or {}).get(SPARSE_UP)
        emitted.extend((minute, p.value) for p in out if p.metric == "RpoUnbounded")
        return out

    pages = transcript({"RpoUnbounded": alarm("RpoUnbounded")}, 45, series)
    # runs 5..20 see the FAILED record (planned at 2, in [now - 20 min, now]); run 25 no longer: its 0
    assert pages == [(9, "RpoUnbounded", name, "ALARM"), (29, "RpoUnbounded", name, "OK")]
    assert emitted == [(5, 1.0), (10, 1.0), (15, 1.0), (20, 1.0), (25, 0.0)]  # one 0, then nothing
    # the flag in the period item (the burn pair, raised by the same failure, is kept there too and falls back later)
    assert ["RpoUnbounded" in (kept[m] or "").split() for m in (5, 20, 25, 40)] == [True, True, False, False]
    assert kept[40] is None


def test_the_sparse_flag_never_costs_a_late_writers_count() -> None:
    """The flag is written into the period item on the fold's own conditions (signals/slo_rollup.py
    save_sparse_up): a late record counted into the item after the collector read it (``gen`` up)
    makes the write fail, the late count stays, and the flag is written by the next run."""
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.core.partitions import PERIOD, roll_partition
    from replmon.signals.rollup import GEN
    from replmon.signals.slo import SloSpec
    from replmon.signals.slo_rollup import SPARSE_UP, rollup_slo_status, save_sparse_up, sparse_up

    store, route = MemoryLatencyTable(), "orders-to-dr"
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    _, fold = rollup_slo_status(store, route, T0 + 8 * 3600, spec, save=True)
    assert fold.cache_written and fold.item is not None and sparse_up(fold.item) == frozenset()
    assert save_sparse_up(store, route, fold.item, frozenset({"RpoUnbounded"}))
    kept = store.get_item(roll_partition(route), PERIOD) or {}
    assert kept[SPARSE_UP] == "RpoUnbounded" and {k: kept[k] for k in fold.item} == fold.item  # the cache as folded, plus the flag
    late = {**kept, GEN: int(kept.get(GEN, 0)) + 1, "late_mark": 1}  # a late writer counted into the item meanwhile
    store.put_item(late)
    assert not save_sparse_up(store, route, kept, frozenset())  # read before the late write: refused
    assert store.get_item(roll_partition(route), PERIOD) == late
    # the next run's fold carries the flag over when it rewrites the cache
    _, fold = rollup_slo_status(store, route, T0 + 9 * 3600, spec, save=True)
    assert sparse_up(fold.item) == frozenset({"RpoUnbounded"}) and save_sparse_up(store, route, fold.item, frozenset())
    assert SPARSE_UP not in (store.get_item(roll_partition(route), PERIOD) or {})


# ------------------------------------------------------------------------------ count alarms (SUM, 1 of 1)
# The event-count signals (ProbeError, ProbeStuck, ProbeFailed, RecordSpooled, RecordLost, CleanupFailed,
# RunSkipped, InvalidRoute, ReplicationEvents) are counted only when non-zero and never as 0. Under AWS's
# rule ("Configuring how CloudWatch alarms treat missing data",
# https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html: each
# evaluation retrieves more periods than EvaluationPeriods; with at least EvaluationPeriods real datapoints
# in that range the most recent real ones are judged and TreatMissingData is ignored) one count is the
# most recent real datapoint until it leaves the evaluation range: the contributor stays in ALARM that
# long, and a repeat meanwhile changes nothing. fleet/alarms.py FleetAlarm.clears says so in each alarm's
# Runbook (docs/ALARMS.md); these transcripts hold the evaluator and that text to each other.

ROUTE_NAME = "orders-to-dr"


def count_points(emf_points: Callable[..., list[Point]], metric: str, minute: int, n: float = 1,
                 extra: dict[str, str] | None = None) -> list[Point]:
    """What the emitting code prints for ``n`` events of ``metric`` on the route at ``minute``
    (deps.metrics.count(metric, n, {Route: ...}): probe/steps.py, probe/heartbeat.py, fleet/lease.py,
    core/registry.py, signals/event_ingest.py)."""
    return emf_points(lambda m: m.count(metric, n, {ROUTE: ROUTE_NAME, **(extra or {})}), minute)


def counted(emf_points: Callable[..., list[Point]], metric: str, at: dict[int, float],
            extra: dict[str, str] | None = None) -> Callable[[int], list[Point]]:
    printed = {minute: count_points(emf_points, metric, minute, n, extra) for minute, n in at.items()}
    return lambda minute: printed.get(minute, [])


def contributor_changes(a: AlarmEvaluator, minutes: int, series: Callable[[int], Iterable[Point]]) -> Transcript:
    """Every contributor state change, wherever (or whether) the template delivers it."""
    points: list[Point] = []
    out: Transcript = []
    for minute in range(minutes):
        points += series(minute)
        out += [(minute, "", n.attributes.get(ROUTE, ""), n.state)
                for n in a.step(T0 + (minute + 1) * 60 + 1, points).notifications if n.level == "contributor"]
    return out


def test_transcript_one_probe_error_then_quiet(emf_points: Callable[..., list[Point]]) -> None:
    """One ProbeError at minute 2, then nothing: the ticket topic hears ALARM when the 5-minute period
    ends (minute 4) and OK only when that datapoint leaves the evaluation range, 3 periods after its
    period ended (minute 19): 15 minutes of ALARM for one error."""
    got = transcript({"ProbeError": alarm("ProbeError")}, 30, counted(emf_points, "ProbeError", {2: 1}), topic=TICKET)
    assert got == [(4, "ProbeError", "", "ALARM"), (4, "ProbeError", ROUTE_NAME, "ALARM"), (19, "ProbeError", ROUTE_NAME, "OK")]
    # at 19 the query returns no series at all: the alarm as a whole goes INSUFFICIENT_DATA (it has no
    # InsufficientDataActions), so only the route's OK arrives
    # had the code emitted an explicit 0 on its next run (minute 7), OK would come at that period's end
    sooner = counted(emf_points, "ProbeError", {2: 1, 7: 0})
    assert contributor_changes(alarm("ProbeError"), 30, sooner) == [(4, "", ROUTE_NAME, "ALARM"), (9, "", ROUTE_NAME, "OK")]


def test_transcript_repeat_probe_error_inside_the_window_sends_no_notification(emf_points: Callable[..., list[Point]]) -> None:
    """ProbeError at minutes 2 and 12: the second error sends nothing (the route is still in ALARM from
    the first) and moves the OK to 3 periods after its own period (minute 29). A third error after the
    OK (minute 32) tickets again."""
    got = transcript({"ProbeError": alarm("ProbeError")}, 50, counted(emf_points, "ProbeError", {2: 1, 12: 1, 32: 1}), topic=TICKET)
    assert [t for t in got if t[2]] == [(4, "ProbeError", ROUTE_NAME, "ALARM"), (29, "ProbeError", ROUTE_NAME, "OK"),
                                        (34, "ProbeError", ROUTE_NAME, "ALARM"), (49, "ProbeError", ROUTE_NAME, "OK")]


def test_transcript_two_skipped_runs_keep_the_hourly_alarm_for_3_hours(emf_points: Callable[..., list[Point]]) -> None:
    """RunSkipped (>= 2 per hour): two skips at minutes 10 and 25 of hour 0 ticket when the hour ends
    (minute 59) and clear 3 hours after it (minute 239): an hour's period keeps its datapoint in the
    3-period evaluation range for 3 hours. One skip in hour 1 (under the threshold) is a real datapoint
    within it: it is judged instead, and OK comes when hour 1 ends (minute 119)."""
    quiet = contributor_changes(alarm("RunSkipped"), 245, counted(emf_points, "RunSkipped", {10: 1, 25: 1}))
    assert quiet == [(59, "", ROUTE_NAME, "ALARM"), (239, "", ROUTE_NAME, "OK")]
    under = contributor_changes(alarm("RunSkipped"), 245, counted(emf_points, "RunSkipped", {10: 1, 25: 1, 70: 1}))
    assert under == [(59, "", ROUTE_NAME, "ALARM"), (119, "", ROUTE_NAME, "OK")]


def test_transcript_invalid_route_fixed_clears_3_hours_after_its_last_plan_hour(emf_points: Callable[..., list[Point]]) -> None:
    """InvalidRoute, counted by every plan (every 15 minutes) while the item is bad: bad for plans 0..45,
    fixed before plan 60. ALARM at the end of hour 0 (minute 59), OK 3 hours after it (minute 239)."""
    from replmon.core.telemetry import REASON

    at = {m: 1.0 for m in (0, 15, 30, 45)}
    got = contributor_changes(alarm("InvalidRoute"), 245, counted(emf_points, "InvalidRoute", at, {REASON: "BadName"}))
    assert got == [(59, "", ROUTE_NAME, "ALARM"), (239, "", ROUTE_NAME, "OK")]


@pytest.mark.parametrize("name", ["ProbeFailed", "ProbeStuck", "ProbeError", "RecordSpooled", "RecordLost", "CleanupFailed",
                                  "RunSkipped", "InvalidRoute", "ReplicationFailedEvent", "MissedThresholdEvent"])
def test_each_count_alarm_clears_when_its_runbook_says(name: str, emf_points: Callable[..., list[Point]]) -> None:
    """Each count alarm's Runbook Action (template.yaml, docs/ALARMS.md) names when its route clears:
    the evaluator, given one period's worth of counts at the threshold, agrees to the minute."""
    from replmon.core.telemetry import EVENT, REASON
    from replmon.fleet.alarms import FLEET_ALARMS

    fa = next(a for a in FLEET_ALARMS if a.name == name)
    assert fa.counts_events and fa.clears()
    props = default_transformed()["Resources"][f"{name}G00Alarm"]
    assert fa.clears() in props["Metadata"]["Runbook"]["Action"]
    table = (Path(__file__).parents[1] / "docs" / "ALARMS.md").read_text(encoding="utf-8")
    assert f"`{name}G00Alarm`" in table and fa.clears() in table.split(f"`{name}G00Alarm`", 1)[1].split("\n", 1)[0]
    a = alarm(name)
    extra = dict(fa.where) if fa.where else {REASON: "BadName"} if REASON in fa.schema else {}
    assert EVENT not in fa.schema or EVENT in extra
    period_min = fa.period // 60
    n = max(1.0, float(fa.threshold) if not isinstance(fa.threshold, str) else 1.0) + (1 if fa.op == ">" else 0)
    got = contributor_changes(a, period_min * (fa.range_periods + 2), counted(emf_points, fa.metric, {1: n}, extra))
    span = f"{fa.period * fa.range_periods // 3600} h" if fa.period >= 3600 else f"{fa.period * fa.range_periods // 60} min"
    assert f"OK about {span} after the end of the last" in fa.clears()
    assert got == [(period_min - 1, "", ROUTE_NAME, "ALARM"), (period_min * (1 + fa.range_periods) - 1, "", ROUTE_NAME, "OK")]
