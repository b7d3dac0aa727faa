"""Heartbeats and stall detection: the real Heartbeat handler against moto's S3 (replication
emulated by tests/fakes.py's botocore hooks: moto never replicates) and DynamoDB, on a manual clock.

S3 facts relied on: HeadObject's ReplicationStatus is
PENDING until the object replicated, then COMPLETED (source) / REPLICA (destination) - "Getting
replication status information",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-status.html; a DELETE that names a
version id is not replicated, so a heartbeat is deleted by version on both sides - "What is
replicated with replication configurations",
https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-what-is-isnot-replicated.html.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from replmon.adapters.notify import MemoryNotifier
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import iso_ms
from replmon.core.partitions import HEARTBEAT_STATE, heartbeat_partition, live_partition
from replmon.local.aslrun import LambdaContext, load_handler
from replmon.probe.heartbeat import heartbeat_step
from replmon.signals.stall import Beat, StallPhase, StallState, advance
from replmon.wiring import injected
from tests.conftest import DST, SRC, Env, all_versions, registry_of, route
from tests.fakes import Scenario


def _deps(env: Env, **fleet: Any) -> Any:
    env.deps.defaults = {"target_seconds": 900}
    env.deps.fleet = FleetSettings(**fleet)
    # the stack's own route, a registry item as the StackRoute custom resource writes it
    env.deps.registry = registry_of(route(), groups=env.deps.fleet.route_groups)
    env.deps.notifier = MemoryNotifier()
    return env.deps


def _beat(env: Env, periods: int = 1, *, on_schedule: bool = True) -> dict[str, Any]:
    """``periods`` scheduled invocations, a minute apart (the schedule's rate; each runs one 60 s
    period, ending early when nothing is pending): the last one's answer, with every route's
    transitions over all of them."""
    seen: dict[str, list[str]] = {}
    for _ in range(periods):
        if on_schedule:
            now = env.clock.now()
            env.clock.sleep(60 - now % 60 + 0.5)
        with injected(env.deps):
            out: dict[str, Any] = load_handler("Heartbeat")({"group": "g00"}, LambdaContext("Heartbeat"))
        for row in out["routes"]:
            seen.setdefault(row["route"], []).extend(row["transitions"])
    for row in out["routes"]:
        row["transitions"] = seen[row["route"]]
    return out


def _stall(env: Env) -> list[float]:
    return [v for m, v, d in env.counted if m == "StallSeconds" and d.get("Route") == "primary"]


def test_a_healthy_route_puts_records_and_deletes_every_heartbeat(env: Env) -> None:
    _deps(env)
    env.fake.default = Scenario(latency=2.0)
    out = _beat(env, periods=3)
    row = out["routes"][0]
    assert (row["route"], row["phase"], row["pending"], row["transitions"]) == ("primary", "HEALTHY", 0, [])
    records = env.store.query(heartbeat_partition("primary"), 0, 2e9)
    assert [r.status.value for r in records] == ["COMPLETED"] * 3
    # the interval brackets the emulated 2 s latency; the expectation used is on the record
    assert all(r.latency_lo is not None and r.latency_hi is not None and r.latency_lo <= 2.0 <= r.latency_hi for r in records)
    item = env.store.get_item(heartbeat_partition("primary"), records[0].sort_key)
    assert item is not None and item["expectation_seconds"] == 20 and "floor" in item["expectation_basis"]
    assert all_versions(env.s3, SRC) == [] and all_versions(env.s3, DST) == []  # nothing piles up
    assert _stall(env) == [0.0] * 6  # early in each invocation and at its period's end
    assert ("HeartbeatRun", 1, {"RouteGroup": "g00"}) in env.counted
    assert env.deps.notifier.messages == []


def test_a_stall_is_detected_by_two_overdue_heartbeats_paged_once_and_recovers(env: Env) -> None:
    """Full stall from the second minute on: the first heartbeat after the fault turns late at E, a
    confirmation is put at once and is late E later: STALLED 2E after that heartbeat's PUT, one
    message with the evidence; healed: RECOVERING, then HEALTHY after two on-time heartbeats, one
    recovery message. StallSeconds is the hole's age while not healthy."""
    _deps(env)
    env.fake.default = Scenario(latency=1.0)
    _beat(env, periods=1)
    fault = env.clock.now()
    env.fake.default = Scenario(latency=None)  # replication stops
    # what CollectSignals stored of S3's metrics: pending operations rising (signals/rtc.py item shape)
    env.store.put_item({"route": "primary#rtc", "at": f"{iso_ms(fault)}#dst#rule", "destination": DST, "rule_id": "r", "collected_at": fault,
                        "series": {"OperationsPendingReplication": [[fault + 1, 3], [fault + 2, 9], [fault + 3, 40]],
                                   "BytesPendingReplication": [[fault + 3, 4096]]}})
    out = _beat(env, periods=3)["routes"][0]
    assert out["phase"] == "STALLED" and out["transitions"] == ["STALLED"]
    state = env.store.get_item(live_partition("primary"), HEARTBEAT_STATE)
    assert state is not None and state["phase"] == "STALLED"
    assert fault <= state["since"] <= fault + 60  # the first heartbeat put after the fault
    stalled = [v for v in _stall(env) if v > 0]
    assert stalled and 2 * 20 <= stalled[0] <= 2 * 20 + 2  # entered 2E after that heartbeat's PUT (+ a poll round)
    records = env.store.query(heartbeat_partition("primary"), fault, 2e9)
    assert len({r.run_id for r in records}) == len(records)
    (subject, message), = env.deps.notifier.messages
    evidence = json.loads(message)
    assert subject == "replmon STALLED: route primary"
    assert evidence["pending_heartbeats"] == 2 and 40 <= evidence["oldest_pending_heartbeat_age_seconds"] <= 42
    assert evidence["expected_latency_seconds"] == 20 and evidence["source"]["bucket"] == SRC
    assert evidence["next"] == "replmon report --route primary"
    assert evidence["s3_pending"] == {"OperationsPendingReplication": 40, "BytesPendingReplication": 4096, "passive_stall": True}

    env.fake.default = Scenario(latency=1.0)  # healed: the backlog replicates
    out = _beat(env, periods=3)["routes"][0]
    assert out["transitions"] == ["RECOVERING", "HEALTHY"] and out["phase"] == "HEALTHY" and out["pending"] == 0
    assert _stall(env)[-1] == 0.0
    assert [s for s, _ in env.deps.notifier.messages] == ["replmon STALLED: route primary", "replmon recovered: route primary"]
    assert all_versions(env.s3, SRC) == [] and all_versions(env.s3, DST) == []


