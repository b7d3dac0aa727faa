"""A route's health: its RPO and SLO from the store (records, in-flight markers, events, RTC
collections), one definition for CollectSignals, the Report function, `replmon report` and the
lab's chaos run; and the metrics CollectSignals emits from it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.keys import HEARTBEAT_SIZE_CLASS
from replmon.core.partitions import (
    EVENT_SHARDS,
    EVENTS,
    PERIOD,
    RTC,
    events_shard_partition,
    hour_sort_key,
    roll_partition,
    signal_partition,
)
from replmon.core.ports import LatencyTable, MetricsSink
from replmon.core.record import ProbeStatus
from replmon.core.telemetry import ROUTE
from replmon.signals.expectation import Expectation
from replmon.signals.heartbeat_rpo import heartbeat_window
from replmon.signals.inflight import in_flight_put_ends
from replmon.signals.rollup import event_counts as rollup_event_counts
from replmon.signals.rtc import RtcSample, latest
from replmon.signals.slo import Rpo, SloSpec, SloStatus, rpo, slo_status
from replmon.signals.slo_rollup import first_read_hour, rollup_slo_status, sparse_up
from replmon.signals.stall import StallState, detection_bound, live_state, stall_seconds
from replmon.signals.windows import SUB_SLOT_SECONDS, event_window, floor_5min, floor_hour, sub_slot, sub_slots

#: A Lambda's longest run: a probe's PUT ends at most this long after its start (with the spread).
PUT_LAG_SECONDS = 900


@dataclass
class RouteHealth:
    route: str
    rpo: Rpo
    slo: SloStatus
    rtc: list[RtcSample] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    stall: dict[str, Any] | None = None  # the Heartbeat's stall state (phase, since, seconds); None: no heartbeats
    # None: not judged (a passive route, a report); True: no RPO input for longer than the route's
    # class interval (CollectSignals publishes RouteNoData = 1)
    no_data: bool | None = None
    # False: the route's probes support no SLO target (signals/slo.py slo_for_route): no budget, no burn
    slo_judged: bool = True
    # The sparse signals (SPARSE_METRICS) the route's last collector run emitted above 0, as kept in its
    # period cache item (slo_rollup.py SPARSE_UP); None: not read (a report) or never kept
    sparse_up: frozenset[str] | None = None
    # The period cache item as stored after this evaluation (CollectSignals: the flag's write goes there)
    period_item: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def has_data(self) -> bool:
        """Did anything bound (or unbound) the RPO in its window? Without, RpoSeconds is not published:
        its 0 would read as the healthiest route."""
        return self.rpo.unbounded or any(self.rpo.inputs.get(k) is not None for k in RPO_INPUTS)

    def to_json(self, spec: SloSpec) -> dict[str, Any]:
        return {
            "route": self.route, "rpo": self.rpo.to_json(), "has_data": self.has_data, "no_data": self.no_data,
            "slo": {"judged": self.slo_judged, "threshold_seconds": spec.threshold_seconds, "target": spec.target, "period_days": spec.period_days,
                    "good": self.slo.good, "total": self.slo.total, "attainment": self.slo.attainment,
                    "budget_left": self.slo.budget_left, "budget_events": self.slo.budget_events(spec.target),
                    "burn_rates": self.slo.burn, "windows": self.slo.windows, "alerts": self.slo.alerts},
            "events": self.events,
            "rtc": [s.to_item() for s in self.rtc],
            "stall": self.stall,
        }


def event_counts(store: LatencyTable, route: str, now: float, window: float,
                 hours: Mapping[float, Mapping[str, Any]] | None = None) -> dict[str, int]:
    """Replication events per kind in the route's event window (signals/windows.py ``event_window``,
    whole 5-minute slots): the hour items' counters (one Query of at most two items, whatever the
    event rate), plus items of the layout before counters (``<route>#events``, written before the
    upgrade: read until the window has passed them, so an upgrade loses no event). ``hours``: the
    hour items already read (slo_rollup.py), used instead of a second read when they cover the window."""
    w = event_window(now, window)
    slots = sub_slots(w)
    if hours is not None and slots[0][0] >= first_read_hour(now):  # the hour items the SLO read
        items: Sequence[Mapping[str, Any]] = list(hours.values())
    else:
        items = store.roll_items(route, hour_sort_key(slots[0][0]), hour_sort_key(slots[-1][0]))
    counts = rollup_event_counts(items, slots)
    legacy = store.items(signal_partition(route, EVENTS), w.start, floor_5min(now) + SUB_SLOT_SECONDS - 0.001)
    for kind, n in legacy_event_counts(legacy, now, window).items():
        counts[kind] = counts.get(kind, 0) + n
    return counts


def legacy_event_counts(items: Iterable[Mapping[str, Any]], now: float, window: float) -> dict[str, int]:
    """Events per kind from items holding one event each (``kind``, ``event_time``), over the same
    whole slots as the counters."""
    slots = set(sub_slots(event_window(now, window)))
    counts: dict[str, int] = {}
    for e in items:
        t = float(e["event_time"])
        if (floor_hour(t), sub_slot(t)) in slots:
            counts[e["kind"]] = counts.get(e["kind"], 0) + 1
    return counts


def failure_events(store: LatencyTable, route: str, now: float, window: float) -> int:
    """``OperationFailedReplication`` events in ``[now - window, now]`` exactly (the RPO is unbounded
    while there is one): the kept failure items (8 shard Queries, empty while the route replicates)
    and the layout before counters. The shards keep missed thresholds too, so in a backlog of late
    replications this reads most of the backlog's events (docs/BENCH-INGEST.md's collector read);
    counting whole slots from the counters and reading items only for the slot at the window's
    start would bound it."""
    pks = [events_shard_partition(route, n) for n in range(EVENT_SHARDS)] + [signal_partition(route, EVENTS)]
    return sum(1 for pk in pks for i in store.items(pk, now - window, now) if i.get("kind") == "OperationFailedReplication")


def route_health(store: LatencyTable, route: str, now: float, spec: SloSpec, window: float, *, save_cache: bool = False,
                 catch_up: int | None = None, rtc_samples: list[RtcSample] | None = None) -> RouteHealth:
    """The route's RPO and SLO from the store: records, in-flight markers, event counters and the
    RTC collections of the window (every collection in it, not only the latest). ``save_cache``:
    the SLO's period cache is written back (CollectSignals only: the readers' roles cannot write);
    ``catch_up``: at most this many older hour items folded into it (slo_rollup.py ``fold_period``);
    ``rtc_samples``: the window's RTC collections as just read (CollectSignals), instead of the stored ones."""
    # Records of the RPO window only (its probes' latencies, FAILED ones): a record's key is its
    # planned time, its PUT ends within the probe interval (the spread) and a Lambda's 15 minutes.
    records = store.query(route, now - window - spec.probe_interval_seconds - PUT_LAG_SECONDS, now)
    if spec.aligned:
        slo, fold = rollup_slo_status(store, route, now, spec, save=save_cache, catch_up=catch_up)  # the period's counts (slo_rollup.py)
        hours: dict[float, Any] | None = dict(fold.read)
        period_item = fold.item
    else:  # the lab's scaled windows (seconds long): only the records can give them
        slo = slo_status(store.query(route, now - spec.period_days * 86_400 - 86_400, now), now, spec)
        hours = None
        period_item = store.get_item(roll_partition(route), PERIOD) if save_cache else None
    # heartbeats (probe/heartbeat.py) are probes to the RPO: the pending ones' ages, the recent ones'
    # latencies (their entries in the hour items just read, heartbeat_rpo.py)
    beats = heartbeat_window(store, route, now, window, hours)
    beat_state = live_state(store, route, now)
    in_flight = in_flight_put_ends(store, route, now) + pending_heartbeat_put_ends(beat_state)
    if rtc_samples is None:
        rtc_samples = [RtcSample.from_item(i) for i in store.items(signal_partition(route, RTC), now - window, now)]
    counts = event_counts(store, route, now, window, hours)
    # The counters' whole slots cover [now - window, now]: no failure counted there means none in
    # the window, and the kept items (a backlog's missed thresholds among them) are not read.
    failures = failure_events(store, route, now, window) if counts.get("OperationFailedReplication") else 0
    r = rpo(now, window, [*records, *beats.records], in_flight, latest(rtc_samples, now - window), failures,
            (HEARTBEAT_SIZE_CLASS, beats.largest, beats.failed))
    h = RouteHealth(route, r, slo, rtc_samples, counts, stall_summary(beat_state, now))
    if save_cache:  # CollectSignals: the sparse signals its last run emitted above 0 (publish_health)
        h.sparse_up, h.period_item = sparse_up(period_item), period_item
    return h


