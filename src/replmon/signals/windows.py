"""The SLO and RPO windows, defined once (docs/SEMANTICS.md, "Windows and how they are read").

Every window is *aligned*, so the raw computation (records) and the rollup computation (5-minute
sub-slots, hour items) count exactly the same samples. With ``S = floor_5min(now)`` and
``H = floor_hour(now)``, a sample's time ``when = put_end or planned_at``:

| label | window | read from |
| --- | --- | --- |
| ``5m`` | ``[S - 5 min, now]`` (5-10 min wide) | sub-slots |
| ``30m`` | ``[S - 30 min, now]`` | sub-slots |
| ``1h`` (also the RPO window) | ``[S - 60 min, now]`` | sub-slots |
| ``6h`` | ``[H - 6 h, now]`` | hour items |
| ``period`` | ``[H - SloPeriodDays, now]`` | period cache + hour items |

>>> now = 1795428000.0 + 37 * 60 + 12          # 10:37:12 UTC
>>> w = window("5m", now)
>>> (w.end - w.start, sub_slot(w.start), sub_slot(now))
(432.0, '30', '35')
>>> window("6h", now).start == floor_hour(now) - 6 * 3600
True

A route without heartbeats judges a sample per class cadence only, so its short windows widen to
whole multiples of its smallest cadence, and the label says so:

>>> widen(window("5m", now), 3600).label
'5m→1h'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from replmon.core.defaults import DEFAULTS
from replmon.core.record import ProbeRecord

__all__ = ["HOUR_SECONDS", "LABELS", "SUB_SLOT_SECONDS", "Window", "event_window", "floor_5min", "floor_hour", "record_time", "sub_slot",
           "sub_slots", "widen", "window", "window_start", "windows"]

SUB_SLOT_SECONDS = 300
HOUR_SECONDS = 3600
#: Short windows: seconds back from S (the current 5-minute slot's start).
_SHORT = {"5m": 300, "30m": 1800, "1h": 3600}
LABELS = ("5m", "30m", "1h", "6h", "period")


def floor_5min(t: float) -> float:
    return math.floor(t / SUB_SLOT_SECONDS) * SUB_SLOT_SECONDS


def floor_hour(t: float) -> float:
    return math.floor(t / HOUR_SECONDS) * HOUR_SECONDS


def sub_slot(t: float) -> str:
    """The 5-minute sub-slot of ``t`` within its hour: ``"00"``, ``"05"``, ... ``"55"`` (hour items' ``_MM``)."""
    return f"{int((t - floor_hour(t)) // SUB_SLOT_SECONDS) * 5:02d}"


def record_time(record: ProbeRecord) -> float:
    """When a sample counts: its PUT's end, else its planned time."""
    return record.put_end if record.put_end is not None else record.planned_at


def _duration_label(seconds: float) -> str:
    if seconds % 86400 == 0:
        return f"{int(seconds // 86400)}d"
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    return f"{int(seconds // 60)}m"


@dataclass(frozen=True)
class Window:
    label: str
    start: float
    end: float

    def contains(self, t: float) -> bool:
        return self.start <= t <= self.end


def window(label: str, now: float, period_days: int = DEFAULTS.slo_period_days) -> Window:
    seconds = {**_SHORT, "6h": 6 * HOUR_SECONDS, "period": period_days * 86400}.get(label)
    if seconds is None:
        raise ValueError(f"unknown window {label!r}; one of {', '.join(LABELS)}")
    return Window(label, window_start(seconds, now), now)


def window_start(seconds: float, now: float) -> float:
    """Where a window ``seconds`` long that ends now starts, aligned as ``window`` aligns the labelled
    ones: under 6 h, whole 5-minute sub-slots back from S; from 6 h, whole hours back from H (so
    the rollups count it from hour items, or from the period cache's hours).

    >>> now = 1795428000.0 + 37 * 60 + 12          # 10:37:12 UTC
    >>> [(floor_5min(now) - window_start(s, now)) / 60 for s in (300, 3600)], (floor_hour(now) - window_start(6 * 3600, now)) / 3600
    ([5.0, 60.0], 6.0)
    >>> (floor_5min(now) - window_start(900, now)) / 60, (floor_hour(now) - window_start(86400, now)) / 3600
    (15.0, 24.0)
    """
    if seconds >= 6 * HOUR_SECONDS:
        return floor_hour(now) - math.ceil(seconds / HOUR_SECONDS) * HOUR_SECONDS
    return floor_5min(now) - math.ceil(seconds / SUB_SLOT_SECONDS) * SUB_SLOT_SECONDS


def windows(now: float, period_days: int = DEFAULTS.slo_period_days) -> dict[str, Window]:
    return {label: window(label, now, period_days) for label in LABELS}


def widen(w: Window, cadence_seconds: float) -> Window:
    """A short window stretched back to a whole multiple of ``cadence_seconds`` (measured from S),
    labelled ``<label>→<width>``; unchanged when it already is one."""
    if w.label not in _SHORT or _SHORT[w.label] % cadence_seconds == 0:
        return w
    width = math.ceil(_SHORT[w.label] / cadence_seconds) * cadence_seconds
    return Window(f"{w.label}→{_duration_label(width)}", floor_5min(w.end) - width, w.end)


def event_window(now: float, seconds: float) -> Window:
    """The replication events a health evaluation counts: whole 5-minute sub-slots (the hour items'
    ``e*_MM`` counters), from ``floor_5min(now) - ceil(seconds / 5 min) * 5 min`` through the slot
    holding ``now`` (an event stamped later in that slot by S3's clock counts too).

    >>> w = event_window(1795428000.0 + 37 * 60 + 12, 3600)          # 10:37:12 UTC, the 1 h RPO window
    >>> (sub_slot(w.start), (w.end - w.start) / 60, len(sub_slots(w)))
    ('35', 62.2, 13)
    """
    width = math.ceil(seconds / SUB_SLOT_SECONDS) * SUB_SLOT_SECONDS
    return Window(f"events {_duration_label(width)}", floor_5min(now) - width, now)


def sub_slots(w: Window) -> list[tuple[float, str]]:
    """(hour start, ``MM``) of every sub-slot a short window covers, oldest first."""
    out = []
    t = floor_5min(w.start)
    while t <= w.end:
        out.append((floor_hour(t), sub_slot(t)))
        t += SUB_SLOT_SECONDS
    return out