def test_one_slow_heartbeat_does_not_stall_the_route(env: Env) -> None:
    """The hysteresis: a heartbeat that takes 90 s (late past E); its confirmation, put when it turned
    late, replicates on time: no transition, no page."""
    _deps(env)
    env.fake.default = Scenario(latency=1.0)
    _beat(env, periods=1)
    env.fake.next_puts = [Scenario(latency=90.0)]
    out = _beat(env, periods=3)["routes"][0]
    assert out["transitions"] == [] and out["phase"] == "HEALTHY"
    assert env.deps.notifier.messages == [] and max(_stall(env)) == 0.0
    records = env.store.query(heartbeat_partition("primary"), 0, 2e9)
    assert len(records) == 5 and max(r.latency_hi or 0 for r in records) >= 90  # 4 on schedule + 1 confirmation


def test_a_duplicate_invocation_puts_no_second_heartbeat(env: Env) -> None:
    """The period is claimed with a conditional put: a retried or overlapping invocation polls only."""
    _deps(env)
    env.fake.default = Scenario(latency=1.0)
    env.clock.sleep(60 - env.clock.now() % 60 + 0.5)
    start = env.clock.now()
    _beat(env, periods=1, on_schedule=False)
    env.clock._t = start  # the same period again (a duplicate delivery)
    _beat(env, periods=1, on_schedule=False)
    assert len(env.store.query(heartbeat_partition("primary"), 0, 2e9)) == 1


def test_heartbeat_routes_come_from_the_group_and_bad_input_names_the_field(env: Env) -> None:
    deps = _deps(env, route_groups=2)
    with pytest.raises(ConfigError, match="group: 'g07' is not a RouteGroup"):
        heartbeat_step({"group": "g07"}, deps)
    with pytest.raises(ConfigError, match="periods"):
        heartbeat_step({"group": "g00", "periods": 0}, deps)
    from replmon.core.registry import group_of

    mine, other = group_of("primary", 2), "g01" if group_of("primary", 2) == "g00" else "g00"
    assert [r["route"] for r in heartbeat_step({"group": mine, "periods": 1}, deps)["routes"]] == ["primary"]
    assert heartbeat_step({"group": other, "periods": 1}, deps)["routes"] == []


