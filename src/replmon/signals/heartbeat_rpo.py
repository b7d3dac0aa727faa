"""What a route's heartbeats give its RPO (signals/slo.py ``rpo``): the largest latency of those whose
PUT ended in the window, and how many FAILED, read from at most 5 records instead of 60 an hour.

A heartbeat (probe/heartbeat.py) is stored with its hour item's counters (``hf_MM``: FAILED ones per
5-minute sub-slot) and its latency as the sub-slot's maximum (``x_1KiB_MM``); a heartbeat's record
never changes once written (no replica event narrows it), so the maximum is exact. The window
``[now - window, now]`` is then the whole sub-slots from ``s0 = ceil_5min(now - window)`` (read
from the hour items the SLO already read: signals/slo_rollup.py) and the records before ``s0``
(under 5 minutes of them: one Query). Exactly the records' numbers (tests/test_heartbeat_rpo.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replmon.core.keys import HEARTBEAT_SIZE_CLASS
from replmon.core.partitions import heartbeat_partition
from replmon.core.ports import LatencyStore
from replmon.core.record import ProbeRecord
from replmon.signals.rollup import HEARTBEAT_FAILED, max_attr
from replmon.signals.windows import HOUR_SECONDS, SUB_SLOT_SECONDS, floor_hour, record_time

__all__ = ["HeartbeatWindow", "heartbeat_window"]

#: A heartbeat's PUT (1 KiB) ends within this of its planned time (its sort key).
PUT_LAG_SECONDS = 60


@dataclass
class HeartbeatWindow:
    records: list[ProbeRecord] = field(default_factory=list)  # the window's heartbeats read as records
    largest: float | None = None  # the largest latency of the rest (sub-slot maxima)
    failed: int = 0  # FAILED heartbeats among the rest


def heartbeat_window(store: LatencyStore, route: str, now: float, window: float,
                     hours: Mapping[float, Mapping[str, Any]] | None) -> HeartbeatWindow:
    """The route's heartbeats in ``[now - window, now]``: ``hours`` are the hour items read (hour
    start -> item, those from ``H - 6 h``); without them, or for a window they do not cover, every
    heartbeat of the window is read as a record."""
    start = now - window
    s0 = math.ceil(start / SUB_SLOT_SECONDS) * SUB_SLOT_SECONDS
    covered = hours is not None and floor_hour(s0) >= floor_hour(now) - 6 * HOUR_SECONDS
    end = s0 if covered else now
    out = HeartbeatWindow([r for r in store.query(heartbeat_partition(route), start - PUT_LAG_SECONDS, end)
                           if start <= record_time(r) and (not covered or record_time(r) < s0)])
    if not covered or hours is None:
        return out
    for hour, item in hours.items():
        for mm in range(0, HOUR_SECONDS // 60, SUB_SLOT_SECONDS // 60):
            t = hour + mm * 60
            if t < s0 or t > now:
                continue
            value = item.get(max_attr(HEARTBEAT_SIZE_CLASS, t))
            if value is not None:
                out.largest = float(value) if out.largest is None else max(out.largest, float(value))
            out.failed += int(item.get(f"{HEARTBEAT_FAILED}_{mm:02d}", 0))
    return out
