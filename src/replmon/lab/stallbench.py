"""Stall detection measured in the lab (docs/BENCH-STALL.md): the real Heartbeat function
(probe/heartbeat.py, loaded by its FUNCTIONS name, as its own least-privilege MinIO user) against the
lab's MinIO pair and DynamoDB Local, a Toxiproxy fault on the replication path, and the template's
``RouteStalledG00Alarm`` evaluated by local/insights.py over the StallSeconds the function emitted.

**Scaled cadence.** The lab runs ``HeartbeatSeconds = 10`` (the setting's minimum) and
``StallFloorSeconds = 2`` (lab replication takes well under a second), so a repetition takes a minute
or two, not ten. The alarm is the template's (Period 60 s, 1 of 1): it is evaluated on the lab's
points with their times stretched by 60 / 10, so one lab period is one alarm minute, and its ALARM
time is mapped back. Each figure is reported in seconds and in heartbeat periods; the deployed
defaults' figure (60 s, 20 s floor) comes from the same state machine (signals/stall.py) by
simulation, and says so.

**False alarms.** A healthy lab run of ``healthy_periods`` periods (60 periods hold as many heartbeats
as an hour at the defaults) counts STALLED transitions and ALARM evaluations; then 30 simulated days
at the defaults through signals/stall.py, latencies resampled from the lab's measured heartbeats.
"""

from __future__ import annotations

import json
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from replmon.adapters.metrics import EmfMetrics
from replmon.adapters.notify import MemoryNotifier
from replmon.core.fleetconfig import FleetSettings
from replmon.core.keys import iso_ms
from replmon.core.partitions import heartbeat_partition
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.telemetry import NAMESPACE, ROUTE
from replmon.local.insights import AlarmEvaluator, Point, template_alarms
from replmon.signals.stall import Beat, StallPhase, StallState, advance, wants_confirmation

LAB_PERIOD = 10
LAB_FLOOR = 2.0
ALARM = "RouteStalledG00Alarm"
DEFAULT_PERIOD, DEFAULT_FLOOR = 60, 20.0


class Recorder:
    """A metrics sink that keeps every value with its time, as CloudWatch would store the EMF: each
    point carries the dimensions the real adapter's EMF documents carry (adapters/metrics.py
    ``EmfMetrics.dimension_sets``: telemetry's sets, the route's group, Powertools' ``service``)."""

    def __init__(self, route_groups: int = 1) -> None:
        self.points: list[Point] = []
        self._lock = threading.Lock()
        self._emf = EmfMetrics(route_groups=route_groups)

    def publish(self, record: ProbeRecord) -> None:
        return None

    def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
        now = time.time()
        points = [Point(NAMESPACE, metric, dims, now, float(value)) for dims in self._emf.dimension_sets(metric, dimensions)]
        with self._lock:
            self.points += points

    def stall(self, route: str) -> list[tuple[float, float]]:
        with self._lock:
            return [(p.timestamp, p.value) for p in self.points if p.metric == "StallSeconds" and p.dimensions.get(ROUTE) == route]


class TimedNotifier(MemoryNotifier):
    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    def publish(self, subject: str, message: str) -> None:
        self.times.append(time.time())
        super().publish(subject, message)


