"""(g) One bad registry item, and one route whose reads fail, among good routes: only they are marked.

The deployed stack (replmon.local.stack, tests/deployed/scenario.py) with two items written into the
registry around `replmon fleet put` (by hand, or by an older version): one without ``destinations``
and one named ``old..name``. Then the stack's own route's items in the latency table are throttled.
Every reader runs through its handler on its schedule: PlanProbes, the Heartbeat, CollectSignals, the
Report function, and the operator's `replmon fleet` and `replmon report --fleet`.

AWS behaviour the scenario relies on (each looked up, cited here):
- DynamoDB enforces no schema beyond the key: "Only the primary key attributes are required; you can
  optionally provide other attribute name-value pairs for the item" (PutItem ``Item``,
  https://docs.aws.amazon.com/sdk-for-kotlin/api/latest/dynamodb/aws.sdk.kotlin.services.dynamodb.model/-put-item-request/item.html;
  "Core components of Amazon DynamoDB",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/HowItWorks.CoreComponents.md). So
  a Query of a registry partition can return an item of any shape, and each reader must judge items
  one by one.
- DynamoDB throttles one partition on its own ("hot partitions": a partition may throttle reads while
  other operations continue, even when the table has capacity;
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/throttling-key-range-limit-exceeded-mitigation.html).
  So one route's reads can fail while every other route's are answered (the harness's
  :meth:`DeployedStack.throttle` answers that route's Query and GetItem with
  ProvisionedThroughputExceededException, and a BatchGetItem with its keys in UnprocessedKeys: "If at
  least one of the items is successfully processed, then BatchGetItem completes successfully, while
  returning the keys of the unread items in UnprocessedKeys", BatchGetItemRequest,
  https://docs.aws.amazon.com/sdkfornet1/latest/apidocs/html/T_Amazon_DynamoDBv2_Model_BatchGetItemRequest.htm).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from replmon.local.stack import HOME, HUB, MEMBER_A, TABLE, DeployedStack
from tests.deployed.scenario import ROUTE, deployed, replmon, uploads

pytestmark = pytest.mark.deployed
BAD = {"no-dests": ("MissingField", "destinations"), "old..name": ("BadName", "name")}
THROTTLED = "primary"  # the stack's own route (fleet/stack_route.py): a registry route like the others




def write_bad_items(stack: DeployedStack) -> None:
    """The two items, each a full route but for its one flaw, straight into the table as an admin."""
    from replmon.adapters.registry_table import to_attrs

    dynamodb = stack.admin("dynamodb", HUB)
    src = {"account": MEMBER_A, "region": HOME, "bucket": ROUTE}
    for name in BAD:
        item: dict[str, Any] = {"route": "#routes/g00", "at": name, "name": name, "group": "g00", "origin": "explicit", "source": src}
        if name != "no-dests":
            item["destinations"] = [{"account": MEMBER_A, "region": HOME, "bucket": "orders-dr"}]
        dynamodb.put_item(TableName=TABLE, Item=to_attrs(item))


@pytest.fixture(scope="module")
def isolated() -> Iterator[dict[str, Any]]:
    """The bad items from the start; eleven minutes (two plans, two collector runs, a heartbeat a
    minute); the stack's own route throttled from minute 6 (the second collector run reads it)."""
    with deployed() as stack:
        write_bad_items(stack)
        stack.advance(minutes=6)
        seen: dict[str, Any] = {"stack": stack, "throttled_at": stack.clock.now()}
        stack.throttle(THROTTLED)
        stack.advance(minutes=5)
        seen["fleet"] = replmon(stack, "fleet", "--format", "json")
        seen["fleet_table"] = replmon(stack, "fleet")
        seen["report"] = replmon(stack, "report", "--fleet", "--format", "json")
        seen["report_csv"] = replmon(stack, "report", "--fleet", "--format", "csv")  # csv: no column cut at the runner's width
        seen["report_fn"] = stack.invoke("Report", {"fleet": True})
        seen["report_plain"] = stack.invoke("Report", {})
        # The InvalidRoute alarms sum one hour (Period 3600): they are evaluated at its end, over what
        # the readers emitted in it (the clock is set there without firing the schedules in between).
        stack.settle()
        stack.clock.set((stack.clock.now() // 3600 + 1) * 3600 + 1)
        stack.evaluate_alarms()
        yield seen


def test_g_the_good_route_is_planned_probed_heartbeated_and_judged(isolated: dict[str, Any]) -> None:
    stack = isolated["stack"]
    assert uploads(stack, ROUTE) == 2  # both 5-minute ticks planned it, beside the bad items
    assert [r.status.value for r in stack.deps("Report").store.query(ROUTE, 0, 4e9)] == ["COMPLETED", "COMPLETED"]
    assert len(stack.points("RpoSeconds", Route=ROUTE)) == 2  # judged by both collector runs, also while another route is throttled
    assert len(stack.points("StallSeconds", Route=ROUTE)) >= 11
    assert not [i for i in stack.invocations if i.function in ("PlanProbes", "CollectSignals", "Heartbeat") and i.error], \
        [(i.function, i.error) for i in stack.invocations if i.error]


def test_g_each_bad_item_is_an_invalid_route_metric_and_a_ticket_naming_it(isolated: dict[str, Any]) -> None:
    stack = isolated["stack"]
    for name, (reason, _) in BAD.items():
        points = stack.points("InvalidRoute", Route=name, Reason=reason, RouteGroup="g00")
        assert len(points) >= 2, f"{name}: {len(points)} InvalidRoute points"  # every plan counts it
        assert stack.alarm_state("InvalidRouteG00Alarm", name) == "ALARM"
        assert [t for t in stack.tickets(naming=name) if t.source == "alarm:InvalidRouteG00Alarm"], f"no ticket names {name}"
        assert not stack.pages(naming=name)  # a ticket, never a page
    assert stack.alarm_state("InvalidRouteG00Alarm", ROUTE) == "OK"


def test_g_a_route_whose_reads_are_throttled_is_marked_alone(isolated: dict[str, Any]) -> None:
    stack = isolated["stack"]
    after = isolated["throttled_at"]
    marked = [p for p in stack.points("InvalidRoute", Route=THROTTLED, Reason="ReadFailed") if p.timestamp >= after]
    assert marked, "the throttled route was not marked"
    assert stack.alarm_state("InvalidRouteG00Alarm", THROTTLED) == "ALARM"
    assert [p for p in stack.points("RpoSeconds", Route=ROUTE) if p.timestamp >= after], "the other route was not judged"
    # PlanProbes: the route's lease is unreadable (BatchGetItem leaves its key unprocessed): it alone waits
    assert [d for f, d in stack.emf if f == "PlanProbes" and "InvalidRoute" in d and d.get("Route") == THROTTLED
            and d.get("Reason") == "ReadFailed"], "PlanProbes did not mark the throttled route"
    assert uploads(stack, THROTTLED, since=after) == 0 and uploads(stack, ROUTE, since=after) == 1
    last = [i for i in stack.invocations if i.function == "CollectSignals"][-1].result
    assert [r["route"] for r in last["routes"]] == [ROUTE] or THROTTLED not in [r["route"] for r in last["routes"]]
    assert {(s["name"], s["reason"]) for s in last["skipped"]} >= {(THROTTLED, "ReadFailed"), *((n, r) for n, (r, _) in BAD.items())}


def test_g_replmon_fleet_names_each_item_and_its_field(isolated: dict[str, Any]) -> None:
    code, out = isolated["fleet"]
    assert code == 0, out
    doc = json.loads(out)
    assert ROUTE in [r["name"] for r in doc["routes"]]
    assert {b["name"]: (b["reason"], b["field"]) for b in doc["invalid"]} == BAD
    code, out = isolated["fleet_table"]
    assert code == 0 and "2 invalid items skipped" in out, out
    assert "registry item 'no-dests' in g00 skipped (MissingField): destinations: is required" in out


def test_g_report_fleet_marks_only_them_and_exits_3_for_the_unread_route(isolated: dict[str, Any]) -> None:
    """The exit code is the most urgent row's (cli/exitcodes.py PRECEDENCE): the throttled route is
    not measured (3: the store failed for it); an invalid item alone would be no data (4); neither
    is a breach (1)."""
    code, out = isolated["report"]
    assert code == 3, out
    rows = {r["route"]: r for r in json.loads(out)["fleet"]}
    assert rows[ROUTE]["verdict"] == "ok" and rows[ROUTE]["rpo_seconds"] is not None
    assert rows[THROTTLED]["verdict"] == "not_measured" and "ProvisionedThroughputExceeded" in rows[THROTTLED]["reason"]
    for name, (reason, field) in BAD.items():
        assert rows[name]["verdict"] == "no_data" and rows[name]["mode"] == "invalid"
        assert rows[name]["reason"].startswith(f"INVALID_{reason}: {field}")
    code, out = isolated["report_csv"]
    assert code == 3 and all(any(line.startswith(f"{n},") and "INVALID_" in line for line in out.splitlines()) for n in BAD), out
    by_fn = {r["route"]: r for r in isolated["report_fn"]["fleet"]}
    assert by_fn[ROUTE]["verdict"] == "ok" and by_fn[THROTTLED]["verdict"] == "not_measured"
    assert {by_fn[n]["verdict"] for n in BAD} == {"no_data"}
    plain = isolated["report_plain"]  # the Report function's {}: every measured route of the registry
    assert ROUTE in [h["route"] for h in plain["health"]] and THROTTLED not in [h["route"] for h in plain["health"]]
    assert [u["route"] for u in plain["unreadable"]] == [THROTTLED]


def test_g_fleet_put_refuses_the_bad_item_at_the_edge(isolated: dict[str, Any]) -> None:
    stack = isolated["stack"]
    route = {"name": "old..name", "source": {"account": MEMBER_A, "region": HOME, "bucket": ROUTE},
             "destinations": [{"account": MEMBER_A, "region": HOME, "bucket": "orders-dr"}]}
    code, out = replmon(stack, "fleet", "put", "-", stdin=json.dumps(route))
    assert code == 2 and "name: must be 1-64 letters" in out, out
    code, out = replmon(stack, "fleet", "put", "-", stdin=json.dumps({**route, "name": "no-dests", "destinations": []}))
    assert code == 2 and "at least one destination" in out, out