#: The RPO's bounding inputs (signals/slo.py ``rpo``): a route with none of them has no data.
RPO_INPUTS = ("oldest_unfinished_probe", "recent_probe_latency", "rtc_replication_latency")
#: Statuses that judge replication (ERROR and INTERRUPTED measured nothing).
_JUDGED = frozenset({ProbeStatus.COMPLETED, ProbeStatus.STUCK, ProbeStatus.FAILED})


def had_data(store: LatencyTable, route: str, now: float, limit: float) -> bool:
    """Did the route have an RPO input within ``limit`` seconds: a probe that judged replication
    (planned then), or an RTC collection with S3's ReplicationLatency? Read only for a route with
    none in the RPO window (so the steady state costs nothing more)."""
    if any(r.status in _JUDGED for r in store.query(route, now - limit, now, newest_first=True, limit=100)):
        return True
    return any(not RtcSample.from_item(i).series["ReplicationLatency"].missing
               for i in store.items(signal_partition(route, RTC), now - limit, now))


def pending_heartbeat_put_ends(state: Mapping[str, Any] | None) -> list[float]:
    """PUT end times of the route's heartbeats not yet replicated, from the Heartbeat's saved state
    (one whose HEAD fails is unknown, not late: left out)."""
    return [float(p["upload"]["put_end"]) for p in (state or {}).get("pending", []) if p.get("upload") and not p.get("error")]