def test_the_state_machine_relapses_while_recovering_and_ignores_the_drained_backlog() -> None:
    e, t = 20.0, 60.0
    s = StallState(StallPhase.STALLED, since=0.0)
    s = advance(s, [Beat(0.0), Beat(60.0), Beat(120.0, latency=5.0)], now=130.0, expect=e, period=t)
    assert s.phase is StallPhase.RECOVERING
    # the backlog from the stall completes late: no relapse; a fresh heartbeat overdue: relapse (same stall)
    assert advance(s, [Beat(0.0, latency=140.0), Beat(180.0)], now=190.0, expect=e, period=t).phase is StallPhase.RECOVERING
    assert advance(s, [Beat(180.0)], now=180.0 + e + t, expect=e, period=t).phase is StallPhase.RECOVERING  # one alone: no
    relapse = advance(s, [Beat(180.0), Beat(200.0)], now=220.0, expect=e, period=t)
    assert (relapse.phase, relapse.since) == (StallPhase.STALLED, 0.0)
    healthy = advance(s, [Beat(180.0, latency=2.0), Beat(240.0, latency=3.0)], now=250.0, expect=e, period=t)
    assert healthy.phase is StallPhase.HEALTHY and healthy.since is None
    # a FAILED heartbeat counts as overdue: it will never replicate
    assert advance(StallState(), [Beat(0.0, failed=True), Beat(60.0)], now=80.0, expect=e, period=t).phase is StallPhase.STALLED
    assert advance(StallState(), [Beat(0.0, failed=True), Beat(60.0)], now=79.0, expect=e, period=t).phase is StallPhase.HEALTHY


def test_the_page_topic_gets_a_subject_sns_accepts() -> None:
    """SNS Publish: "Subject ... must be ASCII text that begins with a letter, number, or punctuation
    mark; must not include line breaks or control characters; and must be less than 100
    characters long" (Amazon SNS API Reference, Publish,
    https://docs.aws.amazon.com/sns/latest/api/API_Publish.html)."""
    import boto3
    from moto import mock_aws

    from replmon.adapters.notify import SnsNotifier

    sent: list[str] = []
    with mock_aws():
        sns = boto3.client("sns", region_name="us-east-1")
        sns.meta.events.register("before-parameter-build.sns.Publish", lambda params, **_: sent.append(params["Subject"]))
        arn = sns.create_topic(Name="page")["TopicArn"]
        SnsNotifier(arn, sns).publish("replmon: route " + "\u00e9" * 120 + "\n STALLED", "{}")
        SnsNotifier(arn, sns).publish("replmon: route r STALLED", json.dumps({"route": "r"}))
    assert sent[1] == "replmon: route r STALLED"
    assert len(sent[0]) < 100 and sent[0].isascii() and sent[0].isprintable() and sent[0].startswith("replmon: route ??")


def test_the_fleet_report_puts_a_stalled_route_right_after_the_unbounded_ones(env: Env) -> None:
    """`replmon report --fleet` / Report {"fleet": true}: a stalled route outranks a breach; its
    StallSeconds is read from the state the Heartbeat function saved."""
    from replmon.fleet.risk import fleet_rows
    from replmon.signals.stall import current_stall

    _deps(env)
    env.fake.default = Scenario(latency=None)
    _beat(env, periods=3)
    now = env.clock.now()
    stalled = current_stall(env.store, "primary", now)
    assert stalled is not None and stalled > 80 and current_stall(env.store, "no-heartbeats", now) is None
    health = {n: {"rpo_seconds": 10.0, "rpo_unbounded": n == "u", "slo": {}} for n in ("u", "primary", "late", "ok")}
    rows = fleet_rows([{"route": n, "group": "g00", "mode": "probe", "reason_code": "OK"} for n in ("ok", "late", "primary", "u")],
                      health, {"u": "breach", "primary": "ok", "late": "breach", "ok": "ok"}, [], target_seconds=900.0,
                      stalls={"primary": stalled, "ok": 0.0, "late": None})
    assert [(r["route"], r["stall_seconds"] and round(r["stall_seconds"])) for r in rows][:3] == [("u", None), ("primary", round(stalled)), ("late", None)]


