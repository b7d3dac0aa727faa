"""One route model: the registry is the only list of routes, read through one port by every
function; the stack's own route is a registry item the stack writes; an event maps to its registry
route or is kept and counted as unmapped; a route without data publishes no RPO of 0.

AWS contracts encoded here:
- "Custom resource response objects"
  (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/crpg-ref-responses.html): the
  provider PUTs Status SUCCESS or FAILED (Reason required when FAILED), a non-empty
  PhysicalResourceId identical for every response of a resource (a different one on Update is a
  replacement: CloudFormation then sends Delete for the old one), StackId, RequestId and
  LogicalResourceId copied from the request; the body is at most 4,096 bytes.
- "Configuring how CloudWatch alarms treat missing data"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarms-and-missing-data.html) and
  "Create an alarm based on a Multi Time Series Metrics Insights query"
  (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/multi-time-series-alarm.html):
  TreatMissingData notBreaching counts a missing point as within the threshold, and a Metrics
  Insights alarm's contributors are the series its query returns, so a series that is not emitted
  can never be in ALARM. Hence a route without data has no RpoSeconds (the RPO alarm cannot fire on
  a made-up 0, nor on nothing) and RouteNoData, emitted 0/1 for every probe-mode route on every
  collector run, is what tickets it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from replmon import wiring
from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.memregistry import MemoryRegistry
from replmon.adapters.registry_table import DynamoRegistry
from replmon.core.clock import ManualClock
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.partitions import roll_partition, unmapped_partition
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.registry import ProbeSpec, Reason, RouteSpec, RouteVerdict, load_route_spec
from replmon.fleet import alarms as fa
from replmon.fleet.stack_route import PROPERTIES, delete_stack_route, handle_custom_resource, stack_route_spec, upsert_stack_route
from replmon.local.aslrun import LambdaContext, load_handler
from replmon.local.tables import ensure_table
from replmon.local.template import load_template
from replmon.signals.event_ingest import route_for_event
from replmon.signals.s3events import ReplicationEvent
from replmon.wiring import Deps
from tests.cfnutil import default_transformed, resolver
from tests.conftest import ROOT, TABLE, TEMPLATE

NOW = 1_790_000_000.0
HUB, MEMBER = "111122223333", "444455556666"


def spec(name: str, src: str, dst: str, *, rule: str | None = "r1", mode: str = "probe", origin: str = "discovered",
         prefix: str = "replmon-probes/") -> RouteSpec:
    verdict = {"probe": RouteVerdict(), "passive": RouteVerdict.of(Reason.FILTER_EXCLUDES_PREFIX),
               "off": RouteVerdict.of(Reason.DESTINATION_MISSING)}[mode]
    return load_route_spec({"name": name, "group": "g00", "origin": origin, "prefix": prefix,
                            "source": {"account": MEMBER, "region": "us-east-1", "bucket": src},
                            "destinations": [{"account": MEMBER, "region": "us-west-2", "bucket": dst, "rule_id": rule}],
                            "verdict": verdict.model_dump(mode="json")})


class Capture:
    def __init__(self) -> None:
        self.counted: list[tuple[str, float, dict[str, str]]] = []

    def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
        self.counted.append((metric, value, dict(dimensions or {})))

    def publish(self, record: Any) -> None:
        pass

    def of(self, metric: str) -> dict[str, float]:
        return {d.get("Route", d.get("Reason", "")): v for m, v, d in self.counted if m == metric}


@pytest.fixture
def table(ddb: Any, request: pytest.FixtureRequest) -> Iterator[DynamoLatencyStore]:
    name = f"{TABLE}-{request.node.name[:200]}"
    ensure_table(ddb, name, TEMPLATE)
    yield DynamoLatencyStore(name, ddb)


def deps(store: DynamoLatencyStore, registry: Any, metrics: Capture) -> Deps:
    return Deps(stores=None, store=store, metrics=metrics, clock=ManualClock(NOW), registry=registry,  # type: ignore[arg-type]
                fleet=FleetSettings(probe_classes="1MiB@1h,1GiB@1d"), results=None)  # type: ignore[arg-type]


def record(route: str, at: float, status: ProbeStatus = ProbeStatus.COMPLETED, hi: float | None = 30.0) -> ProbeRecord:
    import time

    from replmon.core.keys import RUN_STAMP

    return ProbeRecord(route=route, probe_id=f"p{at}", run_id=time.strftime(RUN_STAMP, time.gmtime(at)) + "-r", planned_at=at,
                       size_bytes=2**20, size_class="1MiB", trial=1, status=status, put_end=at + 1,
                       latency_lo=None if hi is None else hi - 1, latency_hi=hi, target_seconds=900.0)


# ------------------------------------------------------------------------------ CollectSignals
def test_collect_signals_judges_every_registry_route_and_no_data_is_not_an_rpo_of_0(table: DynamoLatencyStore) -> None:
    """Through the handler: a discovered route, a passive one and the stack's own get their signals;
    a route in mode off is not measured. A route without data has no RpoSeconds; a probe-mode one
    past its class interval (1 h + a 15-minute tick) has RouteNoData 1, a passive one none."""
    registry = MemoryRegistry([
        spec("measured", "src-a", "dst-a"), spec("silent", "src-b", "dst-b"), spec("passive", "src-c", "dst-c", mode="passive"),
        spec("listed", "src-d", "dst-d", mode="off"),
        stack_route_spec({"RouteName": "primary", "Account": HUB, "Region": "us-east-1", "SourceBucket": "stack-src",
                          "DestinationBucket": "stack-dst"}, groups=1),
    ])
    table.put_once(record("measured", NOW - 600))
    table.put_once(record("primary", NOW - 2 * 3600))  # older than its window and its 1MiB@1h class + tick
    metrics = Capture()
    with wiring.injected({"CollectSignals": deps(table, registry, metrics)}):
        out = load_handler("CollectSignals")({}, LambdaContext("CollectSignals"))
    assert [r["route"] for r in out["routes"]] == ["measured", "passive", "primary", "silent"]  # "listed" (off) is not
    rpo = metrics.of("RpoSeconds")
    assert rpo == {"measured": pytest.approx(30.0, abs=2)}, "no route without data publishes an RPO, 0 or otherwise"
    # sparse: 1 while a route is overdue, nothing otherwise; passive: none (idle S3 metrics are not a fault)
    assert metrics.of("RouteNoData") == {"primary": 1, "silent": 1}
    by_route = {r["route"]: r for r in out["routes"]}
    assert by_route["silent"]["has_data"] is False and by_route["silent"]["no_data"] is True
    assert by_route["passive"]["no_data"] is None


def test_a_route_with_data_within_its_class_interval_is_not_no_data(table: DynamoLatencyStore) -> None:
    """Outside the 1 h RPO window but inside 1MiB@1h + the tick: no RpoSeconds (nothing in the window),
    no RouteNoData (not yet overdue: the sparse signal is emitted only at 1)."""
    registry = MemoryRegistry([spec("r", "src", "dst")])
    table.put_once(record("r", NOW - 3600 - 300))
    metrics = Capture()
    with wiring.injected({"CollectSignals": deps(table, registry, metrics)}):
        out = load_handler("CollectSignals")({"group": "g00"}, LambdaContext("CollectSignals"))
    assert metrics.of("RpoSeconds") == {} and metrics.of("RouteNoData") == {}
    assert [r["no_data"] for r in out["routes"]] == [False]  # judged, and not overdue
    with wiring.injected({"CollectSignals": deps(table, registry, metrics)}), pytest.raises(ConfigError, match="group"):
        load_handler("CollectSignals")({"group": "g05"}, LambdaContext("CollectSignals"))


def test_each_route_is_judged_at_the_slo_its_own_classes_support(table: DynamoLatencyStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the handler: the fleet's classes (1MiB@1h,1GiB@1d: 750 probes a 30-day period, a budget
    of 0.75 at 99.9 %) are judged at the highest target leaving 5 bad probes (99.33 %, signals/slo.py
    slo_for_route, what PlanProbes tickets as SloUnsupported); a route whose own classes support 99.9 %
    keeps it; one too thin for any target publishes no error budget and no burn rate."""
    import dataclasses

    def classed(name: str, classes: dict[str, Any]) -> RouteSpec:
        return spec(name, f"src-{name}", f"dst-{name}").model_copy(update={"probe": ProbeSpec.model_validate({"classes": classes})})

    registry = MemoryRegistry([spec("fleet", "src-f", "dst-f"), classed("rich", {"1KiB": {"every": "5m"}}),
                               classed("thin", {"1GiB": {"every": "7d"}})])
    from replmon.signals.rollup import store_record

    for name in ("fleet", "rich", "thin"):  # with its hour item's counters, as RecordResult writes it
        assert store_record(table, record(name, NOW - 600), NOW - 590, threshold_seconds=900.0)
    metrics = Capture()
    monkeypatch.setattr("replmon.signals.health.BUDGET_EVERY_HOURS", 1)  # the budget every hour here (NOW's hour is 2 mod 6)
    d = deps(table, registry, metrics)
    d.slo = dataclasses.replace(d.slo, target=0.999)
    with wiring.injected({"CollectSignals": d}):
        out = load_handler("CollectSignals")({}, LambdaContext("CollectSignals"))
    slo = {r["route"]: r["slo"] for r in out["routes"]}
    assert slo["fleet"]["target"] == pytest.approx(0.9933) and slo["fleet"]["judged"] is True
    assert slo["rich"]["target"] == pytest.approx(0.999) and slo["rich"]["judged"] is True
    assert slo["thin"]["judged"] is False
    assert set(metrics.of("ErrorBudgetRemaining")) == {"fleet", "rich"}, "a route no target fits publishes no budget"
    assert "thin" not in metrics.of("SloBurnPage") and "thin" in metrics.of("RpoSeconds")  # its RPO still counts


