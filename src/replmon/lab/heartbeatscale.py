"""The Heartbeat at a full group (docs/BENCH-FLEET.md, "A full group"): the Heartbeat handler, one
invocation a minute as its schedule sends it (``{"group": "g00"}``), over ``HEARTBEAT_ROUTES_PER_GROUP``
registry routes in that one group (fleet/caps.py), on the lab's MinIO pair with real replication.

Every route is the lab's bucket pair under its own name (so its own heartbeat key); the registry is a
stand-in holding them (the port every function reads routes through), the rest of the wiring is the
lab's (S3 to MinIO with the lab's administrator keys, DynamoDB Local). What is measured is what the
cost model prices (cost/fleet.py ``heartbeat_invocation_line``): an invocation's duration, here with
every route healthy, against the function's 45 s work deadline (probe/heartbeat.py ``WORK_SECONDS``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["run_heartbeat_scale"]


def run_heartbeat_scale(lab: Any, *, routes: int, invocations: int = 2, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """``invocations`` invocations of the Heartbeat over ``routes`` routes in group g00; each one's wall
    and CPU time, routes served, heartbeats recorded and errors."""
    from replmon import wiring
    from replmon.adapters.memregistry import MemoryRegistry
    from replmon.core.route import Route
    from replmon.fleet.caps import HEARTBEAT_ROUTES_PER_GROUP
    from replmon.fleet.stack_route import spec_of_route
    from replmon.local.aslrun import LambdaContext, load_handler
    from replmon.probe.heartbeat import WORK_SECONDS, WORKERS

    stamp = time.strftime("%H%M%S", time.gmtime())
    specs = [spec_of_route(Route.model_validate(lab.route(f"hb-{stamp}-{i:04d}")), groups=1) for i in range(routes)]
    deps = lab.deps()
    deps.registry = MemoryRegistry(specs)
    handler = load_handler("Heartbeat")
    out = []
    last = 0.0
    for k in range(invocations):
        began = time.time()
        if k and began - last < 60:
            time.sleep(60 - (began - last))  # the schedule's minute: the previous invocation's heartbeats settled
        t0, c0 = time.perf_counter(), time.process_time()
        with wiring.injected({"Heartbeat": deps}):
            result = handler({"group": "g00"}, LambdaContext("Heartbeat"))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        last = time.time()
        rows = result.get("routes", [])
        errors = sum(len(r.get("errors") or []) for r in rows)
        row = {"invocation": k + 1, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "routes_served": len(rows), "errors": errors,
               "pending_at_end": sum(int(r.get("pending") or 0) for r in rows), "phases": _count(rows, "phase")}
        out.append(row)
        progress(f"Heartbeat invocation {k + 1}: {row['wall_s']} s wall, {row['cpu_s']} s CPU, {len(rows)} routes, {errors} errors")
    return {"routes": routes, "group_cap": HEARTBEAT_ROUTES_PER_GROUP, "work_seconds": WORK_SECONDS, "workers": WORKERS,
            "heartbeat_seconds": deps.fleet.heartbeat_seconds, "invocations": out}


def _count(rows: list[dict[str, Any]], key: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        v = str(r.get(key) or "?")
        out[v] = out.get(v, 0) + 1
    return out
