"""The expectation E (signals/expectation.py) learned from a route's 72 hour items is the one its
heartbeat records give, to the digit (the hour items hold each heartbeat's ``hi``: error bound 0),
on random histories; and learning reads at most 72 items in one Query per route (DynamoDB in moto,
its calls counted)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.core.keys import HEARTBEAT_SIZE_CLASS, heartbeat_probe_id, heartbeat_run_id
from replmon.core.partitions import roll_partition
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.expectation import LEARN_HOURS, expectation, learn_expectation, learning_hours
from replmon.signals.ingest_budget import item_bytes
from replmon.signals.rollup import store_record
from replmon.signals.windows import HOUR_SECONDS, record_time

ROUTE = "dr-orders"
T0 = 1_795_428_000.0  # an hour boundary
FLOOR, CAP = 20.0, 450.0


def beat(t: float, status: ProbeStatus, latency: float, every: int) -> ProbeRecord:
    run = heartbeat_run_id(t, every)
    return ProbeRecord(route=ROUTE, probe_id=heartbeat_probe_id(run, ROUTE), run_id=run, planned_at=t, size_bytes=1024,
                       size_class=HEARTBEAT_SIZE_CLASS, trial=1, status=status, put_end=t + 0.05 + (t % 7) / 1000,
                       latency_lo=None if status is ProbeStatus.FAILED else latency * 0.8,
                       latency_hi=latency if status is ProbeStatus.COMPLETED else None)


def history(rng: random.Random, every: int, hours: int, scale: float) -> list[ProbeRecord]:
    """Heartbeats every ``every`` s for ``hours`` hours before T0: log-normal latencies (a heavy tail
    around ``scale``), some missing, FAILED and STUCK ones."""
    out = []
    t = T0 - hours * HOUR_SECONDS
    while t < T0:
        if rng.random() < 0.97:
            status = rng.choice([ProbeStatus.COMPLETED] * 60 + [ProbeStatus.FAILED, ProbeStatus.STUCK])
            out.append(beat(t, status, round(rng.lognormvariate(0, 1.2) * scale, 3), every))
        t += every
    return out


def records_expectation(records: list[ProbeRecord], now: float) -> float:
    """The old computation: q0.999 of the COMPLETED records' ``hi`` whose PUT ended in the learning hours."""
    start, end = learning_hours(now)
    lat = [r.latency_hi for r in records if r.status is ProbeStatus.COMPLETED and r.latency_hi is not None and start <= record_time(r) < end]
    return expectation(lat, floor=FLOOR, cap=CAP).seconds


@pytest.mark.parametrize(("seed", "every"), [(0, 60), (1, 60), (2, 60), (3, 10)])
def test_e_from_the_hour_items_is_e_from_the_records(seed: int, every: int) -> None:
    rng = random.Random(seed)
    store = MemoryLatencyTable()
    records = history(rng, every, 80 if every == 60 else 74, scale=rng.choice([1.0, 8.0, 40.0]))
    for r in records:
        assert store_record(store, r, record_time(r) + 5, threshold_seconds=900.0)
    for now in (T0 + 6 * HOUR_SECONDS, T0 + 6.5 * HOUR_SECONDS, T0 + 7.9 * HOUR_SECONDS, T0 + 3 * HOUR_SECONDS):
        learned = learn_expectation(store, ROUTE, now, floor=FLOOR, cap=CAP)
        assert learned.items_read <= LEARN_HOURS
        assert learned.expectation.seconds == records_expectation(records, now)
        start, end = learning_hours(now)
        assert learned.expectation.samples == sum(1 for r in records if r.status is ProbeStatus.COMPLETED and start <= record_time(r) < end)
    if every == 10:  # the densest cadence: the 72 items of a learning fit one Query page (1 MB) with room to spare
        assert sum(item_bytes(i) for i in store.roll_items(ROUTE, "h#", "h#~")[:LEARN_HOURS]) < 1024 * 1024 / 2