def test_heartbeats_feed_the_rpo_so_a_stall_shows_in_minutes(env: Env) -> None:
    """The RPO (signals/slo.py) takes a pending heartbeat's age as an unfinished probe's and a recent
    heartbeat's latency as a probe's (class 1KiB): minute-scale, where 15-minute probes alone leave
    the RPO blind for up to a schedule period."""
    from replmon.signals.health import route_health
    from replmon.signals.slo import SloSpec

    _deps(env)
    env.fake.default = Scenario(latency=3.0)
    _beat(env, periods=2)
    healthy = route_health(env.store, "primary", env.clock.now(), SloSpec(), 3600).rpo
    assert 3.0 <= healthy.seconds <= 5.0 and set(healthy.by_size_class) == {"1KiB"} and not healthy.unbounded
    env.fake.default = Scenario(latency=None)
    _beat(env, periods=3)
    now = env.clock.now()
    state = env.store.get_item(live_partition("primary"), HEARTBEAT_STATE)
    oldest = min(p["upload"]["put_end"] for p in state["pending"])
    stalled = route_health(env.store, "primary", now, SloSpec(), 3600).rpo
    assert stalled.inputs["oldest_unfinished_probe"] == pytest.approx(now - oldest) and stalled.seconds >= 120


def test_the_expectation_is_learned_from_the_route_s_own_heartbeats_and_recorded(env: Env) -> None:
    """1,000 heartbeats of ~30 s in the 72 h that ended 6 h ago raise E to 30 s: a 25 s heartbeat is
    not late (no confirmation is put); the heartbeat's record names the expectation it was judged by.
    Heartbeats of the last 6 hours (a degradation now) do not count. Learned from the hour items the
    heartbeats were stored with (signals/rollup.py ``store_record``), as the Heartbeat stores them."""
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.core.keys import heartbeat_probe_id, heartbeat_run_id
    from replmon.core.record import ProbeRecord, ProbeStatus
    from replmon.signals.rollup import store_record

    _deps(env)
    env.deps.store = MemoryLatencyTable()
    now = env.clock.now()

    def stored(at: float, latency: float) -> None:
        run = heartbeat_run_id(at, 1)
        assert store_record(env.deps.store, ProbeRecord("primary", heartbeat_probe_id(run, "primary"), run, at, 1024, "1KiB", 1,
                                                        ProbeStatus.COMPLETED, put_end=at, latency_lo=latency - 1,
                                                        latency_hi=latency), at + latency, threshold_seconds=900.0)

    for i in range(1000):
        stored(now - 7 * 3600 - i * 60, 30.0)
        stored(now - 3600 - i, 300.0)
    env.fake.default = Scenario(latency=25.0)
    out = _beat(env, periods=1)["routes"][0]
    assert out["expect_seconds"] == 30.0 and out["transitions"] == []
    _beat(env, periods=1)
    mine = [r for r in env.deps.store.query(heartbeat_partition("primary"), now, 2e9)]
    assert len(mine) == 2 and all(r.latency_hi is not None and 25 <= r.latency_hi < 30 for r in mine)  # no confirmation
    item = env.deps.store.get_item(heartbeat_partition("primary"), mine[-1].sort_key)
    assert item["expectation_seconds"] == 30.0 and item["expectation_basis"] == "q0.999 of 1000 heartbeats (30.0 s)"


def test_one_stalled_route_of_many_pages_alone_and_a_regional_outage_stalls_every_route(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Routes of one group share an invocation: one route's stall is its own (the others stay
    HEALTHY, one message names it); when every route stalls at once the rounds still poll every route
    with fewer workers than routes (2 workers, 5 routes), so each is STALLED within the minute."""
    import replmon.probe.heartbeat as hb

    _deps(env)
    names = ["a", "b", "c", "d", "e"]
    env.deps.registry = registry_of(*(route(name=n) for n in names))
    env.fake.default = Scenario(latency=1.0)
    env.fake.by_key_part["/b/"] = Scenario(latency=None)
    _beat(env, periods=1)
    out = {r["route"]: r for r in _beat(env, periods=1)["routes"]}
    assert [n for n in names if out[n]["phase"] == "STALLED"] == ["b"]
    assert [s for s, _ in env.deps.notifier.messages] == ["replmon STALLED: route b"]

    monkeypatch.setattr(hb, "WORKERS", 2)
    env.fake.default = Scenario(latency=None)
    out = {r["route"]: r for r in _beat(env, periods=1)["routes"]}
    assert all(out[n]["phase"] == "STALLED" for n in names)
    assert len(env.deps.notifier.messages) == 5


def test_a_late_probe_in_flight_counts_as_a_beat(env: Env) -> None:
    """A probe in flight past its own expectation (E + size / 50 MiB/s) and the next heartbeat late:
    STALLED E after that heartbeat's PUT, not 2E (the two late beats: the probe, then the heartbeat)."""
    from replmon.core.keys import record_sort_key
    from replmon.signals.inflight import mark_in_flight

    _deps(env)
    env.fake.default = Scenario(latency=None)
    env.clock.sleep(60 - env.clock.now() % 60 + 0.5)
    put_end = env.clock.now() - 30
    run = "20260921T141300Z-a1b2c3"
    mark_in_flight(env.store, "primary", record_sort_key(run, f"{run}-primary-1MiB-t1"), put_end, put_end + 3600)
    out = _beat(env, periods=1, on_schedule=False)["routes"][0]
    assert out["transitions"] == ["STALLED"] and out["since"] == put_end
    stalled = [v for v in _stall(env) if v > 0]
    assert 30 + 20 <= stalled[0] <= 30 + 22  # the heartbeat late E after its PUT; since = the probe's PUT
    assert json.loads(env.deps.notifier.messages[0][1])["late_probes_in_flight"] == 1


