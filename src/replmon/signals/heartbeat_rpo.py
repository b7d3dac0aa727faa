"""What a route's heartbeats give its RPO (signals/slo.py ``rpo``): the largest latency of those whose
PUT ended in the window, and how many FAILED, from the hour items the SLO already read instead of
one record per heartbeat (60 an hour at the default HeartbeatSeconds, 360 at 10 s).

A heartbeat (probe/heartbeat.py) is stored in one transaction with its hour item's entry
``hx_<MMSSmmm>`` (signals/rollup.py ``heartbeat_attr``): its PUT end to the millisecond and its
polled bound (COMPLETED ``hi``, STUCK ``lo``; -1 FAILED). The entry is set only with its record (a
re-settled heartbeat is a duplicate: neither changes), and a heartbeat's record never changes
afterwards (no replica event narrows it), so the window ``[now - window, now]`` is read exactly,
to the millisecond of its start (tests/test_heartbeat_rpo.py compares it with the records').
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replmon.core.partitions import heartbeat_partition
from replmon.core.ports import LatencyStore
from replmon.core.record import ProbeRecord
from replmon.signals.rollup import FAILED_MARK, heartbeat_entry_time
from replmon.signals.slo_rollup import first_read_hour
from replmon.signals.windows import HOUR_SECONDS, floor_hour, record_time

__all__ = ["HeartbeatWindow", "heartbeat_window"]


@dataclass
class HeartbeatWindow:
    records: list[ProbeRecord] = field(default_factory=list)  # heartbeats read as records (no hour items)
    largest: float | None = None  # the largest bound among the entries
    failed: int = 0  # FAILED heartbeats among the entries


def heartbeat_window(store: LatencyStore, route: str, now: float, window: float,
                     hours: Mapping[float, Mapping[str, Any]] | None) -> HeartbeatWindow:
    """The route's heartbeats in ``[now - window, now]``: ``hours`` are the hour items read (hour
    start -> item, every one from ``H - 6 h``: a missing one holds nothing); without them, or for a
    window longer than they cover, every heartbeat of the window is read as a record."""
    start = now - window
    if hours is None or floor_hour(start) < first_read_hour(now):
        # a heartbeat's key is its period's start; its PUT ends within the period and the invocation
        return HeartbeatWindow([r for r in store.query(heartbeat_partition(route), start - HOUR_SECONDS, now) if start <= record_time(r)])
    out = HeartbeatWindow()
    for hour, item in hours.items():
        for attr, value in item.items():
            t = heartbeat_entry_time(hour, attr)
            if t is None or not start <= t <= now:
                continue
            if value == FAILED_MARK:
                out.failed += 1
            elif float(value) >= 0:
                out.largest = float(value) if out.largest is None else max(out.largest, float(value))
    return out