@dataclass
class Driver:
    """Invokes the Heartbeat handler back to back (the schedule's invocations, a minute's worth of
    periods each) until stopped."""

    invoke: Callable[[], dict[str, Any]]
    every: float | None = None  # invocations start on multiples of this (a schedule's ticks); None: back to back
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[str] = field(default_factory=list)
    reported: list[str] = field(default_factory=list)  # what the Heartbeat answered instead of raising: a skip, a route's errors
    thread: threading.Thread | None = None

    def __enter__(self) -> Driver:
        def loop() -> None:
            while not self.stop.is_set():
                try:
                    out = self.invoke()
                    if out.get("skipped"):
                        self.reported.append(f"skipped: {out['skipped']}")
                    self.reported += [f"{row['route']}: {e}" for row in out.get("routes", []) for e in row.get("errors") or []]
                except Exception as exc:  # reported, never silent
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                    time.sleep(1.0)
                if self.every:
                    self.stop.wait(self.every - time.time() % self.every + 0.2)

        self.thread = threading.Thread(target=loop, name="heartbeat", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(timeout=90)


def first(points: list[tuple[float, float]], after: float, pred: Callable[[float], bool]) -> float | None:
    return next((t for t, v in points if t >= after and pred(v)), None)


def contributor_transitions(points: list[Point], start: float, end: float, period: float,
                            alarm: str = ALARM) -> tuple[dict[str, list[tuple[float, str]]], set[str]]:
    """The template's ``alarm`` (a Metrics Insights alarm, Period 60) stepped each alarm minute over
    the lab's points, their times stretched by 60 / ``period`` from ``start``: each contributor's
    state changes mapped back to lab time (a route absent never left OK), and every contributor the
    alarm's query returned (its series: the query's SCHEMA and WHERE decide, not the emitter)."""
    from replmon.local.template import TEMPLATE, load_template

    evaluator: AlarmEvaluator = template_alarms(load_template(TEMPLATE))[alarm]
    scale = 60.0 / period
    scaled = [Point(p.namespace, p.metric, p.dimensions, start + (p.timestamp - start) * scale, p.value) for p in points]
    out: dict[str, list[tuple[float, str]]] = {}
    state: dict[str, str] = {}
    seen: set[str] = set()
    t = math.floor(start / 60.0) * 60.0 + 60.0  # CloudWatch evaluates each minute, over the last whole period
    while t <= start + (end - start) * scale + 60.0:
        for key, c in evaluator.step(t + 1.0, scaled).contributors.items():
            route = key[0]
            seen.add(route)
            if c.state != state.get(route, "OK"):
                out.setdefault(route, []).append((start + (t - start) / scale, c.state))
                state[route] = c.state
        t += 60.0
    return out, seen


def alarm_transitions(points: list[Point], route: str, start: float, end: float, period: float) -> list[tuple[float, str]]:
    """One route's contributor of the RouteStalled alarm (:func:`contributor_transitions`)."""
    mine = [p for p in points if p.dimensions.get(ROUTE) == route]
    return contributor_transitions(mine, start, end, period)[0].get(route, [])


def simulate_detection(period: float, floor: float, latencies: list[float], trials: int, seed: int = 7) -> list[dict[str, float]]:
    """A full stall at a random phase of the heartbeat schedule, through signals/stall.py with the
    Heartbeat's confirmation rule, one-second evaluation rounds (as the function's), and the alarm
    at the next whole minute after the first StallSeconds > 0 (Metrics Insights: one-minute data,
    evaluated each minute; CloudWatch's ingestion delay is not modelled: none is documented).
    Returns per trial: seconds from the fault to STALLED and to the alarm."""
    rng = random.Random(seed)
    out = []
    for _ in range(trials):
        fault = 600.0 + rng.uniform(0, period)
        beats: list[Beat] = []
        state = StallState()
        t, stalled = 0.0, None
        next_put = 0.0
        while stalled is None and t < fault + 20 * period:
            if t >= next_put:
                beats.append(Beat(t))
                next_put += period
            if wants_confirmation(state, beats, t, floor):
                beats.append(Beat(t))
            beats = [_settle(b, t, fault, rng.choice(latencies)) for b in beats][-12:]
            state = advance(state, beats, t, floor, period)
            if state.phase is StallPhase.STALLED:
                stalled = t
            t += 1.0
        assert stalled is not None
        phase = rng.uniform(0, 60)  # CloudWatch's evaluation minute, unrelated to the heartbeat schedule
        alarm = phase + math.ceil((stalled + 1.0 - phase) / 60) * 60  # the first evaluation whose minute holds the point
        out.append({"stalled": stalled - fault, "alarm": alarm - fault})
    return out


def _settle(b: Beat, now: float, fault: float, latency: float) -> Beat:
    if b.settled:
        return b
    if b.put_at + latency <= min(now, fault):
        return Beat(b.put_at, latency=latency)
    return b


def simulate_false_alarms(period: float, floor: float, latencies: list[float], days: float, seed: int = 11) -> dict[str, Any]:
    """Healthy days at ``period`` through signals/stall.py (with confirmations), each heartbeat's
    latency drawn from ``latencies`` (the lab's measured heartbeats): STALLED transitions counted."""
    rng = random.Random(seed)
    beats: list[Beat] = []
    state = StallState()
    stalls = confirmations = 0
    t, next_put, end = 0.0, 0.0, days * 86400
    drawn: dict[float, float] = {}
    while t < end:
        if t >= next_put:
            beats.append(Beat(t))
            drawn[t] = rng.choice(latencies)
            next_put += period
        if wants_confirmation(state, beats, t, floor):
            beats.append(Beat(t))
            drawn[t] = rng.choice(latencies)
            confirmations += 1
        beats = [b if b.settled or b.put_at + drawn[b.put_at] > t else Beat(b.put_at, latency=drawn[b.put_at]) for b in beats][-12:]
        state = advance(state, beats, t, floor, period)
        if state.transition == StallPhase.STALLED:
            stalls += 1
        pending = [b for b in beats if not b.settled]
        # jump to the next moment anything can change: a PUT, a completion or a lateness
        moments = [next_put] + [b.put_at + drawn[b.put_at] for b in pending] + [b.put_at + floor for b in pending if b.put_at + floor > t]
        t = max(t + 0.5, min(moments))
        drawn = {k: v for k, v in drawn.items() if k >= t - 3600}
    return {"days": days, "heartbeats": int(days * 86400 / period), "confirmations": confirmations, "stalled": stalls}


def heartbeat_deps(lab: Any) -> Callable[[dict[str, Any], Recorder, TimedNotifier], Any]:
    """The Heartbeat's dependencies in the lab: its own MinIO user, the lab's cadence, a recorder and a notifier."""

    def deps_for(route: dict[str, Any], recorder: Recorder, notifier: TimedNotifier) -> Any:
        from replmon.adapters.memregistry import MemoryRegistry
        from replmon.core.route import Route
        from replmon.fleet.stack_route import spec_of_route

        d = lab.deps(keys=lab.users.get("Heartbeat", lab.keys))
        # the run's route in a registry of its own (the port the Heartbeat reads routes through)
        d.registry = MemoryRegistry([spec_of_route(Route.model_validate(route), groups=1)])
        d.fleet = FleetSettings(heartbeat_seconds=LAB_PERIOD, stall_floor_seconds=LAB_FLOOR)
        d.metrics, d.notifier = recorder, notifier
        return d

    return deps_for


def heartbeat_driver(handler: Callable[..., Any], periods: int | None = None) -> Callable[[Any], Driver]:
    """Invocations as deployed (a minute's worth of periods each, back to back), or ``periods`` per
    invocation on the period's ticks (a test: the driver stops within a period)."""
    event: dict[str, Any] = {"group": "g00", **({"periods": periods} if periods else {})}

    def driver(deps: Any) -> Driver:
        from replmon import wiring
        from replmon.local.aslrun import LambdaContext

        def invoke() -> dict[str, Any]:
            with wiring.injected({"Heartbeat": deps}):
                out: dict[str, Any] = handler(event, LambdaContext("Heartbeat"))
            return out

        return Driver(invoke, every=periods * LAB_PERIOD if periods else None)

    return driver


def alarm_window() -> int:
    """RouteStalled's EvaluationPeriods (fleet/alarms.py): the minutes a breach stays in its window."""
    from replmon.fleet.alarms import FLEET_ALARMS

    return next(a.evaluation_periods for a in FLEET_ALARMS if a.name == "RouteStalled")


def one_fault(lab: Any, route: dict[str, Any], fault: str, deps_for: Callable[..., Any], driver: Callable[[Any], Driver],
              warmup_periods: int = 3, tail_periods: int = 2) -> dict[str, Any]:
    """Healthy for ``warmup_periods``, the fault until the route is STALLED (at most 15 periods), the
    alarm's next minutes, healed until HEALTHY (at most 30 periods: MinIO re-checks the healed
    target first), then ``tail_periods`` (at least the alarm's window and one more: its OK needs that
    many clean minutes); the times of each, measured."""
    from replmon.lab.lab import REPLICATION_PROXY

    tail_periods = max(tail_periods, alarm_window() + 1)

    recorder, notifier = Recorder(), TimedNotifier()
    with driver(deps_for(route, recorder, notifier)) as d:
        begin = time.time()
        # a random phase of the heartbeat schedule: detection depends on when the next heartbeat is put
        time.sleep(warmup_periods * LAB_PERIOD + random.uniform(0, LAB_PERIOD))
        fault_at = time.time()
        lab.toxiproxy.add(REPLICATION_PROXY, fault)
        try:
            deadline = fault_at + 15 * LAB_PERIOD
            while time.time() < deadline and first(recorder.stall(route["name"]), fault_at, lambda v: v > 0) is None:
                time.sleep(0.5)
            time.sleep(tail_periods * LAB_PERIOD)  # the alarm's next minutes
        finally:
            lab.toxiproxy.heal(REPLICATION_PROXY)
        healed_at = time.time()
        deadline = healed_at + 30 * LAB_PERIOD
        while time.time() < deadline and first(recorder.stall(route["name"]), healed_at, lambda v: v == 0) is None:
            time.sleep(0.5)
        time.sleep(tail_periods * LAB_PERIOD)
    end = time.time()
    points = recorder.stall(route["name"])
    stalled = first(points, fault_at, lambda v: v > 0)
    recovered = first(points, healed_at, lambda v: v == 0)
    alarms = alarm_transitions(recorder.points, route["name"], begin, end, LAB_PERIOD)
    alarm_on = next((t for t, s in alarms if s == "ALARM" and t >= fault_at), None)
    alarm_off = next((t for t, s in alarms if s == "OK" and t >= healed_at), None)
    return {"route": route["name"], "fault": fault,
            "stalled_s": None if stalled is None else round(stalled - fault_at, 2),
            "alarm_s": None if alarm_on is None else round(alarm_on - fault_at, 2),
            "healthy_s": None if recovered is None else round(recovered - healed_at, 2),
            "alarm_ok_s": None if alarm_off is None else round(alarm_off - healed_at, 2),
            "before_fault_transitions": sum(1 for t, v in points if t < fault_at and v > 0),
            "alarms_before_fault": sum(1 for t, s in alarms if s == "ALARM" and t < fault_at),
            "messages": [s for s, _ in notifier.messages],
            "evidence": json.loads(notifier.messages[0][1]) if notifier.messages else None,
            "errors": d.errors}


# ------------------------------------------------------------------------------------------ the lab run
def run_stall_bench(lab: Any, *, reps: int, healthy_periods: int, fault: str = "hang", progress: Callable[[str], None] = print) -> dict[str, Any]:
    """``reps`` faults (fault -> STALLED and ALARM, heal -> HEALTHY and OK) and a healthy run, each on a
    route of its own; raw figures only (benchreport renders them)."""
    from replmon.local.aslrun import load_handler

    handler = load_handler("Heartbeat")
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())

    deps_for, driver = heartbeat_deps(lab), heartbeat_driver(handler)

    repetitions = []
    for i in range(reps):
        rep = one_fault(lab, lab.route(f"stall-{stamp}-{i}"), fault, deps_for, driver)
        repetitions.append(rep)
        progress(f"repetition {i + 1}/{reps}: STALLED {rep['stalled_s']} s, ALARM {rep['alarm_s']} s after the fault; "
                 f"HEALTHY {rep['healthy_s']} s, OK {rep['alarm_ok_s']} s after healing")

    # the healthy run: as many heartbeats as an hour at the defaults
    route = lab.route(f"stall-{stamp}-healthy")
    recorder, notifier = Recorder(), TimedNotifier()
    deps = deps_for(route, recorder, notifier)
    with driver(deps) as d:
        begin = time.time()
        time.sleep(healthy_periods * LAB_PERIOD)
    end = time.time()
    records = lab.store().query(heartbeat_partition(route["name"]), begin - 60, end + 60)
    latencies: list[float] = [r.latency_hi for r in records if r.status is ProbeStatus.COMPLETED and r.latency_hi is not None]
    healthy_alarms = alarm_transitions(recorder.points, route["name"], begin, end, LAB_PERIOD)
    healthy = {"periods": healthy_periods, "seconds": round(end - begin, 1), "heartbeats": len(records),
               "completed": len(latencies), "statuses": sorted({str(r.status) for r in records}),
               "stalled": sum(1 for _, v in recorder.stall(route["name"]) if v > 0),
               "alarms": sum(1 for _, s in healthy_alarms if s == "ALARM"), "messages": len(notifier.messages),
               "latency_s": sorted(round(x, 3) for x in latencies), "errors": d.errors, "from": iso_ms(begin)}
    progress(f"healthy: {len(records)} heartbeats over {healthy_periods} periods, {healthy['stalled']} stalled points, "
             f"{healthy['alarms']} alarms")
    sample = latencies or [0.5]
    defaults = simulate_detection(DEFAULT_PERIOD, DEFAULT_FLOOR, sample, trials=1000)
    lab_model = simulate_detection(LAB_PERIOD, LAB_FLOOR, sample, trials=1000)
    return {"lab_period_s": LAB_PERIOD, "lab_floor_s": LAB_FLOOR, "repetitions": repetitions, "healthy": healthy,
            "simulated": {"defaults": {"period_s": DEFAULT_PERIOD, "floor_s": DEFAULT_FLOOR,
                                       "stalled_s": [round(x["stalled"], 1) for x in defaults], "alarm_s": [round(x["alarm"], 1) for x in defaults]},
                          "lab": {"stalled_s": [round(x["stalled"], 1) for x in lab_model]},
                          "false_alarms_30d": simulate_false_alarms(DEFAULT_PERIOD, DEFAULT_FLOOR, sample, 30),
                          "false_alarms_30d_heavy_tail": simulate_false_alarms(DEFAULT_PERIOD, DEFAULT_FLOOR, heavy_tail(), 30)}}


def heavy_tail(n: int = 100_000, seed: int = 5) -> list[float]:
    """A modelled worst case for the expectation: log-normal latencies (median 2 s) whose 99.9th
    percentile is the 20 s floor, so exactly 0.1 % of heartbeats are late - what the learned
    expectation (q0.999, signals/expectation.py) allows at most. Independent lateness at p gives
    about 43,200 p^2 false stalls a month: 0.04 here."""
    rng = random.Random(seed)
    sigma = math.log(DEFAULT_FLOOR / 2.0) / 3.090  # z(0.999) = 3.090
    return [2.0 * math.exp(sigma * rng.gauss(0, 1)) for _ in range(n)]


def summary(values: list[float | None]) -> tuple[float, float, float] | None:
    xs = [x for x in values if x is not None]
    return (min(xs), median(xs), max(xs)) if xs else None
