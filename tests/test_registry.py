"""The route registry on DynamoDB (adapters/registry_table.py) and its write rules (fleet/registrar.py).

Contract: "Condition expressions" (Amazon DynamoDB Developer Guide) —
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
(a PutItem/UpdateItem/DeleteItem with a ConditionExpression writes only if it holds, else fails with
ConditionalCheckFailedException and changes nothing; ``attribute_not_exists`` on the key prevents an
overwrite). "Query" key conditions — a page holds at most 1 MB, follow LastEvaluatedKey:
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.KeyConditionExpressions.html
"""

from __future__ import annotations

from typing import Any

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
