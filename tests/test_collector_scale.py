"""CollectSignals reads a bounded number of items per route, steady and cold: through its handler in
the deployed harness (template.yaml's environment and role, moto), over routes holding 30 days and
a day of everything the default schedule writes (records, hour items, heartbeats). Items are counted
as DynamoDB reads them: a Query's ``ScannedCount`` and one per GetItem that found its item. From
https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Other.md: "With the Query
operation, you can limit the number of items that it reads ... set the Limit parameter", and
"ScannedCount - The number of items that matched the key condition expression before a filter
expression (if present) was applied": so the catch-up's Limit bounds what is read, not only what is
returned (``test_the_catch_up_read_sends_its_limit_to_dynamodb``).

And the catch-up (slo_rollup.py ``fold_period`` with ``catch_up``) converges to the full fold's numbers."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.core.partitions import PERIOD, roll_partition
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.lab.collectorbench import CallCounter, history_items, load
from replmon.signals.collector import CATCH_UP_HOURS
from replmon.signals.rollup import store_record
from replmon.signals.slo import SloSpec, slo_status
from replmon.signals.slo_rollup import fold_period, rollup_slo_status

GOAL_ITEMS_PER_ROUTE = 20
ROUTES = [f"scale-{i}" for i in range(3)]


def _late(route: str, at: float) -> ProbeRecord:
    run = "20261101T000000Z-late00"
    return ProbeRecord(route=route, probe_id=f"{run}-{route}-1MiB-t1", run_id=run, planned_at=at, size_bytes=2**20, size_class="1MiB",
                       trial=1, status=ProbeStatus.FAILED, put_end=at + 1)


@pytest.fixture(scope="module")
def runs() -> dict[str, Any]:
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.registry_table import DynamoRegistry
    from replmon.core.registry import group_of, load_route_spec
    from replmon.local.stack import HOME, HUB, MEMBER_A, TABLE
    from tests.deployed.scenario import deployed

    out: dict[str, Any] = {}
    with deployed(fleet=False) as stack:
        admin = stack.admin("dynamodb", HUB)
        groups = stack.deps("CollectSignals").fleet.route_groups
        registry = DynamoRegistry(TABLE, admin)
        now = stack.clock.now()
        items: list[dict[str, Any]] = []
        for name in ROUTES:
            spec = load_route_spec({"name": name, "origin": "explicit", "group": group_of(name, groups),
                                    "source": {"account": MEMBER_A, "bucket": f"{name}-src", "region": HOME},
                                    "destinations": [{"account": MEMBER_A, "bucket": f"{name}-dst", "region": HOME}]})
            assert registry.put_explicit(spec, None)
            items += history_items(name, now)  # 31 days of records and heartbeats' hour items, the heartbeats' records
        load(admin, TABLE, items, threads=2)
        counter = CallCounter()
        counter.attach(stack.deps("CollectSignals").store.client)  # type: ignore[attr-defined]

        def run(phase: str) -> None:
            counter.reset()
            result = stack.invoke("CollectSignals", {})
            out[phase] = {"per_route": {r: counter.by_route.get(r, 0) for r in ROUTES},
                          "health": {h["route"]: h for h in result["routes"]}}

        run("cold")  # no period cache: each route folds its CATCH_UP_HOURS oldest hours
        store = DynamoLatencyStore(TABLE, admin)
        for name in ROUTES:  # caught up at once (the ~124 runs of CATCH_UP_HOURS the schedule would take: the same fold)
            fold_period(store, name, now, 30)
        run("steady")
        for name in ROUTES:  # replayed three days late: an hour the cache folded
            assert store_record(store, _late(name, now - 3 * 86_400), now, threshold_seconds=900.0)
        run("late")
        out["period"] = {name: store.get_item(roll_partition(name), PERIOD) for name in ROUTES}
        out["denied"] = stack.denied()
    return out


def test_a_cold_route_reads_at_most_twenty_items_and_publishes_no_period_budget_until_caught_up(runs: dict[str, Any]) -> None:
    assert all(n <= GOAL_ITEMS_PER_ROUTE for n in runs["cold"]["per_route"].values()), runs["cold"]["per_route"]
    assert all(n > 0 for n in runs["cold"]["per_route"].values())
    for name in ROUTES:
        slo = runs["cold"]["health"][name]["slo"]
        assert slo["total"] == 0 and slo["budget_left"] is None  # not known yet: no ErrorBudgetRemaining, not a wrong one
        assert runs["cold"]["health"][name]["has_data"]  # the RPO is read at once


def test_a_steady_route_reads_at_most_twenty_items_and_is_judged_over_the_whole_period(runs: dict[str, Any]) -> None:
    assert all(n <= GOAL_ITEMS_PER_ROUTE for n in runs["steady"]["per_route"].values()), runs["steady"]["per_route"]
    for name in ROUTES:
        slo = runs["steady"]["health"][name]["slo"]
        assert slo["total"] > 700 and slo["budget_left"] == 1.0  # 30 days of the default classes, all good


def test_a_late_write_is_counted_without_a_rebuild(runs: dict[str, Any]) -> None:
    assert all(n <= GOAL_ITEMS_PER_ROUTE for n in runs["late"]["per_route"].values()), runs["late"]["per_route"]
    for name in ROUTES:
        steady, late = runs["steady"]["health"][name]["slo"], runs["late"]["health"][name]["slo"]
        assert (late["total"], late["good"]) == (steady["total"] + 1, steady["good"])
        assert not any(k.startswith(("lj_", "lg_")) for k in runs["period"][name])  # folded into the cache and cleared
    assert runs["denied"] == []


@pytest.mark.parametrize("catch_up", [1, CATCH_UP_HOURS, 50])
def test_the_catch_up_converges_to_the_full_folds_numbers(catch_up: int) -> None:
    t0 = 1_795_428_000.0
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    store = MemoryLatencyTable()
    records = [ProbeRecord(route="r", probe_id=f"20261123T100000Z-{n:04d}-r-1MiB-t1", run_id=f"20261123T100000Z-{n:04d}",
                           planned_at=t0 - n * 2900.0, size_bytes=2**20, size_class="1MiB", trial=1,
                           status=ProbeStatus.COMPLETED if n % 5 else ProbeStatus.FAILED, put_end=t0 - n * 2900.0 + 1,
                           latency_lo=1.0, latency_hi=2.0 if n % 3 else 1000.0) for n in range(900)]
    for r in records:
        store_record(store, r, (r.put_end or 0) + 1, threshold_seconds=900.0)
    now, reads = t0 + 60, []
    while True:
        status, fold = rollup_slo_status(store, "r", now, spec, catch_up=catch_up)
        reads.append(fold.items_read)
        if fold.complete:
            break
        assert status.total == 0 and status.budget_left is None
        now += 300
    assert max(reads) <= 1 + catch_up + 7
    expected = slo_status(records, now, spec)
    assert dataclasses.asdict(status) == dataclasses.asdict(expected)


def test_the_catch_up_read_sends_its_limit_to_dynamodb() -> None:
    from replmon.adapters.dynamodb import DynamoLatencyStore

    sent: list[dict[str, Any]] = []

    class Client:
        def query(self, **kwargs: Any) -> dict[str, Any]:
            sent.append(kwargs)
            return {"Items": [], "Count": 0, "ScannedCount": 0}

    assert DynamoLatencyStore("t", Client()).roll_items("r", "h#a", "h#b", limit=CATCH_UP_HOURS) == []
    assert sent[0]["Limit"] == CATCH_UP_HOURS and sent[0]["ConsistentRead"] is True


def test_the_rtc_read_covers_the_rpo_window_within_getmetricdatas_data_point_limit() -> None:
    """"You can use the GetMetricData API to retrieve as many as 500 different metrics in a single
    request, with a total of as many as 100,800 data points" (https://fig.io/manual/aws/cloudwatch/get-metric-data,
    the AWS CLI's reference). The collector reads the whole RPO window at a 60 s period (so a route's
    RTC input is this run's read): 500 queries x 60 points is 30,000."""
    from replmon.adapters.metrics import NullMetrics
    from replmon.core.route import Route
    from replmon.signals.collector import collect
    from replmon.signals.rtc import MAX_QUERIES_PER_CALL

    calls: list[tuple[int, float, float]] = []

    class Readers:
        def __call__(self, key: Any, /) -> Readers:
            return self

        def read(self, queries: Any, start: float, end: float) -> list[Any]:
            from replmon.core.ports import MetricSeries

            calls.append((len(queries), start, end))
            return [MetricSeries(q.id, ((end - 120, 5.0),)) for q in queries]

    routes = [Route.model_validate({"name": f"r{i}", "source": {"bucket": f"src-{i}"},
                                    "destinations": [{"bucket": f"dst-{i}", "rule_id": "rule"}]}) for i in range(130)]
    store, now, window = MemoryLatencyTable(), 1_795_430_000.0, 3600.0
    health = collect(routes, store, Readers(), NullMetrics(), now, SloSpec(), window, 1)
    assert calls and all(end - start == window and n <= MAX_QUERIES_PER_CALL for n, start, end in calls)
    assert max(n for n, _, _ in calls) * window / 60 <= 100_800
    assert all(h.rpo.inputs.get("rtc_replication_latency") == 5.0 for h in health)  # this run's samples, none read back


