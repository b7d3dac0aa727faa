"""Probe size classes on their own clocks, and when each is due (docs/design/fleet.md 4).

One schedule fires every *tick* (``ScheduleRateMinutes``, default 15 min). Each size class has a
cadence that is a whole number of ticks, written in the ``ProbeClasses`` grammar
``<size>@<n><m|h|d>[x<trials>]``, comma-separated, validated once:

>>> classes = ProbeClasses.parse("1MiB@1h,64MiB@6h,1GiB@1dx2")
>>> [(c.label, c.every_seconds, c.trials) for c in classes]
[('1MiB', 3600, 1), ('64MiB', 21600, 1), ('1GiB', 86400, 2)]
>>> str(classes)
'1MiB@1h,64MiB@6h,1GiB@1dx2'
>>> ProbeClasses.parse("1MiB@90s")
Traceback (most recent call last):
...
replmon.core.errors.ConfigError: ProbeClasses: '1MiB@90s' is not <size>@<n><m|h|d>[x<trials>], e.g. '1MiB@1h,64MiB@6h,1GiB@1d'

A registry item (core/registry.py) may override the classes per route as a mapping of
:class:`ClassSpec` (``{"1MiB": {"every": "1h", "trials": 1}}``): :meth:`ProbeClasses.from_specs`.

**Due rule** for route r, class c with cadence k ticks, at the tick that starts at ``now``:
``now - last_started[c] >= every_c - tick/2`` if the class ran before, else
``(t - phase(r, c)) % k == 0`` with ``t`` the tick's index and ``phase = crc32("r/c") % k``: the
large probes of different routes land on different ticks, and a class missed because the route
was busy runs at the next free tick, once (no pile-up). ``now`` and ``last_started`` are tick
*starts* (BeginRouteRun records the tick's start as ``ls_<class>``, not the time it acquired):

>>> c = ProbeClasses.parse("1MiB@1h")[0]
>>> [is_due("dr-orders", c, 1795428000.0 + i * 900, 900, None) for i in range(4)]
[False, True, False, False]
>>> is_due("dr-orders", c, 1795428000.0 + 3600, 900, last_started=1795428000.0)
True
>>> round(start_offset("dr-orders", 450), 2)
418.5
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

from replmon.core.errors import ConfigError
from replmon.core.sizes import SizeError, format_size, parse_size

__all__ = [
    "FORM", "MAX_PROBES_PER_ROUTE_RUN", "ClassSpec", "ProbeClass", "ProbeClasses", "due_classes", "every_seconds", "is_due",
    "phase", "start_offset", "tick_index", "tick_start",
]

FORM = "<size>@<n><m|h|d>[x<trials>], e.g. '1MiB@1h,64MiB@6h,1GiB@1d'"
#: A route-run carries its probes inline in the state machine: at most 200.
MAX_PROBES_PER_ROUTE_RUN = 200
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
_EVERY_RE = re.compile(r"^(\d+)([mhd])$")
_CLASS_RE = re.compile(r"^(?P<size>\d+(?:\.\d+)?[A-Za-z]*)@(?P<every>[1-9]\d*[mhd])(?:x(?P<trials>\d+))?$")


def every_seconds(every: str) -> int:
    """``"15m"`` -> 900; raises ValueError naming the form."""
    m = _EVERY_RE.match(every.strip())
    if not m or int(m.group(1)) < 1:
        raise ValueError(f"{every!r} is not a cadence <n><m|h|d> with n >= 1, e.g. '15m', '6h', '1d'")
    return int(m.group(1)) * _UNIT_SECONDS[m.group(2)]


def _every_text(seconds: int) -> str:
    for unit, factor in (("d", 86400), ("h", 3600)):
        if seconds % factor == 0:
            return f"{seconds // factor}{unit}"
    return f"{seconds // 60}m"


class ClassSpec(BaseModel):
    """One size class of a route's override (a registry item's ``probe.classes`` values)."""

    model_config = ConfigDict(extra="forbid")
    every: str
    trials: int = Field(default=1, ge=1, le=MAX_PROBES_PER_ROUTE_RUN)

    @field_validator("every")
    @classmethod
    def _every(cls, value: str) -> str:
        every_seconds(value)
        return value


@dataclass(frozen=True)
class ProbeClass:
    label: str  # the size as format_size writes it: the SizeClass dimension, ls_<label> on the lease
    size_bytes: int
    every_seconds: int
    trials: int = 1

    def __str__(self) -> str:
        return f"{self.label}@{_every_text(self.every_seconds)}" + (f"x{self.trials}" if self.trials != 1 else "")

    @property
    def runs_per_day(self) -> float:
        return 86400 / self.every_seconds


@dataclass(frozen=True)
class ProbeClasses:
    """The classes of a fleet (template parameter ``ProbeClasses``) or of one route, in order."""

    classes: tuple[ProbeClass, ...]

    def __iter__(self) -> Iterator[ProbeClass]:
        return iter(self.classes)

    def __getitem__(self, i: int) -> ProbeClass:
        return self.classes[i]

    def __len__(self) -> int:
        return len(self.classes)

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.classes)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(c.label for c in self.classes)

    def probes_per_day(self) -> float:
        return sum(c.trials * c.runs_per_day for c in self.classes)

    @classmethod
    def parse(cls, text: str, parameter: str = "ProbeClasses") -> ProbeClasses:
        """Validate the grammar once; every error names ``parameter`` and shows the form."""
        out = []
        for part in (p.strip() for p in text.split(",")):
            m = _CLASS_RE.match(part)
            if not m:
                raise ConfigError(f"{parameter}: {part!r} is not {FORM}")
            try:
                size = parse_size(m.group("size"))
            except SizeError as exc:
                raise ConfigError(f"{parameter}: {part!r}: {exc}") from None
            out.append(ProbeClass(format_size(size), size, every_seconds(m.group("every")), int(m.group("trials") or 1)))
        return cls._checked(out, parameter)

    @classmethod
    def from_specs(cls, specs: Mapping[str, ClassSpec], parameter: str = "probe.classes") -> ProbeClasses:
        out = []
        for label, spec in specs.items():
            try:
                size = parse_size(label)
            except SizeError as exc:
                raise ConfigError(f"{parameter}.{label}: {exc}") from None
            out.append(ProbeClass(format_size(size), size, every_seconds(spec.every), spec.trials))
        return cls._checked(out, parameter)

    @classmethod
    def _checked(cls, classes: Sequence[ProbeClass], parameter: str) -> ProbeClasses:
        if not classes:
            raise ConfigError(f"{parameter}: at least one class is required; use {FORM}")
        labels = [c.label for c in classes]
        twice = sorted({x for x in labels if labels.count(x) > 1})
        if twice:
            raise ConfigError(f"{parameter}: size {', '.join(twice)} appears twice; give each size one cadence")
        bad = [str(c) for c in classes if not 1 <= c.trials <= MAX_PROBES_PER_ROUTE_RUN]
        if bad:
            raise ConfigError(f"{parameter}: trials must be 1..{MAX_PROBES_PER_ROUTE_RUN} ({', '.join(bad)})")
        total = sum(c.trials for c in classes)
        if total > MAX_PROBES_PER_ROUTE_RUN:
            raise ConfigError(f"{parameter}: {total} probes when every class is due at once; at most "
                              f"{MAX_PROBES_PER_ROUTE_RUN} per route-run: lower trials")
        return cls(tuple(classes))

    def check_tick(self, tick_seconds: int, parameter: str = "ProbeClasses", tick_parameter: str = "ScheduleRateMinutes") -> None:
        """Every cadence is a whole number (>= 1) of ticks."""
        bad = [str(c) for c in self.classes if c.every_seconds < tick_seconds or c.every_seconds % tick_seconds]
        if bad:
            raise ConfigError(f"{parameter}: {', '.join(bad)}: a cadence must be a whole multiple of the "
                              f"{tick_parameter} tick ({tick_seconds // 60} min)")


# ------------------------------------------------------------------------------ the due rule (pure)
def tick_start(now: float, tick_seconds: int) -> float:
    return math.floor(now / tick_seconds) * tick_seconds


def tick_index(now: float, tick_seconds: int) -> int:
    return math.floor(now / tick_seconds)


def phase(route: str, label: str, ticks: int) -> int:
    """The tick (mod the class's cadence in ticks) a route's class first runs on."""
    return zlib.crc32(f"{route}/{label}".encode()) % ticks


def is_due(route: str, cls: ProbeClass, now: float, tick_seconds: int, last_started: float | None) -> bool:
    if last_started is not None:
        return now - last_started >= cls.every_seconds - tick_seconds / 2
    ticks = max(1, cls.every_seconds // tick_seconds)
    return (tick_index(now, tick_seconds) - phase(route, cls.label, ticks)) % ticks == 0


def due_classes(route: str, classes: ProbeClasses, now: float, tick_seconds: int,
                last_started: Mapping[str, float]) -> list[ProbeClass]:
    """The classes due at the tick starting at ``now``; ``last_started`` by label (the lease's ``ls_<label>``)."""
    return [c for c in classes if is_due(route, c, now, tick_seconds, last_started.get(c.label))]


def start_offset(route: str, spread_seconds: float) -> float:
    """Seconds after the tick's start at which the route's run starts: N routes do not PUT at the same second."""
    return (zlib.crc32(route.encode()) % 1000) / 1000 * spread_seconds
