"""The route registry on DynamoDB (adapters/registry_table.py) and its write rules (fleet/registrar.py).

Contract: "Condition expressions" (Amazon DynamoDB Developer Guide) —
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
(a PutItem/UpdateItem/DeleteItem with a ConditionExpression writes only if it holds, else fails with
ConditionalCheckFailedException and changes nothing; ``attribute_not_exists`` on the key prevents an
overwrite). "Query" key conditions — a page holds at most 1 MB, follow LastEvaluatedKey:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from replmon.adapters.registry_table import DynamoRegistry
from replmon.core.registry import InventoryObservation, Origin, Reason, RouteSpec, RouteVerdict, group_of, load_route_spec
from replmon.fleet.registrar import move_groups


def spec(name: str = "dr-orders", origin: str = "explicit", groups: int = 1, **over: Any) -> RouteSpec:
    raw: dict[str, Any] = {
        "name": name, "group": group_of(name, groups), "origin": origin,
        "source": {"account": "111122223333", "region": "ap-northeast-1", "bucket": name},
        "destinations": [{"account": "444455556666", "region": "ap-southeast-1", "bucket": f"{name}-dr", "rule_id": "dr"}],
        "verdict": {"mode": "probe", "reason_code": "OK", "checked_at": 1795000000.25},
    }
    raw.update(over)
    return load_route_spec(raw)




def test_a_route_round_trips_through_the_table_exactly(registry: DynamoRegistry) -> None:
    s = spec(slo={"threshold_seconds": 900.5, "target_percent": 99.9})
    assert registry.put_explicit(s, None)
    got = registry.get_route(s.group, s.name)
    assert got == s.model_copy(update={"version": 1})
    assert registry.get_route(s.group, "absent") is None


def test_explicit_edits_are_optimistic_one_of_two_concurrent_edits_wins(registry: DynamoRegistry) -> None:
    s = spec()
    assert registry.put_explicit(s, None)
    assert not registry.put_explicit(s, None), "a second create must not overwrite"
    assert registry.put_explicit(s.model_copy(update={"prefix": "p2/"}), expected_version=1)
    assert not registry.put_explicit(s.model_copy(update={"prefix": "p3/"}), expected_version=1), "stale version wins nothing"
    got = registry.get_route(s.group, s.name)
    assert got is not None and (got.version, got.prefix) == (2, "p2/")


def test_discovered_never_clobbers_explicit_and_only_the_observation_is_set(registry: DynamoRegistry) -> None:
    mine = spec(prefix="mine/")
    assert registry.put_explicit(mine, None)
    found = spec(origin="discovered", prefix="replmon-probes/")
    assert not registry.put_discovered(found)
    seen = RouteVerdict.of(Reason.RULE_DISABLED, "rule 'dr' is Disabled", 1795000100.0)
    registry.observe(found.group, found.name, InventoryObservation(seen_at=1795000100.0, run_id="r1", observed={"rules": 1}), seen)
    got = registry.get_route(mine.group, mine.name)
    assert got is not None
    assert (got.origin, got.prefix, got.version) == (Origin.EXPLICIT, "mine/", 1)
    assert got.verdict_observed == seen and got.inventory is not None and got.inventory.run_id == "r1"
    # a discovered route is replaced by the next inventory, and an explicit one replaces it
    other = spec("dr-logs", origin="discovered")
    assert registry.put_discovered(other)
    assert registry.put_discovered(other.model_copy(update={"prefix": "x/"}))
    assert registry.put_explicit(spec("dr-logs"), expected_version=0)
    got = registry.get_route(other.group, "dr-logs")
    assert got is not None and got.origin is Origin.EXPLICIT


def test_observe_never_creates_a_half_item(registry: DynamoRegistry) -> None:
    registry.observe("g00", "gone", InventoryObservation(seen_at=1.0, run_id="r"), RouteVerdict())
    assert registry.get_route("g00", "gone") is None


def test_delete_with_origin_never_deletes_an_explicit_route(registry: DynamoRegistry) -> None:
    s = spec()
    registry.put_explicit(s, None)
    assert not registry.delete_route(s.group, s.name, origin="discovered")
    assert registry.get_route(s.group, s.name) is not None
    assert registry.delete_route(s.group, s.name)
    assert not registry.delete_route(s.group, s.name)


def test_a_group_lists_every_page_in_name_order(registry: DynamoRegistry) -> None:
    big = {"observed": {"pad": "x" * 300_000}}  # ~300 KB items (< 400 KB): 8 of them span 3 Query pages of 1 MB
    names = [f"route-{i:03d}" for i in range(8)]
    for n in names:
        assert registry.put_discovered(spec(n, origin="discovered", inventory={"seen_at": 1.0, "run_id": "r", **big}))
    queries: list[str] = []
    registry.client.meta.events.register("before-call.dynamodb.Query", lambda **kw: queries.append("q"))
    assert [r.name for r in registry.routes("g00")] == names
    assert len(queries) >= 3, "the registry followed LastEvaluatedKey"
    assert registry.routes("g01") == []


def test_a_route_groups_change_moves_every_route_keeping_explicit_wins(registry: DynamoRegistry) -> None:
    names = [f"rt{i:02d}" for i in range(12)]
    for i, n in enumerate(names):
        if i % 2:
            registry.put_explicit(spec(n), None)
        else:
            registry.put_discovered(spec(n, origin="discovered"))
    moved = move_groups(registry, 4)
    assert sorted(moved) == sorted(n for n in names if group_of(n, 4) != "g00") and moved
    for n in names:
        got = registry.get_route(group_of(n, 4), n)
        assert got is not None and got.group == group_of(n, 4)
        assert got.origin is (Origin.EXPLICIT if int(n[2:]) % 2 else Origin.DISCOVERED)
    assert sum(len(registry.routes(f"g{g:02d}")) for g in range(8)) == len(names), "no copies left behind"
    assert move_groups(registry, 4) == []  # idempotent
    assert sorted(move_groups(registry, 1)) == sorted(moved)


def test_inventory_rows_and_checkpoint(registry: DynamoRegistry) -> None:
    registry.put_account("111122223333", {"status": "ok", "buckets": 3, "seen_at": 1.5})
    assert registry.accounts() == {"111122223333": {"status": "ok", "buckets": 3, "seen_at": 1.5}}
    assert registry.checkpoint() is None
    registry.put_checkpoint({"account": "111122223333", "token": "t1", "run_id": "r"})
    assert registry.checkpoint() == {"account": "111122223333", "token": "t1", "run_id": "r"}
    registry.put_checkpoint(None)
    assert registry.checkpoint() is None


# ------------------------------------------------------------------------------ a bad item is isolated
class Counted:
    def __init__(self) -> None:
        self.counted: list[tuple[str, float, dict[str, str]]] = []

    def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
        self.counted.append((metric, value, dict(dimensions or {})))


def bad_items(registry: DynamoRegistry) -> None:
    """An item without destinations, one named 'old..name' and one with an unknown field, written
    around the validation (by hand, or by an older version)."""
    from replmon.adapters.registry_table import to_attrs

    good = spec("zz-good").to_item()
    for name, drop, extra in (("no-dests", "destinations", {}), ("old..name", None, {}), ("colour", None, {"colour": "red"})):
        item = {**good, "at": name, "name": name, **extra}
        if drop:
            item.pop(drop)
        registry.client.put_item(TableName=registry.table, Item=to_attrs(item))


def test_one_bad_item_is_skipped_with_its_field_and_every_reader_gets_the_others(registry: DynamoRegistry) -> None:
    from replmon.core.registry import InvalidRoute, parse_item

    assert registry.put_explicit(spec("aa-good"), None) and registry.put_explicit(spec("zz-good"), None)
    bad_items(registry)
    assert [r.name for r in registry.routes("g00")] == ["aa-good", "zz-good"]  # what other readers call
    read = registry.read("g00")
    assert [r.name for r in read.routes] == ["aa-good", "zz-good"]
    assert {(b.name, b.reason, b.field) for b in read.invalid} == {
        ("no-dests", "MissingField", "destinations"), ("old..name", "BadName", "name"), ("colour", "UnknownField", "colour")}
    (dots,) = [b for b in registry.invalid("g00") if b.name == "old..name"]
    assert dots.line().startswith("registry item 'old..name' in g00 skipped (BadName): name: ")
    assert isinstance(parse_item("g00", {"at": "x"}), InvalidRoute)  # nothing but a key: still a finding, never a raise


def test_the_planner_counts_invalid_route_per_item_and_plans_the_rest(registry: DynamoRegistry) -> None:
    from types import SimpleNamespace

    from replmon.core.errors import StoreUnavailable
    from replmon.core.fleetconfig import FleetSettings
    from replmon.core.registry import INVALID_ROUTE
    from replmon.fleet.planner import registry_routes

    assert registry.put_explicit(spec("aa-good"), None)
    bad_items(registry)

    class Throttled:  # group g01's Query is throttled: only that group is marked
        def __init__(self, inner: DynamoRegistry) -> None:
            self.inner = inner

        def read(self, group: str) -> Any:
            if group == "g01":
                from replmon.core.errors import StoreUnavailable

                raise StoreUnavailable("latency: ProvisionedThroughputExceededException")
            return self.inner.read(group)

    metrics = Counted()
    deps = SimpleNamespace(registry=Throttled(registry), fleet=FleetSettings(route_groups=2), metrics=metrics,
                           defaults={"timeout_seconds": 1800})
    planned = registry_routes(deps)  # type: ignore[arg-type]
    assert [r.route.name for r in planned] == ["aa-good"]
    assert sorted((m, d["Route"], d["Reason"], d["RouteGroup"]) for m, _, d in metrics.counted) == [
        (INVALID_ROUTE, "#routes/g01", "ReadFailed", "g01"), (INVALID_ROUTE, "colour", "UnknownField", "g00"),
        (INVALID_ROUTE, "no-dests", "MissingField", "g00"), (INVALID_ROUTE, "old..name", "BadName", "g00")]

    class Down:  # every group's read fails: the table, not a group - the plan fails (as before), nothing is planned silently
        def read(self, group: str) -> Any:
            from replmon.core.errors import StoreUnavailable

            raise StoreUnavailable("latency: ResourceNotFoundException")

    deps.registry = Down()
    with pytest.raises(StoreUnavailable):
        registry_routes(deps)  # type: ignore[arg-type]


def test_invalid_route_is_a_declared_metric_with_a_ticket_alarm() -> None:
    """The metric's dimension set is the alarm's schema (core/telemetry.py, fleet/alarms.py): the
    template's alarm reads exactly what the planner emits (tests/test_alarm_contract.py checks the template)."""
    from replmon.core.telemetry import METRICS, REASON, ROUTE, ROUTE_GROUP, SERVICE_DIM
    from replmon.fleet.alarms import FLEET_ALARMS, schema_dimensions

    (alarm,) = [a for a in FLEET_ALARMS if a.metric == "InvalidRoute"]
    assert alarm.severity == "ticket" and alarm.notifies
    assert METRICS["InvalidRoute"].dimension_sets == ((SERVICE_DIM, ROUTE_GROUP, ROUTE, REASON),)
    assert set(schema_dimensions(alarm)) == set(METRICS["InvalidRoute"].dimension_sets[0])


