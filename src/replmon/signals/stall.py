"""Is a route stalled? The heartbeat's state machine, with confirmation heartbeats
(docs/design/fleet.md 10).

A heartbeat is *late* when it has been pending for the route's expectation ``E`` (signals/
expectation.py; a FAILED one is late at once); a probe in flight is a beat too, late past ``E`` plus
its size at 50 MiB/s (:func:`probe_expectation`). A route stalls when **two consecutive heartbeats are
late**, so one slow heartbeat never stalls a route: its successor replicates on time. To learn that
sooner than the next period, the moment the newest heartbeat turns late the Heartbeat function puts
a **confirmation** heartbeat (:func:`wants_confirmation`); if that one is late too, ``E`` later, the
route is STALLED::

    HEALTHY    --(two consecutive beats late, one at least a heartbeat)---------> STALLED
    STALLED    --(a heartbeat put after the stall began completes within E + T)--> RECOVERING
    RECOVERING --(the 2 newest settled heartbeats on time, none late pending)----> HEALTHY
    RECOVERING --(two consecutive beats put since recovery began late)-----------> STALLED

Each transition that ends a phase moves a **horizon**: beats put before it are history (a stall's
backlog, pending or FAILED, must not re-stall a route that recovered; a relapse needs a heartbeat
put after it to recover).

``StallSeconds`` is 0 when HEALTHY, else the seconds since ``since``: the put time of the first late
heartbeat, so it reads as the age of the hole in the recovery point.

**Detection** of a full stall that begins at ``t0``: the first heartbeat put after it (at ``t1``,
within a period T) is late at ``t1 + E``; the confirmation put then is late at ``t1 + 2E``: STALLED
``2E`` to ``2E + T`` after the fault (the evaluation runs with every poll round, not once a period).
At the defaults (E = 20 s floor, T = 60 s) that is 40-100 s, before the alarm's own evaluation.

>>> s = StallState()
>>> beats = [Beat(put_at=0.0), Beat(put_at=20.0)]          # the second is the confirmation
>>> advance(s, beats, now=39.0, expect=20.0, period=60.0).phase
<StallPhase.HEALTHY: 'HEALTHY'>
>>> s2 = advance(s, beats, now=40.0, expect=20.0, period=60.0); s2.phase, s2.since, s2.transition
(<StallPhase.STALLED: 'STALLED'>, 0.0, 'STALLED')
>>> stall_seconds(s2, now=100.0)
100.0
>>> wants_confirmation(StallState(), [Beat(put_at=0.0)], now=20.0, expect=20.0)
True

One slow heartbeat (its confirmation completes on time) never stalls:

>>> slow = [Beat(put_at=0.0), Beat(put_at=20.0, latency=1.0)]
>>> advance(StallState(), slow, now=200.0, expect=20.0, period=60.0).phase
<StallPhase.HEALTHY: 'HEALTHY'>
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from itertools import pairwise
from typing import Any

from replmon.core.partitions import HEARTBEAT_STATE, live_partition
from replmon.core.ports import SignalStore

__all__ = ["ALARM_PERIOD_SECONDS", "HEARTBEAT_IDLE_SECONDS", "STALE_AFTER_SECONDS", "Beat", "StallPhase", "StallState", "advance", "current_stall", "detection_bound", "live_state", "probe_expectation", "stall_seconds", "wants_confirmation"]

#: Settled heartbeats needed on time, in a row, before a recovering route is healthy again.
RECOVERY_STREAK = 2


#: A probe in flight is late past the heartbeat's expectation plus its size at this rate: a lower bound
#: of S3's replication throughput for one object, so a big probe is not late merely for being big.
PROBE_BYTES_PER_SECOND = 50 * 2**20


#: RouteStalled's Metrics Insights period (template.yaml: Period 60, DatapointsToAlarm 1 of 3): a
#: StallSeconds point above 0 is seen by the evaluation of its minute, at most one period later.
ALARM_PERIOD_SECONDS = 60.0
#: The part of each minute the Heartbeat does not judge (probe/heartbeat.py INVOCATION_SECONDS -
#: WORK_SECONDS: it stops polling 45 s into its minute): a beat turning late then is seen at the next
#: invocation's start, at most this much later.
HEARTBEAT_IDLE_SECONDS = 15.0


def detection_bound(expect: float, period: float, *, idle: float = HEARTBEAT_IDLE_SECONDS,
                    alarm_period: float = ALARM_PERIOD_SECONDS) -> float:
    """Seconds from a full stall's start to RouteStalled's ALARM at most (docs/SEMANTICS.md,
    Stalls): the first heartbeat put after it within ``period`` (T), late ``E`` after its PUT and
    seen within ``idle``, its confirmation put then, late ``E`` later and seen within ``idle``
    (STALLED, StallSeconds printed at once), then the alarm's evaluation of that minute. Not in it:
    CloudWatch's ingestion of the point and EventBridge's delivery of the contributor's state change
    to the page topic (AWS documents no bound for either).

    >>> detection_bound(20.0, 60.0), detection_bound(180.0, 60.0)
    (190.0, 510.0)
    """
    return period + 2 * (expect + idle) + alarm_period


def probe_expectation(size_bytes: int, heartbeat_expect: float) -> float:
    """A probe in flight is a beat too: late after ``E + size / 50 MiB/s``.

    >>> probe_expectation(2**30, 20.0)
    40.48
    """
    return round(heartbeat_expect + size_bytes / PROBE_BYTES_PER_SECOND, 3)


class StallPhase(StrEnum):
    HEALTHY = "HEALTHY"
    STALLED = "STALLED"
    RECOVERING = "RECOVERING"


@dataclass(frozen=True)
class Beat:
    """One heartbeat as the state machine sees it: when it was put (its PUT's end) and, once settled,
    its latency (the interval's upper bound) or that it failed (FAILED/STUCK: it will not replicate)."""

    put_at: float
    latency: float | None = None  # settled and replicated: seconds after the PUT
    failed: bool = False  # settled without replicating
    expect: float | None = None  # its own expectation (a probe in flight: :func:`probe_expectation`), else the route's

    @property
    def settled(self) -> bool:
        return self.latency is not None or self.failed

    def age(self, now: float) -> float:
        return now - self.put_at

    def late(self, now: float, expect: float) -> bool:
        """Not replicated ``expect`` after its PUT (a failure is late at once)."""
        return self.failed or (self.latency is None and self.age(now) >= (self.expect if self.expect is not None else expect))

    def on_time(self, expect: float) -> bool:
        return self.latency is not None and self.latency <= expect


@dataclass(frozen=True)
class StallState:
    phase: StallPhase = StallPhase.HEALTHY
    since: float | None = None  # the stall's start: the put time of the first late heartbeat
    recovering_at: float | None = None  # when RECOVERING began
    # beats put before this are history: a stall's backlog (still pending, or FAILED) cannot re-stall a
    # route that recovered, nor recover a route that relapsed
    horizon: float | None = None
    transition: str | None = None  # the phase entered by the last advance, if it changed

    def to_item(self) -> dict[str, Any]:
        return {"phase": str(self.phase), "since": self.since, "recovering_at": self.recovering_at, "horizon": self.horizon}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> StallState:
        return cls(StallPhase(item.get("phase", StallPhase.HEALTHY)), item.get("since"), item.get("recovering_at"), item.get("horizon"))


def _stall_start(beats: Sequence[Beat], now: float, expect: float) -> float | None:
    """The put time of the older of the first two consecutive beats that are both late, at least one
    of them a heartbeat (two probes alone are not the two-heartbeat rule: big probes are slow)."""
    for older, newer in pairwise(beats):
        if older.late(now, expect) and newer.late(now, expect) and (older.expect is None or newer.expect is None):
            return older.put_at
    return None


def wants_confirmation(state: StallState, beats: Sequence[Beat], now: float, expect: float) -> bool:
    """Put a heartbeat now? Yes when the newest one is late and the route is not already STALLED: the
    next one, if late too, decides a stall ``E`` from now instead of a period from now."""
    if state.phase is StallPhase.STALLED or not beats:
        return False
    newest = max(beats, key=lambda b: b.put_at)
    return not newest.settled and newest.late(now, expect)


def advance(state: StallState, beats: Sequence[Beat], now: float, expect: float, period: float) -> StallState:
    """The next state from the route's known heartbeats (any order; pending and recently settled)."""
    beats = sorted(beats, key=lambda b: b.put_at)
    state = replace(state, transition=None)
    if state.horizon is not None:
        beats = [b for b in beats if b.put_at >= state.horizon]
    if state.phase is StallPhase.HEALTHY:
        start = _stall_start(beats, now, expect)
        if start is None:
            return state
        return StallState(StallPhase.STALLED, since=start, transition=StallPhase.STALLED.value)
    assert state.since is not None
    if state.phase is StallPhase.STALLED:
        if any(b.put_at >= state.since and b.latency is not None and b.latency <= expect + period for b in beats):
            return StallState(StallPhase.RECOVERING, since=state.since, recovering_at=now, horizon=state.horizon,
                              transition=StallPhase.RECOVERING.value)
        return state
    # RECOVERING: heartbeats put before recovery began may still drain; only newer ones count
    began = state.recovering_at if state.recovering_at is not None else now
    fresh = [b for b in beats if b.put_at >= began - period]
    if _stall_start(fresh, now, expect) is not None:  # the same stall: it needs a heartbeat put from now on to recover
        return StallState(StallPhase.STALLED, since=state.since, horizon=now, transition=StallPhase.STALLED.value)
    settled = [b for b in fresh if b.settled and b.expect is None]
    newest = settled[-RECOVERY_STREAK:]
    waiting = any(not b.settled and b.late(now, expect) for b in fresh)
    if len(newest) == RECOVERY_STREAK and all(b.on_time(expect) for b in newest) and not waiting:
        return StallState(StallPhase.HEALTHY, horizon=newest[0].put_at, transition=StallPhase.HEALTHY.value)
    return state


def stall_seconds(state: StallState, now: float) -> float:
    """The metric: 0 when healthy, else seconds since the stall began (at least 1)."""
    if state.phase is StallPhase.HEALTHY or state.since is None:
        return 0.0
    return max(1.0, now - state.since)


#: A heartbeat state not saved for this long is a route the Heartbeat no longer visits (removed,
#: heartbeats turned off, the function not running): readers ignore it (its TTL deletes it later).
STALE_AFTER_SECONDS = 600


def live_state(store: SignalStore, route: str, now: float) -> dict[str, Any] | None:
    """The route's heartbeat state as last saved, or None (no heartbeats, or stale)."""
    item = store.get_item(live_partition(route), HEARTBEAT_STATE)
    if item is None or now - float(item.get("updated_at", 0.0)) > STALE_AFTER_SECONDS:
        return None
    return item


def current_stall(store: SignalStore, route: str, now: float) -> float | None:
    """The route's StallSeconds as the Heartbeat function last saved it (None: no current state)."""
    item = live_state(store, route, now)
    return None if item is None else stall_seconds(StallState.from_item(item), now)
