"""One bad registry item, or one route whose reads fail, costs only itself in every reader.

DynamoDB throttles one partition on its own: "a partition may throttle reads while writes continue
normally", "even when your table ... has sufficient overall capacity" (Key range throughput exceeded,
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/throttling-key-range-limit-exceeded-mitigation.html).
A route's items are its own partitions (core/partitions.py), so one route's reads can fail while the
others' are answered; the fakes below fail exactly those. The deployed scenario is
tests/deployed/test_deployed_isolation.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from replmon.adapters.memregistry import MemoryRegistry
from replmon.adapters.memtable import MemoryLatencyTable
from replmon.core.errors import StoreUnavailable
from replmon.core.registry import INVALID_ROUTE, GroupRead, InvalidRoute, load_route_spec, read_registry
from replmon.core.route import Route


class Counted:
    def __init__(self) -> None:
        self.counted: list[tuple[str, float, dict[str, str]]] = []

    def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
        self.counted.append((metric, value, dict(dimensions or {})))

    def invalid(self) -> list[tuple[str, str, str]]:
        return sorted((d["RouteGroup"], d["Route"], d["Reason"]) for m, _, d in self.counted if m == INVALID_ROUTE)


class Throttled:
    """A latency table whose reads and writes of ``route``'s own partitions fail (a hot key)."""

    def __init__(self, inner: MemoryLatencyTable, route: str) -> None:
        self.inner, self.route = inner, route

    def __getattr__(self, name: str) -> Callable[..., Any]:
        fn = getattr(self.inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            key = args[0] if args and isinstance(args[0], str) else str((args[0] if args else {}).get("route", "")) if args else ""
            if key == self.route or key.startswith(f"{self.route}#"):
                raise StoreUnavailable("latency: ProvisionedThroughputExceededException")
            return fn(*args, **kwargs)

        return call


def spec(name: str, group: str = "g00") -> Any:
    return load_route_spec({"name": name, "group": group, "origin": "explicit",
                            "source": {"account": "111122223333", "region": "us-east-1", "bucket": f"{name}-src"},
                            "destinations": [{"account": "111122223333", "region": "us-west-2", "bucket": f"{name}-dst"}]})


class TwoGroups:
    """g00: two good routes and an item without destinations; g01's Query is throttled."""

    def __init__(self, fail: tuple[str, ...] = ("g01",)) -> None:
        self.fail = fail
        self.reads: list[str] = []

    def read(self, group: str) -> GroupRead:
        self.reads.append(group)
        if group in self.fail:
            raise StoreUnavailable("latency: ProvisionedThroughputExceededException")
        return GroupRead(routes=[spec("aa"), spec("zz")],
                         invalid=[InvalidRoute("g00", "no-dests", "MissingField", "destinations", "destinations: is required")])


def test_read_registry_skips_a_bad_item_and_an_unreadable_group_and_raises_only_when_no_group_answers() -> None:
    read = read_registry(TwoGroups(), ["g00", "g01"])
    assert [s.name for s in read.routes] == ["aa", "zz"] and read.unread == ["g01"]
    assert [(b.name, b.reason, b.field) for b in read.invalid] == [("no-dests", "MissingField", "destinations"),
                                                                   ("#routes/g01", "ReadFailed", "(query)")]
    with pytest.raises(StoreUnavailable):
        read_registry(TwoGroups(fail=("g00", "g01")), ["g00", "g01"])  # the table, not a group


def test_the_collector_marks_a_route_whose_reads_fail_and_judges_the_others() -> None:
    from replmon.signals.collector import collect
    from replmon.signals.slo import SloSpec

    routes = [Route.model_validate({"name": n, "source": {"bucket": f"{n}-src"}, "destinations": [{"bucket": f"{n}-dst"}]})
              for n in ("aa", "hot", "zz")]
    metrics = Counted()
    store = Throttled(MemoryLatencyTable(), "hot")
    out = collect(routes, store, None, metrics, 1_795_000_000.0, SloSpec(), 3600, 1,  # type: ignore[arg-type]
                  groups={"aa": "g00", "hot": "g01", "zz": "g00"})
    assert [h.route for h in out] == ["aa", "zz"]
    assert metrics.invalid() == [("g01", "hot", "ReadFailed")]
    with pytest.raises(StoreUnavailable):  # every route failing is the store: the run fails (Lambda Errors)
        collect(routes[1:2], store, None, Counted(), 1_795_000_000.0, SloSpec(), 3600, 1)  # type: ignore[arg-type]


def test_collect_step_skips_a_bad_item_and_an_unreadable_group() -> None:
    from types import SimpleNamespace

    from replmon.core.fleetconfig import FleetSettings
    from replmon.signals.collector import collect_step
    from replmon.signals.slo import SloSpec

    metrics = Counted()
    deps = SimpleNamespace(store=MemoryLatencyTable(), registry=TwoGroups(), metric_readers=None, metrics=metrics,
                           clock=SimpleNamespace(now=lambda: 1_795_000_000.0), slo=SloSpec(), rpo_window=3600.0, retention_days=1,
                           fleet=FleetSettings(route_groups=2))
    out = collect_step({}, deps)
    assert [r["route"] for r in out["routes"]] == ["aa", "zz"]
    assert {(s["name"], s["reason"]) for s in out["skipped"]} == {("no-dests", "MissingField"), ("#routes/g01", "ReadFailed")}
    assert metrics.invalid() == [("g01", "#routes/g01", "ReadFailed")]  # the invalid item is the planner's to count


def test_the_heartbeat_marks_a_route_whose_step_raises_and_beats_the_others() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from replmon.core.clock import ManualClock
    from replmon.probe.heartbeat import run_periods

    class Beat:
        def __init__(self, name: str, broken: bool) -> None:
            self.name, self.broken, self.ended = name, broken, 0
            self.errors: list[str] = []
            self.pending: list[Any] = []

        def load(self) -> None:
            if self.broken:
                raise ValueError("state item of another shape")

        def emit(self, now: float) -> None: ...
        def begin_period(self, now: float) -> None: ...
        def due(self, now: float) -> bool:
            return False

        def step(self) -> None: ...
        def judge(self) -> None: ...
        def next_head_at(self) -> float:
            return 0.0

        def end_period(self, now: float) -> None:
            self.ended += 1

        def _error(self, what: str, exc: Exception) -> None:
            self.errors.append(f"{what}: {exc}")

    routes = [Beat("aa", False), Beat("bad", True), Beat("zz", False)]
    clock = ManualClock(start=1_795_000_000.0)
    with ThreadPoolExecutor(2) as pool:
        run_periods(routes, 2, 60, clock, pool, deadline=clock.now() + 600)  # type: ignore[arg-type]
    assert [r.ended for r in routes] == [2, 2, 2]
    assert routes[1].errors == ["heartbeat step failed: state item of another shape"] and not routes[0].errors


def test_ingest_events_maps_the_readable_routes_and_reads_an_unread_group_again() -> None:
    from replmon.entry.ingest_events import registry_routes

    registry = TwoGroups()
    routes, unread = registry_routes(registry, ["g00", "g01"], 100.0)
    assert [r.name for r in routes] == ["aa", "zz"] and [(b.group, b.reason) for b in unread] == [("g01", "ReadFailed")]
    registry_routes(registry, ["g00", "g01"], 101.0)  # a group was unread: not cached, read again
    assert registry.reads == ["g00", "g01", "g00", "g01"]
    good = MemoryRegistry([spec("aa")])
    registry_routes(good, ["g00"], 100.0)
    assert [r.name for r in registry_routes(good, ["g00"], 101.0)[0]] == ["aa"]  # a whole read is cached a minute


def test_the_report_function_names_a_route_whose_reads_fail_and_reports_the_others() -> None:
    from types import SimpleNamespace

    from replmon.core.fleetconfig import FleetSettings
    from replmon.probe.steps import report_step
    from replmon.signals.slo import SloSpec

    deps = SimpleNamespace(store=Throttled(MemoryLatencyTable(), "hot"), registry=MemoryRegistry([spec("aa"), spec("hot"), spec("zz")]),
                           fleet=FleetSettings(route_groups=1), clock=SimpleNamespace(now=lambda: 1_795_000_000.0), slo=SloSpec(),
                           rpo_window=3600.0)
    out = report_step({}, deps)
    assert [h["route"] for h in out["health"]] == ["aa", "zz"]
    assert [(u["route"], u["error"]) for u in out["unreadable"]] == [("hot", "StoreUnavailable: latency: ProvisionedThroughputExceededException")]
    deps.store = Throttled(MemoryLatencyTable(), "aa")
    with pytest.raises(StoreUnavailable):  # the only route unreadable: the store's failure, raised
        report_step({"routes": ["aa"]}, deps)


def test_the_planner_leaves_out_only_a_route_whose_lease_cannot_be_read() -> None:
    """BatchGetItem "returns a partial result if ... the table's provisioned throughput is exceeded"
    and names the unread keys in UnprocessedKeys; "if none of the items can be processed" it returns
    ProvisionedThroughputExceededException (BatchGetItemRequest, AWS SDK for .NET API reference,
    https://docs.aws.amazon.com/sdkfornet1/latest/apidocs/html/T_Amazon_DynamoDBv2_Model_BatchGetItemRequest.htm). The lease
    adapter retries unprocessed keys and keeps what it read (``read_leases``): the planner reads again
    only the keys left unread, and leaves out only the hot route."""
    from types import SimpleNamespace

    from replmon.core.cadence import ProbeClasses
    from replmon.core.ports import Lease, LeaseRead
    from replmon.fleet.planner import FleetRoute, route_leases

    class Leases:
        def __init__(self, hot: set[str]) -> None:
            self.hot = hot
            self.reads: list[list[str]] = []

        def read_leases(self, routes: list[str]) -> LeaseRead:
            self.reads.append(list(routes))
            if set(routes) <= self.hot:
                raise StoreUnavailable("latency: ProvisionedThroughputExceededException")
            return LeaseRead({r: Lease(r, None, None, {"1KiB": 1.0}) for r in routes if r not in self.hot},
                             {r: "BatchGetItem left the key unprocessed after 8 attempts" for r in routes if r in self.hot})

    routes = [FleetRoute(Route.model_validate({"name": n, "source": {"bucket": f"{n}-src"}, "destinations": [{"bucket": f"{n}-dst"}]}),
                         "g00", ProbeClasses.parse("1KiB@5m"), 900) for n in ("aa", "hot", "zz")]
    metrics, leases = Counted(), Leases({"hot"})
    clock = SimpleNamespace(now=lambda: 1_795_000_000.0)
    got, kept = route_leases(routes, SimpleNamespace(leases=leases, metrics=metrics, clock=clock))
    assert [r.route.name for r in kept] == ["aa", "zz"] and metrics.invalid() == [("g00", "hot", "ReadFailed")]
    assert sorted(got) == ["aa", "zz"]  # the batch's partial answer is kept
    assert leases.reads == [["aa", "hot", "zz"], ["hot"]]  # only the key left unread is read again
    with pytest.raises(StoreUnavailable):  # every read fails: the table, raised after the first few
        route_leases(routes, SimpleNamespace(leases=Leases({"aa", "hot", "zz"}), metrics=Counted(), clock=clock))

    ticks = iter(range(0, 10_000, 20))  # 20 s a clock read (deadline 30 s): past the deadline the rest are named, not read
    slow = Leases({"aa", "hot"})
    metrics = Counted()
    _, kept = route_leases(routes, SimpleNamespace(leases=slow, metrics=metrics, clock=SimpleNamespace(now=lambda: float(next(ticks)))))
    assert [r.route.name for r in kept] == ["zz"] and slow.reads == [["aa", "hot", "zz"], ["aa"]]
    assert metrics.invalid() == [("g00", "aa", "ReadFailed"), ("g00", "hot", "ReadFailed")]


def test_the_lease_adapter_keeps_a_partial_batch_and_names_the_keys_left_unprocessed(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoLeases.read_leases against BatchGetItem's contract (test above): the answered items are
    kept, a key still in UnprocessedKeys after the retries is named, a call that raises costs only its
    keys; nothing read at all is the table and raises."""
    from replmon.adapters import leases as adapter
    from replmon.core.partitions import live_partition
    from replmon.core.record import PARTITION_KEY

    monkeypatch.setattr(adapter.time, "sleep", lambda s: None)

    class Client:
        def __init__(self, hot: set[str]) -> None:
            self.hot, self.calls = hot, 0

        def batch_get_item(self, RequestItems: Any) -> Any:
            self.calls += 1
            [(table, req)] = RequestItems.items()
            keys = req["Keys"]
            if all(k[PARTITION_KEY]["S"] in {live_partition(h) for h in self.hot} for k in keys):
                from botocore.exceptions import ClientError
                raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "none read"}}, "BatchGetItem")
            hot = [k for k in keys if k[PARTITION_KEY]["S"] in {live_partition(h) for h in self.hot}]
            items = [{**k, "ls_1KiB": {"N": "1"}} for k in keys if k not in hot]
            return {"Responses": {table: items}, "UnprocessedKeys": {table: {"Keys": hot}} if hot else {}}

    client = Client({"hot"})
    read = adapter.DynamoLeases("latency", client).read_leases(["aa", "hot", "zz"])
    assert sorted(read.leases) == ["aa", "zz"] and read.leases["aa"].last_started == {"1KiB": 1.0}
    assert list(read.unread) == ["hot"] and "ProvisionedThroughputExceededException" in read.unread["hot"]  # its retry alone: none read
    with pytest.raises(StoreUnavailable):  # the one-key read the old interface made: still raises
        adapter.DynamoLeases("latency", Client({"hot"})).leases(["aa", "hot"])
    with pytest.raises(StoreUnavailable):
        adapter.DynamoLeases("latency", Client({"aa", "hot"})).read_leases(["aa", "hot"])


def test_ingest_events_retries_an_unmapped_event_while_a_registry_group_is_unread() -> None:
    """A replication failure on a route of an unread group is not filed as unmapped and acknowledged:
    its message is named in ``batchItemFailures`` so SQS delivers it again ("Implementing partial
    batch responses": only the messages named are retried; after the queue's maxReceiveCount they
    move to the DLQ, template.yaml EventsQueue RedrivePolicy; "Handling errors for an SQS event
    source in Lambda", https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
    The unread group is counted as InvalidRoute{Reason=ReadFailed}; once it reads, the redelivery is
    counted under its route."""
    import json

    from replmon.core.fleetconfig import FleetSettings
    from replmon.entry.ingest_events import handler
    from replmon.local.aslrun import LambdaContext
    from replmon.wiring import Deps, injected
    from tests.conftest import ROOT

    primary = load_route_spec({"name": "primary", "group": "g01", "origin": "explicit",
                               "source": {"account": "111122223333", "region": "us-east-1", "bucket": "probe-source"},
                               "destinations": [{"account": "111122223333", "region": "us-west-2", "bucket": "probe-replica"}]})

    class Registry(TwoGroups):
        def read(self, group: str) -> GroupRead:
            return super().read(group) if group == "g00" or group in self.fail else GroupRead(routes=[primary])

    failed = json.loads((ROOT / "events" / "s3" / "replication_failed.json").read_text())
    other = json.loads(json.dumps(failed).replace("probe-source", "aa-src").replace("probe-replica", "aa-dst"))  # a route of the group read
    batch = {"Records": [{"messageId": "m-failed", "body": json.dumps(failed)}, {"messageId": "m-aa", "body": json.dumps(other)}]}
    store, metrics, registry = MemoryLatencyTable(), Counted(), Registry()
    with injected(Deps(stores=None, store=store, metrics=metrics, registry=registry, fleet=FleetSettings(route_groups=2))):  # type: ignore[arg-type]
        assert handler(batch, LambdaContext("IngestEvents")) == {"batchItemFailures": [{"itemIdentifier": "m-failed"}]}
        assert metrics.invalid() == [("g01", "#routes/g01", "ReadFailed")]
        assert not [c for c in metrics.counted if c[0] == "UnmappedEvent"]
        assert not [k for k in store._items if k[0].startswith("#unmapped/")]
        registry.fail = ()  # the group reads again: the redelivered message is counted under its route
        assert handler(batch, LambdaContext("IngestEvents")) == {"batchItemFailures": []}
    counted = {(d["Route"], d["Event"]) for m, _, d in metrics.counted if m == "ReplicationEvents"}
    assert counted == {("aa", "OperationFailedReplication"), ("primary", "OperationFailedReplication")}
    assert not [c for c in metrics.counted if c[0] == "UnmappedEvent"]


def test_the_collector_publishes_every_route_when_one_routes_sparse_flag_write_is_throttled() -> None:
    """A route's sparse-signal flags (slo_rollup.py ``save_sparse_up``, one PutItem on a transition)
    are written per route after its metrics: one throttled write is logged with its route and the
    other routes' metrics are still published (the next run compares and writes again)."""
    from replmon.signals.collector import collect
    from replmon.signals.slo import SloSpec
    from replmon.signals.slo_rollup import SPARSE_UP

    class HotFlags(MemoryLatencyTable):
        def put_period(self, route: str, item: Any, *args: Any, **kwargs: Any) -> Any:
            if route == "hot" and SPARSE_UP in item:
                raise StoreUnavailable("latency: ProvisionedThroughputExceededException")
            return super().put_period(route, item, *args, **kwargs)

    names = ("aa", "hot", "zz")
    routes = [Route.model_validate({"name": n, "source": {"bucket": f"{n}-src"}, "destinations": [{"bucket": f"{n}-dst"}]}) for n in names]
    metrics, store = Counted(), HotFlags()
    out = collect(routes, store, None, metrics, 1_795_000_000.0, SloSpec(), 3600, 1,  # type: ignore[arg-type]
                  no_data_limits={n: 60.0 for n in names})  # no input at all: each route's RouteNoData rises to 1
    assert [h.route for h in out] == ["aa", "hot", "zz"]
    assert sorted(d["Route"] for m, v, d in metrics.counted if m == "RouteNoData" and v == 1) == ["aa", "hot", "zz"]
    assert sum(1 for m, _, _ in metrics.counted if m == "CollectorHeartbeat") == 3
    assert metrics.invalid() == []  # a lost flag write is not an unreadable route


def test_begin_route_run_starts_the_routes_whose_lease_was_read_and_names_the_one_left_unread() -> None:
    """BeginRouteRun reads every planned route's lease in one batch (``read_leases``): a key BatchGetItem
    left unprocessed after the retries (contract above) holds back only its route, which is not started
    this run, counted RunSkipped and named under ``unleased``; the others start."""
    from replmon.adapters.leases import MemoryLeases
    from replmon.core.clock import ManualClock
    from replmon.core.ports import LeaseRead
    from replmon.fleet.lease import RUN_SKIPPED, begin_run

    class HotLeases(MemoryLeases):
        def read_leases(self, routes: Any) -> LeaseRead:
            read = super().read_leases([r for r in routes if r != "hot"])
            return LeaseRead(read.leases, {"hot": "BatchGetItem left the key unprocessed after 8 attempts"} if "hot" in routes else {})

    def route(name: str) -> dict[str, Any]:
        return {"name": name, "source": {"bucket": f"{name}-src"}, "destinations": [{"bucket": f"{name}-dst"}]}

    metrics = Counted()
    deps = type("D", (), {"leases": HotLeases(), "clock": ManualClock(start=1000.0), "metrics": metrics, "executions": None})()
    plan = {"run_id": "r", "bound_seconds": 10.0, "routes": [route(n) for n in ("aa", "hot", "zz")],
            "probes": [{"route": route(n), "size_class": "1MiB"} for n in ("aa", "hot", "zz")]}
    out = begin_run({"plan": plan, "execution": "me"}, deps)  # type: ignore[arg-type]
    assert out["lease"]["routes"] == ["aa", "zz"] and [p["route"]["name"] for p in out["probes"]] == ["aa", "zz"]
    assert [(u["route"], u["error"]) for u in out["unleased"]] == [("hot", "BatchGetItem left the key unprocessed after 8 attempts")]
    assert [d["Route"] for m, _, d in metrics.counted if m == RUN_SKIPPED] == ["hot"]
    assert deps.leases.leases(["hot"]) == {}  # not taken
