"""Heartbeat (docs/design/fleet.md 10): a heartbeat is a 1 KiB probe put every minute. One scheduled invocation per RouteGroup puts a 1 KiB
heartbeat on every heartbeat route of the group each ``HeartbeatSeconds`` and polls the pending
ones, with the probe's interval semantics (probe/poll.py ``head_once``: ``lo`` = the last PENDING
HEAD, ``hi`` = the first final one, replicas verified), into the same table (``<route>#hb`` records,
kept 7 days). It keeps each route's stall state (signals/stall.py) against the route's learned
expectation (signals/expectation.py) and emits ``StallSeconds{RouteGroup, Route}`` every period.

Why one function and not the state machine: a heartbeat a minute per route through Step
Functions would cost more in state transitions than everything else together.

Contract (the template, the lab and the tests rely on it):
- event ``{"group": "g00"}`` (a RouteGroup of the deployment; ``"periods": N`` overrides how many
  heartbeat periods this invocation runs: default one minute's worth, the schedule's rate);
- each period, per route: claim the period (a conditional put: a duplicate or overlapping
  invocation never puts a second heartbeat), PUT, poll every pending heartbeat until the period
  ends, record and delete settled ones on both sides, evaluate the stall state, save it, emit
  ``StallSeconds`` (and at once on a transition); ``HeartbeatRun`` once per invocation;
- on entering STALLED and on returning HEALTHY: one message with the evidence to the evidence topic
  (``deps.notifier``, the ticket topic): CloudWatch's contributor notification carries only the
  route's name, and it is the page (one page per cause: this message must not ring a pager too).
- stale heartbeats never pile up: one settled is deleted at once (every version, both sides); one
  pending past ``MAX_PENDING_SECONDS`` or beyond ``MAX_PENDING`` is recorded STUCK and deleted;
  the housekeeping sweep and the bucket's lifecycle rule remove what a crash leaves.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from replmon.core.clock import Clock
from replmon.core.defaults import DEFAULTS
from replmon.core.errors import ConfigError
from replmon.core.fleetconfig import FleetSettings
from replmon.core.heartbeatcap import HEARTBEAT_FIX, heartbeat_routes_within_cap
from replmon.core.keys import (
    HEARTBEAT_SIZE_BYTES,
    HEARTBEAT_SIZE_CLASS,
    heartbeat_probe_id,
    heartbeat_run_id,
    run_time,
)
from replmon.core.partitions import HEARTBEAT_CLAIMS, HEARTBEAT_STATE, RTC, live_partition, signal_partition
from replmon.core.ports import LatencyTable, LeaseStore, MetricsSink, Notifier, ObjectStores, RegistryStore, VersionInfo
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, ProbeStatus
from replmon.core.registry import read_registry
from replmon.core.route import Route
from replmon.core.sizes import parse_size
from replmon.core.telemetry import ROUTE, ROUTE_GROUP
from replmon.probe.poll import head_once
from replmon.probe.polling import PollPolicy
from replmon.probe.request import PollSettings
from replmon.probe.results import to_record
from replmon.probe.state import Poll, ProbeState
from replmon.probe.upload import UploadSettings, probe_key, upload_probe
from replmon.signals.expectation import REFRESH_SECONDS, Expectation, expectation, learn_expectation
from replmon.signals.inflight import in_flight_probes
from replmon.signals.rollup import HEARTBEAT_RETENTION_DAYS, store_record
from replmon.signals.stall import (
    Beat,
    StallPhase,
    StallState,
    advance,
    detection_bound,
    probe_expectation,
    stall_seconds,
    wants_confirmation,
)

__all__ = ["HeartbeatDeps", "heartbeat_routes", "heartbeat_step"]

log = logging.getLogger("replmon")

INVOCATION_SECONDS = 60  # the schedule's rate: EventBridge Scheduler's finest
#: An invocation stops polling this long after it began (then saves and emits): it must end before the
#: next minute's invocation and well inside the function's Timeout, whatever a slow endpoint does.
WORK_SECONDS = 45.0
MAX_PENDING_SECONDS = 7200  # a heartbeat pending this long is recorded STUCK and dropped
MAX_PENDING = 15  # ... and so is the oldest beyond this many pending
RECENT = 8  # settled heartbeats kept in the state for the state machine
WORKERS = 32
#: The log message each route's hourly learning prints (its fields: route, expectation_seconds,
#: detection_bound_seconds, ...): fleet/dashboard.py's Logs Insights widget filters on it.
EXPECTATION_LEARNED = "route expectation learned"
GROUP_LEASE_PREFIX = "#heartbeat/"  # the lease item of a group's invocation: <prefix><group>#live / lease


class HeartbeatDeps(Protocol):
    stores: ObjectStores
    heartbeat_stores: ObjectStores | None  # short-timeout clients (adapters/clients.py HEARTBEAT); None: ``stores``
    store: LatencyTable
    leases: LeaseStore | None
    metrics: MetricsSink
    clock: Clock
    fleet: FleetSettings
    registry: RegistryStore | None
    notifier: Notifier | None
    defaults: dict[str, Any]


@dataclass(frozen=True)
class HeartbeatRoute:
    route: Route
    target_seconds: float  # the route's latency target: the expectation is capped at half of it


def heartbeat_routes(group: str, deps: HeartbeatDeps) -> list[HeartbeatRoute]:
    """The group's registry routes that take heartbeats (probe mode, ``probe.heartbeat`` not false);
    the stack's own route is one of them (fleet/stack_route.py)."""
    out: list[HeartbeatRoute] = []
    default_target = float(deps.defaults.get("target_seconds") or DEFAULTS.target_seconds)
    if deps.registry is not None:
        # at most HEARTBEAT_ROUTES_PER_GROUP: one invocation must serve them within WORK_SECONDS (fleet/caps.py;
        # PlanProbes names the rest and tickets through RoutesOverCap)
        read = read_registry(deps.registry, [group])  # the group unreadable: this invocation fails (its only group)
        for bad in read.invalid:  # PlanProbes counts them (InvalidRoute) and `replmon fleet` names them
            log.warning("registry item not heartbeated: " + bad.line(), extra={"route": bad.name, "field": bad.field})
        beating, past = heartbeat_routes_within_cap(read.routes)
        if past:
            log.error("heartbeat routes past the group's cap get no heartbeats", extra={
                "group": group, "routes": ", ".join(s.name for s in past[:100]), "count": len(past), "fix": HEARTBEAT_FIX})
        for spec in beating:
            try:
                route = spec.to_route(deps.fleet.member_role_prefix)
            except (ConfigError, ValueError) as exc:  # one bad item must not stop the group's heartbeats
                log.error("registry route not heartbeated", extra={"route": spec.name, "error": f"{type(exc).__name__}: {exc}"})
                continue
            out.append(HeartbeatRoute(route, spec.slo.threshold_seconds if spec.slo else default_target))
    return out


