"""The scheduled run plans every probe-mode route of the registry - the real ASL under
moto's interpreter (ManualClock), the registry, leases and plan bucket in moto's DynamoDB and S3.

AWS contracts encoded here:
- "Maximum input or output size for a task, state, or execution: 262,144 bytes of data as a UTF-8
  encoded string" ("Step Functions service quotas",
  https://docs.aws.amazon.com/step-functions/latest/dg/limits-overview.html).
  moto enforces it (States.DataLimitExceeded): the 1,000-route run below would fail if any
  state's input or output crossed it; its sizes are also measured on the real outputs.
- ItemReader reads the items from an S3 object: ``"Resource": "arn:aws:states:::s3:getObject"``,
  ``Parameters`` ``Bucket``/``Key`` (JSONPath workflows), ``ReaderConfig.InputType`` one of CSV, JSON,
  JSONL, MANIFEST ("ItemReader (Map)",
  https://docs.aws.amazon.com/step-functions/latest/dg/input-output-itemreader.html); with
  ``InputType JSON`` the object holds one JSON array, each element an item ("S3JsonItemReader: Item
  Reader configuration for iterating over items in a JSON array stored in a S3 file", AWS CDK API
  reference, https://docs.aws.amazon.com/cdk/api/v2/docs/aws-cdk-lib.aws_stepfunctions.S3JsonItemReader.html).
  The state machine's role needs S3 read for ItemReader ("Using Map state in
  Distributed mode", https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html).
  Checked against the definition and template.yaml (the IAM evaluator), and run by moto's interpreter
  (which reads JSON and CSV only: the plan is a JSON array, never JSONL).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from typing import Any

import boto3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replmon.adapters.plans import S3Plans
from replmon.adapters.registry_table import DynamoRegistry
from replmon.core.cadence import ProbeClasses, due_classes, start_offset, tick_start
from replmon.core.fleetconfig import FleetSettings
from replmon.core.partitions import LEASE, live_partition, runs_partition, skip_sort_key
from replmon.core.registry import group_of, load_route_spec
from replmon.fleet import caps, planner
from replmon.local.aslrun import LambdaContext, LocalStateMachine, load_handler, state_machine_handlers
from replmon.local.template import DEFINITION
from replmon.wiring import injected
from tests.conftest import DST, SRC, TABLE, Env

QUOTA = 262_144  # bytes
PLAN_BUCKET = "replmon-plans-test"
CLASSES = "1KiB@15m,2KiB@1h,3KiB@6h"
TICK = 900
T0 = tick_start(1_790_000_000.0, TICK) + TICK  # a tick's start


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":")).encode())


def spec(name: str, **over: Any) -> Any:
    raw: dict[str, Any] = {
        "name": name, "group": group_of(name, 1), "origin": "explicit",
        "source": {"account": "111122223333", "region": "us-east-1", "bucket": SRC},
        "destinations": [{"account": "111122223333", "region": "us-east-1", "bucket": DST}],
        "verdict": {"mode": "probe", "reason_code": "OK", "checked_at": 1795000000.0},
    }
    raw.update(over)
    return load_route_spec(raw)


def fleet_env(env: Env, **fleet: Any) -> DynamoRegistry:
    """Registry, leases and plan bucket wired into ``env.deps`` (as wiring.from_env does in Lambda)."""
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=PLAN_BUCKET)
    registry = DynamoRegistry(TABLE, env.ddb)
    env.deps.registry = registry
    env.deps.plans = S3Plans(PLAN_BUCKET, s3)
    env.deps.fleet = FleetSettings(probe_classes=CLASSES, spread_seconds=60, plan_bucket=PLAN_BUCKET, **fleet)
    return registry


def lease_item(env: Env, route: str) -> dict[str, Any]:
    return env.ddb.get_item(TableName=TABLE, Key={"route": {"S": live_partition(route)}, "at": {"S": LEASE}}).get("Item") or {}


def uploads(result: Any) -> Counter[str]:
    return Counter(i.event["route"]["name"] for i in result.invocations if i.function == "UploadProbe")


def test_twenty_registry_routes_run_their_due_classes_and_a_held_lease_skips_one(env: Env) -> None:
    registry = fleet_env(env)
    names = [f"r{i:02d}" for i in range(20)]
    for i, name in enumerate(names):
        over = {"probe": {"classes": {"1KiB": {"every": "30m"}, "2KiB": {"every": "15m", "trials": 2}}}} if i % 5 == 0 else {}
        assert registry.put_explicit(spec(name, **over), None)
    # History: some classes ran one tick ago (not due yet), some a day ago (due, overdue).
    for i, name in enumerate(names[1:10], start=1):
        ls = ({"1KiB": T0, "2KiB": T0 - TICK, "3KiB": T0 - TICK} if i % 3 == 0  # ran at this tick already: nothing due
              else {"1KiB": T0 - TICK} if i % 2 else {"2KiB": T0 - 86_400, "3KiB": T0 - 86_400})
        env.leases.acquire(name, "old-run", T0 - 3600, T0 - 3000, ls)
        env.leases.release(name, "old-run", T0 - 3000)
    env.leases.acquire("r07", "arn:aws:states:us-east-1:123456789012:execution:sm:other", T0 - 60, T0 + 3600, {})
    before = {n: {k: v for k, v in lease_item(env, n).items() if k.startswith("ls_")} for n in names}
    fleet = ProbeClasses.parse(CLASSES)

    def expected(name: str) -> list[str]:
        classes = registry.get_route("g00", name).classes(fleet)  # type: ignore[union-attr]
        last = {k[3:]: float(v["N"]) for k, v in before[name].items()}
        return [c.label for c in due_classes(name, classes, T0, TICK, last) for _ in range(c.trials)]

    env.clock.advance(T0 + 7 - env.clock.now())
    with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
        result = sm.run({}, timeout=120)
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    want = {n: expected(n) for n in names}
    due = {n: w for n, w in want.items() if w}
    assert 8 <= len(due) < 20 and len({len(w) for w in due.values()}) >= 2, want  # different due classes per route
    # The held route is skipped once, recorded and counted; every other due route ran exactly its due classes.
    assert result.output["skipped"] == [{"route": "r07", "held_by": "arn:aws:states:us-east-1:123456789012:execution:sm:other",
                                         "until": T0 + 3600}]
    assert [c for c in env.counted if c[0] == "RunSkipped"] == [("RunSkipped", 1, {"Route": "r07"})]
    assert env.ddb.get_item(TableName=TABLE, Key={"route": {"S": runs_partition("r07")},
                                                  "at": {"S": skip_sort_key(result.output["run_id"])}}).get("Item")
    ran = {n: sorted(e["size_class"] for e in (i.event for i in result.invocations if i.function == "UploadProbe")
                     if e["route"]["name"] == n) for n in names}
    assert {n: r for n, r in ran.items() if r} == {n: sorted(w) for n, w in due.items() if n != "r07"}
    records = [r for n in names for r in env.store.query(n, 0, 4e9)]
    assert len(records) == sum(len(w) for n, w in due.items() if n != "r07")
    assert all(r.status.value == "COMPLETED" for r in records), Counter(r.status.value for r in records)
    # ls_<class> = the tick's start for what ran, unchanged for the rest (the skipped route's too).
    for n in names:
        ls = {k: v for k, v in lease_item(env, n).items() if k.startswith("ls_")}
        ran_classes = set() if n == "r07" else set(want[n])
        assert {k for k, v in ls.items() if float(v["N"]) == T0} >= {f"ls_{c}" for c in ran_classes}, n
        assert {k: v for k, v in ls.items() if k[3:] not in ran_classes} == \
            {k: v for k, v in before[n].items() if k[3:] not in ran_classes}, n
    assert result.output["lease_end"]["not_held"] == []


def test_spread_each_probe_waits_its_routes_offset_before_uploading(env: Env) -> None:
    """Offsets lie in [0, SpreadSeconds); a route's probes share one; the child's Wait (SecondsPath)
    runs before UploadProbe, so each upload starts no earlier than its route's offset."""
    registry = fleet_env(env)
    names = [f"s{i:02d}" for i in range(12)]
    for name in names:
        registry.put_explicit(spec(name, probe={"classes": {"1KiB": {"every": "15m"}}}), None)
    env.clock.advance(T0 + 2 - env.clock.now())
    plan = planner.fleet_plan(planner.registry_routes(env.deps), env.deps)  # type: ignore[arg-type]
    waits = {p["route"]["name"]: p["wait_seconds"] for p in plan["probes"]}
    assert set(waits) == set(names)
    for n, w in waits.items():
        offset = start_offset(n, 60)
        assert 0 <= offset < 60 and abs(w - max(0.0, offset - 2)) <= 1, (n, w, offset)
    assert [p["wait_seconds"] for p in plan["probes"]] == sorted(waits.values())  # items in start order
    assert len(set(waits.values())) > 6  # spread, not one second
    raw = json.loads(DEFINITION.read_text())
    proc = raw["States"]["Probes"]["ItemProcessor"]
    assert proc["StartAt"] == "Spread" and proc["States"]["StartDelay"] == {"Type": "Wait", "SecondsPath": "$.wait_seconds",
                                                                              "Next": "UploadProbe"}
    advances: list[float] = []
    advance = env.clock.advance

    def recorded(seconds: float) -> None:
        advances.append(seconds)
        advance(seconds)

    env.clock.advance = recorded  # type: ignore[method-assign]
    with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
        result = sm.run({}, timeout=120)
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    # Each positive wait was played by a Wait state (moto's Wait advances the ManualClock).
    assert not Counter(w for w in waits.values() if w > 0) - Counter(int(a) for a in advances)
    starts = [i.event for i in result.invocations if i.function == "UploadProbe"]
    assert len(starts) == len(names)
    assert all(e["wait_seconds"] == waits[e["route"]["name"]] for e in starts)