def test_stuck_failed_and_unbounded_heartbeats_are_not_latencies() -> None:
    """A STUCK heartbeat's entry is its ``lo`` (a lower bound: what the RPO reads), marked ``hs_``; a
    FAILED one -1: neither is a latency, as the records' reading left them out."""
    store = MemoryLatencyTable()
    t = T0 - 30 * HOUR_SECONDS  # 1,000 minutes inside the learning window of T0 (78 h to 6 h before it)
    for i in range(1000):
        assert store_record(store, beat(t + i * 60, ProbeStatus.COMPLETED, 2.0, 60), t + i * 60 + 5, threshold_seconds=900.0)
    for i in range(5):  # five beyond the q0.999's rank (the 5th largest of 1,010) would raise E were they counted
        at = t - 3600 + i * 60
        assert store_record(store, beat(at, ProbeStatus.STUCK, 7000.0, 60), at + 7200, threshold_seconds=900.0)
        assert store_record(store, beat(at + 30, ProbeStatus.FAILED, 0.0, 1), at + 40, threshold_seconds=900.0)
    learned = learn_expectation(store, ROUTE, T0, floor=1.0, cap=CAP)
    assert learned.expectation.seconds == 2.0 and learned.expectation.samples == 1000


def test_learning_reads_at_most_72_hour_items_in_one_query_on_dynamodb() -> None:
    """On DynamoDB (moto, the template's table), a route with 74 hours of heartbeats every 60 s
    (4,440 records) is learned from one Query returning 72 hour items, no record read. A Query
    returns at most 1 MB a page (AWS, "Paginating table query results in DynamoDB",
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.Pagination.html): the 72
    items fit one page, at the densest cadence too (10 s: test_e_from_the_hour_items_is_e_from_the_records)."""
    import boto3
    from moto import mock_aws

    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.local.tables import ensure_table
    from tests.conftest import TABLE, TEMPLATE

    rng = random.Random(7)
    memory = MemoryLatencyTable()
    records = history(rng, 60, 74, scale=3.0)
    for r in records:
        assert store_record(memory, r, record_time(r) + 5, threshold_seconds=900.0)
    hour_items = memory.roll_items(ROUTE, "h#", "h#~")
    assert len(hour_items) == 74
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        store = DynamoLatencyStore(TABLE, ddb)
        for item in hour_items:
            store.put_item(dict(item))
        calls: list[tuple[str, dict[str, Any]]] = []
        ddb.meta.events.register("after-call.dynamodb.*", lambda http_response, parsed, model, **_: calls.append((model.name, parsed)))
        now = T0 + 6.5 * HOUR_SECONDS
        learned = learn_expectation(store, ROUTE, now, floor=FLOOR, cap=CAP)
    assert [op for op, _ in calls] == ["Query"]
    assert calls[0][1]["Count"] == learned.items_read == LEARN_HOURS
    assert "LastEvaluatedKey" not in calls[0][1]
    assert learned.expectation.seconds == records_expectation(records, now)
    assert all(str(i["route"]) == roll_partition(ROUTE) for i in hour_items)


def test_the_semantics_page_states_the_bound_the_code_computes() -> None:
    """docs/SEMANTICS.md's detection bound, filled in at E = 20, 60 and 180 s, is signals/stall.py's."""
    import re
    from pathlib import Path

    from replmon.signals.stall import detection_bound

    text = (Path(__file__).resolve().parents[1] / "docs" / "SEMANTICS.md").read_text()
    assert "detection ≤ T + 2 (E + g) + A = T + 2E + 90 s" in text
    m = re.search(r"(\d+) s at the floor \(E = 20 s, T = 60 s\), (\d+) s at E = 60 s, (\d+) s at E = 180 s", text)
    assert m is not None
    assert [float(x) for x in m.groups()] == [detection_bound(e, 60.0) for e in (20.0, 60.0, 180.0)]
    assert detection_bound(33.0, 10.0) == 10.0 + 2 * 33.0 + 90.0
