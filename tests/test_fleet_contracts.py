"""The fleet's shared contracts (docs/design/fleet.md): the registry item,
the cadence grammar and due rule, the table's key formats, the aligned windows, the rollup
transaction, the fleet's metrics and the defaults they rest on.

AWS facts encoded here:
- Metrics Insights multi-time-series alarms evaluate at most 500 series and 200 such alarms per
  account and Region (CloudWatch User Guide, "Create an alarm based on a Metrics Insights query",
  https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/multi-time-series-alarms.html):
  RouteGroups <= 8 groups of <= 500 routes, 15 alarms each.
- TransactWriteItems takes at most 100 actions and cancels the whole transaction when one
  condition fails, naming each action's reason (DynamoDB API Reference, "TransactWriteItems",
  https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
- S3 and KMS policies match a key by its ARN; aliases or key ids are not accepted where the ARN is
  required (S3 User Guide, "Specifying server-side encryption with AWS KMS (SSE-KMS)",
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-kms-encryption.html).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replmon.core import telemetry
from replmon.core.cadence import MAX_PROBES_PER_ROUTE_RUN, ClassSpec, ProbeClasses, due_classes, start_offset, tick_start
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.keys import (
    heartbeat_probe_id,
    heartbeat_run_id,
    is_heartbeat,
    new_run_id,
    parse_probe_object_key,
    probe_object_key,
)
from replmon.core.names import ROUTE_NAME_RE
from replmon.core.partitions import (
    EVENT_SHARDS,
    PERIOD,
    SEEN_SHARDS,
    events_partition,
    heartbeat_partition,
    hour_sort_key,
    registry_partition,
    roll_partition,
    seen_partition,
)
from replmon.core.ports import RollupStore, TransactAdd, TransactPut
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, ProbeRecord, ProbeStatus
from replmon.core.registry import (
    MAX_ROUTE_GROUPS,
    Mode,
    Reason,
    RouteSpec,
    RouteVerdict,
    bucket_index,
    group_names,
    group_of,
    load_route_spec,
)
from replmon.signals import rollup
from replmon.signals.windows import LABELS, floor_5min, record_time, sub_slot, sub_slots, widen, window
from tests.memtable import MemTable

T0 = 1795428000.0  # 2026-11-23T10:00:00Z
TICK = 900


def spec(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "dr-orders", "group": "g00", "origin": "discovered",
        "source": {"account": "111122223333", "region": "ap-northeast-1", "bucket": "orders"},
        "destinations": [{"account": "444455556666", "region": "ap-southeast-1", "bucket": "orders-dr", "rule_id": "dr",
                          "priority": 2, "rtc": True, "metrics": True}],
    }
    raw.update(over)
    return raw


# ------------------------------------------------------------------------------ cadence
def test_the_default_classes_parse_and_fit_the_tick() -> None:
    classes = ProbeClasses.parse(DEFAULTS.probe_classes)
    classes.check_tick(DEFAULTS.schedule_rate_minutes * 60)
    assert str(classes) == DEFAULTS.probe_classes
    assert classes.labels == ("1MiB", "64MiB", "1GiB")


@pytest.mark.parametrize(("text", "message"), [
    ("1MiB@15", r"ProbeClasses: '1MiB@15' is not <size>@<n><m\|h\|d>\[x<trials>\]"),
    ("1MiB@0h", r"is not <size>@"),
    ("1Mx@1h", r"ProbeClasses: '1Mx@1h': unknown size unit"),
    ("1MiB@1h,1048576@6h", r"size 1MiB appears twice"),
    ("1MiB@1hx201", rf"ProbeClasses: trials must be 1..{MAX_PROBES_PER_ROUTE_RUN} \(1MiB@1hx201\)"),
    ("1MiB@1hx150,1GiB@1dx60", r"210 probes when every class is due at once"),
    ("", r"is not <size>@"),
])
def test_bad_classes_name_the_parameter_and_the_form(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ProbeClasses.parse(text)


def test_a_cadence_must_be_a_whole_number_of_ticks() -> None:
    with pytest.raises(ConfigError, match=r"ProbeClasses: 1MiB@20m: .* ScheduleRateMinutes tick \(15 min\)"):
        ProbeClasses.parse("1MiB@20m").check_tick(TICK)
    with pytest.raises(ConfigError, match="ScheduleRateMinutes"):
        ProbeClasses.parse("1MiB@5m").check_tick(TICK)


def test_a_routes_classes_override_the_fleets() -> None:
    s = load_route_spec(spec(probe={"classes": {"1MiB": {"every": "15m", "trials": 2}}}))
    fleet = ProbeClasses.parse(DEFAULTS.probe_classes)
    assert str(s.classes(fleet)) == "1MiB@15mx2"
    assert load_route_spec(spec()).classes(fleet) is fleet
    with pytest.raises(ConfigError, match=r"probe.classes.*every.*'90s' is not a cadence"):
        load_route_spec(spec(probe={"classes": {"1MiB": {"every": "90s"}}}))
    with pytest.raises(ConfigError, match=r"at most 200 per route-run"):
        load_route_spec(spec(probe={"classes": {"1MiB": {"every": "1h", "trials": 150}, "1GiB": {"every": "1d", "trials": 60}}}))
    assert ClassSpec(every="6h").trials == 1


def play(routes: list[str], classes: ProbeClasses, ticks: int, busy: set[tuple[str, int]] = frozenset()) -> dict[str, list[tuple[int, str]]]:  # type: ignore[assignment]
    """Run the due rule tick by tick; a busy (route, tick) runs nothing; ls_<class> = the tick's start."""
    last: dict[str, dict[str, float]] = {r: {} for r in routes}
    ran: dict[str, list[tuple[int, str]]] = {r: [] for r in routes}
    for i in range(ticks):
        now = T0 + i * TICK
        for r in routes:
            if (r, i) in busy:
                continue
            for c in due_classes(r, classes, now, TICK, last[r]):
                last[r][c.label] = tick_start(now, TICK)
                ran[r].append((i, c.label))
    return ran


