"""How long should a heartbeat take on this route? Learned from the route's own history
(docs/design/fleet.md 10).

``E = clamp(q0.999(latencies), floor, cap)``: the 99.9th percentile (nearest rank: a latency that
was actually seen) of the route's completed heartbeats in the 72 hours that **ended 6 hours ago** - so a
degradation unfolding now cannot raise its own bar - never below ``floor`` (``StallFloorSeconds``,
20 s by default: S3 replicates most objects in seconds, and a 1 KiB object across Regions in a
few) and never above ``cap`` (half the route's latency target: a stall is known before the RPO
alarm would fire). With fewer than 1,000 samples (about 17 hours of heartbeats, so about 23 hours after the first: the
window ends 6 hours ago) the floor is used
and the record says so.

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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HISTORY_END_AGO", "HISTORY_SPAN", "MIN_SAMPLES", "QUANTILE", "REFRESH_SECONDS", "Expectation", "expectation"]

QUANTILE = 0.999
MIN_SAMPLES = 1000
HISTORY_SPAN = 72 * 3600
HISTORY_END_AGO = 6 * 3600
REFRESH_SECONDS = 3600  # the heartbeat re-learns a route's expectation hourly


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