def test_the_no_data_alarm_tickets_and_the_rpo_alarm_never_sees_a_made_up_zero() -> None:
    """RouteNoData: a per-route Metrics Insights alarm, ticket, >= 1, missing data notBreaching (a
    missing series is a route with data, or the collector down: CollectorHeartbeatAlarm); its metric
    is sparse (1 while the route is overdue, else nothing: the same OK as a 0)."""
    from replmon.core.telemetry import FLEET_METRICS, SPARSE

    t = load_template(TEMPLATE)
    (alarm,) = [a for a in fa.FLEET_ALARMS if a.metric == "RouteNoData"]
    assert (alarm.severity, alarm.op, alarm.threshold, alarm.notifies) == ("ticket", ">=", 1, True)
    p = t["Resources"][fa.logical_id(alarm, "g00")]["Properties"]
    assert p["TreatMissingData"] == "notBreaching" and "MAX(RouteNoData)" in p["Metrics"][0]["Expression"]
    assert FLEET_METRICS["RouteNoData"].cadence == SPARSE
    assert t["Resources"]["CollectorHeartbeatAlarm"]["Properties"]["TreatMissingData"] == "breaching"
    # The RPO alarm: a route without data has no series, so no contributor, never an "RPO 0" that reads healthiest.
    rpo = t["Resources"][fa.logical_id(fa.FLEET_ALARMS[0], "g00")]["Properties"]
    assert "MAX(RpoSeconds)" in rpo["Metrics"][0]["Expression"] and rpo["TreatMissingData"] == "notBreaching"
    dash = json.dumps(t["Resources"])
    assert "RouteNoData" in dash  # the dashboard shows routes without data beside the RPO


