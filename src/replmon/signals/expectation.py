"""How long should a heartbeat take on this route? Learned from the route's own history
(docs/design/fleet.md 10).

``E = clamp(q0.999(latencies), floor, cap)``: the 99.9th percentile (nearest rank: a latency that
was actually seen) of the route's completed heartbeats in the 72 whole hours that **ended 6 to 7 hours
ago** (the hour boundary at or before ``now - 6 h``) - so a
degradation unfolding now cannot raise its own bar - never below ``floor`` (``StallFloorSeconds``,
20 s by default: S3 replicates most objects in seconds, and a 1 KiB object across Regions in a
few) and never above ``cap`` (half the route's latency target: a stall is known before the RPO
alarm would fire). With fewer than 1,000 samples (about 17 hours of heartbeats, so about 23 hours after the first: the
window ends 6 hours ago) the floor is used
and the record says so.

**Read from the hour items, not the records** (:func:`learn_expectation`): each heartbeat's hour item
(signals/rollup.py) holds its polled bound as ``hx_<MMSSmmm>`` (COMPLETED: ``hi``, the value its
record holds, to the digit: DynamoDB keeps a number's decimal digits), written in the record's own
transaction; FAILED (-1), unbounded (-2) and STUCK ones (marked ``hs_<MMSSmmm>``) are left out, as
the records' reading left them out. So the 72 hour items give the very latencies the 4,320 records
(at 60 s) give: ``E`` is the same number, error bound 0 (tests/test_heartbeat_expectation.py). One
Query of at most 72 items per route an hour.

Why the 99.9th and not the 99th: a stall needs two consecutive heartbeats late (signals/stall.py).
Were lateness independent at ``p`` per heartbeat, a healthy route would see about ``43,200 p^2``
false stalls a month: 4.3 at p = 1 %, 0.04 at p = 0.1 %. Lateness in real outages is correlated -
and then it is a real stall of at least 2E.

>>> e = expectation([1.0] * 900 + [2.0] * 100 + [30.0] * 1, floor=3.0, cap=450.0)
>>> e.seconds, e.samples, e.basis
(3.0, 1001, 'q0.999 of 1001 heartbeats (2.0 s) raised to the floor 3.0 s')
>>> expectation([50.0] * 1000, floor=20.0, cap=450.0).seconds
50.0
>>> expectation([900.0] * 1000, floor=20.0, cap=450.0).basis
'q0.999 of 1000 heartbeats (900.0 s) capped at 450.0 s (half the latency target)'
>>> expectation([1.0] * 10, floor=20.0, cap=450.0).basis
'floor 20.0 s (10 heartbeats in the window; 1000 needed to learn)'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from replmon.core.partitions import hour_sort_key
from replmon.signals.rollup import HEARTBEAT_PREFIX, STUCK_PREFIX, heartbeat_entry_time
from replmon.signals.windows import HOUR_SECONDS, floor_hour

__all__ = ["HISTORY_END_AGO", "HISTORY_SPAN", "LEARN_HOURS", "MIN_SAMPLES", "QUANTILE", "REFRESH_SECONDS", "Expectation", "Learned",
           "expectation", "hour_latencies", "learn_expectation", "learning_hours"]

QUANTILE = 0.999
MIN_SAMPLES = 1000
HISTORY_SPAN = 72 * 3600
HISTORY_END_AGO = 6 * 3600
REFRESH_SECONDS = 3600  # the heartbeat re-learns a route's expectation hourly
LEARN_HOURS = HISTORY_SPAN // HOUR_SECONDS  # hour items read per route and learning: 72


class HourItems(Protocol):
    def roll_items(self, route: str, first_sk: str, last_sk: str) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class Expectation:
    seconds: float
    samples: int
    basis: str  # how it was chosen (the stall notification and the record say it)
    learned_at: float = 0.0

    def to_item(self) -> dict[str, Any]:
        return {"expect": self.seconds, "expect_n": self.samples, "expect_basis": self.basis, "expect_at": self.learned_at}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> Expectation | None:
        if "expect" not in item:
            return None
        return cls(float(item["expect"]), int(item.get("expect_n", 0)), str(item.get("expect_basis", "")), float(item.get("expect_at", 0)))


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The smallest value with at least ``q`` of the values at or below it.

    >>> nearest_rank([5, 1, 3, 2, 4], 0.5), nearest_rank([5, 1, 3, 2, 4], 0.99)
    (3, 5)
    """
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def expectation(latencies: Sequence[float], *, floor: float, cap: float, learned_at: float = 0.0) -> Expectation:
    cap = max(cap, floor)
    n = len(latencies)
    if n < MIN_SAMPLES:
        return Expectation(floor, n, f"floor {floor:.1f} s ({n} heartbeats in the window; {MIN_SAMPLES} needed to learn)", learned_at)
    q = nearest_rank(latencies, QUANTILE)
    seconds = min(max(q, floor), cap)
    how = f"q{QUANTILE:g} of {n} heartbeats ({q:.1f} s)"
    if seconds > q:
        how += f" raised to the floor {floor:.1f} s"
    elif seconds < q:
        how += f" capped at {cap:.1f} s (half the latency target)"
    return Expectation(seconds, n, how, learned_at)


def learning_hours(now: float) -> tuple[float, float]:
    """The learning window ``[start, end)``: 72 whole hours ending at the hour boundary at or before
    ``now - 6 h``.

    >>> start, end = learning_hours(1795428000.0 + 6 * 3600 + 59 * 60)  # 16:59 UTC
    >>> (1795428000.0 - end, (end - start) / 3600)
    (0.0, 72.0)
    """
    end = floor_hour(now - HISTORY_END_AGO)
    return end - HISTORY_SPAN, end


def hour_latencies(items: Sequence[Mapping[str, Any]]) -> list[float]:
    """The completed heartbeats' latencies (``hi``) the hour items hold, in no particular order:
    every ``hx_`` entry but FAILED (-1), unbounded (-2) and STUCK ones (an ``hs_`` twin). An hour
    item written before ``hs_`` existed cannot tell a STUCK heartbeat's ``lo`` from a latency: it
    counts it (a larger, never a smaller E), for at most the 72 hours such items stay in the window.

    >>> hour_latencies([{"hx_0000050": 3.5, "hx_0100050": -1, "hx_0200050": 7200.0, "hs_0200050": 1, "j": 3}])
    [3.5]
    """
    out: list[float] = []
    for item in items:
        for attr, value in item.items():
            if not attr.startswith(HEARTBEAT_PREFIX) or heartbeat_entry_time(0.0, attr) is None:
                continue
            v = float(value)
            if v < 0 or STUCK_PREFIX + attr[len(HEARTBEAT_PREFIX):] in item:
                continue
            out.append(v)
    return out


@dataclass(frozen=True)
class Learned:
    expectation: Expectation
    items_read: int  # hour items the Query returned (at most LEARN_HOURS)


def learn_expectation(store: HourItems, route: str, now: float, *, floor: float, cap: float) -> Learned:
    """``route``'s expectation from its 72 hour items of the learning window (one Query: the items
    ``h#<start>`` .. ``h#<end - 1 h>`` of ``<route>#roll``)."""
    start, end = learning_hours(now)
    items = store.roll_items(route, hour_sort_key(start), hour_sort_key(end - HOUR_SECONDS))
    return Learned(expectation(hour_latencies(items), floor=floor, cap=cap, learned_at=now), len(items))