def test_each_class_runs_on_its_cadence_and_large_probes_spread_over_the_day() -> None:
    classes = ProbeClasses.parse("1MiB@1h,64MiB@6h,1GiB@1d")
    routes = [f"route-{n:03d}" for n in range(200)]
    ran = play(routes, classes, 96 * 3)  # three days of 15-minute ticks
    for r in routes:
        counts = {label: sum(1 for _, c in ran[r] if c == label) for label in classes.labels}
        assert counts["1MiB"] in (72, 71) and counts["64MiB"] in (12, 11) and counts["1GiB"] in (3, 2), (r, counts)
    first_gib = {next(i for i, c in ran[r] if c == "1GiB") for r in routes}
    assert len(first_gib) > 60  # 200 routes' daily 1 GiB probes land on many different ticks, not one


def test_a_class_missed_while_the_route_was_busy_runs_once_at_the_next_free_tick() -> None:
    classes = ProbeClasses.parse("1MiB@1h")
    normal = [i for i, _ in play(["r"], classes, 16)["r"]]
    first = normal[0]
    late = [i for i, _ in play(["r"], classes, 16, busy={("r", first + 4)})["r"]]
    assert late == [first, first + 5, first + 9, first + 13]  # caught up at the next free tick, once; then every 4 ticks
    assert normal == [first, first + 4, first + 8, first + 12]


def test_start_offsets_spread_routes_over_the_spread_window() -> None:
    offsets = [start_offset(f"route-{n}", DEFAULTS.spread_seconds) for n in range(1000)]
    assert all(0 <= o < DEFAULTS.spread_seconds for o in offsets)
    per_second: dict[int, int] = {}
    for o in offsets:
        per_second[int(o)] = per_second.get(int(o), 0) + 1
    assert max(per_second.values()) <= 10  # 1,000 routes over 450 s: a handful per second, never all at once