# ------------------------------------------------------------------------------ IngestEvents
def event(src: str, dst: str | None, rule: str | None, key: str = "data/x", kind: str = "OperationFailedReplication") -> ReplicationEvent:
    return ReplicationEvent(kind=kind, source_bucket=src, key=key, event_time=NOW - 60, rule_id=rule, destination_bucket=dst,
                            version_id="v1", failure_reason="AssumeRoleNotPermitted")


def test_an_event_maps_by_source_destination_and_rule_or_is_unmapped_with_the_first_check_that_failed() -> None:
    routes = [s.to_route(None) for s in (spec("a", "src", "dst", rule="r1"), spec("b", "src", "dst2", rule="r2"),
                                         spec("c", "src", "dst", rule="r3", prefix="other/"), spec("d", "two", "dst", rule=None))]
    assert route_for_event(event("src", "dst", "r1"), routes) == "a"
    assert route_for_event(event("src", "dst2", "r2"), routes) == "b"
    assert route_for_event(event("src", "dst", "r3", key="other/k"), routes) == "c"
    assert route_for_event(event("two", "dst", "any-rule"), routes) == "d"  # no rule id in the registry: any rule
    assert route_for_event(event("src", None, None), routes) == "a"  # MinIO names neither: the first by name
    for ev, reason in ((event("nobody", "dst", "r1"), "source_bucket"), (event("src", "elsewhere", "r1"), "destination"),
                       (event("src", "dst2", "r9"), "rule_id")):
        got = route_for_event(ev, routes)
        assert not isinstance(got, str) and got.reason == reason, (ev, got)