def stall_summary(state: Mapping[str, Any] | None, now: float) -> dict[str, Any] | None:
    """The route's stall as the Heartbeat function last saved it (signals/stall.py)."""
    if state is None:
        return None
    s = StallState.from_item(dict(state))
    expect = Expectation.from_item(dict(state))
    period = float(state.get("heartbeat_seconds") or DEFAULTS.heartbeat_seconds)
    return {"phase": str(s.phase), "since": s.since, "seconds": stall_seconds(s, now), "saved_at": state.get("updated_at"),
            # the route's learned expectation and what it makes of the stall's detection (signals/stall.py detection_bound)
            "expect_seconds": None if expect is None else expect.seconds,
            "expect_basis": None if expect is None else expect.basis,
            "detection_bound_seconds": None if expect is None else detection_bound(expect.seconds, period)}


#: A burn pair (signals/slo.py DEFAULT_PAIRS) -> its per-route metric, min(long, short) burn rate.
BURN_METRICS = {"page": "SloBurnPage", "ticket": "SloBurnTicket"}


#: ErrorBudgetRemaining is drawn (the route's SLO widget), never alarmed: one hour in six is enough
#: to see it move, and CloudWatch bills a metric for each hour it receives data (cost/fleet.py).
BUDGET_EVERY_HOURS = 6