def test_a_cache_of_the_layout_before_is_read_and_rewritten_packed() -> None:
    """A period cache written before ``hours_packed`` (a map of hours) is still read, and rewritten packed."""
    from replmon.signals.slo_rollup import first_read_hour, unpack_hours
    from replmon.signals.windows import HOUR_SECONDS

    t0, store = 1_795_428_000.0 + 60, MemoryLatencyTable()
    fold_to = first_read_hour(t0) - HOUR_SECONDS
    hours = {str(int(fold_to - n * HOUR_SECONDS)): [2, 1] for n in range(10)}
    assert store.put_period("r", {"gen": 0, "cached_gen": 0, "through_hour": "h#old", "through_at": fold_to, "hours": hours}, None, 0)
    status, fold = rollup_slo_status(store, "r", t0 + 3600, SloSpec(), catch_up=CATCH_UP_HOURS)  # an hour on: one more folded
    assert fold.complete and not fold.rebuilt and (status.total, status.good) == (20, 10)
    period = store.get_item(roll_partition("r"), PERIOD)
    assert "hours" not in period and len(unpack_hours(period["hours_packed"])) == 10


def test_the_store_client_keeps_a_connection_for_each_collector_thread() -> None:
    """botocore keeps max_pool_connections per client (default 10); 16 threads on one client would
    open and drop connections past that (urllib3: "Connection pool is full, discarding connection")."""
    from replmon.adapters.clients import STORE
    from replmon.signals.collector import WORKERS

    assert STORE.config().max_pool_connections >= WORKERS
