"""A route's SLO attainment, error budget and burn rates from its rollups: a bounded number of
items per route whatever the period (docs/design/fleet.md 8), the same numbers as ``slo.slo_status``
over the records themselves (tests/test_slo_rollup.py compares them on random histories).

Each run reads (with ``H = floor_hour(now)``):

1. the period cache ``<route>#roll`` / ``period`` (one GetItem, strongly consistent, first): per
   hour older than the read hours, the probes judged and good (``pj``, ``pg``) that hour, through
   ``through_at`` (``H - 7 h`` once folded), and ``cached_gen``;
2. the hour items from ``H - 6 h`` through ``H`` (7 items, one strongly consistent Query): their 5-minute sub-slot
   counters (``pj_MM``, ``pg_MM``) give every window under 6 h; their totals the 6 h window.

Each hour the cache folds one more hour (one more item read). A record that lands in an hour older
than ``LATE_AFTER_HOURS`` (signals/rollup.py: a replayed spool, a late narrowing) counts the
period item's ``gen`` up in its own transaction; a cache whose ``cached_gen`` is not the ``gen``
read is rebuilt from every hour item of the period (at most ``period_days x 24 + 1`` items, once),
and written back only if ``gen`` and ``through_hour`` are still the ones read (so a late write that
races the rebuild is never folded away). Reading the period item before the hours is what makes
that hold: a write after the read bumps ``gen``, a write before it is in the hours read (both
reads strongly consistent: an eventually consistent one might miss a write that has completed).

The cached hours are those at least 7 h old: a writer whose clock runs up to 1 h behind the
collector's still sees them as older than ``LATE_AFTER_HOURS`` (5 h) and counts ``gen`` up.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replmon.core.partitions import PERIOD, hour_sort_key, roll_partition
from replmon.core.ports import LatencyTable
from replmon.core.record import PARTITION_KEY, SORT_KEY
from replmon.signals.rollup import DGEN, GEN, LATE_GOOD, LATE_JUDGED, PROBE_GOOD, PROBE_JUDGED
from replmon.signals.slo import SloSpec, SloStatus, slo_from_counts
from replmon.signals.windows import HOUR_SECONDS, SUB_SLOT_SECONDS, floor_hour, window_start

__all__ = ["READ_HOURS", "SPARSE_UP", "PeriodFold", "first_read_hour", "pack_hours", "rollup_slo_status", "save_sparse_up", "sparse_up",
           "unpack_hours"]

#: Hour items read each run: H - 6 h .. H (the 6 h burn window's, and every shorter window's sub-slots).
READ_HOURS = 7
CACHED_GEN, CACHED_DGEN, THROUGH_HOUR, THROUGH_AT, HOURS = "cached_gen", "cached_dgen", "through_hour", "through_at", "hours"
#: The folded hours as one string (:func:`pack_hours`): a map of ~720 typed numbers costs the collector
#: more CPU to parse than everything else it reads (docs/BENCH-COLLECTOR.md), and 4x the item size.
#: ``hours`` (a map, the layout before) is still read.
HOURS_PACKED = "hours_packed"
#: The route's sparse signals last emitted above 0 (signals/health.py SPARSE_METRICS), space-separated:
#: kept here, the item every collector run reads anyway, so a signal falling back to 0 is emitted as
#: one explicit 0 (health.py publish_health) at the cost of one write per transition.
SPARSE_UP = "sparse_up"


def pack_hours(folded: Mapping[float, tuple[int, int]]) -> str:
    """``"<first hour> j.g j.g - j.g"``: one token per hour from the first (``-``: none judged).

    >>> pack_hours({1795428000.0: (2, 1), 1795435200.0: (1, 1)})
    '1795428000 2.1 - 1.1'
    >>> unpack_hours(pack_hours({1795428000.0: (2, 1), 1795435200.0: (1, 1)})) == {1795428000.0: (2, 1), 1795435200.0: (1, 1)}
    True
    """
    if not folded:
        return ""
    first, last = int(min(folded)), int(max(folded))
    tokens = [f"{folded[h][0]}.{folded[h][1]}" if (h := float(t)) in folded else "-" for t in range(first, last + 1, HOUR_SECONDS)]
    return f"{first} " + " ".join(tokens)


def unpack_hours(packed: str) -> dict[float, tuple[int, int]]:
    parts = packed.split()
    if not parts:
        return {}
    first = float(parts[0])
    out: dict[float, tuple[int, int]] = {}
    for i, token in enumerate(parts[1:]):
        if token != "-":
            j, _, g = token.partition(".")
            out[first + i * HOUR_SECONDS] = (int(j), int(g))
    return out


def _hour_of(item: Mapping[str, Any]) -> float | None:
    """The hour start of an hour item (``h#YYYY-MM-DDTHH``), None for the period item."""
    sk = str(item.get(SORT_KEY, ""))
    if not sk.startswith("h#"):
        return None
    return float(calendar.timegm(time.strptime(sk[2:], "%Y-%m-%dT%H")))


@dataclass
class PeriodFold:
    """What one evaluation read: the folded hours' totals and the read hour items' sub-slots."""

    folded: dict[float, tuple[int, int]] = field(default_factory=dict)  # hour start -> (judged, good)
    read: dict[float, Mapping[str, Any]] = field(default_factory=dict)  # hour start -> hour item
    items_read: int = 0
    rebuilt: bool = False
    cache_written: bool = False
    #: False while a bounded catch-up has not folded every hour of the period: windows reaching
    #: before the read hours count nothing (the period's attainment and budget are not known yet)
    complete: bool = True
    read_from: float = 0.0  # the first read hour (``first_read_hour``)
    item: dict[str, Any] | None = None  # the period item as stored after this fold (written, or as read)

    def count(self, start: float) -> tuple[int, int]:
        """(good, judged) probes from ``start`` (a window_start: 5-minute aligned within the read
        hours, hour aligned before them) through now."""
        good = judged = 0
        if not self.complete and start < self.read_from:
            return 0, 0
        for hour, (j, g) in self.folded.items():
            if hour >= start:
                judged, good = judged + j, good + g
            elif hour + HOUR_SECONDS > start:
                raise ValueError(f"window start {start} falls inside folded hour {hour}: only whole hours are folded")
        for hour, item in self.read.items():
            for mm in range(0, HOUR_SECONDS // 60, SUB_SLOT_SECONDS // 60):
                if hour + mm * 60 >= start:
                    judged += int(item.get(f"{PROBE_JUDGED}_{mm:02d}", 0))
                    good += int(item.get(f"{PROBE_GOOD}_{mm:02d}", 0))
        return good, judged


def first_read_hour(now: float) -> float:
    """The oldest hour item every evaluation reads (``H - 6 h``): a window starting at or after it
    is counted from ``PeriodFold.read`` alone (heartbeat_rpo.py and the event counts use them too)."""
    return floor_hour(now) - (READ_HOURS - 1) * HOUR_SECONDS


def _totals(item: Mapping[str, Any]) -> tuple[int, int]:
    return int(item.get(PROBE_JUDGED, 0)), int(item.get(PROBE_GOOD, 0))


def _late_counts(period: Mapping[str, Any]) -> dict[float, tuple[int, int]]:
    """The late writes' counts on the period item (rollup.py ``late_period_add``): hour -> (judged, good)."""
    out: dict[float, tuple[int, int]] = {}
    for attr, n in period.items():
        prefix, _, hour = attr.partition("_")
        if prefix in (LATE_JUDGED, LATE_GOOD) and hour.isdigit() and n:
            j, g = out.get(float(hour), (0, 0))
            out[float(hour)] = (j + int(n), g) if prefix == LATE_JUDGED else (j, g + int(n))
    return out


def fold_period(store: LatencyTable, route: str, now: float, period_days: int, *, save: bool = True,
                catch_up: int | None = None) -> PeriodFold:
    """Read the period cache and the recent hour items; fold the hours that left the read range
    into the cache (written back conditionally, when ``save``: CollectSignals; the Report function
    and `replmon report` read only, their roles grant no write). ``catch_up``: fold at most this
    many older hour items this run (CollectSignals: a bounded read per route whatever the cache's
    state); the period's counts are then :attr:`PeriodFold.complete` only once the cache reaches
    the read hours. See the module's docstring."""
    h = floor_hour(now)
    first_read = first_read_hour(now)
    fold_to = first_read - HOUR_SECONDS
    period_start = window_start(period_days * 86_400, now)
    period = store.get_item(roll_partition(route), PERIOD)  # first (see above), strongly consistent
    fold = PeriodFold(items_read=1 if period else 0, read_from=first_read)
    gen, dgen = int((period or {}).get(GEN, 0)), int((period or {}).get(DGEN, 0))
    cached_gen, cached_dgen = int((period or {}).get(CACHED_GEN, -1)), int((period or {}).get(CACHED_DGEN, 0))
    # valid: every write since the cache carried its counts (each counted dgen with gen; a writer of the
    # layout before counted gen alone, and only a rebuild knows what it changed)
    valid = bool(period and THROUGH_AT in period and (cached_gen == gen or gen - cached_gen == dgen - cached_dgen))
    through = float(period[THROUGH_AT]) if valid and period else period_start - HOUR_SECONDS
    late = bool(valid and period and cached_gen != gen)
    if valid and period:
        cached = unpack_hours(str(period[HOURS_PACKED])) if HOURS_PACKED in period else \
            {float(k): (int(v[0]), int(v[1])) for k, v in dict(period.get(HOURS, {})).items()}
        fold.folded = {k: v for k, v in cached.items() if period_start <= k <= fold_to}
        # a late count of an hour the cache folded is added to it; of a later hour, it is in that hour's item
        for late_hour, (j, g) in _late_counts(period).items() if late else ():
            if period_start <= late_hour <= min(through, fold_to):
                fj, fg = fold.folded.get(late_hour, (0, 0))
                fold.folded[late_hour] = (fj + j, fg + g)
    else:
        fold.rebuilt = True
    first = max(through + HOUR_SECONDS, period_start)
    new_through = max(through, fold_to)
    if through < fold_to and catch_up is not None and first + catch_up * HOUR_SECONDS <= fold_to:
        # more to fold than one run may read: the oldest ``catch_up`` hours, then the read hours
        older = store.roll_items(route, hour_sort_key(first), hour_sort_key(fold_to), limit=catch_up)
        fold.items_read += len(older)
        if len(older) == catch_up:  # perhaps more: the cache reaches the last hour read
            hours_read = [x for x in map(_hour_of, older) if x is not None]
            new_through = max(hours_read) if hours_read else first
            fold.complete = False
        items = older + store.roll_items(route, hour_sort_key(first_read), hour_sort_key(h))
        fold.items_read += len(items) - len(older)
    else:
        items = store.roll_items(route, hour_sort_key(min(first, first_read)), hour_sort_key(h))
        fold.items_read += len(items)
    for item in items:
        hour = _hour_of(item)
        if hour is None:
            continue
        if hour >= first_read:
            fold.read[hour] = item
        elif hour <= fold_to:
            j, g = _totals(item)
            if j:
                fold.folded[hour] = (j, g)
    if save and (fold.rebuilt or late or through < new_through):
        cache = {GEN: gen, CACHED_GEN: gen, DGEN: dgen, CACHED_DGEN: dgen, THROUGH_HOUR: hour_sort_key(new_through),
                 THROUGH_AT: new_through, HOURS_PACKED: pack_hours(fold.folded)}
        if period and SPARSE_UP in period:  # not the fold's: carried over
            cache[SPARSE_UP] = period[SPARSE_UP]
        old = str(period[THROUGH_HOUR]) if period and THROUGH_HOUR in period else None
        fold.cache_written = store.put_period(route, cache, old, gen)
    fold.item = dict(cache) if fold.cache_written else (dict(period) if period else None)
    return fold


def sparse_up(item: Mapping[str, Any] | None) -> frozenset[str]:
    """The sparse signals a period item says were last emitted above 0.

    >>> sorted(sparse_up({SPARSE_UP: "RpoUnbounded SloBurnPage"})), sparse_up(None)
    (['RpoUnbounded', 'SloBurnPage'], frozenset())
    """
    return frozenset(str((item or {}).get(SPARSE_UP) or "").split())


def save_sparse_up(store: LatencyTable, route: str, item: Mapping[str, Any] | None, names: frozenset[str]) -> bool:
    """Keep ``names`` in the route's period item, on the same conditions as the fold's write (its
    ``through_hour`` and ``gen`` unchanged, so a late writer's count is never lost): False when another
    writer won; the next run compares again and writes again (a signal still up is kept then; one that
    fell back emits its 0 once more)."""
    base = {k: v for k, v in (item or {}).items() if k not in (PARTITION_KEY, SORT_KEY, SPARSE_UP)}
    if names:
        base[SPARSE_UP] = " ".join(sorted(names))
    through = str(item[THROUGH_HOUR]) if item and THROUGH_HOUR in item else None
    return store.put_period(route, base, through, int((item or {}).get(GEN, 0)) or None)


def rollup_slo_status(store: LatencyTable, route: str, now: float, spec: SloSpec, *, save: bool = True,
                      catch_up: int | None = None) -> tuple[SloStatus, PeriodFold]:
    """The route's SLO from its rollups (``slo.slo_status``'s numbers), and what was read
    (``catch_up``: :func:`fold_period`'s bound; while catching up the period counts nothing)."""
    if not spec.aligned:
        raise ValueError("the rollups count aligned windows only: an SloSpec with aligned=False is computed from the records")
    fold = fold_period(store, route, now, spec.period_days, save=save, catch_up=catch_up)
    return slo_from_counts(fold.count, now, spec), fold