def sqs(doc: dict[str, Any], mid: str) -> dict[str, Any]:
    return {"messageId": mid, "receiptHandle": "h", "body": json.dumps(doc), "attributes": {}, "messageAttributes": {},
            "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:events",
            "awsRegion": "us-east-1"}


def test_ingest_events_files_events_under_registry_routes_and_keeps_unmapped_ones(table: DynamoLatencyStore, ddb: Any) -> None:
    """Through the handler: the documented failure event (probe-source -> probe-replica, rule
    replmon-probes) is counted under the registry route; one from a bucket no route has is kept under
    #unmapped/<day>, counted once as UnmappedEvent{Reason} (a redelivery is not a second count), and no
    ``<src>><dst>`` route is invented."""
    registry = DynamoRegistry(table.table, ddb)
    registry.put_discovered(spec("orders-dr", "probe-source", "probe-replica", rule="replmon-probes"))
    doc = json.loads((ROOT / "events" / "s3" / "replication_failed.json").read_text())
    stray = json.loads(json.dumps(doc))
    stray["Records"][0]["s3"]["bucket"]["name"] = "not-measured"
    stray["Records"][0]["s3"]["bucket"]["arn"] = "arn:aws:s3:::not-measured"
    metrics = Capture()
    handler = load_handler("IngestEvents")
    with wiring.injected({"IngestEvents": deps(table, registry, metrics)}):
        out = handler({"Records": [sqs(doc, "m1"), sqs(stray, "m2")]}, LambdaContext("IngestEvents"))
        again = handler({"Records": [sqs(stray, "m3")]}, LambdaContext("IngestEvents"))
    assert out == {"batchItemFailures": []} and again == {"batchItemFailures": []}
    assert [(m, d) for m, _, d in metrics.counted if m == "ReplicationEvents"] == [
        ("ReplicationEvents", {"Route": "orders-dr", "Event": "OperationFailedReplication"})]
    assert [(m, v, d) for m, v, d in metrics.counted if m == "UnmappedEvent"] == [("UnmappedEvent", 1, {"Reason": "source_bucket"})]
    day = unmapped_partition(stray_time(stray))
    assert day == "#unmapped/2026-11-22"  # the event's own UTC day
    kept = table.partition_items(day)
    assert len({i["at"] for i in kept}) == 1 and kept[0]["source_bucket"] == "not-measured" and kept[0]["reason"] == "source_bucket"
    assert table.partition_items(roll_partition("not-measured>probe-replica")) == []  # no invented route


def stray_time(doc: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(doc["Records"][0]["eventTime"].replace("Z", "+00:00")).timestamp()


def test_the_unmapped_event_alarm_tickets() -> None:
    p = load_template(TEMPLATE)["Resources"]["UnmappedEventAlarm"]
    tags = {t["Key"]: t["Value"] for t in p["Properties"]["Tags"]}
    assert tags["Severity"] == "ticket" and "Runbook" in p["Metadata"]
    assert p["Properties"]["Metrics"][0]["Expression"] == ('SELECT SUM(UnmappedEvent) FROM SCHEMA("Replmon", Reason, service) '
                                                          "GROUP BY Reason ORDER BY SUM() DESC LIMIT 10")
    from replmon.core.telemetry import METRICS

    assert METRICS["UnmappedEvent"].dimension_sets == (("service", "Reason"),)


# ------------------------------------------------------------------------------ the stack's own route
class Responses:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, url: str, body: dict[str, Any]) -> None:
        assert len(json.dumps(body).encode()) <= 4096  # the response body's documented maximum
        self.sent.append((url, body))


