"""A route's RPO, its SLO attainment, error budget and burn rates: one definition, used by the
collector (metrics and alarms), the Report function and `replmon report`.

**RPO** (docs/SEMANTICS.md, "RPO"): how far behind the destination may be right now, in seconds,
the largest of

1. the age of the oldest unfinished probe (``now - put_end`` of a probe in flight);
2. the largest latency among probes recorded in the last ``window`` (``hi`` of COMPLETED,
   ``lo`` of STUCK: a lower bound), per size class and overall;

   (a heartbeat, probe/heartbeat.py, is a probe here: its pending age counts in 1, its record in 2 as
   class ``1KiB``; with heartbeats every minute a stall shows in the RPO within a minute or two);
3. S3's RTC ``ReplicationLatency`` (Maximum) in the last ``window``.

It is **unbounded** when an object is known not to be on the destination: a FAILED probe or an
``OperationFailedReplication`` event in the window, or RTC ``OperationsFailedReplication`` > 0.
``BytesPendingReplication`` and ``OperationsPendingReplication`` are reported beside it (S3 gives
no age for them). Missing inputs are named, never read as zero.

**SLO**: the share of judged probes (COMPLETED, FAILED, STUCK) with ``hi <= threshold`` (900 s,
RTC's promise) against ``target`` (defaults.json: 99.9 %). S3 emits no event for an on-time replication, so
passive events have no denominator: missed-threshold and failure events page on their own alarms
and raise the RPO, they do not enter the ratio. **Burn rate** over a window = error rate /
(1 - target); the SRE workbook's pairs page when both windows burn faster than the factor. A
short window is widened to the probe interval, so it always holds the latest run.

>>> burn_rate(bad=1, total=10, target=0.99)
10.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.windows import record_time, window_start

if TYPE_CHECKING:
    from replmon.core.cadence import ProbeClasses
    from replmon.core.fleetconfig import FleetSettings
    from replmon.core.registry import RouteSpec


@dataclass(frozen=True)
class BurnPair:
    name: str  # "page" / "ticket"
    long_seconds: float
    short_seconds: float
    factor: float
    labels: tuple[str, str] | None = None  # (long, short) names; default from the lengths ("1h", "5m")

    @property
    def long_label(self) -> str:
        return self.labels[0] if self.labels else window_label(self.long_seconds)

    @property
    def short_label(self) -> str:
        return self.labels[1] if self.labels else window_label(self.short_seconds)


#: The SRE workbook's multi-window, multi-burn-rate pairs (R12): 2 % of a 30-day budget in 1 h,
#: 5 % in 6 h.
DEFAULT_PAIRS = (BurnPair("page", 3600, 300, 14.4), BurnPair("ticket", 6 * 3600, 1800, 6.0))


def window_label(seconds: float) -> str:
    return f"{int(seconds // 3600)}h" if seconds >= 3600 and seconds % 3600 == 0 else f"{int(seconds // 60)}m"


@dataclass(frozen=True)
class SloSpec:
    threshold_seconds: float = 900.0
    target: float = DEFAULTS.slo_target
    period_days: int = 30
    pairs: tuple[BurnPair, ...] = DEFAULT_PAIRS
    probe_interval_seconds: float = 900.0  # the schedule's rate: the shortest window that holds a run
    #: Windows aligned to 5-minute / hour boundaries (signals/windows.py ``window_start``), so the
    #: rollups can count them. False: exact windows back from now, from the records only (the lab's
    #: chaos phases scale every window down to seconds, lab/chaos.py ``lab_spec``).
    aligned: bool = True


def is_judged(r: ProbeRecord) -> bool:
    return r.status.judged


def is_good(r: ProbeRecord, threshold: float) -> bool:
    return r.status is ProbeStatus.COMPLETED and r.latency_hi is not None and r.latency_hi <= threshold


def burn_rate(bad: int, total: int, target: float) -> float | None:
    """Error rate / allowed error rate; None when the window holds no judged probe (no data)."""
    if total == 0:
        return None
    return round((bad / total) / (1.0 - target), 6)


@dataclass
class SloStatus:
    good: int
    total: int
    attainment: float | None  # good / total over the period
    budget_left: float | None  # 1 - (bad / total) / (1 - target); negative when overspent
    burn: dict[str, float | None]  # window label -> burn rate ("1h", "5m", "6h", "30m")
    alerts: dict[str, bool]  # pair name -> both windows above the factor
    windows: dict[str, str] = field(default_factory=dict)  # window label -> the window really used ("5m" -> "5m→15m")
    #: pair name -> min(long, short) burn: above the pair's factor exactly when both windows are, so one
    #: per-route metric (SloBurnPage / SloBurnTicket) carries the pair to one Metrics Insights alarm
    #: (a composite over two multi-series alarms sees alarm-level state only). None: a window had no sample.
    pair_burn: dict[str, float | None] = field(default_factory=dict)

    def budget_events(self, target: float) -> float:
        """The error budget over the period, in bad samples: (1 - target) x judged samples."""
        return round((1.0 - target) * self.total, 3)


# ------------------------------------------------------------------------------ what a sample supports
#: A period whose expected budget is under this many bad samples is refused: one slow probe would
#: burn more than a fifth of it, and a burn rate over a short window would be 0 or a huge multiple.
#: (10 would keep one slow probe under a tenth of the budget; the stack's own default - 3 sizes every 15 min, 99.9 % - is 8.64 until
#: heartbeats are judged too; then raise this to 10.)
REFUSE_BELOW_EVENTS = 5.0
#: Under this many, the configuration is accepted with a warning (its attainment's relative error
#: is above ~18 %, 1/sqrt(30)).
WARN_BELOW_EVENTS = 30.0


def expected_judged(spec: SloSpec, probes_per_run: int) -> float:
    """Judged samples a route gets over the SLO period: its probes per run, one run per schedule
    interval (each judged COMPLETED, FAILED or STUCK unless it errors)."""
    return probes_per_run * spec.period_days * 86_400 / spec.probe_interval_seconds


def largest_target(samples: float, events: float = REFUSE_BELOW_EVENTS) -> float:
    """The largest target whose budget over ``samples`` is still ``events`` bad samples, in percent,
    rounded down to 0.01 %.

    >>> largest_target(8640, 5)
    99.94
    """
    return math.floor((1.0 - events / samples) * 10_000) / 100


def check_budget(spec: SloSpec, probes_per_run: int, field_name: str = "ExpertSettings slo_target_percent") -> str | None:
    """Refuse (ConfigError naming ``field_name`` and the fix) an SLO whose expected error budget is
    under REFUSE_BELOW_EVENTS bad samples per period; a warning (returned) under WARN_BELOW_EVENTS.

    >>> check_budget(SloSpec(target=0.999, period_days=30, probe_interval_seconds=900), 3)[:60]
    'ExpertSettings slo_target_percent: 99.9 % over 8640 judged p'
    >>> check_budget(SloSpec(target=0.99, period_days=30, probe_interval_seconds=900), 3) is None
    True
    """
    samples = expected_judged(spec, probes_per_run)
    budget = (1.0 - spec.target) * samples
    what = (f"{field_name}: {spec.target * 100:g} % over {samples:.0f} judged probes per {spec.period_days} days "
            f"is an error budget of {budget:.2f} bad probes")
    if samples <= 0 or budget < REFUSE_BELOW_EVENTS:
        best = largest_target(samples) if samples > REFUSE_BELOW_EVENTS else None
        fix = (f"lower {field_name} to at most {best:g}" if best and best >= 50 else "probe more often or with more sizes/trials")
        raise ConfigError(f"invalid SLO configuration:\n  {what}, under {REFUSE_BELOW_EVENTS:g}: one slow probe would spend "
                          f"{100 / max(budget, 1e-9):.0f} % of it; {fix}, or lengthen ExpertSettings slo_period_days")
    if budget < WARN_BELOW_EVENTS:
        return (f"{what}: one slow probe spends {100 / budget:.0f} % of it and burn rates over short windows are 0 or "
                f"{1 / (1 - spec.target):.0f}x per bad probe; for a steadier budget lower {field_name} to "
                f"{largest_target(samples, WARN_BELOW_EVENTS):g} or probe more often")
    return None


# ------------------------------------------------------------------------------ the target each route can support
#: The lowest target a route may be judged at (a registry item's ``slo.target_percent`` >= 50).
LOWEST_TARGET = 0.5


@dataclass(frozen=True)
class RouteTarget:
    """The SLO target a route is judged with: the one asked for, or - when the route's probe
    classes cannot support it - the highest target whose budget is >= :data:`REFUSE_BELOW_EVENTS`
    bad probes a period (:func:`largest_target`), or none at all (``target`` None: fewer probes than
    that rule can judge at :data:`LOWEST_TARGET`).

    >>> from replmon.core.cadence import ProbeClasses
    >>> t = route_target("dr-orders", ProbeClasses.parse("1MiB@1h,64MiB@6h,1GiB@1d"), 0.999, 30)
    >>> (t.samples, t.budget, t.target, t.lowered)
    (870.0, 0.87, 0.9942, True)
    """

    route: str
    requested: float  # the target asked for (a fraction)
    target: float | None  # the target the route is judged with; None: not judgeable
    samples: float  # judged probes per period its classes give
    period_days: int

    @property
    def budget(self) -> float:
        """Bad probes a period the requested target allows."""
        return round((1.0 - self.requested) * self.samples, 3)

    @property
    def lowered(self) -> bool:
        return self.target != self.requested

    @property
    def judgeable(self) -> bool:
        return self.target is not None

    def message(self) -> str:
        what = (f"route {self.route}: {self.requested * 100:g} % over {self.samples:.0f} judged probes per {self.period_days} days "
                f"is an error budget of {self.budget:g} bad probes, under {REFUSE_BELOW_EVENTS:g}")
        if self.target is None:
            return (f"{what}, and no target of {LOWEST_TARGET * 100:g} % or more leaves {REFUSE_BELOW_EVENTS:g}: the route is not "
                    "judged (no SLO); add probe classes or trials to it")
        if not self.lowered:
            return f"route {self.route}: {self.requested * 100:g} % over {self.samples:.0f} judged probes is a budget of {self.budget:g}"
        return (f"{what}: judged at {self.target * 100:g} % instead; set its slo.target_percent to {self.target * 100:g} "
                "(replmon fleet put) or probe it more often")


def route_samples(classes: ProbeClasses, period_days: int) -> float:
    """Judged probes a period from a route's size classes (each class's trials every cadence;
    heartbeats are not judged: the SLO counts probes only, signals/rollup.py ``pj``)."""
    return round(sum(c.trials * period_days * 86_400 / c.every_seconds for c in classes), 6)


def route_target(route: str, classes: ProbeClasses, requested: float, period_days: int) -> RouteTarget:
    """The target ``route`` is judged with over ``classes`` (the rule: :class:`RouteTarget`)."""
    samples = route_samples(classes, period_days)
    if (1.0 - requested) * samples >= REFUSE_BELOW_EVENTS:
        return RouteTarget(route, requested, requested, samples, period_days)
    best = largest_target(samples) / 100 if samples > REFUSE_BELOW_EVENTS else None
    return RouteTarget(route, requested, round(best, 6) if best is not None and best >= LOWEST_TARGET else None, samples, period_days)


def route_slo_target(spec: RouteSpec, fleet: FleetSettings, base: SloSpec) -> RouteTarget:
    """:func:`route_target` for a registry route: its own classes and ``slo`` (else the fleet's and ``base``'s)."""
    requested = spec.slo.target_percent / 100 if spec.slo is not None else base.target
    return route_target(spec.name, spec.classes(fleet.classes), requested, base.period_days)


def slo_for_route(spec: RouteSpec, fleet: FleetSettings, base: SloSpec) -> SloSpec | None:
    """The SLO the collector judges a registry route with: ``base`` (REPLMON_SLO) with the route's
    own threshold, the target its sample supports (:func:`route_slo_target`) and, as the shortest
    window that holds a probe, its most frequent class's cadence. None: the route cannot be judged
    (too few probes a period for any target of 50 % or more); PlanProbes tickets both cases
    (fleet/caps.py, ``SloUnsupported``).

    >>> from replmon.core.fleetconfig import FleetSettings
    >>> from replmon.core.registry import load_route_spec
    >>> spec = load_route_spec({"name": "dr-orders", "group": "g00", "origin": "explicit",
    ...     "source": {"account": "111122223333", "region": "eu-west-1", "bucket": "orders"},
    ...     "destinations": [{"account": "111122223333", "region": "eu-central-1", "bucket": "orders-dr"}]})
    >>> s = slo_for_route(spec, FleetSettings(), SloSpec())
    >>> (s.target, s.threshold_seconds, s.probe_interval_seconds)
    (0.9942, 900.0, 3600.0)
    """
    t = route_slo_target(spec, fleet, base)
    if t.target is None:
        return None
    threshold = spec.slo.threshold_seconds if spec.slo is not None else base.threshold_seconds
    interval = float(min(c.every_seconds for c in spec.classes(fleet.classes)))
    return replace(base, target=t.target, threshold_seconds=threshold, probe_interval_seconds=interval)


#: (good, judged) samples from a window's start (signals/windows.py ``window_start``) through now.
Counter = Callable[[float], tuple[int, int]]


def slo_status(records: Sequence[ProbeRecord], now: float, spec: SloSpec) -> SloStatus:
    """From the records themselves (each judged sample by its PUT end, planned time for those without
    one), over aligned windows (signals/windows.py ``window_start``): the definition the rollups
    (signals/slo_rollup.py) reproduce exactly, from a bounded number of items."""
    judged = [(record_time(r), is_good(r, spec.threshold_seconds)) for r in records if is_judged(r)]

    def count(start: float) -> tuple[int, int]:
        w = [good for t, good in judged if t >= start]
        return sum(w), len(w)

    return slo_from_counts(count, now, spec)


def slo_from_counts(count: Counter, now: float, spec: SloSpec) -> SloStatus:
    """Attainment and budget over the period ``[floor_hour(now) - period_days, now]``, and each burn
    pair's windows; a short window narrower than the probe interval is widened to it (the label says so)."""
    burn: dict[str, float | None] = {}
    alerts: dict[str, bool] = {}
    windows: dict[str, str] = {}
    pair_burn: dict[str, float | None] = {}

    def start(seconds: float) -> float:
        return window_start(seconds, now) if spec.aligned else now - seconds

    for pair in spec.pairs:
        rates = []
        short = max(pair.short_seconds, spec.probe_interval_seconds)
        for seconds in (pair.long_seconds, short):
            good, total = count(start(seconds))
            rates.append(burn_rate(total - good, total, spec.target))
        burn[pair.long_label], burn[pair.short_label] = rates
        windows[pair.long_label] = pair.long_label
        windows[pair.short_label] = pair.short_label if short == pair.short_seconds else f"{pair.short_label}→{window_label(short)}"
        alerts[pair.name] = all(r is not None and r > pair.factor for r in rates)
        known = [r for r in rates if r is not None]
        pair_burn[pair.name] = min(known) if len(known) == len(rates) else None
    good, total = count(start(spec.period_days * 86_400))
    attainment = good / total if total else None
    budget = None if not total else 1.0 - ((total - good) / total) / (1.0 - spec.target)
    return SloStatus(good, total, attainment, budget, burn, alerts, windows, pair_burn)


