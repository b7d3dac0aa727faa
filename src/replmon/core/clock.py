"""Clocks are inputs: the wall clock in Lambda and the lab, a manual one in tests.

Epoch seconds, because the two ends of a latency interval are read in different processes
(UploadProbe and PollReplication run in separate Lambda invocations).

A clock also carries cancellation: a local run that receives SIGINT/SIGTERM sets its event, and
every sleep or :meth:`check` in the probe's steps then raises :class:`Cancelled` at once.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Cancelled(Exception):
    """The run was interrupted (a local run's SIGINT or SIGTERM)."""


class Clock(Protocol):
    def now(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...
    def check(self) -> None:
        """Raise :class:`Cancelled` if the run was interrupted."""
        ...


class WallClock:
    def __init__(self, cancel: threading.Event | None = None) -> None:
        self.cancel = cancel

    def now(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if self.cancel is None:
            if seconds > 0:
                time.sleep(seconds)
            return
        if self.cancel.wait(max(0.0, seconds)):
            raise Cancelled("interrupted")

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("interrupted")


class CancellableClock:
    """Wraps a clock so that a set ``cancel`` event ends any sleep at once (:class:`Cancelled`)."""

    def __init__(self, inner: Clock, cancel: threading.Event) -> None:
        self.inner, self.cancel = inner, cancel

    def now(self) -> float:
        return self.inner.now()

    def sleep(self, seconds: float) -> None:
        self.check()
        if isinstance(self.inner, WallClock):
            if self.cancel.wait(max(0.0, seconds)):
                raise Cancelled("interrupted")
            return
        self.inner.sleep(seconds)
        self.check()

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled("interrupted")


class ManualClock:
    """A clock that moves only when told; ``sleep`` advances it at once.

    >>> c = ManualClock(100.0); c.sleep(2.5); c.now()
    102.5
    """

    def __init__(self, start: float = 1_700_000_000.0, tick: float = 0.0) -> None:
        self._t = start
        self._tick = tick  # added on every read: models the time a request takes
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            self._t += self._tick
            return self._t

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._t += max(0.0, seconds)

    def check(self) -> None:
        return None

    advance = sleep