def request(kind: str, props: dict[str, Any], physical: str | None = None) -> dict[str, Any]:
    r = {"RequestType": kind, "ResponseURL": "https://cloudformation-custom-resource-response.example/abc", "StackId": "stack-1",
         "RequestId": f"req-{kind}", "LogicalResourceId": "StackRoute", "ResourceType": "Custom::StackRoute",
         "ResourceProperties": {"ServiceToken": "arn:aws:lambda:us-east-1:111122223333:function:inv", **props}}
    if physical:
        r["PhysicalResourceId"] = physical
    return r


PROPS = {"RouteName": "primary", "Account": HUB, "Region": "us-east-1", "SourceBucket": "src", "SourceKmsKeyArn": "",
         "DestinationBucket": "dst", "DestinationRegion": "us-west-2", "DestinationRoleArn": f"arn:aws:iam::{MEMBER}:role/dst-access",
         "RuleId": "rule-1", "Prefix": "replmon-probes/", "SeedPrefix": "replmon-seed/"}


def test_the_stack_route_custom_resource_writes_renames_and_deletes_the_registry_item(table: DynamoLatencyStore, ddb: Any) -> None:
    """Through the Inventory function's handler (the ServiceToken), as CloudFormation calls it."""
    registry = DynamoRegistry(table.table, ddb)
    answers = Responses()
    handler = load_handler("Inventory")
    d = deps(table, registry, Capture())
    with wiring.injected({"Inventory": d}), pytest.MonkeyPatch.context() as mp:
        mp.setattr("replmon.fleet.stack_route._put_response", answers)
        mp.setattr("replmon.entry.inventory.handle_custom_resource",
                   lambda e, r, groups: handle_custom_resource(e, r, groups=groups, respond=answers))
        handler(request("Create", PROPS), LambdaContext("Inventory"))
        handler(request("Create", PROPS), LambdaContext("Inventory"))  # a redelivery changes nothing
        item = registry.get_route("g00", "primary")
        assert item is not None and (item.origin.value, item.managed_by, item.version) == ("explicit", "stack", 1)
        route = item.to_route(d.fleet.member_role_prefix)
        assert route.source.role_arn is None and route.destinations[0].role_arn == PROPS["DestinationRoleArn"]
        assert route.destinations[0].account == MEMBER and route.destinations[0].rule_id == "rule-1"
        # RouteName changes: the new item, then CloudFormation's Delete of the old physical id
        handler(request("Update", {**PROPS, "RouteName": "main"}, physical="primary"), LambdaContext("Inventory"))
        handler(request("Delete", PROPS, physical="primary"), LambdaContext("Inventory"))
        assert registry.get_route("g00", "primary") is None and registry.get_route("g00", "main") is not None
        # a bad parameter is answered FAILED with the parameter's name (a stack never waits an hour)
        handler(request("Create", {**PROPS, "RouteName": "x", "DestinationBucket": ""}), LambdaContext("Inventory"))
    statuses = [(b["Status"], b["PhysicalResourceId"], b["RequestId"], b["StackId"]) for _, b in answers.sent]
    assert statuses == [("SUCCESS", "primary", "req-Create", "stack-1"), ("SUCCESS", "primary", "req-Create", "stack-1"),
                        ("SUCCESS", "main", "req-Update", "stack-1"), ("SUCCESS", "primary", "req-Delete", "stack-1"),
                        ("FAILED", "x", "req-Create", "stack-1")]
    assert "DestinationBucketName" in answers.sent[-1][1]["Reason"]
    assert answers.sent[1][1]["Data"]["Outcome"] == "unchanged"


def test_the_stack_never_overwrites_a_route_a_person_registered_and_replaces_a_discovered_one() -> None:
    registry = MemoryRegistry()
    mine = stack_route_spec(PROPS, groups=1)
    registry.put_discovered(spec("primary", "src", "dst"))
    assert upsert_stack_route(registry, mine) == "replaced discovered"
    assert delete_stack_route(registry, "primary") == ["g00"]
    person = spec("primary", "src", "dst", origin="explicit")
    registry.put_explicit(person, None)
    with pytest.raises(ConfigError, match="RouteName"):
        upsert_stack_route(registry, mine)
    assert delete_stack_route(registry, "primary") == [] and registry.get_route("g00", "primary") is not None
    with pytest.raises(Exception, match="role_arn"):  # only the stack's route carries a destination role of its own
        load_route_spec({**person.model_dump(mode="json"), "destinations": [{**person.destinations[0].model_dump(mode="json"),
                                                                            "role_arn": PROPS["DestinationRoleArn"]}]})