def budget_hour(now: float | None) -> bool:
    """Is ``now`` in an hour ErrorBudgetRemaining is emitted in (hours = 0 mod 6, UTC)? None: always.

    >>> budget_hour(6 * 3600 + 120), budget_hour(7 * 3600)
    (True, False)
    """
    return now is None or int(now // 3600) % BUDGET_EVERY_HOURS == 0


#: Per-route signals emitted only while above 0 (core/telemetry.py SPARSE), in emission order.
SPARSE_METRICS = ("RouteNoData", "RpoUnbounded", "SloBurnPage", "SloBurnTicket", "RtcBytesPending", "RtcOperationsPending")


def publish_health(metrics: MetricsSink, h: RouteHealth, now: float | None = None) -> frozenset[str]:
    """One route's health metrics (core/telemetry.py FLEET_METRICS). Only RpoSeconds (and the
    Heartbeat's StallSeconds) are continuous per route; the 0/1 and burn signals are sparse
    (``SPARSE_METRICS``), emitted while above 0, and CloudWatch bills a metric only for the hours
    it receives data. When one falls back to 0 (it was above 0 in ``h.sparse_up``, the last run's),
    one explicit 0 is emitted, then nothing: an alarm judges the most recent real datapoint in its
    evaluation range (AWS, "Configuring how CloudWatch alarms treat missing data"), so a series that
    just stopped would hold its last 1 in ALARM until that datapoint left the range; the 0 is the
    most recent, and the contributor goes OK at the next evaluation. Returns the sparse signals
    emitted above 0 (the caller keeps them for the next run: collector.py). ``now``: the run's time
    (ErrorBudgetRemaining in hours = 0 mod 6 only)."""
    # Unbounded, RpoSeconds stays: its value (the largest measured input) is a lower bound of the RPO.
    # A late route that turns unbounded keeps its RpoAboveTarget contributor in ALARM (a series that
    # stopped would send OK mid-incident) while RpoUnbounded pages for the new cause; a route that
    # fails without being late stays under the target, so the failure pages once. With no input at
    # all there is no RPO: the series is absent (no data is not 0) and RouteNoData says so once that
    # outlasts the route's class interval.
    if any(h.rpo.inputs.get(k) is not None for k in RPO_INPUTS):
        metrics.count("RpoSeconds", h.rpo.seconds, {ROUTE: h.route})
    up: dict[str, float] = {}
    if h.no_data:
        up["RouteNoData"] = 1
    if h.rpo.unbounded:
        up["RpoUnbounded"] = 1
    for pair, rate in h.slo.pair_burn.items():
        if rate and pair in BURN_METRICS and h.slo_judged:  # no judged probe in a window: no data, not zero
            up[BURN_METRICS[pair]] = rate
    for name, attr in (("RtcBytesPending", "rtc_bytes_pending"), ("RtcOperationsPending", "rtc_operations_pending")):
        value = h.rpo.inputs.get(attr)
        if value:  # nothing pending: nothing to draw
            up[name] = value
    if h.slo.budget_left is not None and h.slo_judged and budget_hour(now):
        metrics.count("ErrorBudgetRemaining", round(h.slo.budget_left * 100, 4), {ROUTE: h.route})
    was = h.sparse_up or frozenset()
    for name in SPARSE_METRICS:
        if name in up:
            metrics.count(name, up[name], {ROUTE: h.route})
        elif name in was:  # fell back to healthy: one 0, then quiet
            metrics.count(name, 0, {ROUTE: h.route})
    metrics.count("CollectorHeartbeat", 1)
    return frozenset(up)


def health_output(h: Mapping[str, Any]) -> dict[str, Any]:
    """A route's RPO and SLO (:meth:`RouteHealth.to_json`) in the output's words (docs/output.schema.json
    ``health``): what `replmon report` prints and the fleet report ranks."""
    rpo, slo = h["rpo"], h["slo"]

    def pct(v: float | None) -> float | None:
        return None if v is None else round(100 * v, 4)

    inputs = rpo["inputs"]
    return {
        "route": h["route"],
        "rpo_seconds": rpo["seconds"] if any(inputs.get(k) is not None for k in ("oldest_unfinished_probe", "recent_probe_latency",
                                                                                  "rtc_replication_latency")) else None,
        "rpo_unbounded": rpo["unbounded"], "rpo_unbounded_reasons": list(rpo["reasons"]),
        "rpo_inputs": {
            "oldest_unfinished_probe_seconds": inputs.get("oldest_unfinished_probe"),
            "recent_probe_latency_seconds": inputs.get("recent_probe_latency"),
            "rtc_replication_latency_seconds": inputs.get("rtc_replication_latency"),
            "rtc_bytes_pending_bytes": inputs.get("rtc_bytes_pending"),
            "rtc_operations_pending_count": inputs.get("rtc_operations_pending"),
        },
        "rpo_by_size_class": [{"size_class": k, "rpo_seconds": v} for k, v in rpo["by_size_class"].items()],
        "rpo_missing_inputs": list(rpo["missing"]),
        "slo": {
            "threshold_seconds": slo["threshold_seconds"], "objective_percent": pct(slo["target"]), "period_days": slo["period_days"],
            "good_probes": slo["good"], "judged_probes": slo["total"], "attainment_percent": pct(slo["attainment"]),
            "budget_left_percent": pct(slo["budget_left"]),
            # the window really used: "5m→15m" when the short window is widened to the probe interval
            "burn_rates": [{"window": slo.get("windows", {}).get(w, w), "rate": v} for w, v in slo["burn_rates"].items()],
            "alerts": {k: bool(v) for k, v in slo["alerts"].items()},
        },
        "events": [{"kind": k, "count": n} for k, n in sorted(h.get("events", {}).items())],
        "stall": h.get("stall"),
    }