def test_report_judges_a_stalled_route_a_breach_and_says_so(env: Env) -> None:
    """`replmon report` / the Report function: the route's health carries the Heartbeat's stall state
    and the verdict has a route_stalled finding (a page, as the RouteStalled alarm)."""
    from replmon.signals.health import health_output, route_health
    from replmon.signals.slo import SloSpec
    from replmon.signals.verdict import judge_health

    _deps(env)
    env.fake.default = Scenario(latency=None)
    _beat(env, periods=2)
    now = env.clock.now()
    h = route_health(env.store, "primary", now, SloSpec(), 3600).to_json(SloSpec())
    assert h["stall"]["phase"] == "STALLED" and h["stall"]["seconds"] > 40 and health_output(h)["stall"] == h["stall"]
    j = judge_health(h, [], target_seconds=900, rpo_window_seconds=3600, now=now)
    assert str(j.verdict) == "breach" and [f.kind for f in j.findings][:1] == ["route_stalled"]
    assert route_health(env.store, "other", now, SloSpec(), 3600).stall is None

def test_a_stall_of_failed_heartbeats_recovers_once_without_flapping(env: Env) -> None:
    """Replication FAILS (a role or key broken) for a while, then works again: STALLED, RECOVERING,
    HEALTHY once, two messages; the FAILED heartbeats of the stall, still in the state, do not
    re-stall the route that recovered (the horizon)."""
    _deps(env)
    env.fake.default = Scenario(latency=1.0)
    _beat(env)
    env.fake.default = Scenario(latency=2.0, outcome="FAILED")
    _beat(env, periods=3)
    env.fake.default = Scenario(latency=1.0)
    out = _beat(env, periods=8)["routes"][0]
    assert out["phase"] == "HEALTHY"
    assert [s for s, _ in env.deps.notifier.messages] == ["replmon STALLED: route primary", "replmon recovered: route primary"]