def test_caps_defer_routes_by_name_count_them_and_run_them_first_at_the_next_tick(env: Env) -> None:
    registry = fleet_env(env, max_route_runs=5, max_probes=8)
    names = [f"c{i:02d}" for i in range(9)]
    for name in names:  # two probes per route, every tick
        registry.put_explicit(spec(name, probe={"classes": {"1KiB": {"every": "15m"}, "2KiB": {"every": "15m"}}}), None)
    handler = load_handler("PlanProbes")
    env.clock.advance(T0 + 1 - env.clock.now())
    with injected(env.deps):
        first = handler({}, LambdaContext("PlanProbes"))
    planned = sorted(first["route_classes"])
    assert len(planned) == 4 and first["probe_count"] == 8  # FleetMaxProbes binds before FleetMaxRouteRuns
    deferred = [d["route"] for d in first["deferred"]]
    assert sorted(planned + deferred) == names and first["deferred_count"] == 5
    assert {d["reason"] for d in first["deferred"]} == {"FleetMaxProbes"}
    assert sorted(c[2]["Route"] for c in env.counted if c[0] == "RunSkipped") == sorted(deferred)
    # The planned routes start (their leases record the tick); the deferred ones keep no ls_<class>.
    begin = load_handler("BeginRouteRun")
    with injected(env.deps):
        begun = begin({"plan": first, "execution": "exec-1"}, LambdaContext("BeginRouteRun"))
        load_handler("EndRouteRun")({"holder": "exec-1", "routes": begun["lease"]["routes"]}, LambdaContext("EndRouteRun"))
    assert sorted(begun["lease"]["routes"]) == planned
    assert all(not any(k.startswith("ls_") for k in lease_item(env, n)) for n in deferred)
    # Next tick: every class of every route is due again; the deferred routes (overdue) come first.
    env.clock.advance(TICK)
    with injected(env.deps):
        second = handler({}, LambdaContext("PlanProbes"))
    assert set(second["route_classes"]) <= set(deferred) and len(second["route_classes"]) == 4