def test_the_template_writes_the_stack_route_from_its_parameters_and_a_fleet_only_hub_has_none() -> None:
    t = load_template(TEMPLATE)
    res = t["Resources"]["StackRoute"]
    assert res["Type"] == "Custom::StackRoute" and res["Condition"] == "HasStackRoute"
    props = res["Properties"]
    assert props["ServiceToken"] in ({"Fn::GetAtt": ["InventoryFunction", "Arn"]}, {"Fn::GetAtt": "InventoryFunction.Arn"})
    assert set(props) - {"ServiceToken", "ServiceTimeout"} == set(PROPERTIES)
    # CloudFormation's own wait for an answer (AWS::CloudFormation::CustomResource ServiceTimeout: 1-3600 s,
    # default 3600; https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-cloudformation-customresource.html)
    assert 1 <= props["ServiceTimeout"] <= 300
    defaults = json.dumps(t["Globals"]["Function"]["Environment"]["Variables"]["REPLMON_DEFAULTS"])
    assert "routes" not in defaults, "REPLMON_DEFAULTS holds request defaults, never routes"
    r = resolver(default_transformed())
    assert r.exists("StackRoute")  # the demo pair
    r.params.update({"BucketMode": "none"})  # existing without buckets: refused by the template's Rules
    assert not r.exists("StackRoute") and not r.exists("PendingBytesAlarm")  # a fleet-only hub
    r.params.update({"BucketMode": "existing", "SourceBucketName": "mine", "DestinationBucketName": "dr"})
    assert r.exists("StackRoute")
    inv = t["Resources"]["InventoryFunction"]["Properties"]["Policies"][0]["Statement"][0]["Action"]
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem"} <= set(inv)


# ------------------------------------------------------------------------------ Report, PlanProbes
def test_report_without_routes_covers_the_registry_routes(table: DynamoLatencyStore) -> None:
    registry = MemoryRegistry([spec("a", "src-1", "dst-1"), spec("b", "src-2", "dst-2", mode="passive"),
                               spec("c", "src-3", "dst-3", mode="off")])
    with wiring.injected({"Report": deps(table, registry, Capture())}):
        out = load_handler("Report")({"hours": 1}, LambdaContext("Report"))
    assert [h["route"] for h in out["health"]] == ["a", "b"]


def test_an_ad_hoc_run_naming_sizes_probes_the_registry_routes_and_an_empty_registry_plans_nothing(table: DynamoLatencyStore) -> None:
    from replmon.fleet.planner import plan_step

    d = deps(table, MemoryRegistry([spec("a", "src-1", "dst-1"), spec("p", "src-2", "dst-2", mode="passive")]), Capture())
    d.defaults = {"timeout_seconds": 3600}
    out = plan_step({"sizes": ["1MiB"]}, d)
    assert [p["route"]["name"] for p in out["probes"]] == ["a"]
    d.registry = MemoryRegistry()
    empty = plan_step({}, d)
    assert empty["probes"] == [] and empty["planned_routes"] == 0


def test_a_stack_route_request_is_answered_failed_when_the_functions_own_wiring_fails() -> None:
    """CloudFormation waits for an answer up to the resource's ServiceTimeout: a function whose
    configuration fails before the request is handled still answers FAILED with the reason; a
    reason of any length and script fits the response's 4096 bytes (measured encoded)."""
    answers = Responses()

    def broken(name: str) -> Deps:
        raise ValueError("REPLMON_FLEET: not JSON")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("replmon.fleet.stack_route._put_response", answers)
        mp.setattr(wiring, "for_function", broken)
        body = load_handler("Inventory")(request("Create", PROPS), LambdaContext("Inventory"))
    assert [b["Status"] for _, b in answers.sent] == ["FAILED"] and "REPLMON_FLEET: not JSON" in body["Reason"]
    assert body["PhysicalResourceId"] == "primary" and body["RequestId"] == "req-Create"
    from replmon.fleet.stack_route import MAX_RESPONSE_BYTES, response

    long = response(request("Update", PROPS), "FAILED", "é" * 5000, "primary")
    assert len(long["Reason"]) > 0 and len(json.dumps(long).encode()) <= MAX_RESPONSE_BYTES
