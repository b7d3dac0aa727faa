"""The SLO from the rollups (signals/slo_rollup.py) is the SLO from the records (signals/slo.py
``slo_status``), on random histories: records of every status stored through the real write path
(``store_record``'s transaction), some late (a replayed spool, days after their hour), some
narrowed afterwards by a replica event (``apply_arrivals``' counter moves), read by evaluations at
increasing times that fold, reuse and rebuild the period cache; and a bounded read per route."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.core.keys import heartbeat_probe_id, heartbeat_run_id, is_heartbeat
from replmon.core.partitions import PERIOD, heartbeat_partition, roll_partition
from replmon.core.ports import TransactAdd
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.rollup import GEN, narrow_ops, store_record
from replmon.signals.slo import BurnPair, SloSpec, slo_status
from replmon.signals.slo_rollup import READ_HOURS, rollup_slo_status, unpack_hours

T0 = 1_795_428_000.0  # 2026-11-23T10:00:00Z
ROUTE = "dr-orders"
STATUSES = [ProbeStatus.COMPLETED, ProbeStatus.COMPLETED, ProbeStatus.COMPLETED, ProbeStatus.FAILED, ProbeStatus.STUCK, ProbeStatus.ERROR]


def probe(n: int, when: float, status: ProbeStatus, hi: float, has_put_end: bool) -> ProbeRecord:
    run = f"{n:04d}"
    planned = when - (1.0 if has_put_end else 0.0)
    return ProbeRecord(route=ROUTE, probe_id=f"20261123T100000Z-{run}-{ROUTE}-1MiB-t1", run_id=f"20261123T100000Z-{run}", planned_at=planned,
                       size_bytes=2**20, size_class="1MiB", trial=1, status=status, put_end=when if has_put_end else None,
                       latency_lo=hi / 2 if status in (ProbeStatus.COMPLETED, ProbeStatus.STUCK) else None,
                       latency_hi=hi if status is ProbeStatus.COMPLETED else None, target_seconds=900)


def heartbeat(when: float) -> ProbeRecord:
    run = heartbeat_run_id(when)
    return ProbeRecord(route=ROUTE, probe_id=heartbeat_probe_id(run, ROUTE), run_id=run, planned_at=when, size_bytes=1024,
                       size_class="1KiB", trial=1, status=ProbeStatus.COMPLETED, put_end=when + 0.05, latency_lo=0.4, latency_hi=2000.0)


def same(a: Any, b: Any) -> bool:
    return dataclasses.asdict(a) == dataclasses.asdict(b)


samples = st.lists(st.tuples(
    st.floats(0, 3 * 86_400),        # how long before the end of the history the sample counts
    st.sampled_from(STATUSES),
    st.floats(0.5, 2_000),           # its polled upper bound (threshold 900 s)
    st.booleans(),                   # a PUT end (else its planned time counts)
    st.sampled_from([0.0, 0.0, 0.0, 600.0, 7 * 3600, 2 * 86_400]),  # stored this late (a replayed spool)
    st.one_of(st.none(), st.floats(0.1, 1.0)),  # narrowed afterwards by a replica event to this share of hi
), max_size=40)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=samples, checks=st.lists(st.floats(0, 3 * 86_400), min_size=1, max_size=8),
       interval=st.sampled_from([300.0, 900.0, 3600.0, 6 * 3600.0, 86_400.0]), period_days=st.sampled_from([1, 2, 30]),
       beats=st.integers(0, 5))
def test_the_rollup_slo_is_the_records_slo_on_random_histories(samples: list[Any], checks: list[float], interval: float,
                                                               period_days: int, beats: int) -> None:
    play(samples, checks, interval, period_days, beats)


@pytest.mark.parametrize("seed", range(4))
def test_the_rollup_slo_is_the_records_slo_on_dense_random_histories(seed: int) -> None:
    """Hundreds of samples over three days, a third stored late, a third narrowed, and an evaluation
    every 7 minutes: every fold, reuse and rebuild of the cache is met many times."""
    rng = random.Random(seed)
    samples = [(rng.uniform(0, 3 * 86_400), rng.choice(STATUSES), rng.uniform(0.5, 2_000), rng.random() < 0.8,
                rng.choice([0.0, 0.0, 600.0, 5.5 * 3600, 7 * 3600, 2 * 86_400]), rng.uniform(0.1, 1.0) if rng.random() < 0.4 else None)
               for _ in range(400)]
    play(samples, [3 * 86_400 - i * 420.0 for i in range(int(3 * 86_400 / 420))], rng.choice([300.0, 900.0, 86_400.0]),
         rng.choice([1, 2]), 20)


def play(samples: list[Any], checks: list[float], interval: float, period_days: int, beats: int) -> None:
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=period_days, probe_interval_seconds=interval,
                   pairs=(BurnPair("page", 3600, 300, 14.4), BurnPair("ticket", 6 * 3600, 1800, 6.0)))
    end = T0 + 3 * 86_400
    # (time, order, action): writes, narrowings and evaluations, in the order they happen
    timeline: list[tuple[float, int, str, Any]] = []
    for n, (ago, status, hi, has_put_end, late, narrow) in enumerate(samples):
        r = probe(n, end - ago, status, hi, has_put_end)
        stored = r.put_end if r.put_end is not None else r.planned_at
        timeline.append((stored + late, 0, "write", r))
        if narrow is not None and status is ProbeStatus.COMPLETED:
            timeline.append((stored + late + 60, 1, "narrow", (r, round(hi * narrow, 6))))
    for b in range(beats):  # heartbeats are probes to the RPO, never samples of the SLO
        timeline.append((end - b * 4000.0, 0, "write", heartbeat(end - b * 4000.0)))
    timeline += [(end - ago, 2, "check", None) for ago in checks]
    store = MemoryLatencyTable()
    current: dict[str, ProbeRecord] = {}
    for t, _, action, what in sorted(timeline, key=lambda e: (e[0], e[1])):
        if action == "write":
            assert store_record(store, what, t, threshold_seconds=spec.threshold_seconds, period_days=period_days)
            if not is_heartbeat(what.run_id):
                current[what.probe_id] = what
        elif action == "narrow":
            r, new_hi = what
            held = current[r.probe_id]
            if held.latency_lo is not None and held.latency_hi is not None and new_hi < held.latency_hi:
                new_lo = min(held.latency_lo, new_hi)
                counted = store.get_item(held.route, held.sort_key)["counted_good"]
                moves = narrow_ops(held, new_hi, spec.threshold_seconds, t, counted, period_days=period_days)
                assert store.narrow_interval(held, new_lo, new_hi, t, moves, mark_good=any("g" in m.add for m in moves))
                current[r.probe_id] = dataclasses.replace(held, latency_lo=new_lo, latency_hi=new_hi)
        else:
            from_rollups, _ = rollup_slo_status(store, ROUTE, t, spec)
            from_records = slo_status(list(current.values()), t, spec)
            assert same(from_rollups, from_records), (t, from_rollups, from_records)


def test_a_run_reads_the_period_item_and_seven_hours_and_a_late_write_adds_its_counts_to_the_cache() -> None:
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    store = MemoryLatencyTable()
    now = T0 + 20 * 86_400 + 1800
    records = [probe(n, now - n * 3600.0 - 100, ProbeStatus.COMPLETED, 3.0 if n % 7 else 1200.0, True) for n in range(400)]
    for r in records:
        store_record(store, r, now - 1, threshold_seconds=900.0, period_days=30)  # loaded late: every hour counts gen up
    assert store.get_item(roll_partition(ROUTE), PERIOD)[GEN] > 0
    first, fold = rollup_slo_status(store, ROUTE, now, spec)
    assert fold.rebuilt and fold.cache_written and fold.items_read == 1 + 400  # the period item and every hour item (one a record)
    assert same(first, slo_status(records, now, spec))
    again, fold = rollup_slo_status(store, ROUTE, now + 300, spec)  # the next run, same hour: the same numbers
    assert same(again, slo_status(records, now + 300, spec))
    assert not fold.rebuilt and fold.items_read == 1 + READ_HOURS
    next_hour, fold = rollup_slo_status(store, ROUTE, now + 3600, spec)  # an hour later: one more hour folded
    # the period item, the hour folded now and the 6 hours after it (the new current hour holds nothing yet)
    assert not fold.rebuilt and fold.cache_written and fold.items_read == 1 + 1 + (READ_HOURS - 1)
    assert same(next_hour, slo_status(records, now + 3600, spec))
    # a replayed record lands in an hour the cache holds: gen counts up with its counts, the next run adds
    # them to that hour (the period item and the read hours: no rebuild) and writes the cache without them
    late = probe(999, now - 10 * 86_400, ProbeStatus.FAILED, 1.0, True)
    store_record(store, late, now + 3700, threshold_seconds=900.0, period_days=30)
    after, fold = rollup_slo_status(store, ROUTE, now + 3700, spec)
    assert not fold.rebuilt and fold.cache_written and fold.items_read <= 1 + READ_HOURS
    assert same(after, slo_status([*records, late], now + 3700, spec)) and after.total == next_hour.total + 1
    assert not any(k.startswith(("lj_", "lg_")) for k in store.get_item(roll_partition(ROUTE), PERIOD))
    # a writer of the layout before (gen alone, no counts) still forces a rebuild: only it knows the hour
    store.transact([TransactAdd(roll_partition(ROUTE), PERIOD, {GEN: 1})])
    _, fold = rollup_slo_status(store, ROUTE, now + 3800, spec)
    assert fold.rebuilt


def test_a_late_write_racing_the_fold_is_never_folded_away() -> None:
    """The write lands after the collector read the period item and the hours, before it writes the
    cache back: its gen makes the conditional put fail, and the next run rebuilds with it."""
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    now = T0 + 20 * 86_400
    store = MemoryLatencyTable()
    records = [probe(n, now - n * 3600.0 - 100, ProbeStatus.COMPLETED, 3.0, True) for n in range(30)]
    for r in records:
        store_record(store, r, r.put_end or 0, threshold_seconds=900.0, period_days=30)  # on time: gen stays 0
    late = probe(500, now - 12 * 3600.0, ProbeStatus.STUCK, 1.0, True)
    original = store.roll_items

    def read_then_late_write(*args: Any) -> Any:
        got = original(*args)
        store_record(store, late, now, threshold_seconds=900.0, period_days=30)
        return got

    store.roll_items = read_then_late_write  # type: ignore[method-assign]
    raced, fold = rollup_slo_status(store, ROUTE, now, spec)
    store.roll_items = original  # type: ignore[method-assign]
    assert fold.rebuilt and not fold.cache_written and raced.total == 30  # the cache was not written over the late write
    after, fold = rollup_slo_status(store, ROUTE, now + 60, spec)
    assert fold.rebuilt and fold.cache_written and same(after, slo_status([*records, late], now + 60, spec)) and after.total == 31


def test_heartbeats_go_to_their_own_partition_and_never_into_the_probe_counters() -> None:
    store = MemoryLatencyTable()
    store_record(store, heartbeat(T0), T0 + 1, threshold_seconds=900.0)
    hour = store.roll_items(ROUTE, "h#", "h#~")[0]
    assert store.get_item(heartbeat_partition(ROUTE), heartbeat(T0).sort_key) is not None
    assert hour.get("j") == 1 and "pj" not in hour and not any(k.startswith("pj_") for k in hour)


def test_a_record_narrowed_twice_is_counted_good_once_and_one_stored_before_the_rollups_moves_nothing() -> None:
    from replmon.adapters.metrics import NullMetrics
    from replmon.core.partitions import ARRIVAL_ATTR, ARRIVALS, signal_partition
    from replmon.signals.arrivals import apply_arrivals

    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    store = MemoryLatencyTable()
    r = dataclasses.replace(probe(1, T0 + 10, ProbeStatus.COMPLETED, 1200.0, True), latency_lo=100.0,
                            destinations=[{"bucket": "dst"}])
    assert store_record(store, r, T0 + 20, threshold_seconds=900.0)
    for replica_at, skew in ((T0 + 10 + 800.0, 50.0), (T0 + 10 + 800.0, 0.5)):  # narrowed twice, each time within 900 s
        store.put_item({"route": signal_partition(ROUTE, ARRIVALS), "at": r.sort_key, f"{ARRIVAL_ATTR}dst": replica_at})
        held = store.get_record(ROUTE, r.sort_key)
        assert held is not None and "narrowed" in (apply_arrivals(store, NullMetrics(), held, skew, spec, T0 + 900) or "")
    hour = store.roll_items(ROUTE, "h#", "h#~")[0]
    assert (hour["pj"], hour["pg"], hour["g"]) == (1, 1, 1)  # good once, never more than judged
    # a record stored before the rollups (no counted verdict): narrowing it moves no counter
    old = dataclasses.replace(probe(2, T0 + 20, ProbeStatus.COMPLETED, 1200.0, True), latency_lo=100.0, destinations=[{"bucket": "dst"}])
    store.put_item_once(old.to_item())
    store.put_item({"route": signal_partition(ROUTE, ARRIVALS), "at": old.sort_key, f"{ARRIVAL_ATTR}dst": T0 + 20 + 300.0})
    assert "narrowed" in (apply_arrivals(store, NullMetrics(), old, 0.5, spec, T0 + 900) or "")
    assert store.roll_items(ROUTE, "h#", "h#~")[0]["pg"] == 1


def test_the_readers_never_write_the_cache() -> None:
    """The Report function and `replmon report` read the SLO too; their roles grant no write."""
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    store = MemoryLatencyTable()
    for n in range(20):
        r = probe(n, T0 - n * 3600.0, ProbeStatus.COMPLETED, 3.0, True)
        store_record(store, r, r.put_end or 0, threshold_seconds=900.0)
    _, fold = rollup_slo_status(store, ROUTE, T0 + 60, spec, save=False)
    assert fold.rebuilt and not fold.cache_written and store.get_item(roll_partition(ROUTE), PERIOD) is None


def test_the_collector_writes_the_period_cache_and_its_next_run_reads_eight_items() -> None:
    """CollectSignals is the cache's one writer: without its write every run would rebuild (~720 items a route)."""
    from replmon.adapters.metrics import NullMetrics
    from replmon.core.route import Route
    from replmon.signals.collector import CATCH_UP_HOURS, collect

    store = MemoryLatencyTable()
    for n in range(48):
        r = probe(n, T0 - n * 3600.0, ProbeStatus.COMPLETED, 3.0, True)
        store_record(store, r, r.put_end or 0, threshold_seconds=900.0)
    route = Route.model_validate({"name": ROUTE, "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]})
    spec = SloSpec(threshold_seconds=900.0, target=0.99, period_days=30)
    # the cache is built CATCH_UP_HOURS hours a run (a bounded read per route), then holds every hour older than the 7 read
    runs = 0
    while len(unpack_hours((store.get_item(roll_partition(ROUTE), PERIOD) or {}).get("hours_packed", ""))) < 48 - READ_HOURS:
        collect([route], store, None, NullMetrics(), T0 + 60, spec, 3600, 1)
        runs += 1
    assert runs == -(-(48 - READ_HOURS) // CATCH_UP_HOURS)
    _, fold = rollup_slo_status(store, ROUTE, T0 + 120, spec, save=False)
    assert not fold.rebuilt and fold.items_read == 1 + READ_HOURS


def test_the_aws_contracts_the_rollups_rely_on() -> None:
    """DynamoDB's documented limits (API_TransactWriteItems, ServiceQuotas): a ClientRequestToken is
    1 to 36 characters and is sent with every record's transaction (a retry must carry the same
    one); an item is at most 400 KB, so the period cache at the template's largest SloPeriodDays,
    every hour holding large counts, must fit; the hour items are read strongly consistent (the
    fold's race argument, slo_rollup.py) and the period item by a strongly consistent GetItem."""
    import boto3
    from moto import mock_aws

    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.local.tables import ensure_table
    from replmon.signals.ingest_budget import item_bytes
    from tests.conftest import TABLE, TEMPLATE

    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        sent: list[tuple[str, dict[str, Any]]] = []
        ddb.meta.events.register("provide-client-params.dynamodb.*",
                                 lambda params, model, **_: sent.append((model.name, dict(params))))
        store = DynamoLatencyStore(TABLE, ddb)
        r = probe(1, T0, ProbeStatus.COMPLETED, 3.0, True)
        assert store_record(store, r, T0 + 1, threshold_seconds=900.0)
        token = next(p["ClientRequestToken"] for op, p in sent if op == "TransactWriteItems")
        assert 1 <= len(token) <= 36
        sent.clear()
        rollup_slo_status(store, ROUTE, T0 + 60, SloSpec())
        assert {op: p.get("ConsistentRead") for op, p in sent if op in ("GetItem", "Query")} == {"GetItem": True, "Query": True}

    from replmon.core.expert import ExpertSettings

    max_days = int(ExpertSettings.model_fields["slo_period_days"].metadata[-1].le)  # ExpertSettings slo_period_days' bound
    cache = {"route": f"{'r' * 63}#roll", "at": "period", "gen": 10**9, "cached_gen": 10**9, "through_hour": "h#2026-11-23T10",
             "through_at": T0, "hours": {str(int(T0) - h * 3600): [10**6, 10**6] for h in range(max_days * 24)}}
    assert item_bytes(cache) < 400 * 1024 / 4  # a quarter of the limit at most
