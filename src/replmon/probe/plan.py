"""PlanProbes' work: expand a validated request into one state per probe (route x size x trial).

Everything a probe is known by is fixed here: its id, its object key and its record's key
(:mod:`replmon.core.keys`). A retry, a replay or
an interrupted local run therefore always finds the same object and the same record.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

from replmon.core.errors import ConfigError
from replmon.core.sizes import format_size
from replmon.probe.request import ProbeRequest
from replmon.probe.state import ProbeState


def plan_probes(request: ProbeRequest, run_id: str, planned_at: float) -> list[ProbeState]:
    """Trials run in rounds (every size once, then again), so a slow hour hits all sizes alike.

    >>> from replmon.probe.request import load_request
    >>> req = load_request({"routes": [{"name": "p", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]}],
    ...                     "sizes": "1MiB,1MiB", "trials": 1})
    >>> [p.probe_id for p in plan_probes(req, "20261122T000000Z-r1", 0.0)]
    ['20261122T000000Z-r1-p-1MiB-t1', '20261122T000000Z-r1-p-1MiB-t1-2']
    """
    probes = []
    seen: Counter[str] = Counter()
    for trial in range(1, request.trials + 1):
        for route in request.routes:
            for size in request.sizes:
                cls = format_size(size)
                base = f"{run_id}-{route.name}-{cls}-t{trial}"
                seen[base] += 1
                probes.append(
                    ProbeState(
                        probe_id=base if seen[base] == 1 else f"{base}-{seen[base]}",
                        run_id=run_id,
                        planned_at=planned_at,
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


def plan_output(request: ProbeRequest, run_id: str, planned_at: float) -> dict[str, Any]:
    """The state machine's Map input."""
    probes = [p.dump() for p in plan_probes(request, run_id, planned_at)]
    out = {"run_id": run_id, "planned_at": planned_at, "max_concurrency": request.max_concurrency,
           # how long the run can take: its routes' leases expire this long (plus a margin) after it
           # began, so a run that dies frees its routes by itself (fleet/lease.py)
           "bound_seconds": worst_case_seconds(request),
           "routes": [r.model_dump(mode="json", exclude_none=True) for r in request.routes], "probes": probes}
    size = len(json.dumps(out))
    if size > MAX_PLAN_BYTES:
        raise ConfigError(
            "invalid probe configuration:\n"
            f"  trials: {len(probes)} probes ({size // 1024} KiB of state) exceed what one run can carry "
            f"({MAX_PLAN_BYTES // 1024} KiB); lower trials, sizes or routes, or split them over several runs"
        )
    return out


def check_fits(request: ProbeRequest) -> None:
    """Refuse (ConfigError, naming the fix) a request whose plan would not fit in one execution:
    what PlanProbes would refuse, found before anything starts."""
    plan_output(request, "19700101T000000Z-check", 0.0)


#: Bounds of the steps after polling, as the state machine's retries and the clients' timeouts
#: set them (docs/SEMANTICS.md, "How long a run can take"): RecordResult with its retries and
#: the spool fallback, Cleanup with its retries.
#: RecordResult, one invocation: the store (42 s: 3 attempts x 13 s + 3 s backoff), then the spool
#: (42 s); RecordResultFunction's Timeout (90 s) covers both, so a hung store still spools.
RECORD_INVOCATION_SECONDS = 90
#: The state machine retries RecordResult on any error up to 3 times (2, 4, 8 s apart).
RECORD_BOUND_SECONDS = 4 * RECORD_INVOCATION_SECONDS + 2 + 4 + 8
#: Cleanup per side: list versions, delete them, list uploads - three control calls of at most 27 s
#: each (2 attempts x 13 s + 1 s backoff). A route with one destination has two sides (162 s);
#: CleanupFunction's Timeout (180 s) covers that. With more destinations a hung side can time the
#: function out: the state machine retries it and the housekeeping sweep removes what is left.
CLEANUP_SIDE_SECONDS = 82
CLEANUP_BOUND_SECONDS = 2 * CLEANUP_SIDE_SECONDS
HOUSEKEEPING_BOUND_SECONDS = 120  # once per run: spool replay and a sweep of every side


def worst_case_seconds(request: ProbeRequest) -> float:
    """The longest a run of ``request`` can take: each probe is bounded by its timeout (upload
    and polling) plus the record and cleanup bounds; probes run ``max_concurrency`` at a time;
    Housekeeping runs once at the end.

    >>> from replmon.probe.request import load_request
    >>> req = load_request({"routes": [{"name": "p", "source": {"bucket": "src"}, "destinations": [{"bucket": "dst"}]}],
    ...                     "sizes": "1MiB,2MiB,3MiB", "trials": 1, "timeout_seconds": 600, "max_concurrency": 2})
    >>> worst_case_seconds(req)
    2396.0
    """
    probes = len(request.routes) * len(request.sizes) * request.trials
    waves = math.ceil(probes / request.max_concurrency)
    return float(waves * (request.timeout_seconds + RECORD_BOUND_SECONDS + CLEANUP_BOUND_SECONDS) + HOUSEKEEPING_BOUND_SECONDS)
