"""Stall detection at a learned expectation E, measured through the deployed stack's wiring
(local/stack.py ``DeployedStack``): the Heartbeat function through its handler and template
environment, E learned by it from the route's hour items (seeded with 80 hours of heartbeats whose
q0.999 is E: signals/expectation.py), its StallSeconds EMF, the template's ``RouteStalledG00Alarm``
evaluated each minute (local/insights.py) and the ``FleetPagesG00Rule`` EventBridge rule that puts the
contributor's ALARM on the page topic.

**Time is stepped** (the harness's ``SteppedClock``): a repetition at E = 180 s covers about 15
minutes of deployment time in seconds of real time. The figures are in deployment seconds.

Each repetition: the stack runs healthy, a random part of a minute passes (the fault's phase against
the Heartbeat's schedule), replication of the route stops (new objects stay PENDING), and the clock is
stepped past the route's detection bound (signals/stall.py ``detection_bound``); STALLED is the
Heartbeat's evidence message (published when it enters STALLED), the page is the page topic's
message naming the route. Then replication works again and the stack runs until the alarm is OK.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from replmon.core.keys import HEARTBEAT_SIZE_CLASS, heartbeat_probe_id, heartbeat_run_id
from replmon.core.partitions import HEARTBEAT_STATE, live_partition
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.signals.expectation import HISTORY_END_AGO, MIN_SAMPLES
from replmon.signals.stall import detection_bound
from replmon.signals.windows import HOUR_SECONDS, floor_hour

__all__ = ["ALARM", "ROUTE", "AllowAll", "history_latencies", "measure_detection", "seed_history"]

ALARM = "RouteStalledG00Alarm"
ROUTE = "orders-src"  # the route: its source bucket's name (the inventory names routes so)
PERIOD = 60  # HeartbeatSeconds: the template's default
SEED_HOURS = 80  # the learning window (72 h ending 6-7 h ago) and room for an hour's re-learning


class AllowAll:
    """An authorizer that allows every call (local/stack.py ``Authorizer``): this bench times the path;
    tests/deployed run the same wiring with IAM evaluated (tests/iam.py), an installed replmon has no
    evaluator."""

    def requests(self, service: str, operation: str, params: dict[str, Any], region: str, account: str) -> list[Any]:
        return []

    def simulate(self, batch: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {e["id"]: {"result": "Allowed"} for e in batch}


def history_latencies(expect: float, n: int, rng: random.Random) -> list[float]:
    """``n`` heartbeat latencies, one a minute, whose q0.999 (nearest rank) over any 72 hours of them is
    ``expect``: every 600th (one each 10 hours: 7 or 8 in 72 hours, 5 are the top 0.1 % of 4,320)
    is ``expect``, the rest well under it.

    >>> xs = history_latencies(60.0, 4320, random.Random(1))
    >>> from replmon.signals.expectation import nearest_rank
    >>> nearest_rank(xs, 0.999), max(xs), xs.count(60.0)
    (60.0, 60.0, 7)
    """
    return [expect if i % 600 == 300 else round(rng.uniform(0.5, min(5.0, expect / 2)), 3) for i in range(n)]


def seed_history(store: Any, route: str, now: float, expect: float, rng: random.Random) -> int:
    """Store ``SEED_HOURS`` of heartbeats (one a minute, COMPLETED) before ``now - 6 h`` with q0.999 =
    ``expect``, as the Heartbeat stores them (signals/rollup.py ``store_record``: record and hour item in
    one transaction) into ``store``; returns how many."""
    from replmon.signals.rollup import store_record

    end = floor_hour(now - HISTORY_END_AGO)
    times = [end - SEED_HOURS * HOUR_SECONDS + i * PERIOD for i in range(SEED_HOURS * HOUR_SECONDS // PERIOD)]
    lat = history_latencies(expect, len(times), rng)
    for t, latency in zip(times, lat, strict=True):
        run = heartbeat_run_id(t, PERIOD)
        record = ProbeRecord(route=route, probe_id=heartbeat_probe_id(run, route), run_id=run, planned_at=t, size_bytes=1024,
                             size_class=HEARTBEAT_SIZE_CLASS, trial=1, status=ProbeStatus.COMPLETED, put_end=t + 0.05,
                             latency_lo=max(0.0, latency - 1.0), latency_hi=latency)
        store_record(store, record, t + latency, threshold_seconds=900.0)
    return len(times)


def _copy_hour_items(memory: Any, table: Any, route: str) -> int:
    items = memory.roll_items(route, "h#", "h#~")
    for item in items:
        table.put_item(dict(item))
    return len(items)


def measure_detection(expectations: list[float], reps: int, *, seed: int = 1, authorizer: Any = None, iam: str = "",
                      progress: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Fault -> STALLED -> page at each E of ``expectations`` (``reps`` faults each, one stack per E);
    ``authorizer`` decides IAM (local/stack.py ``Authorizer``; None: :class:`AllowAll`), ``iam`` says how."""
    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.local.stack import AWAY, HOME, HUB, MEMBER_A, TABLE, DeployedStack

    auth = authorizer or AllowAll()
    iam = iam or ("not evaluated here (tests/deployed evaluate the same wiring's IAM)" if authorizer is None else "evaluated")
    rng = random.Random(seed)
    out: dict[str, Any] = {"period_s": PERIOD, "alarm": ALARM, "iam": iam, "clock": "stepped (local/stack.py SteppedClock)", "runs": []}
    for expect in expectations:
        began = time.monotonic()
        with DeployedStack(auth) as stack:
            stack.bucket_pair(MEMBER_A, ROUTE, HOME, MEMBER_A, "orders-dr", AWAY, tags={"replmon:enroll": "true"})
            stack.invoke("Inventory", {})
            table = DynamoLatencyStore(TABLE, stack.admin("dynamodb", HUB, HOME))
            memory = MemoryLatencyTable()
            seeded = seed_history(memory, ROUTE, stack.clock.now(), expect, rng) if expect > 20.0 else 0
            hour_items = _copy_hour_items(memory, table, ROUTE) if seeded else 0
            stack.advance(minutes=3)  # healthy: the Heartbeat learns E (its first invocation) and runs
            state = table.get_item(live_partition(ROUTE), HEARTBEAT_STATE) or {}
            learned = float(state["expect"]) if "expect" in state else None
            bound = detection_bound(learned if learned is not None else expect, PERIOD)
            run: dict[str, Any] = {"expect_s": expect, "learned_expect_s": learned, "learned_basis": state.get("expect_basis"),
                                   "seeded_heartbeats": seeded, "seeded_hour_items": hour_items, "bound_s": bound, "reps": []}
            for i in range(reps):
                stack.advance(rng.uniform(0, PERIOD))  # the fault's phase against the Heartbeat's minute
                t0 = stack.clock.now()
                stack.stall(ROUTE)
                stack.advance(bound + 60)
                stalled = [n.at for n in stack.tickets(naming=ROUTE, since=t0) if n.source == "Heartbeat" and "STALLED" in n.subject]
                paged = [n.at for n in stack.pages(naming=ROUTE, since=t0) if n.state == "ALARM"]
                rep = {"stalled_s": round(stalled[0] - t0, 1) if stalled else None, "page_s": round(paged[0] - t0, 1) if paged else None,
                       "pages": len(paged)}
                stack.resume(ROUTE)
                healed = stack.clock.now()
                for _ in range(20):  # until the contributor is OK again (3 one-minute periods without a stall)
                    stack.advance(minutes=1)
                    if stack.alarm_state(ALARM, ROUTE) == "OK" and stack.clock.now() - healed >= 4 * PERIOD:
                        break
                rep["ok_after_heal_s"] = round(stack.clock.now() - healed, 1) if stack.alarm_state(ALARM, ROUTE) == "OK" else None
                run["reps"].append(rep)
                progress(f"E = {expect:g} s, fault {i + 1}: STALLED {rep['stalled_s']} s, page {rep['page_s']} s (bound {bound:g} s)")
            run["denied"] = [f"{c.function}: {c.service}:{c.operation}" for c in stack.denied()][:10]
        run["real_seconds"] = round(time.monotonic() - began, 1)
        out["runs"].append(run)
    out["min_samples"] = MIN_SAMPLES
    return out
