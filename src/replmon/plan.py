"""PlanProbes: validate a request and expand it into one state per probe (route x size x trial)."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from replmon.config import ConfigError, ProbeRequest
from replmon.sizes import format_size
from replmon.state import ProbeState


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now if now is not None else time.time()))
    return f"{stamp}-{secrets.token_hex(3)}"


def plan_probes(request: ProbeRequest, run_id: str) -> list[ProbeState]:
    """Trials run in rounds (every size once, then again), so a slow hour hits all sizes alike."""
    probes = []
    for trial in range(1, request.trials + 1):
        for route in request.routes:
            for size in request.sizes:
                cls = format_size(size)
                probes.append(
                    ProbeState(
                        probe_id=f"{run_id}-{route.name}-{cls}-t{trial}-{secrets.token_hex(2)}",
                        run_id=run_id,
                        route=route,
                        size_bytes=size,
                        size_class=cls,
                        trial=trial,
                        timeout_seconds=request.timeout_seconds,
                        target_seconds=request.target_seconds,
                        poll_settings=request.poll,
                    )
                )
    return probes


#: Step Functions passes at most 256 KiB between states; leave room for the Map's results.
MAX_PLAN_BYTES = 192 * 1024


def plan_output(request: ProbeRequest, run_id: str) -> dict[str, Any]:
    """The state machine's Map input."""
    probes = [p.dump() for p in plan_probes(request, run_id)]
    out = {"run_id": run_id, "max_concurrency": request.max_concurrency, "probes": probes}
    size = len(json.dumps(out))
    if size > MAX_PLAN_BYTES:
        raise ConfigError(
            "invalid probe configuration:\n"
            f"  trials: {len(probes)} probes ({size // 1024} KiB of state) exceed what one run can carry "
            f"({MAX_PLAN_BYTES // 1024} KiB); lower trials, sizes or routes, or split them over several runs"
        )
    return out