# ------------------------------------------------------------------------------ the registry item
def test_a_registry_item_round_trips_through_the_table_item() -> None:
    s = load_route_spec(spec(origin="explicit", version=3, slo={"threshold_seconds": 600},
                             probe={"heartbeat": False, "tags": {"replmon": "probe"}}))
    item = s.to_item()
    assert (item[PARTITION_KEY], item[SORT_KEY]) == ("#routes/g00", "dr-orders")
    assert RouteSpec.from_item(item) == s
    assert s.slo is not None and s.slo.target_percent == 99.9
    assert s.probing and not s.heartbeat


@pytest.mark.parametrize(("over", "message"), [
    ({"colour": "red"}, r"colour: unknown field; remove it"),
    ({"group": "g8"}, r"group: String should match pattern"),
    ({"name": "#routes"}, r"name: must be 1-64 letters"),
    ({"destinations": []}, r"destinations: at least one destination is required"),
    ({"source": {"account": "1111", "region": "ap-northeast-1", "bucket": "orders"}}, r"source.account: must be a 12-digit"),
    ({"source": {"account": "111122223333", "region": "ap-northeast-1", "bucket": "orders", "kms_key_arn": "alias/orders"}},
     r"source.kms_key_arn: .*must be a full KMS key ARN .* not an alias"),
    ({"verdict": {"mode": "probe", "reason_code": "TAG_FILTER"}}, r"verdict: .*mode 'probe' does not go with reason_code TAG_FILTER"),
    ({"superseded_by": "orders-explicit"}, r"superseded_by is set exactly when verdict.reason_code is SUPERSEDED"),
    ({"opt_out": True}, r"opt_out: an opted-out route cannot have verdict mode 'probe'"),
])
def test_a_bad_registry_item_names_the_field_and_the_fix(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=r"invalid route dr-orders:\n|invalid route #routes:\n") as exc:
        load_route_spec(spec(**over))
    assert re.search(message, str(exc.value)), str(exc.value)


def test_destinations_are_unique_per_bucket() -> None:
    d = spec()["destinations"][0]
    with pytest.raises(ConfigError, match="destination bucket orders-dr listed twice"):
        load_route_spec(spec(destinations=[d, d]))


def test_every_reason_has_a_mode_and_a_fix_sentence() -> None:
    for reason in Reason:
        assert reason.fix and reason.fix[0].islower() and not reason.fix.endswith("."), reason
        assert RouteVerdict.of(reason).mode is reason.mode
    assert {r for r in Reason if r.mode is Mode.PROBE} == {Reason.OK}
    superseded = load_route_spec(spec(verdict=RouteVerdict.of(Reason.SUPERSEDED).model_dump(), superseded_by="orders-explicit"))
    assert superseded.verdict.reason == Reason.SUPERSEDED.fix and not superseded.probing


def test_to_route_gives_each_endpoint_its_accounts_prober_role() -> None:
    route = load_route_spec(spec()).to_route("acme")
    assert route.source.role_arn == "arn:aws:iam::111122223333:role/acme-prober"
    assert route.source.region == "ap-northeast-1" and route.destinations[0].region == "ap-southeast-1"
    assert route.destinations[0].role_arn == "arn:aws:iam::444455556666:role/acme-prober"
    assert route.destinations[0].rule_id == "dr"
    own = load_route_spec(spec()).to_route(None)  # the lab's MinIO users, tests: the caller's own credentials
    assert own.source.role_arn is None and own.destinations[0].role_arn is None


def test_to_route_carries_the_source_kms_key() -> None:
    """SSE-KMS probes: the source's key reaches the probes' Endpoint (adapters/s3.py writes with it)."""
    kms = "arn:aws:kms:ap-northeast-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    s = load_route_spec(spec(source={"account": "111122223333", "region": "ap-northeast-1", "bucket": "orders", "kms_key_arn": kms}))
    assert s.to_route().source.kms_key_arn == kms


