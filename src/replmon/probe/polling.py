"""When to send the next HEAD: the adaptive polling policy.

Bound: with HEADs spaced by at most ``max(floor, relative * t)`` (``t`` = seconds since the PUT
ended, at the last PENDING answer), the latency interval's width is at most
``max(floor, relative * latency)``, because the true latency is at least ``t``. HEADs are sent
early by twice a recent HEAD's duration and by 5 % of the gap, so that the *answer* lands in
time. Defaults give max(1 s, 2 %): about 53 HEADs for the first 50 s, then one more per ~1.9 %
of elapsed time (~245 HEADs for a 30-minute replication instead of 3,602 with a 0.5 s loop).

History lets us skip the early HEADs of large probes: replication cannot plausibly finish
faster than half of what the route's fastest recent throughput predicts (``not_before``). If
it does anyway, the interval is wider than the bound; the record says so (``bound_met``) and
the next prediction learns from it.

>>> p = PollPolicy(floor_seconds=1.0, relative=0.02)
>>> p.max_gap(10.0), p.max_gap(500.0)
(1.0, 10.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MIN_HISTORY = 3
SAFETY = 0.5  # start polling at half the fastest-ever prediction
MIN_SECONDS_FOR_RATE = 1.0  # latencies shorter than this say little about throughput
MARGIN = 0.05  # of each gap, kept for sleep overshoot and scheduling delay
DECAY = 0.7  # per HEAD, of the remembered slowest HEAD duration


@dataclass(frozen=True)
class PollPolicy:
    floor_seconds: float = 1.0
    relative: float = 0.02

    def max_gap(self, since_put: float) -> float:
        """Longest allowed gap after a PENDING answer seen ``since_put`` seconds after the PUT."""
        return max(self.floor_seconds, self.relative * since_put)

    def next_head_at(self, last_pending: float | None, not_before: float = 0.0, rtt: float = 0.0) -> float:
        """Seconds after the PUT end at which to send the next HEAD, so that its answer arrives
        within ``max_gap`` of the last PENDING request (``rtt``: recent HEAD durations, see
        :func:`rtt_estimate`)."""
        if last_pending is None:
            return 0.0  # first HEAD right after the PUT: proves replication applies to the key
        gap = self.max_gap(last_pending)
        # Early by twice the HEAD's duration (the answer's trip, and one more for a slower answer)
        # and by MARGIN of the gap (sleep overshoot and scheduling delay on a busy host).
        return max(last_pending + max(gap * (1 - MARGIN) - 2 * rtt, gap / 2), not_before)


    def bound(self, latency: float) -> float:
        return max(self.floor_seconds, self.relative * latency)


def rtt_estimate(previous: float, latest: float) -> float:
    """A decaying maximum of HEAD durations: one slow answer keeps the schedule cautious for a while.

    >>> rtt_estimate(0.010, 0.050), round(rtt_estimate(0.050, 0.010), 3)
    (0.05, 0.035)
    """
    return max(latest, DECAY * previous)


def earliest_completion(size_bytes: int, history: Iterable[tuple[int, float]]) -> float:
    """Seconds after the PUT before which completion is implausible, from ``(size, latency_lo)``
    pairs of the route's recent COMPLETED probes; 0 when history is too thin.

    >>> earliest_completion(1000 * 2**20, [(100 * 2**20, 10.0)] * 3)
    50.0
    """
    rates = [size / lat for size, lat in history if lat >= MIN_SECONDS_FOR_RATE]
    if len(rates) < MIN_HISTORY:
        return 0.0
    return SAFETY * size_bytes / max(rates)