@dataclass
class RtcLatest:
    """The latest value of each RTC metric in the window; None = no data (idle, or not enabled)."""

    replication_latency: float | None = None
    bytes_pending: float | None = None
    operations_pending: float | None = None
    operations_failed: float | None = None


@dataclass
class Rpo:
    seconds: float  # the largest bounded input (0 when there is none: its JSON says null, never 0)
    unbounded: bool
    inputs: dict[str, float | None]  # each input, None when missing
    by_size_class: dict[str, float] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)  # why unbounded
    missing: list[str] = field(default_factory=list)

    @property
    def bounded(self) -> bool:
        """Did any input bound the RPO? Without one, its seconds are not known (not 0)."""
        return any(v is not None for k, v in self.inputs.items() if not k.endswith("_pending"))

    def to_json(self) -> dict[str, Any]:
        """``seconds`` is null when nothing bounds the RPO (unknown is null: docs/SEMANTICS.md)."""
        return {"seconds": self.seconds if self.bounded else None, "unbounded": self.unbounded, "inputs": self.inputs,
                "by_size_class": self.by_size_class, "reasons": self.reasons, "missing": self.missing}


_LOWER_BOUNDED = frozenset({ProbeStatus.STUCK, ProbeStatus.FAILED})


def rpo(now: float, window: float, records: Iterable[ProbeRecord], in_flight_put_ends: Iterable[float],
        rtc: RtcLatest | None, failure_events: int, rolled: tuple[str, float | None, int] | None = None) -> Rpo:
    """``rolled``: samples read as counters, not records (signals/heartbeat_rpo.py): their size
    class, their largest latency, how many FAILED."""
    recent = [r for r in records if (r.put_end if r.put_end is not None else r.planned_at) >= now - window]
    by_class: dict[str, float] = {}
    reasons: list[str] = []
    for r in recent:
        # STUCK and FAILED: at least latency_lo without a replica (FAILED: a lower bound of the unbounded
        # RPO, kept so a late route turning unbounded stays late; a FAILED seen before any PENDING bounds nothing)
        value = r.latency_hi if r.status is ProbeStatus.COMPLETED else r.latency_lo if r.status in _LOWER_BOUNDED else None
        if value is not None and (value > 0 or r.status is not ProbeStatus.FAILED):
            by_class[r.size_class] = max(by_class.get(r.size_class, 0.0), value)
    failed = sum(r.status is ProbeStatus.FAILED for r in recent)
    if rolled is not None:
        size_class, largest, rolled_failed = rolled
        if largest is not None:
            by_class[size_class] = max(by_class.get(size_class, 0.0), largest)
        failed += rolled_failed
    if failed:
        reasons.append(f"{failed} FAILED probe(s)")
    if failure_events:
        reasons.append(f"{failure_events} OperationFailedReplication event(s)")
    ends = list(in_flight_put_ends)
    inputs: dict[str, float | None] = {
        "oldest_unfinished_probe": max((now - t for t in ends), default=None),
        "recent_probe_latency": max(by_class.values(), default=None),
        "rtc_replication_latency": rtc.replication_latency if rtc else None,
    }
    if rtc and rtc.operations_failed:
        reasons.append(f"RTC OperationsFailedReplication = {rtc.operations_failed:g}")
    missing = [k for k, v in inputs.items() if v is None]
    if rtc is None or rtc.bytes_pending is None:
        missing.append("rtc_bytes_pending")
    if rtc is None or rtc.operations_pending is None:
        missing.append("rtc_operations_pending")
    inputs["rtc_bytes_pending"] = rtc.bytes_pending if rtc else None
    inputs["rtc_operations_pending"] = rtc.operations_pending if rtc else None
    bounded = [v for k, v in inputs.items() if v is not None and not k.endswith("_pending")]
    seconds = round(max(bounded, default=0.0), 3)
    assert math.isfinite(seconds)
    return Rpo(seconds, bool(reasons), inputs, by_class, reasons, missing)


def slo_spec(raw: Mapping[str, Any]) -> SloSpec:
    """The SLO from REPLMON_SLO (the template's parameters) or the CLI's flags; each field defaults
    to defaults.json (``target_percent`` in percent, or ``target`` as a fraction)."""
    target = float(raw["target_percent"]) / 100 if "target_percent" in raw else float(raw.get("target", DEFAULTS.slo_target))
    return SloSpec(threshold_seconds=float(raw.get("threshold_seconds", DEFAULTS.target_seconds)), target=target,
                   period_days=int(raw.get("period_days", DEFAULTS.slo_period_days)),
                   probe_interval_seconds=60 * float(raw.get("probe_interval_minutes", DEFAULTS.schedule_rate_minutes)))