def test_groups_are_stable_in_range_and_refuse_more_than_eight() -> None:
    names = [f"bucket-{n}" for n in range(4000)]
    for groups in (1, 3, 8):
        counts: dict[str, int] = {}
        for n in names:
            counts[group_of(n, groups)] = counts.get(group_of(n, groups), 0) + 1
        assert set(counts) == set(group_names(groups))
        assert max(counts.values()) < 1.15 * len(names) / groups  # crc32 spreads names evenly enough
    # Stable across processes and releases (a deployed route keeps its group): pinned values, which
    # a switch to Python's per-process salted hash() or another checksum would change.
    assert (group_of("dr-orders", 8), group_of("bucket-1", 8), group_of("dr-orders", 3)) == ("g02", "g03", "g02")
    with pytest.raises(ConfigError, match=r"RouteGroups: 9 is not 1\.\.8"):
        group_of("x", MAX_ROUTE_GROUPS + 1)


def test_the_bucket_index_maps_sources_and_destinations_to_measured_routes() -> None:
    a = load_route_spec(spec())
    b = load_route_spec(spec(name="dr-orders-2", destinations=[{**spec()["destinations"][0], "bucket": "orders-dr2"}]))
    off = load_route_spec(spec(name="old", source={**spec()["source"], "bucket": "old"},
                               verdict=RouteVerdict.of(Reason.ACCESS_DENIED, "s3:GetReplicationConfiguration denied").model_dump()))
    assert bucket_index([a, b, off]) == {"orders": ["dr-orders", "dr-orders-2"], "orders-dr": ["dr-orders"], "orders-dr2": ["dr-orders-2"]}


# ------------------------------------------------------------------------------ keys and partitions
def test_registry_partitions_never_collide_with_a_route() -> None:
    assert not ROUTE_NAME_RE.match(registry_partition("g00"))
    assert not ROUTE_NAME_RE.match("#inventory")


@given(st.floats(min_value=T0 - 400 * 86400, max_value=T0 + 400 * 86400))
def test_the_period_cache_sorts_after_every_hour_item(t: float) -> None:
    assert hour_sort_key(t) < PERIOD and hour_sort_key(t).startswith("h#")
    assert hour_sort_key(t) <= hour_sort_key(t + 3600)


def test_shards_are_in_range_and_spread() -> None:
    seen = {seen_partition("r", f"replmon-probes/run/r/p{n}") for n in range(2000)}
    events = {events_partition("r", f"evt-{n}") for n in range(2000)}
    assert seen == {f"r#seen/{n}" for n in range(SEEN_SHARDS)}
    assert events == {f"r#events/{n}" for n in range(EVENT_SHARDS)}


def test_heartbeat_keys_are_probe_keys() -> None:
    run = heartbeat_run_id(T0 + 90.5, period_seconds=30)
    assert run == "20261123T100130Z-hb" and is_heartbeat(run)
    key = probe_object_key(DEFAULTS.probe_prefix, run, "dr-orders", heartbeat_probe_id(run, "dr-orders"))
    parsed = parse_probe_object_key(key, DEFAULTS.probe_prefix)
    assert parsed is not None and (parsed.run_id, parsed.route) == (run, "dr-orders")
    assert not any(is_heartbeat(new_run_id(T0 + n)) for n in range(200))  # a probe run's suffix is hex


# ------------------------------------------------------------------------------ windows
def test_windows_are_aligned_to_sub_slots_and_hours() -> None:
    now = T0 + 37 * 60 + 12
    assert [window(label, now).start for label in LABELS] == [
        T0 + 30 * 60, T0 + 5 * 60, T0 - 25 * 60, T0 - 6 * 3600, T0 - 30 * 86400]
    assert len(sub_slots(window("1h", now))) == 13  # 12 whole sub-slots and the current one
    assert widen(window("30m", now), 900).label == "30m" and widen(window("5m", now), 900).label == "5m→15m"
    with pytest.raises(ValueError, match="unknown window '2h'"):
        window("2h", now)