def test_heartbeats_and_the_fleet_report_skip_a_bad_item_and_mark_only_an_unreadable_route(registry: DynamoRegistry) -> None:
    from types import SimpleNamespace

    from replmon.core.fleetconfig import FleetSettings
    from replmon.fleet.risk import fleet_report, registry_rows
    from replmon.probe.heartbeat import heartbeat_routes
    from replmon.signals.slo import SloSpec

    assert registry.put_explicit(spec("aa-good"), None) and registry.put_explicit(spec("zz-good"), None)
    bad_items(registry)
    deps = SimpleNamespace(registry=registry, fleet=FleetSettings(route_groups=1), defaults={}, routes=[])
    assert [h.route.name for h in heartbeat_routes("g00", deps)] == ["aa-good", "zz-good"]  # type: ignore[arg-type]

    rows = {r["route"]: r for r in registry_rows(registry)}
    assert rows["old..name"]["mode"] == "invalid" and rows["old..name"]["reason_code"] == "INVALID_BadName"
    assert rows["aa-good"]["mode"] == "probe"

    # zz-good's reads are denied (as a member's changed policy would); the others' are answered
    from botocore.exceptions import ClientError

    from replmon.adapters.dynamodb import DynamoLatencyStore

    def deny(params: dict[str, Any], **_: Any) -> None:
        if "zz-good" in json.dumps(params, default=str):
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized on zz-good"}}, "Query")

    registry.client.meta.events.register("before-parameter-build.dynamodb.*", deny)
    try:
        report = fleet_report(DynamoLatencyStore(registry.table, registry.client), registry, slo=SloSpec(threshold_seconds=900.0),
                              rpo_window_seconds=3600.0, now=1795000000.0)
    finally:
        registry.client.meta.events.unregister("before-parameter-build.dynamodb.*", deny)
    by = {r["route"]: r for r in report["fleet"]}
    assert by["zz-good"]["verdict"] == "not_measured" and "AccessDeniedException" in by["zz-good"]["reason"]
    assert by["old..name"]["verdict"] == "no_data" and by["old..name"]["mode"] == "invalid"  # a configuration to fix: exit 4, not 3
    assert by["aa-good"]["verdict"] == "no_data" and by["aa-good"]["reason"] == "-"
