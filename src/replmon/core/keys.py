"""Names fixed by the plan: run ids, probe object keys, record keys; each derivable from the others.

A replica's ObjectCreated event carries only the object key, so the key names the run, the route
and the probe, and the record's key follows from them:

>>> key = probe_object_key("replmon-probes/", "20261122T101221Z-f2a1c6", "primary", "20261122T101221Z-f2a1c6-primary-1MiB-t1")
>>> key
'replmon-probes/20261122T101221Z-f2a1c6/primary/20261122T101221Z-f2a1c6-primary-1MiB-t1'
>>> parse_probe_object_key(key, "replmon-probes/")
ProbeKey(run_id='20261122T101221Z-f2a1c6', route='primary', probe_id='20261122T101221Z-f2a1c6-primary-1MiB-t1')
>>> record_sort_key("20261122T101221Z-f2a1c6", "20261122T101221Z-f2a1c6-primary-1MiB-t1")
'2026-11-22T10:12:21.000Z#20261122T101221Z-f2a1c6-primary-1MiB-t1'

A heartbeat (probe/heartbeat.py) is a 1 KiB probe with the same key scheme, its run id the heartbeat's own
second + ``-hb`` (shared by every route's heartbeat of that second; the key names the route), so
replica events narrow heartbeats exactly as they narrow probes:

>>> run = heartbeat_run_id(1795428061.7, period_seconds=60)
>>> run, heartbeat_probe_id(run, "dr-orders"), is_heartbeat(run)
('20261123T100100Z-hb', '20261123T100100Z-hb-dr-orders-1KiB-t1', True)
>>> parse_probe_object_key(probe_object_key("replmon-probes/", run, "dr-orders", heartbeat_probe_id(run, "dr-orders")), "replmon-probes/")
ProbeKey(run_id='20261123T100100Z-hb', route='dr-orders', probe_id='20261123T100100Z-hb-dr-orders-1KiB-t1')

The fleet's schedule fires every tick; a tick is named by its start, and its plan file by the tick
and the execution (the state machine's ItemReader reads it from the plan bucket):

>>> tick_id(1795428900.0), plan_object_key("20261123T101500Z", "a1b2c3")
('20261123T101500Z', 'plans/20261123T101500Z-a1b2c3.json')
"""

from __future__ import annotations

import calendar
import re
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime

RUN_STAMP = "%Y%m%dT%H%M%SZ"
#: A run id starts with the UTC second it was planned: records sort by it, the sweep reads ages from it.
RUN_ID_PATTERN = r"^\d{8}T\d{6}Z-[A-Za-z0-9._-]{1,47}$"


def iso_ms(epoch_seconds: float) -> str:
    """Sortable UTC timestamp with milliseconds: '2026-11-21T23:50:01.123Z'."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def new_run_id(now: float | None = None) -> str:
    """'<UTC second>-<6 hex>'."""
    return f"{time.strftime(RUN_STAMP, time.gmtime(now if now is not None else time.time()))}-{secrets.token_hex(3)}"


def run_time(run_id: str) -> float | None:
    """Epoch seconds of a run id's stamp, or None if it has none."""
    try:
        return float(calendar.timegm(time.strptime(run_id.split("-", 1)[0], RUN_STAMP)))
    except ValueError:
        return None


@dataclass(frozen=True)
class ProbeKey:
    run_id: str
    route: str
    probe_id: str


def probe_object_key(prefix: str, run_id: str, route: str, probe_id: str) -> str:
    return f"{prefix}{run_id}/{route}/{probe_id}"


def parse_probe_object_key(key: str, prefix: str) -> ProbeKey | None:
    """The run, route and probe an object key names, or None if it is not a probe's key."""
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix):].split("/")
    if len(parts) != 3 or not re.match(RUN_ID_PATTERN, parts[0]) or not parts[2].startswith(f"{parts[0]}-{parts[1]}-"):
        return None
    return ProbeKey(*parts)


def record_sort_key(run_id: str, probe_id: str) -> str:
    """The latency store's sort key: the run's stamped time, then the probe id."""
    t = run_time(run_id)
    if t is None:
        raise ValueError(f"run id {run_id!r} does not start with a UTC stamp (YYYYMMDDTHHMMSSZ-...)")
    return f"{iso_ms(t)}#{probe_id}"


# ------------------------------------------------------------------------------ heartbeats
HEARTBEAT_RUN_SUFFIX = "hb"
HEARTBEAT_SIZE_CLASS = "1KiB"
HEARTBEAT_SIZE_BYTES = 1024


def heartbeat_run_id(now: float, period_seconds: int = 60) -> str:
    """The run id of the heartbeat put in the period that holds ``now``: '<UTC second>-hb'."""
    start = int(now // period_seconds) * period_seconds
    return f"{time.strftime(RUN_STAMP, time.gmtime(start))}-{HEARTBEAT_RUN_SUFFIX}"


def heartbeat_probe_id(run_id: str, route: str) -> str:
    return f"{run_id}-{route}-{HEARTBEAT_SIZE_CLASS}-t1"


def is_heartbeat(run_id: str) -> bool:
    return run_id.endswith(f"-{HEARTBEAT_RUN_SUFFIX}") and run_time(run_id) is not None


# ------------------------------------------------------------------------------ the fleet's ticks and plans
PLAN_PREFIX = "plans/"  # the plan bucket's ItemReader inputs (lifecycle: 7 days)
RESULTS_PREFIX = "results/"  # the Distributed Maps' ResultWriter outputs: results/fleet, results/route


def tick_id(tick_start: float) -> str:
    """A tick's name: the UTC second it starts (route-runs' ``tick``, ``<route>#runs`` sort keys)."""
    return time.strftime(RUN_STAMP, time.gmtime(tick_start))


def plan_object_key(tick: str, execution: str) -> str:
    return f"{PLAN_PREFIX}{tick}-{execution}.json"