@given(st.floats(min_value=T0, max_value=T0 + 86400), st.floats(min_value=0, max_value=7200))
def test_a_sample_is_in_a_short_window_exactly_when_its_sub_slot_is(now: float, age: float) -> None:
    """The raw computation (times) and the rollup computation (sub-slots) count the same samples."""
    t = now - age
    for label in ("5m", "30m", "1h"):
        w = window(label, now)
        slots = {(h, mm) for h, mm in sub_slots(w)}
        by_slot = (floor_5min(t) - floor_5min(t) % 3600, sub_slot(t)) in slots
        assert w.contains(t) == by_slot, (label, now, t)


# ------------------------------------------------------------------------------ rollups
def record(i: int, when: float, status: ProbeStatus, hi: float | None, size_class: str = "1MiB", heartbeat: bool = False) -> ProbeRecord:
    run = heartbeat_run_id(when) if heartbeat else f"{new_run_id(when).split('-')[0]}-{i:06x}"
    probe = heartbeat_probe_id(run, "r") if heartbeat else f"{run}-r-{size_class}-t1"
    return ProbeRecord(route="r", probe_id=probe, run_id=run, planned_at=when - 1, size_bytes=1, size_class=size_class, trial=1,
                       status=status, put_end=when, latency_lo=None if hi is None else hi / 2, latency_hi=hi)


def write(table: MemTable, r: ProbeRecord, now: float) -> bool:
    outcome = table.transact(rollup.record_ops(r, now))
    if outcome.applied:
        for op in rollup.record_max_ops(r):
            table.raise_to(op)
    else:
        assert outcome.duplicates == (0,)
    return outcome.applied


def test_the_memory_table_is_a_rollup_store() -> None:
    store: RollupStore = MemTable()  # mypy checks the Protocol
    assert store.live_items("r") == []