def test_a_head_that_fails_is_unknown_not_a_stall(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """AccessDenied on HEAD (say kms:Decrypt missing for the checksum): the heartbeats are unknown, not
    late: no stall, no RPO growth; one ProbeError per heartbeat (a ticket), not per HEAD."""
    from botocore.exceptions import ClientError

    from replmon.adapters.s3 import S3ObjectStore
    from replmon.signals.health import route_health
    from replmon.signals.slo import SloSpec

    _deps(env)
    env.fake.default = Scenario(latency=None)

    def denied(*_: Any, **__: Any) -> None:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no kms:Decrypt"}}, "HeadObject")

    monkeypatch.setattr(S3ObjectStore, "head", denied)
    out = _beat(env, periods=3)["routes"][0]
    assert out["transitions"] == [] and out["pending"] == 3
    assert len([m for m, _, d in env.counted if m == "ProbeError"]) == 3
    rpo = route_health(env.store, "primary", env.clock.now(), SloSpec(), 3600).rpo
    assert rpo.inputs["oldest_unfinished_probe"] is None


def test_a_duplicate_invocation_of_the_group_does_nothing_while_one_runs(env: Env) -> None:
    """One invocation per group at a time (a lease): a redelivered or retried event finds it held."""
    _deps(env)
    now = env.clock.now()
    assert env.deps.leases.acquire("#heartbeat/g00", "g00-other", now, now + 120, {}) is not None
    out = _beat(env, on_schedule=False)
    assert out["skipped"] == "the group's lease is held" and out["routes"] == []
    env.clock.sleep(130)
    assert _beat(env)["routes"][0]["route"] == "primary"


def test_each_route_s_expectation_and_detection_bound_reach_the_fleet_report(env: Env) -> None:
    """The Heartbeat saves E and its period with the route's state; the route's health (what
    `replmon report --fleet` and the Report function read) gives E and the detection bound
    ``T + 2 (E + 15 s) + 60 s`` (signals/stall.py), as the fleet row of docs/output.schema.json."""
    import jsonschema

    from replmon.fleet.risk import COLUMNS, fleet_rows
    from replmon.signals.health import health_output, route_health
    from replmon.signals.slo import SloSpec
    from tests.test_operator_cli import SCHEMA

    _deps(env)
    env.fake.default = Scenario(latency=1.0)
    _beat(env, periods=1)
    h = health_output(route_health(env.store, "primary", env.clock.now(), SloSpec(), 3600).to_json(SloSpec()))
    stall = h["stall"]
    assert stall["expect_seconds"] == 20 and "floor" in stall["expect_basis"]
    assert stall["detection_bound_seconds"] == 60 + 2 * (20 + 15) + 60
    rows = fleet_rows([{"route": "primary", "group": "g00", "mode": "probe", "reason_code": "OK"}], {"primary": h}, {"primary": "ok"}, [],
                      target_seconds=900.0)
    assert (rows[0]["expect_seconds"], rows[0]["detect_bound_seconds"]) == (20, 190.0)
    assert list(rows[0]) == list(COLUMNS)
    fleet_row = jsonschema.Draft202012Validator({"$ref": "#/$defs/fleet_row", "$defs": SCHEMA["$defs"]})
    assert [e.message for e in fleet_row.iter_errors(rows[0])] == []
    assert [e.message for e in jsonschema.Draft202012Validator({"$ref": "#/$defs/health", "$defs": SCHEMA["$defs"]}).iter_errors(h)] == []


def test_the_detection_bound_s_terms_are_the_template_s_and_the_heartbeat_s() -> None:
    """The bound's alarm term is RouteStalled's period with 1 datapoint to alarm (an "M out of N"
    alarm, M = DatapointsToAlarm: AWS, PutMetricAlarm DatapointsToAlarm,
    https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/cloudwatch/aws.sdk.kotlin.services.cloudwatch.model/-put-metric-alarm-request/datapoints-to-alarm.html):
    the first evaluation of the minute that holds the point can alarm. Its idle term is the part of
    the Heartbeat's minute it does not judge."""
    from replmon.probe import heartbeat as hb
    from replmon.signals.stall import ALARM_PERIOD_SECONDS, HEARTBEAT_IDLE_SECONDS
    from tests.cfnutil import default_transformed

    resources = default_transformed()["Resources"]
    stalled = [r["Properties"] for n, r in resources.items() if n.startswith("RouteStalledG") and n.endswith("Alarm")]
    assert stalled and all(p["Metrics"][0]["Period"] == ALARM_PERIOD_SECONDS and p["DatapointsToAlarm"] == 1 for p in stalled)
    assert HEARTBEAT_IDLE_SECONDS == hb.INVOCATION_SECONDS - hb.WORK_SECONDS


def test_the_learning_line_carries_every_field_the_dashboard_s_widget_reads(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """fleet/dashboard.py's Logs Insights widget reads E and the bound from the line each route prints
    when it learns E: every field its query reads is in that line (a structured log's extra keys are
    its top-level JSON fields: Powertools Logger)."""
    import logging
    import re

    from replmon.fleet.dashboard import EXPECTATION_QUERY
    from replmon.probe.heartbeat import EXPECTATION_LEARNED

    _deps(env)
    env.fake.default = Scenario(latency=1.0)
    with caplog.at_level(logging.INFO, logger="replmon"):
        _beat(env, periods=1)
    learned = [r.__dict__ for r in caplog.records if r.getMessage() == EXPECTATION_LEARNED]
    assert len(learned) == 1
    fields = set(re.findall(r"latest\((\w+)\)", EXPECTATION_QUERY)) | set(re.findall(r" by (\w+)", EXPECTATION_QUERY))
    assert fields and fields <= set(learned[0]), fields - set(learned[0])
    assert learned[0]["route"] == "primary" and learned[0]["detection_bound_seconds"] == 190.0
