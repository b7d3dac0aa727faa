"""The latency interval: what a polled measurement really knows.

A probe's replication finished at some moment we never see directly. We know it was still
PENDING when a HEAD request was *sent* (``lo``) and already COMPLETED when a later HEAD's answer
was *received* (``hi``); both are counted from the end of the PUT as the client saw it.

>>> iv = LatencyInterval(lo=12.0, hi=13.0)
>>> iv.mid, iv.width
(12.5, 1.0)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LatencyInterval:
    lo: float
    hi: float | None  # None when completion was never seen (FAILED, STUCK)

    def __post_init__(self) -> None:
        if self.hi is not None and self.hi < self.lo:
            raise ValueError(f"interval upper bound {self.hi} is below its lower bound {self.lo}")

    @property
    def mid(self) -> float | None:
        return None if self.hi is None else (self.lo + self.hi) / 2

    @property
    def width(self) -> float | None:
        return None if self.hi is None else self.hi - self.lo

    def contains(self, seconds: float) -> bool:
        return self.hi is not None and self.lo <= seconds <= self.hi
