"""The RPO's heartbeat input from the hour items (signals/heartbeat_rpo.py) is the one the
heartbeat records give, on random histories (heartbeats every 10 or 60 s, PUTs that end up to
90 s after their period starts, FAILED and STUCK ones, re-settled ones), with no record read."""

from __future__ import annotations

import dataclasses
import random

import pytest

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.core.keys import HEARTBEAT_SIZE_CLASS, heartbeat_probe_id, heartbeat_run_id
from replmon.core.partitions import hour_sort_key
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.heartbeat_rpo import heartbeat_window
from replmon.signals.rollup import store_record
from replmon.signals.slo import rpo
from replmon.signals.windows import HOUR_SECONDS, floor_hour

ROUTE = "dr-orders"
T0 = 1_795_428_000.0


def beat(t: float, status: ProbeStatus, latency: float, lag: float = 0.05, every: int = 60) -> ProbeRecord:
    run = heartbeat_run_id(t, every)
    return ProbeRecord(route=ROUTE, probe_id=heartbeat_probe_id(run, ROUTE), run_id=run, planned_at=t, size_bytes=1024,
                       size_class=HEARTBEAT_SIZE_CLASS, trial=1, status=status, put_end=t + lag,
                       latency_lo=latency / 2 if status is not ProbeStatus.FAILED else None,
                       latency_hi=latency if status is ProbeStatus.COMPLETED else None)


@pytest.mark.parametrize("seed", range(6))
def test_the_heartbeat_rpo_from_the_hour_items_is_the_records_rpo(seed: int) -> None:
    rng = random.Random(seed)
    store = MemoryLatencyTable()
    every = 10 if seed % 2 else 60
    planned = []
    t = T0
    while t < T0 + 8 * HOUR_SECONDS:  # some missing, a few FAILED or STUCK, latencies and PUT lags that vary
        if rng.random() < 0.9:
            planned.append(beat(t, rng.choice([ProbeStatus.COMPLETED] * 8 + [ProbeStatus.FAILED, ProbeStatus.STUCK]),
                                rng.uniform(0.1, 900), rng.choice([0.05, 1.5, 30.0, 90.0]) + rng.uniform(0, 0.5), every))  # no two PUTs end in one ms
        t += every
    stored: list[ProbeRecord] = []
    for now in sorted(T0 + rng.uniform(1, 8) * HOUR_SECONDS for _ in range(25)):
        while planned and (planned[0].put_end or 0) + 5 <= now:  # stored 5 s after its PUT, as the Heartbeat settles it
            b = planned.pop(0)
            assert store_record(store, b, (b.put_end or 0) + 5, threshold_seconds=900.0)
            # settled again after a crash, with another outcome: a duplicate, nothing changes
            again = dataclasses.replace(b, status=ProbeStatus.COMPLETED, latency_lo=1.0, latency_hi=5000.0)
            assert not store_record(store, again, (b.put_end or 0) + 60, threshold_seconds=900.0)
            stored.append(b)
        window = rng.choice([600.0, 1800.0, 3600.0, 3 * 3600.0])
        h = floor_hour(now)
        hours = {hour: item for hour in (h - n * HOUR_SECONDS for n in range(7))
                 for item in store.roll_items(ROUTE, hour_sort_key(hour), hour_sort_key(hour))}
        got = heartbeat_window(store, ROUTE, now, window, hours)
        assert got.records == []  # nothing but the hour items
        rolled = rpo(now, window, got.records, [], None, 0, (HEARTBEAT_SIZE_CLASS, got.largest, got.failed))
        raw = rpo(now, window, stored, [], None, 0)
        assert (rolled.by_size_class, rolled.reasons, rolled.inputs) == (raw.by_size_class, raw.reasons, raw.inputs), (now, window)
        # without the hour items every heartbeat of the window is read as a record
        assert len(heartbeat_window(store, ROUTE, now, window, None).records) == len(
            [b for b in stored if now - window <= (b.put_end or 0)])