def test_past_max_routes_the_plan_takes_the_first_routes_in_order_and_tickets_the_rest_by_name(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """REPLMON_FLEET max_routes: explicit routes (replmon fleet put) before discovered ones, each by
    name; the rest are left out (not deferred), named in the log and counted (RoutesOverCap)."""
    registry = fleet_env(env, max_routes=3)
    for name in ("e-b", "e-a"):
        registry.put_explicit(spec(name), None)
    for name in ("a-disc", "b-disc"):  # enrolled discovered routes: after every explicit one, whatever their names
        registry.put_discovered(spec(name, origin="discovered"))
    env.clock.advance(T0 + 1 - env.clock.now())
    handler = load_handler("PlanProbes")
    runs = []
    for _ in range(2):  # the same registry gives the same routes, tick after tick
        env.counted.clear()
        with injected(env.deps), caplog.at_level("WARNING", logger="replmon"):
            runs.append(handler({}, LambdaContext("PlanProbes")))
        counted = {c[0]: c[1] for c in env.counted if c[0] in (caps.OVER_CAP, caps.SLO_UNSUPPORTED)}
        assert counted[caps.OVER_CAP] == 1
        env.clock.advance(TICK)
    assert all(sorted(r["route_classes"]) == ["a-disc", "e-a", "e-b"] for r in runs if r["route_classes"])
    assert sorted(runs[0]["route_classes"]) == ["a-disc", "e-a", "e-b"]
    assert "b-disc" not in {d["route"] for r in runs for d in r["deferred"]}, "left out by the caps, not deferred"
    [line] = {r.getMessage(): r for r in caplog.records if r.getMessage() == "routes left out by the fleet caps"}.values()
    assert line.routes == "b-disc" and line.left_out[0]["cap"] == "max_routes"  # type: ignore[attr-defined]
    # an on-demand run of every route (sizes, no routes: events/probe_now.json) is held to the same caps
    env.counted.clear()
    with injected(env.deps):
        adhoc = handler({"sizes": ["1KiB"], "trials": 1}, LambdaContext("PlanProbes"))
    assert {p["route"]["name"] for p in adhoc["probes"]} == {"a-disc", "e-a", "e-b"}
    assert [c[1] for c in env.counted if c[0] == caps.OVER_CAP] == [1]


def test_past_the_monthly_ceiling_only_what_fits_the_cost_model_is_planned(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """REPLMON_FLEET monthly_usd against `replmon cost`'s model (cost/fleet.py): the deployment's
    fixed lines plus each route's own; a dear route is left out and a cheaper one after it still fits."""
    from replmon.cost.fleet import fixed_monthly_usd, fleet_estimate

    registry = fleet_env(env)
    cheap = {"1KiB": {"every": "15m"}}
    registry.put_explicit(spec("r1", probe={"classes": cheap}), None)
    registry.put_explicit(spec("r2", probe={"classes": {"1GiB": {"every": "15m"}}},  # 96 GiB a day across Regions, RTC
                               destinations=[{"account": "111122223333", "region": "eu-west-1", "bucket": DST, "rtc": True}]), None)
    registry.put_explicit(spec("r3", probe={"classes": cheap}), None)
    routes = planner.registry_routes(env.deps)  # type: ignore[arg-type]
    usd = {fr.route.name: caps.route_cost(fr, env.deps.fleet) for fr in routes}
    assert usd["r1"] == pytest.approx(fleet_estimate(1, ProbeClasses.parse("1KiB@15m"), rtc=False).per_route)  # same Region, no RTC
    assert usd["r2"] > 10 * usd["r1"], usd  # ~2,900 GiB a month: the RTC fee and the transfer
    fixed = fixed_monthly_usd(3, env.deps.fleet.classes, route_groups=1)
    env.deps.fleet = env.deps.fleet.model_copy(update={"monthly_usd": fixed + usd["r1"] + usd["r3"] + 1})
    env.clock.advance(T0 + 1 - env.clock.now())
    with injected(env.deps), caplog.at_level("WARNING", logger="replmon"):
        plan = load_handler("PlanProbes")({}, LambdaContext("PlanProbes"))
    assert sorted(plan["route_classes"]) == ["r1", "r3"]
    assert [c[1] for c in env.counted if c[0] == caps.OVER_CAP] == [1]
    line = next(r for r in caplog.records if r.getMessage() == "routes left out by the fleet caps")
    assert line.routes == "r2" and line.left_out == [{"route": "r2", "cap": "monthly_usd", "monthly_usd": round(usd["r2"], 2)}]  # type: ignore[attr-defined]
    # one cent less and r3 no longer fits either
    env.deps.fleet = env.deps.fleet.model_copy(update={"monthly_usd": fixed + usd["r1"] + usd["r3"] - 0.01})
    a = caps.cap_routes(routes, env.deps.fleet, env.deps.slo)
    assert [fr.route.name for fr in a.admitted] == ["r1"] and [x.route for x in a.left_out] == ["r2", "r3"]


def test_routes_whose_probes_cannot_support_their_slo_target_are_ticketed_by_name(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """The budget check per route: 1KiB@15m,2KiB@1h,3KiB@6h is 3,720 judged probes a 30-day period,
    a budget of 3.72 bad probes at 99.9 % (under 5): judged at 99.86 % and counted (SloUnsupported);
    a route whose own target leaves >= 5 is not."""
    registry = fleet_env(env)
    registry.put_explicit(spec("thin"), None)
    registry.put_explicit(spec("fine", slo={"target_percent": 99.0}), None)
    env.clock.advance(T0 + 1 - env.clock.now())
    with injected(env.deps), caplog.at_level("WARNING", logger="replmon"):
        load_handler("PlanProbes")({}, LambdaContext("PlanProbes"))
    assert [c[1] for c in env.counted if c[0] == caps.SLO_UNSUPPORTED] == [1]
    assert [c[1] for c in env.counted if c[0] == caps.OVER_CAP] == [0]  # every plan says so: the ticket clears
    line = next(r for r in caplog.records if r.getMessage() == "routes whose probes cannot support their SLO target")
    assert line.routes == "thin"  # type: ignore[attr-defined]
    assert "3720 judged probes" in line.detail[0] and "judged at 99.86 %" in line.detail[0]  # type: ignore[attr-defined]


def test_a_plan_too_large_for_the_state_is_read_from_the_plan_bucket_by_item_reader(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small plans stay inline; past INLINE_PLAN_BYTES the items go to the plan bucket and the
    ProbesFromPlan Map reads them (ItemReader). A skipped route's probes are taken out of the object
    the Map reads (BeginRouteRun writes the narrowed plan beside it)."""
    monkeypatch.setattr(planner, "INLINE_PLAN_BYTES", 4096)
    registry = fleet_env(env)
    names = [f"p{i:02d}" for i in range(6)]
    for name in names:
        registry.put_explicit(spec(name, probe={"classes": {"1KiB": {"every": "15m"}, "2KiB": {"every": "15m"}}}), None)
    env.leases.acquire("p03", "another-run", T0 - 10, T0 + 3600, {})
    env.clock.advance(T0 + 1 - env.clock.now())
    plan_s3 = boto3.client("s3", region_name="us-east-1")  # through aslrun's ItemReader patch point
    with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock, plan_s3=plan_s3) as sm:
        result = sm.run({}, timeout=120)
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    out = result.output
    plan_calls = [i for i in result.invocations if i.function == "PlanProbes"]
    ref = plan_calls[0].result["plan"]
    assert ref["bucket"] == PLAN_BUCKET and ref["key"].startswith("plans/") and ref["items"] == 12
    assert plan_calls[0].result["probes"] == []  # nothing inline
    narrowed = next(i for i in result.invocations if i.function == "BeginRouteRun").result["plan"]
    assert narrowed["items"] == 10 and "-held-" in narrowed["key"]
    items = json.loads(boto3.client("s3", region_name="us-east-1").get_object(Bucket=PLAN_BUCKET, Key=narrowed["key"])["Body"].read())
    assert isinstance(items, list) and "p03" not in {p["route"]["name"] for p in items}
    assert out["results"] == {"probes": 10}
    assert sorted(uploads(result)) == [n for n in names if n != "p03"]
    assert out["skipped"][0]["route"] == "p03"


def test_the_two_probe_maps_run_the_same_workflow() -> None:
    """ProbesFromPlan is Probes with an ItemReader instead of ItemsPath and its states renamed (state
    names are unique in a definition): written by tools/render_probe_maps.py, current."""
    import importlib.util

    from tests.conftest import ROOT

    spec_ = importlib.util.spec_from_file_location("render_probe_maps", ROOT / "tools" / "render_probe_maps.py")
    assert spec_ is not None and spec_.loader is not None
    tool = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(tool)
    raw = json.loads(DEFINITION.read_text())
    assert raw == tool.render(raw), "ProbesFromPlan is stale: python tools/render_probe_maps.py --write"
    from_plan = raw["States"]["ProbesFromPlan"]
    assert from_plan["ItemReader"] == {"Resource": "arn:aws:states:::s3:getObject", "ReaderConfig": {"InputType": "JSON"},
                                       "Parameters": {"Bucket.$": "$.plan.bucket", "Key.$": "$.plan.key"}}
    assert "ItemsPath" not in from_plan and from_plan["ItemProcessor"]["StartAt"] == "SpreadFromPlan"
    assert raw["States"]["AnyRouteLeased"]["Choices"][0]["Next"] == "ProbesFromPlan"


def test_a_thousand_route_plan_keeps_every_state_under_the_quota(env: Env) -> None:
    """1,000 routes, one class each, all due (FleetMaxProbes' largest value): the 1,000 items go to
    the plan bucket; every route is held by another run here, so the real ASL runs PlanProbes and
    BeginRouteRun at full size (1,000 leases tried, 1,000 skips recorded) without 1,000 child executions; moto would fail
    the execution with States.DataLimitExceeded past the quota, and the outputs are measured too."""
    from replmon.adapters.leases import MemoryLeases
    from replmon.core.registry import RouteSpec

    class Registry:  # the RegistryStore read PlanProbes makes (1,000 moto PutItems would cost seconds)
        def __init__(self, specs: list[RouteSpec]) -> None:
            self.specs = specs

        def routes(self, group: str) -> list[RouteSpec]:
            return [s for s in self.specs if s.group == group]

    # FleetMaxProbes' largest value (1,000: the Map's result array bound, test_payload_bounds.py): one class per route.
    fleet_env(env, max_route_runs=1000, max_probes=1000, max_routes=1000, monthly_usd=1e6)
    specs = [spec(f"route-{i:04d}-of-the-fleet", probe={"classes": {"1KiB": {"every": "15m"}}}) for i in range(1000)]
    env.deps.registry = Registry(specs)  # type: ignore[assignment]
    env.deps.leases = MemoryLeases()  # the lease semantics are tests/test_run_lease.py's; here only the sizes matter
    holder = "arn:aws:states:us-east-1:123456789012:execution:sm:" + "x" * 36
    for s in specs:
        env.deps.leases.acquire(s.name, holder, T0 - 10, T0 + 3600, {})
    env.clock.advance(T0 + 1 - env.clock.now())
    with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
        result = sm.run({}, timeout=300)
    assert result.status == "SUCCEEDED", (result.error, result.cause and result.cause[:300])
    plan = next(i for i in result.invocations if i.function == "PlanProbes").result
    begun = next(i for i in result.invocations if i.function == "BeginRouteRun").result
    body = boto3.client("s3", region_name="us-east-1").get_object(Bucket=PLAN_BUCKET, Key=plan["plan"]["key"])["Body"].read()
    assert plan["plan"]["items"] == 1000 and len(body) > 2 * QUOTA  # could never have passed inline
    assert size(plan) < QUOTA // 2 and size(begun) < QUOTA // 2 and size(result.output) < QUOTA // 2, \
        (size(plan), size(begun), size(result.output))
    assert begun["skipped_count"] == 1000 and len(begun["skipped"]) == 100
    assert len([c for c in env.counted if c[0] == "RunSkipped"]) == 1000


def test_the_fleet_calls_are_allowed_by_the_deployed_roles_and_by_nothing_wider(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every AWS call PlanProbes, BeginRouteRun and EndRouteRun make in a plan-bucket run (registry
    Query, lease BatchGetItem/UpdateItem, skip PutItem, plan PutObject/GetObject) is allowed by the
    role template.yaml gives the function (the iam-simulate evaluator, tests/iam.py); the state
    machine's role may GetObject a plan (the ItemReader's need, "IAM policies for using Distributed
    Map states", https://docs.aws.amazon.com/step-functions/latest/dg/iam-policies-eg-dist-map.html)
    and nothing else of the bucket; PlanProbes may not read it (page above)."""
    from tests.cfnutil import ACCOUNT, default_transformed, function_role_policies, resolver
    from tests.iam import CallRecorder, IamRequest, evaluate

    cfn = default_transformed()
    r = resolver(cfn)
    bucket = r.ref("PlanBucket")
    monkeypatch.setattr(planner, "INLINE_PLAN_BYTES", 2048)
    registry = fleet_env(env)
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    env.deps.plans = S3Plans(bucket, s3)
    for name in ("a1", "a2", "a3"):
        registry.put_explicit(spec(name, probe={"classes": {"1KiB": {"every": "15m"}}}), None)
    env.leases.acquire("a2", "another-run", T0 - 10, T0 + 3600, {})
    recorder = CallRecorder(ACCOUNT)
    handlers = state_machine_handlers()
    fleet_fns = ("PlanProbes", "BeginRouteRun", "EndRouteRun")

    # One handler at a time (the recorder names the running function process-wide): EndRouteRun also
    # runs inside the Map (each probe's EndProbe), beside other probes' Cleanup.
    lock = threading.Lock()

    def recorded(name: str) -> Any:
        def call(event: dict[str, Any], context: Any) -> Any:
            with lock, (recorder.function(name) if name in fleet_fns else contextlib.nullcontext()):
                return handlers[name](event, context)
        return call

    env.clock.advance(T0 + 1 - env.clock.now())
    with recorder.recording(), injected(env.deps), \
            LocalStateMachine({n: recorded(n) for n in handlers}, clock=env.clock) as sm:
        result = sm.run({}, timeout=120)
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    assert result.output["results"] == {"probes": 2}
    ops = {(c.function, c.operation) for c in recorder.calls}
    assert {("PlanProbes", "Query"), ("PlanProbes", "BatchGetItem"), ("PlanProbes", "PutObject"),
            ("BeginRouteRun", "GetObject"), ("BeginRouteRun", "PutObject"), ("BeginRouteRun", "UpdateItem"),
            ("BeginRouteRun", "PutItem"), ("EndRouteRun", "UpdateItem")} <= ops, ops
    policies = {fn: function_role_policies(cfn, fn, r) for fn in fleet_fns}
    assert evaluate(recorder.requests(), policies, ACCOUNT) == []
    # ...and nothing wider: every S3/DynamoDB action these roles grant is used by a recorded call.
    used = {(c.function, q.action) for c in recorder.calls for q in c.requests}
    granted = {(fn, a) for fn in fleet_fns for p in policies[fn] for st in p["policy"]["Statement"]
               for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]) if a.split(":")[0] in ("s3", "dynamodb")}
    assert granted - used == set(), granted - used
    role = cfn["Resources"][cfn["Resources"]["ProbeStateMachine"]["Properties"]["RoleArn"]["Fn::GetAtt"][0]]["Properties"]
    policies["ProbeStateMachine"] = [{"name": p["PolicyName"], "policy": r.resolve(p["PolicyDocument"])} for p in role["Policies"]]
    key = f"arn:aws:s3:::{bucket}/plans/20261123T101500Z-x.json"
    assert evaluate([("ProbeStateMachine", IamRequest("s3:GetObject", key))], policies, ACCOUNT) == []
    denied = evaluate([("ProbeStateMachine", IamRequest("s3:PutObject", key)),
                       ("ProbeStateMachine", IamRequest("s3:GetObject", f"arn:aws:s3:::{bucket}/results/x")),
                       ("PlanProbes", IamRequest("s3:GetObject", key))], policies, ACCOUNT)
    assert len(denied) == 3, denied


def test_the_plan_bucket_is_private_encrypted_tls_only_and_expires_plans() -> None:
    """S3 bucket hygiene the stack's other buckets have: default encryption, every public-access
    block, bucket-owner-enforced ownership, a Deny of ``aws:SecureTransport = false`` ("Amazon S3
    supports both HTTP and HTTPS protocols ... HTTP traffic is accepted": "Protecting data in transit
    with encryption", https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingEncryptionInTransit.html),
    and a lifecycle expiry (plans serve one run)."""
    from replmon.local.template import load_template
    from tests.conftest import TEMPLATE

    res = load_template(TEMPLATE)["Resources"]
    props = res["PlanBucket"]["Properties"]
    assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]["SSEAlgorithm"]
    assert all(props["PublicAccessBlockConfiguration"][k] is True for k in
               ("BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"))
    assert props["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    [rule] = props["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled" and 1 <= rule["ExpirationInDays"] <= 30
    [deny] = res["PlanBucketPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*" and deny["Action"] == "s3:*"
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    # Every function that reads REPLMON_FLEET gets the bucket and the fleet parameters (the expert
    # knobs, ProbeClasses' and the caps, come from REPLMON_EXPERT on every function: core/expert.py).
    for fn in ("PlanProbesFunction", "BeginRouteRunFunction"):
        text = json.dumps(res[fn]["Properties"]["Environment"]["Variables"]["REPLMON_FLEET"])
        for name in ("RouteGroups", "ScheduleRateMinutes", "MemberExternalId", "PlanBucket"):
            assert "${" + name + "}" in text, (fn, name)
    assert load_template(TEMPLATE)["Globals"]["Function"]["Environment"]["Variables"]["REPLMON_EXPERT"] == {"Ref": "ExpertSettings"}


def test_inputs_that_ask_for_something_and_an_empty_registry_plan_from_the_registry(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry is the only list of routes: ``events/probe_now.json`` names sizes, not routes: the
    registry's probe-mode routes with those sizes; the schedule's ``{}`` with an empty registry plans
    nothing (a fleet-only hub before its inventory ran); the stack's own route is a registry item
    (the StackRoute custom resource) planned like any other. Past the state budget, routes are
    deferred by name (StateSize), never carried into a failing run."""
    from replmon.core.route import Route
    from replmon.fleet.stack_route import spec_of_route, upsert_stack_route
    from tests.conftest import route

    registry = fleet_env(env)
    env.deps.defaults = {"sizes": "1KiB", "trials": 1}
    handler = load_handler("PlanProbes")
    with injected(env.deps):
        empty = handler({}, LambdaContext("PlanProbes"))
    assert empty["probes"] == [] and empty["route_classes"] == {}
    upsert_stack_route(registry, spec_of_route(Route.model_validate(route()), groups=1))
    registry.put_explicit(spec("reg-1"), None)
    registry.put_explicit(spec("reg-2"), None)
    with injected(env.deps):
        sized = handler({"sizes": ["1KiB", "2KiB"], "trials": 1}, LambdaContext("PlanProbes"))
        scheduled = handler({}, LambdaContext("PlanProbes"))
    assert [p["size_class"] for p in sized["probes"] if p["route"]["name"] == "primary"] == ["1KiB", "2KiB"]
    assert {p["route"]["name"] for p in sized["probes"]} == {"primary", "reg-1", "reg-2"}
    assert set(scheduled["route_classes"]) == {"primary", "reg-1", "reg-2"}
    # each route's probe count: its last probe to end releases its lease (fleet/lease.py end_probe)
    assert scheduled["route_probes"] == {n: sum(p["route"]["name"] == n for p in scheduled["probes"]) for n in scheduled["route_classes"]}
    assert all(scheduled["route_probes"].values())
    monkeypatch.setattr(planner, "STATE_ROUTE_BYTES", 40)
    with injected(env.deps):
        tight = handler({}, LambdaContext("PlanProbes"))
    assert len(tight["route_classes"]) == 1 and [d["reason"] for d in tight["deferred"]] == ["StateSize"] * 2


def test_registry_probes_may_assume_the_member_prober_role_of_listed_accounts_only() -> None:
    """Registry routes carry ``<MemberRolePrefix>-prober`` role ARNs per account (core/registry.py
    ``to_route``): the probe functions may AssumeRole exactly that role name, in this account and the
    MemberAccounts (``aws:ResourceAccount``, "AWS global condition context keys",
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html), and no
    other role - evaluated with iam-simulate on the deployed roles."""
    from replmon.local.cfn import Resolver
    from tests.cfnutil import ACCOUNT, MODES, REGION, STACK, default_transformed, function_role_policies
    from tests.iam import IamRequest, evaluate

    cfn = default_transformed()  # the transform does not depend on parameter values
    r = Resolver(cfn, {**MODES["create-demo"], "MemberAccounts": ["210987654321"]}, region=REGION, account=ACCOUNT, stack=STACK,
                 physical={"DemoSourceBucket": SRC, "DemoDestinationBucket": DST, "LatencyTable": TABLE})
    fns = ("UploadProbe", "PollReplication", "Cleanup")
    policies = {fn: function_role_policies(cfn, fn, r) for fn in fns}

    def assume(fn: str, account: str, role: str = "replmon-prober") -> tuple[str, IamRequest]:
        return fn, IamRequest("sts:AssumeRole", f"arn:aws:iam::{account}:role/{role}", (("aws:ResourceAccount", account),))

    assert evaluate([assume(fn, a) for fn in fns for a in (ACCOUNT, "210987654321")], policies, ACCOUNT) == []
    denied = evaluate([assume(fn, "999999999999") for fn in fns] + [assume(fn, "210987654321", "replmon-inventory") for fn in fns],
                      policies, ACCOUNT)
    assert len(denied) == 6, denied
    # With OrganizationId: any account of the organization too, and the listed ones outside it still.
    r_org = Resolver(cfn, {**MODES["create-demo"], "MemberAccounts": ["210987654321"], "OrganizationId": "o-abcdef1234"}, region=REGION,
                     account=ACCOUNT, stack=STACK, physical={"DemoSourceBucket": SRC, "DemoDestinationBucket": DST, "LatencyTable": TABLE})
    org = {fn: function_role_policies(cfn, fn, r_org) for fn in fns}

    def in_org(fn: str, account: str, org_id: str) -> tuple[str, IamRequest]:
        return fn, IamRequest("sts:AssumeRole", f"arn:aws:iam::{account}:role/replmon-prober",
                              (("aws:ResourceAccount", account), ("aws:ResourceOrgID", org_id)))

    assert evaluate([in_org(fn, "333333333333", "o-abcdef1234") for fn in fns]
                    + [in_org(fn, "210987654321", "o-other00000") for fn in fns], org, ACCOUNT) == []
    assert len(evaluate([in_org(fn, "333333333333", "o-other00000") for fn in fns], org, ACCOUNT)) == 3


def test_a_local_run_without_a_plan_bucket_refuses_to_read_plans_rather_than_reach_aws(env: Env) -> None:
    """moto builds the ItemReader's S3 client with no endpoint; in a local run S3 passes through, so
    it would read from AWS itself. local_state_machine hands it a client that refuses, by name."""
    import importlib

    from replmon.local.aslrun import ITEM_READER_CLIENT, NoPlanBucket, check_patch_points

    check_patch_points()
    module, _, name = ITEM_READER_CLIENT.rpartition(".")
    with LocalStateMachine({}, plan_s3=NoPlanBucket()):
        client = getattr(importlib.import_module(module), name)("us-east-1", "s3")
        with pytest.raises(RuntimeError, match="no plan bucket"):
            client.get_object(Bucket=PLAN_BUCKET, Key="plans/x.json")


CLASS_CHOICES = ("1KiB@15m", "1MiB@1h", "64MiB@6h,1GiB@1d", "1GiB@15m")


@settings(max_examples=60, deadline=None)
@given(picks=st.lists(st.tuples(st.sampled_from(CLASS_CHOICES), st.booleans(), st.booleans()), min_size=0, max_size=12),
       max_routes=st.integers(1, 12), ceiling=st.floats(1, 3000), seed=st.randoms(use_true_random=False))
def test_the_caps_are_a_deterministic_greedy_pass_that_never_exceeds_either(
        picks: list[tuple[str, bool, bool]], max_routes: int, ceiling: float, seed: Any) -> None:
    """Whatever the registry's order: at most max_routes routes, a modelled month within monthly_usd,
    the same routes for any order of the same input, and every left-out route was over a cap at its turn."""
    from replmon.signals.slo import SloSpec

    fleet = FleetSettings(max_routes=max_routes, monthly_usd=ceiling)
    routes = []
    for i, (classes, explicit, cross) in enumerate(picks):
        s = spec(f"r{i:02d}", origin="explicit" if explicit else "discovered",
                 probe={"classes": {c.split("@")[0]: {"every": c.split("@")[1]} for c in classes.split(",")}},
                 destinations=[{"account": "111122223333", "region": "eu-west-1" if cross else "us-east-1", "bucket": DST,
                                "rtc": cross}])
        routes.append(planner.FleetRoute(route=s.to_route(None), group=s.group, classes=s.classes(fleet.classes),
                                         timeout_seconds=600, spec=s))
    a = caps.cap_routes(routes, fleet, SloSpec())
    shuffled = list(routes)
    seed.shuffle(shuffled)
    b = caps.cap_routes(shuffled, fleet, SloSpec())
    assert [fr.route.name for fr in a.admitted] == [fr.route.name for fr in b.admitted]
    assert len(a.admitted) <= max_routes and (not a.admitted or a.monthly_usd <= ceiling + 1e-9)  # (the fixed part alone may pass it)
    assert len(a.admitted) + len(a.left_out) == len(routes)
    explicit_first = [fr.spec.origin.value for fr in a.admitted if fr.spec]  # type: ignore[union-attr]
    assert explicit_first == sorted(explicit_first, key=lambda o: o != "explicit")
    for x in a.left_out:
        assert x.cap in ("max_routes", "monthly_usd")
        if x.cap == "monthly_usd":
            assert a.monthly_usd + x.monthly_usd > ceiling  # it fits nowhere: the plan is maximal


def test_a_route_named_alone_is_that_registry_route_and_an_unknown_name_is_refused(env: Env) -> None:
    """``events/probe_route.json`` names one registry route: PlanProbes probes that route only, as
    the schedule would (its member role, its buckets), outside the fleet's caps; a name that is not a
    probe-mode registry route (unknown, or passive) fails the run with the field and the fix."""
    from replmon.core.errors import ConfigError
    from tests.conftest import ROOT

    registry = fleet_env(env, max_routes=1)  # the caps bound the registry, not a route asked for by name
    registry.put_explicit(spec("reg-1"), None)
    registry.put_explicit(spec("reg-2"), None)
    registry.put_explicit(spec("passive-1", verdict={"mode": "passive", "reason_code": "OPTED_OUT", "checked_at": 1795000000.0}), None)
    event = {**json.loads((ROOT / "events" / "probe_route.json").read_text()), "routes": ["reg-2"]}
    handler = load_handler("PlanProbes")
    with injected(env.deps):
        out = handler(event, LambdaContext("PlanProbes"))
        with pytest.raises(ConfigError, match=r"routes: 'nope' is not a probe-mode registry route; use one of: reg-1, reg-2"):
            handler({**event, "routes": ["nope"]}, LambdaContext("PlanProbes"))
        with pytest.raises(ConfigError, match=r"routes: 'passive-1' is not a probe-mode"):
            handler({**event, "routes": ["passive-1"]}, LambdaContext("PlanProbes"))
    [probe] = out["probes"]
    assert probe["route"] == spec("reg-2").to_route(env.deps.fleet.member_role_prefix).model_dump(mode="json", exclude_none=True)
    assert probe["route"]["destinations"][0]["role_arn"].endswith(":role/replmon-prober")
    assert probe["size_class"] == "1MiB" and probe["trial"] == 1
    # through the real state machine: the named route's probe runs end to end, and only that route
    with injected(env.deps), LocalStateMachine(state_machine_handlers(), clock=env.clock) as sm:
        result = sm.run({**event, "sizes": ["1KiB"]}, timeout=120)
    assert result.status == "SUCCEEDED", (result.error, result.cause)
    assert [i.event["route"]["name"] for i in result.invocations if i.function == "UploadProbe"] == ["reg-2"]
    env.deps.registry = None
    with injected(env.deps), pytest.raises(ConfigError, match="no registry; give each route in full"):
        handler(event, LambdaContext("PlanProbes"))