STATUSES = st.sampled_from([ProbeStatus.COMPLETED, ProbeStatus.COMPLETED, ProbeStatus.FAILED, ProbeStatus.STUCK, ProbeStatus.ERROR])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=3 * 86400), STATUSES, st.floats(min_value=0.1, max_value=2000),
                          st.booleans()), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_rollups_count_what_the_records_say_once_in_any_order(samples: list[tuple[float, ProbeStatus, float, bool]],
                                                              rnd: random.Random) -> None:
    """Counters summed over hour items = the raw counts, per hour and sub-slot, whatever the order
    of writes and however often each is retried (a duplicate's transaction is cancelled whole)."""
    unique: dict[tuple[str, str], ProbeRecord] = {}
    for i, (t, s, hi, hb) in enumerate(samples):
        r = record(i, T0 + t, s, hi if s is not ProbeStatus.FAILED else None, heartbeat=hb)
        unique.setdefault((r.run_id, r.probe_id), r)  # one heartbeat per route and minute
    records = list(unique.values())
    writes = records + rnd.choices(records, k=len(records) // 2)
    rnd.shuffle(writes)
    table = MemTable()
    now = T0 + 4 * 86400
    assert sum(write(table, r, now) for r in writes) == len(records)
    judged = [r for r in records if r.status.judged]
    hours = table.roll_items("r", "h#", "h#~")
    assert sum(h.get(rollup.JUDGED, 0) for h in hours) == len(judged)
    good = [r for r in judged if r.status is ProbeStatus.COMPLETED and r.latency_hi is not None and r.latency_hi <= 900]
    assert sum(h.get(rollup.GOOD, 0) for h in hours) == len(good)
    assert sum(h.get(rollup.PROBE_JUDGED, 0) for h in hours) == sum(not is_heartbeat(r.run_id) for r in judged)
    for r in judged:
        h = table.get(roll_partition("r"), hour_sort_key(record_time(r)))
        assert h is not None and h[TTL_ATTRIBUTE] > record_time(r) + 30 * 86400
        slot = rollup.slot_attr("j", record_time(r))
        assert h[slot] == sum(1 for o in judged if rollup.slot_attr("j", record_time(o)) == slot
                              and hour_sort_key(record_time(o)) == hour_sort_key(record_time(r)))
        bound = r.latency_hi if r.status is ProbeStatus.COMPLETED else r.latency_lo
        if bound is not None:
            assert h[rollup.max_attr(r.size_class, record_time(r))] >= bound
    # Late probe writes (older than 5 h by the writer's clock) each bumped the period cache's generation
    # once; heartbeats never do (the cache folds probes only).
    period = table.get(roll_partition("r"), PERIOD)
    late = sum(1 for r in judged if record_time(r) < now - 6 * 3600 and not is_heartbeat(r.run_id))
    assert (period or {}).get(rollup.GEN, 0) == late


def test_heartbeats_are_kept_beside_probe_records_for_seven_days() -> None:
    hb = record(0, T0, ProbeStatus.COMPLETED, 3.0, size_class="1KiB", heartbeat=True)
    put, add = rollup.record_ops(hb, T0 + 10)
    assert isinstance(put, TransactPut) and isinstance(add, TransactAdd)
    assert put.item[PARTITION_KEY] == heartbeat_partition("r") == "r#hb"
    assert put.item[TTL_ATTRIBUTE] == int(hb.planned_at + 7 * 86400)
    assert rollup.PROBE_JUDGED not in add.add and add.add[rollup.JUDGED] == 1


def test_unjudged_records_are_stored_not_counted_and_events_count_per_kind() -> None:
    error = record(0, T0, ProbeStatus.ERROR, None)
    assert [type(op).__name__ for op in rollup.record_ops(error, T0)] == ["TransactPut", "TransactDelete"]  # stored, its marker gone
    assert rollup.record_max_ops(error) == []
    adds = rollup.event_add("r", {("OperationFailedReplication", T0 + 1): 3, ("OperationFailedReplication", T0 + 299): 1,
                                  ("OperationNotTracked", T0 + 3600 * 2): 1})
    assert [(a.sk, dict(a.add)) for a in adds] == [("h#2026-11-23T10", {"eF_00": 4}), ("h#2026-11-23T12", {"eN_00": 1})]
    # A name no counter was made for is counted under its letters and digits, never an error that
    # would fail its whole SQS batch (review s26, M2); the parser keeps the name S3 sent.
    [odd] = rollup.event_add("r", {("Operation-X:Odd", T0): 1})
    assert dict(odd.add) == {"eU_OperationXOdd_00": 1}


def test_a_histogram_bucket_holds_its_latencies() -> None:
    for seconds in (0.3, 1.0, 4.0, 59.9, 900.0, 5000.0):
        b = rollup.latency_bucket(seconds)
        assert rollup.bucket_upper(b - 1) < seconds <= rollup.bucket_upper(b) if b else seconds <= rollup.bucket_upper(0)
        assert rollup.bucket_upper(b) <= seconds * 1.25 + 1e-9 or b in (0, rollup.HIST_BUCKETS - 1)  # the last is open


# ------------------------------------------------------------------------------ telemetry
#: docs/design/fleet.md 9: the Metrics Insights alarms' metrics, each read FROM SCHEMA("Replmon", RouteGroup, Route, service).
MI_ALARM_METRICS = ("RpoSeconds", "RpoUnbounded", "StallSeconds", "SloBurnPage", "SloBurnTicket", "ProbeFailed", "ProbeStuck",
                    "ProbeError", "RunSkipped", "RecordLost", "CleanupFailed")


def test_the_fleet_metrics_carry_the_alarms_schema() -> None:
    fleet = telemetry.FLEET_METRICS
    for name in MI_ALARM_METRICS:
        assert fleet[name].dimension_sets == (("service", "RouteGroup", "Route"),), name
    assert fleet["ReplicationEvents"].dimension_sets == (("service", "RouteGroup", "Route", "Event"),)
    assert fleet["ReplicationLatencySeconds"].dimension_sets == (("service", "RouteGroup", "Route", "SizeClass"),)
    for m in fleet.values():
        assert len(m.dimension_sets) == 1 and m.dimension_sets[0][0] == "service" and m.cadence, m.name
        assert "Route" not in m.dimension_sets[0] or "RouteGroup" in m.dimension_sets[0], m.name
    continuous = {m.name for m in fleet.values() if m.cadence == telemetry.CONTINUOUS}
    assert {"RpoSeconds", "StallSeconds"} <= continuous


def test_todays_metrics_stay_until_a_package_switches_them() -> None:
    assert telemetry.RETIRING.isdisjoint(telemetry.FLEET_METRICS)
    assert set(telemetry.FLEET_METRICS) >= telemetry.SWITCHED
    for name, m in telemetry.METRICS.items():
        assert m == (telemetry.FLEET_METRICS[name] if name in telemetry.SWITCHED else telemetry._TODAY[name])
    fio = {n for n in telemetry.METRICS if n.startswith("Fio")}
    assert fio.isdisjoint(telemetry.FLEET_METRICS)  # mount baselines are not the fleet's


# ------------------------------------------------------------------------------ the defaults the fleet rests on
def test_the_default_slo_has_a_budget_its_sample_supports() -> None:
    """The SLO counts probes, not heartbeats (signals/rollup.py ``pj``/``pg``): the default classes
    judge 870 probes a route per 30 days, a budget of 0.87 bad probes at 99.9 %. A fleet route is
    therefore judged at the highest target that leaves REFUSE_BELOW_EVENTS (signals/slo.py
    ``route_target``: 99.42 %) and ticketed (SloUnsupported), never at a target one probe overspends."""
    from replmon.signals.slo import REFUSE_BELOW_EVENTS, route_target

    classes = ProbeClasses.parse(DEFAULTS.probe_classes)
    judged = DEFAULTS.slo_period_days * classes.probes_per_day()
    assert judged == 870 and round((1 - DEFAULTS.slo_target) * judged, 3) == 0.87
    t = route_target("r", classes, DEFAULTS.slo_target, DEFAULTS.slo_period_days)
    assert t.lowered and t.target is not None and (1 - t.target) * judged >= REFUSE_BELOW_EVENTS
    assert DEFAULTS.spread_seconds == DEFAULTS.schedule_rate_minutes * 60 // 2
    assert DEFAULTS.fleet_max_probes >= DEFAULTS.fleet_max_route_runs * DEFAULTS.route_max_concurrency


# ------------------------------------------------------------------------------ the fleet settings every fleet function reads
def test_fleet_settings_come_from_one_variable_and_name_their_parameter() -> None:
    from replmon.core.fleetconfig import load_fleet_settings
    from replmon.wiring import from_env

    env = {"REPLMON_TABLE": "t", "REPLMON_FLEET": json.dumps({"route_groups": 3, "probe_classes": "1MiB@15m,1GiB@1d",
                                                              "plan_bucket": "stack-planbucket-1"})}
    deps = from_env(env)
    assert deps.fleet.groups == ["g00", "g01", "g02"] and deps.fleet.plan_bucket == "stack-planbucket-1"
    assert str(deps.fleet.classes) == "1MiB@15m,1GiB@1d"
    assert from_env({"REPLMON_TABLE": "t"}).fleet == load_fleet_settings({})  # unset: defaults.json's
    assert load_fleet_settings({}).max_route_runs_for(4) == DEFAULTS.fleet_max_probes // 4
    with pytest.raises(ConfigError, match=r"route_groups \(RouteGroups\): Input should be less than or equal to 8"):
        from_env({**env, "REPLMON_FLEET": json.dumps({"route_groups": 9})})
    with pytest.raises(ConfigError, match=r"ExpertSettings spread_seconds \(900\) must be below the ScheduleRateMinutes tick"):
        load_fleet_settings({"spread_seconds": 900})