def _periods(event: Mapping[str, Any], period: int) -> int:
    raw = event.get("periods", max(1, INVOCATION_SECONDS // period))
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= 60:
        raise ConfigError(f"periods: {raw!r} is not a whole number of heartbeat periods 1..60; omit it for one minute's worth")
    return raw


def heartbeat_step(event: Mapping[str, Any], deps: HeartbeatDeps) -> dict[str, Any]:
    began = deps.clock.now()  # the invocation's own deadline counts from here (WORK_SECONDS)
    group = event.get("group")
    if group not in deps.fleet.groups:
        raise ConfigError(f"group: {group!r} is not a RouteGroup of this deployment ({', '.join(deps.fleet.groups)}); "
                          'the schedule passes {"group": "g00"}')
    period = deps.fleet.heartbeat_seconds
    periods = _periods(event, period)
    # One invocation per group at a time: a duplicate delivery or a retry must not poll, record and
    # delete the same heartbeats twice (a second HEAD after the first's delete would read "missing").
    holder = f"{group}-{uuid.uuid4().hex[:12]}"
    lease_key = f"{GROUP_LEASE_PREFIX}{group}"
    if deps.leases is not None and deps.leases.acquire(lease_key, holder, began, began + INVOCATION_SECONDS + WORK_SECONDS, {}) is None:
        log.warning("another heartbeat invocation of the group is running; this one does nothing", extra={"group": group})
        return {"group": group, "periods": 0, "period_seconds": period, "routes": [], "skipped": "the group's lease is held"}
    try:
        routes = [RouteHeartbeat(h, deps, period) for h in heartbeat_routes(group, deps)]
        with ThreadPoolExecutor(max(1, min(WORKERS, len(routes)))) as pool:
            run_periods(routes, periods, period, deps.clock, pool, deadline=began + WORK_SECONDS)
        deps.metrics.count("HeartbeatRun", 1, {ROUTE_GROUP: group})
    finally:
        if deps.leases is not None:
            deps.leases.release(lease_key, holder, deps.clock.now())
    now = deps.clock.now()
    return {"group": group, "periods": periods, "period_seconds": period, "routes": [r.row(now) for r in routes]}


def run_periods(routes: Sequence[RouteHeartbeat], periods: int, period: int, clock: Clock, pool: ThreadPoolExecutor,
                deadline: float) -> None:
    """Rounds, not a thread per route: each round sends the HEADs that are due (and the PUTs of a new
    period) through the pool, then every route evaluates its state. So a group of 500 routes that
    all stall at once (a Region's outage) still has every route polled every round."""

    def each(fn: Callable[[RouteHeartbeat], None], chosen: Sequence[RouteHeartbeat]) -> None:
        def one(r: RouteHeartbeat) -> None:
            try:
                fn(r)
            except Exception as exc:  # this route only (its state, a read it was denied): marked in its row, the others beat on
                r._error("heartbeat step failed", exc)

        list(pool.map(one, chosen))

    start = clock.now()
    margin = min(5.0, period / 5)
    each(lambda r: r.load(), routes)
    each(lambda r: r.emit(clock.now()), routes)  # a point early in every minute, whatever happens later
    for k in range(periods):
        begin = start + k * period
        end = min(begin + period - (margin if k == periods - 1 else 0.0), deadline)
        if begin >= deadline:
            break
        if clock.now() < begin:
            clock.sleep(begin - clock.now())
        each(lambda r: r.begin_period(clock.now()), routes)
        while True:
            now = clock.now()
            each(lambda r: r.step(), [r for r in routes if r.due(now)])
            each(lambda r: r.judge(), routes)  # a transition may publish or put a confirmation: I/O too
            now = clock.now()
            if now >= end or (k == periods - 1 and not any(r.pending for r in routes)):
                break  # nothing pending: nothing can change before the next invocation (Lambda bills by the millisecond)
            # wake for the next HEAD, and at least every second: lateness is a matter of time alone
            wake = min((r.next_head_at() for r in routes if r.pending), default=now + 1.0)
            clock.sleep(max(0.05, min(wake - now, end - now, 1.0)))
        each(lambda r: r.end_period(clock.now()), routes)


@dataclass
class RouteHeartbeat:
    """One route's heartbeats for one invocation: its own thread, its own state item."""

    h: HeartbeatRoute
    deps: HeartbeatDeps
    period: int
    pending: list[ProbeState] = field(default_factory=list)
    recent: list[Beat] = field(default_factory=list)
    stall: StallState = field(default_factory=StallState)
    expect: Expectation | None = None
    probes: list[Beat] = field(default_factory=list)  # probes in flight (read once a period)
    transitions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return self.h.route.name

    # ------------------------------------------------------------------ the invocation
    def begin_period(self, now: float) -> None:
        self.learn(now)
        self.put(now)
        self.read_probes(now)

    def read_probes(self, now: float) -> None:
        """The route's probes in flight are beats too, each with its size's expectation."""
        try:
            self.probes = [Beat(t, expect=probe_expectation(parse_size(c), self._expect()))
                           for t, c in in_flight_probes(self.deps.store, self.name, now) if c != "?"]
        except Exception as exc:
            self._error("probes in flight not read", exc)

    def due(self, now: float) -> bool:
        return bool(self.pending) and now >= self.next_head_at()

    def step(self) -> None:
        self.poll_due()

    def judge(self) -> None:
        clock = self.deps.clock
        self.evaluate(clock.now())
        if wants_confirmation(self.stall, self.beats(), clock.now(), self._expect()):
            self.put(clock.now(), confirmation=True)

    def end_period(self, now: float) -> None:
        self.emit(now)
        self.save(now)

    def emit(self, now: float) -> None:
        self.deps.metrics.count("StallSeconds", stall_seconds(self.stall, now), {ROUTE: self.name})

    @property
    def s3(self) -> ObjectStores:
        return self.deps.heartbeat_stores or self.deps.stores

    def row(self, now: float) -> dict[str, Any]:
        oldest = min((p.upload.put_end for p in self.pending if p.upload), default=None)
        return {"route": self.name, "phase": str(self.stall.phase), "stall_seconds": stall_seconds(self.stall, now),
                "since": self.stall.since, "expect_seconds": self.expect.seconds if self.expect else None,
                "pending": len(self.pending), "oldest_pending_age": None if oldest is None else round(now - oldest, 3),
                "transition": self.transitions[-1] if self.transitions else None, "transitions": self.transitions,
                "errors": self.errors}

    # ------------------------------------------------------------------ state
    def load(self) -> None:
        try:
            item = self.deps.store.get_item(live_partition(self.name), HEARTBEAT_STATE) or {}
        except Exception as exc:  # the store is down: start from nothing, keep measuring
            self._error("state not read", exc)
            item = {}
        self.pending = [ProbeState.model_validate(p) for p in item.get("pending", [])]
        self.recent = [Beat(float(b[0]), None if b[1] is None else float(b[1]), bool(b[2])) for b in item.get("recent", [])]
        self.stall = StallState.from_item(item)
        self.expect = Expectation.from_item(item)

    def save(self, now: float) -> None:
        item = {PARTITION_KEY: live_partition(self.name), SORT_KEY: HEARTBEAT_STATE, "updated_at": now,
                "pending": [p.dump() for p in self.pending], "recent": [[b.put_at, b.latency, b.failed] for b in self.recent],
                **self.stall.to_item(), **(self.expect.to_item() if self.expect else {}), "heartbeat_seconds": self.period,
                TTL_ATTRIBUTE: int(now + HEARTBEAT_RETENTION_DAYS * 86_400)}
        try:
            self.deps.store.put_item({k: v for k, v in item.items() if v is not None})
        except Exception as exc:
            self._error("state not saved", exc)

    def learn(self, now: float) -> None:
        """Re-learn the expectation hourly from the route's 72 hour items of the learning window
        (signals/expectation.py: each holds every heartbeat's latency; one Query, not 4,320 records)."""
        # hourly, each route at its own minute (crc32 of the name): a group's routes do not all read at once
        if self.expect is not None and now - self.expect.learned_at < REFRESH_SECONDS + zlib.crc32(self.name.encode()) % 600:
            return
        floor, cap = self.deps.fleet.stall_floor_seconds, self.h.target_seconds / 2
        items = 0
        try:
            learned = learn_expectation(self.deps.store, self.name, now, floor=floor, cap=cap)
            self.expect, items = learned.expectation, learned.items_read
        except Exception as exc:  # no history now: the floor, re-learned next hour
            self._error("history not read; expectation is the floor", exc)
            self.expect = expectation([], floor=floor, cap=cap, learned_at=now)
        # one line a route an hour: the dashboard's "expectation and detection bound" widget reads it (fleet/dashboard.py)
        log.info(EXPECTATION_LEARNED, extra={"route": self.name, "expectation_seconds": self.expect.seconds,
                                             "expectation_samples": self.expect.samples, "expectation_basis": self.expect.basis,
                                             "hour_items_read": items, "heartbeat_seconds": self.period,
                                             "detection_bound_seconds": detection_bound(self.expect.seconds, self.period)})

    # ------------------------------------------------------------------ heartbeats
    def put(self, now: float, confirmation: bool = False) -> None:
        """The period's heartbeat, or a confirmation of a late one (named by its second)."""
        run_id = heartbeat_run_id(now, 1 if confirmation else self.period)
        probe_id = heartbeat_probe_id(run_id, self.name)
        try:
            # a duplicate or overlapping invocation finds the period taken (TTL: it is only a claim)
            claimed = self.deps.store.put_item_once({PARTITION_KEY: signal_partition(self.name, HEARTBEAT_CLAIMS), SORT_KEY: f"hb#{run_id}",
                                                     TTL_ATTRIBUTE: int(now + 3600)})
        except Exception as exc:
            self._error("period not claimed; heartbeat not put", exc)
            return
        if not claimed:
            return
        state = ProbeState(probe_id=probe_id, run_id=run_id, planned_at=run_time(run_id) or now, route=self.h.route,
                           size_bytes=HEARTBEAT_SIZE_BYTES, size_class=HEARTBEAT_SIZE_CLASS, trial=1,
                           timeout_seconds=MAX_PENDING_SECONDS, target_seconds=self.h.target_seconds,
                           poll_settings=PollSettings(use_history=False))
        try:
            upload_probe(state, self.s3(self.h.route.source), self.deps.clock, UploadSettings())
        except Exception as exc:  # the source refused the PUT: not a replication stall; counted and logged
            self._error("heartbeat PUT failed", exc)
            self.deps.metrics.count("ProbeError", 1, {ROUTE: self.name})
            return
        state.poll = Poll()
        self.pending.append(state)

    def next_head_at(self) -> float:
        times = [self._due(p) for p in self.pending]
        return min(times, default=self.deps.clock.now() + 1.0)

    def _due(self, p: ProbeState) -> float:
        assert p.upload is not None and p.poll is not None
        policy = PollPolicy(p.poll_settings.floor_seconds, p.poll_settings.relative)
        return p.upload.put_end + policy.next_head_at(p.poll.last_pending, p.poll.not_before, p.poll.last_rtt)

    def poll_due(self) -> None:
        clock = self.deps.clock
        source = self.s3(self.h.route.source)
        for p in list(self.pending):
            assert p.upload is not None
            if clock.now() < self._due(p):
                continue
            try:
                settled = head_once(p, source, self.s3, clock, p.upload.put_end + MAX_PENDING_SECONDS)
            except Exception as exc:
                # Not evidence of a stall: a HEAD we may not make (AccessDenied, kms:Decrypt for the
                # checksum) or an endpoint that does not answer. The heartbeat is *unknown* until a HEAD
                # answers: left out of the stall rule and the RPO, counted once as a ProbeError (a ticket).
                if p.error is None:
                    self.deps.metrics.count("ProbeError", 1, {ROUTE: self.name})
                p.error = {"Error": type(exc).__name__, "Cause": str(exc)[:300]}
                assert p.poll is not None
                p.poll.last_pending = clock.now() - p.upload.put_end  # the next HEAD backs off as for a pending one
                self._error("HEAD failed", exc)
                continue
            p.error = None
            if settled:
                self.settle(p)
        while len(self.pending) > MAX_PENDING:  # the oldest gives way: recorded STUCK, deleted
            self.give_up(self.pending[0], f"more than {MAX_PENDING} heartbeats pending")

    def give_up(self, p: ProbeState, why: str) -> None:
        assert p.poll is not None
        p.poll.status = ProbeStatus.STUCK
        p.poll.failure_reason = f"still PENDING: {why}"
        self.settle(p)

    def settle(self, p: ProbeState) -> None:
        """Record the heartbeat in ``<route>#hb`` (with the expectation it was judged by), delete it on
        both sides, remember it for the state machine."""
        assert p.upload is not None
        self.pending.remove(p)
        record = to_record(p, HEARTBEAT_RETENTION_DAYS)
        self.recent = [*self.recent, Beat(p.upload.put_end, record.latency_hi if record.status is ProbeStatus.COMPLETED else None,
                                          record.status is not ProbeStatus.COMPLETED)][-RECENT:]
        extra = {} if self.expect is None else {"expectation_seconds": self.expect.seconds, "expectation_basis": self.expect.basis}
        try:
            # In ``<route>#hb`` with its hour item's counters and entry, what the RPO reads (one
            # transaction: heartbeat_rpo.py); a re-settled heartbeat is a duplicate, neither changes.
            store_record(self.deps.store, record, self.deps.clock.now(), threshold_seconds=self.h.target_seconds, extra=extra)
        except Exception as exc:
            self._error(f"heartbeat record {record.probe_id} not stored", exc)
        key = probe_key(p)
        version = p.upload.version_id
        for endpoint in (self.h.route.source, *self.h.route.destinations):
            try:
                store = self.s3(endpoint)
                if version:  # a replica keeps its source's version id: one DeleteObjects a side, no listing
                    store.delete_versions(endpoint.bucket, [VersionInfo(key, version, 0.0)])
                else:
                    store.delete_all_versions(endpoint.bucket, key)
            except Exception as exc:  # counted; the sweep and the lifecycle rule remove it later
                self._error(f"heartbeat not deleted from {endpoint.bucket}", exc)
                self.deps.metrics.count("CleanupFailed", 1, {ROUTE: self.name})

    # ------------------------------------------------------------------ the verdict
    def beats(self) -> list[Beat]:
        return self.recent + self.probes + [Beat(p.upload.put_end) for p in self.pending if p.upload is not None and p.error is None]

    def evaluate(self, now: float) -> None:
        for p in [p for p in self.pending if p.upload is not None and now - p.upload.put_end >= MAX_PENDING_SECONDS]:
            self.give_up(p, f"{MAX_PENDING_SECONDS} s after its PUT")
        before = self.stall.phase
        new = advance(self.stall, self.beats(), now, self._expect(), self.period)
        if new.transition == StallPhase.STALLED and self.probes:
            self.read_probes(now)  # a probe may have finished since the period began: judge on fresh markers
            new = advance(self.stall, self.beats(), now, self._expect(), self.period)
        self.stall = new
        if new.transition is None:
            return
        self.transitions.append(new.transition)
        log.warning("route stall state", extra={"route": self.name, "phase": new.transition, "since": new.since})
        self.emit(now)  # now, not at the period's end
        self.save(now)  # before anything else can fail: the next invocation must know
        # one message when the stall begins and one when it is over; a relapse while recovering is the same stall
        first = new.transition == StallPhase.STALLED and before is StallPhase.HEALTHY
        if (first or new.transition == StallPhase.HEALTHY) and self.deps.notifier is not None:
            subject, message = self.evidence(now)
            try:
                self.deps.notifier.publish(subject, message)
            except Exception as exc:  # the alarm still follows StallSeconds; the details are in the log
                self._error("stall notification not published", exc)

    def _expect(self) -> float:
        return self.expect.seconds if self.expect else self.deps.fleet.stall_floor_seconds

    def evidence(self, now: float) -> tuple[str, str]:
        """What the on-call engineer needs first (SNS subjects are under 100 characters)."""
        r = self.h.route
        pending = sorted(p.upload.put_end for p in self.pending if p.upload is not None)
        done = [b for b in self.recent if b.latency is not None]
        state = "STALLED" if self.stall.phase is StallPhase.STALLED else "recovered"
        body: dict[str, Any] = {
            "route": r.name, "state": state, "stall_seconds": round(stall_seconds(self.stall, now), 1),
            "source": {"account": r.source.account, "region": r.source.region, "bucket": r.source.bucket},
            "destinations": [{"account": d.account, "region": d.region, "bucket": d.bucket} for d in r.destinations],
            "oldest_pending_heartbeat_age_seconds": round(now - pending[0], 1) if pending else None,
            "pending_heartbeats": len(pending),
            "late_probes_in_flight": sum(b.late(now, self._expect()) for b in self.probes),
            "expected_latency_seconds": self.expect.seconds if self.expect else None,
            "expectation": self.expect.basis if self.expect else None,
            "last_completed_latency_seconds": done[-1].latency if done else None,
            "s3_pending": self.s3_pending(now), "heartbeat_seconds": self.period,
            "next": f"replmon report --route {r.name}",
        }
        subject = f"replmon {'STALLED' if state == 'STALLED' else 'recovered'}: route {r.name}"[:99]  # the state first: long names are cut
        return subject, json.dumps(body, indent=1, default=str)

    def s3_pending(self, now: float) -> dict[str, Any] | None:
        """S3's latest OperationsPendingReplication / BytesPendingReplication the collector stored, and
        ``passive_stall``: pending operations rose over the last 3 points while no heartbeat completed
        since the first of them. Evidence, not a trigger: S3's metrics lag minutes ("Using S3 Replication metrics")."""
        try:
            items = self.deps.store.items(signal_partition(self.name, RTC), now - 1800, now)
        except Exception:
            return None
        out: dict[str, Any] = {}
        series: dict[str, list[tuple[float, float]]] = {}
        for item in items:
            for metric in ("OperationsPendingReplication", "BytesPendingReplication"):
                series.setdefault(metric, []).extend((float(t), float(v)) for t, v in item.get("series", {}).get(metric) or [])
        for metric, points in series.items():
            if points:
                out[metric] = max(points)[1]
        ops = sorted(series.get("OperationsPendingReplication", []))[-3:]
        if len(ops) == 3:
            rising = ops[0][1] < ops[1][1] < ops[2][1]
            completed = any(b.latency is not None and b.put_at + b.latency >= ops[0][0] for b in self.recent)
            out["passive_stall"] = rising and not completed
        return out or None

    def _error(self, what: str, exc: Exception) -> None:
        text = f"{what}: {type(exc).__name__}: {str(exc)[:200]}"
        with self._lock:
            self.errors.append(text)
        log.error(what, extra={"route": self.name, "error": f"{type(exc).__name__}: {exc}"})
