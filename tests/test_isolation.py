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
    assert [r.name for r in registry_routes(registry, ["g00", "g01"], 100.0)] == ["aa", "zz"]
    registry_routes(registry, ["g00", "g01"], 101.0)  # a group was unread: not cached, read again
    assert registry.reads == ["g00", "g01", "g00", "g01"]
    good = MemoryRegistry([spec("aa")])
    registry_routes(good, ["g00"], 100.0)
    assert [r.name for r in registry_routes(good, ["g00"], 101.0)] == ["aa"]  # a whole read is cached a minute


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
    adapter retries unprocessed keys, then raises StoreUnavailable for the whole batch: the planner
    reads each route on its own and leaves out only the hot one."""
    from types import SimpleNamespace

    from replmon.core.cadence import ProbeClasses
    from replmon.fleet.planner import FleetRoute, route_leases

    class Leases:
        def __init__(self, hot: set[str]) -> None:
            self.hot = hot

        def leases(self, routes: list[str]) -> dict[str, Any]:
            if self.hot & set(routes):
                raise StoreUnavailable("latency: BatchGetItem left keys unprocessed after 8 attempts")
            return {}

    routes = [FleetRoute(Route.model_validate({"name": n, "source": {"bucket": f"{n}-src"}, "destinations": [{"bucket": f"{n}-dst"}]}),
                         "g00", ProbeClasses.parse("1KiB@5m"), 900) for n in ("aa", "hot", "zz")]
    metrics = Counted()
    _, kept = route_leases(routes, SimpleNamespace(leases=Leases({"hot"}), metrics=metrics))
    assert [r.route.name for r in kept] == ["aa", "zz"] and metrics.invalid() == [("g00", "hot", "ReadFailed")]
    with pytest.raises(StoreUnavailable):  # every read fails: the table, raised after the first few
        route_leases(routes, SimpleNamespace(leases=Leases({"aa", "hot", "zz"}), metrics=Counted()))
