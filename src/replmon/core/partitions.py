"""Every partition and sort-key format of the one table (template.yaml's LatencyTable), defined once.

A route name never contains '#' and never starts with it (core/names.py ``ROUTE_NAME_RE``), so
``<route>`` (a route's probe records), ``<route>#<kind>`` (its signal partitions) and ``#<name>``
(fleet-wide partitions) never collide. Key attributes: ``route`` (partition), ``at`` (sort),
``expires_at`` (TTL) - core/record.py.

Today's partitions (single-route product):

| partition | sort key | item | writer |
| --- | --- | --- | --- |
| ``<route>`` | record key | a probe's record (core/record.py) | RecordResult |
| ``<route>#events`` | ``<event time>#<event id>`` | one S3 replication event (layout before counters: read, no longer written) | IngestEvents (before event counters) |
| ``<route>#arrivals`` | record key | replica creation times, one attribute per destination | IngestEvents |
| ``<route>#rtc`` | ``<collection time>#<destination>#<rule>`` | one collection of S3's replication metrics | CollectSignals |
| ``<route>#inflight`` | record key | a probe uploaded and not yet recorded | UploadProbe (to move to ``#live``) |

The fleet's (docs/design/fleet.md):

| partition | sort key | item | writer |
| --- | --- | --- | --- |
| ``#routes/<group>`` | route name | the route's registry item (core/registry.py ``RouteSpec``) | Inventory, ``replmon fleet put`` |
| ``#inventory/accounts`` | account id | what the last inventory saw of an account (e.g. ASSUME_ROLE_DENIED) | Inventory |
| ``#inventory/checkpoint`` | ``checkpoint`` | where an unfinished inventory resumes | Inventory |
| ``<route>#live`` | ``lease`` | the route's run lease (+ ``ls_<class>``: each class's last start) | BeginRouteRun, EndRouteRun |
| ``<route>#live`` | ``hb`` | heartbeat state: pending heartbeats, stall state, expectation | Heartbeat (+ collector's ``expect``) |
| ``<route>#live`` | ``inflight#<record key>`` | a probe in flight (planned: today in ``<route>#inflight``) | UploadProbe / the record's transaction |
| ``<route>#roll`` | ``h#<YYYY-MM-DDTHH>`` | the hour's rollup counters (signals/rollup.py) | RecordResult, Heartbeat, IngestEvents |
| ``<route>#roll`` | ``period`` | the period cache (sorts after every ``h#...``) | CollectSignals |
| ``<route>#hb`` | record key | a heartbeat's record (kept 7 days) | Heartbeat |
| ``<route>#hbclaim`` | ``hb#<run id>`` | a heartbeat period claimed (TTL 1 h: a duplicate invocation puts none) | Heartbeat |
| ``<route>#runs`` | ``<tick>#skipped`` | a route-run skipped because the lease was held | PlanFleet, BeginRouteRun |
| ``<route>#seen/<n>`` | dedupe key | an event already counted (TTL 2 days), n = crc32(object key) % 16 | IngestEvents |
| ``<route>#events/<n>`` | ``<event time>#<event id>`` | a kept failure / missed-threshold event, n = crc32(event id) % 8 | IngestEvents |
| ``#unmapped/<YYYY-MM-DD>`` | ``<event time>#<event id>`` | an S3 replication event no registry route owns, with the reason | IngestEvents |

The whole ``<route>#live`` partition is one Query for the collector (lease + hb; the in-flight markers once moved);
``<route>#roll`` between ``h#<H-6h>`` and ``period`` is the other (7 hour items + the cache).

>>> signal_partition("primary", EVENTS)
'primary#events'
>>> registry_partition("g03"), live_partition("primary"), roll_partition("primary")
('#routes/g03', 'primary#live', 'primary#roll')
>>> hour_sort_key(1795428000.0)
'h#2026-11-23T10'
>>> hour_sort_key(1795428000.0) < PERIOD
True
>>> seen_partition("primary", "replmon-probes/a"), events_partition("primary", "evt-1")
('primary#seen/3', 'primary#events/1')
>>> unmapped_partition(1795428000.0)
'#unmapped/2026-11-23'
>>> inflight_sort_key("2026-11-22T10:12:21.000Z#p1"), skip_sort_key("20261123T101500Z")
('inflight#2026-11-22T10:12:21.000Z#p1', '20261123T101500Z#skipped')
"""

from __future__ import annotations

import time
import zlib

# ------------------------------------------------------------------------------ a route's signal kinds
EVENTS = "events"
ARRIVALS = "arrivals"
RTC = "rtc"
IN_FLIGHT = "inflight"
#: Attribute of an arrivals item holding one destination's replica creation time.
ARRIVAL_ATTR = "replica@"

LIVE = "live"  # lease, heartbeat state (and, planned, the in-flight markers): what changes every minute
ROLL = "roll"  # hourly rollups and the period cache
HEARTBEATS = "hb"  # heartbeat records (same shape as probe records)
HEARTBEAT_CLAIMS = "hbclaim"  # periods claimed (kept out of #live: the collector reads that whole partition)
RUNS = "runs"  # route-run bookkeeping (skips)
SEEN = "seen"  # event dedupe markers (sharded)

# ------------------------------------------------------------------------------ sort keys
LEASE = "lease"
HEARTBEAT_STATE = "hb"
PERIOD = "period"
CHECKPOINT = "checkpoint"
HOUR_PREFIX = "h#"
INFLIGHT_PREFIX = "inflight#"

# ------------------------------------------------------------------------------ fleet-wide partitions
REGISTRY_PREFIX = "#routes/"
INVENTORY_ACCOUNTS = "#inventory/accounts"
INVENTORY_CHECKPOINT = "#inventory/checkpoint"
UNMAPPED_PREFIX = "#unmapped/"

#: Shards of the hot per-route partitions: writes per key stay under DynamoDB's 1,000 WCU per
#: partition key at the benchmark's peak event rate (docs/design/fleet.md 7).
SEEN_SHARDS = 16
EVENT_SHARDS = 8


def shard(value: str, shards: int) -> int:
    """A stable shard in ``[0, shards)`` (crc32: the same in every process and Python version)."""
    return zlib.crc32(value.encode()) % shards


def signal_partition(route: str, kind: str) -> str:
    return f"{route}#{kind}"


def registry_partition(group: str) -> str:
    """The registry partition of a RouteGroup (``g00``..``g07``)."""
    return f"{REGISTRY_PREFIX}{group}"


def live_partition(route: str) -> str:
    return signal_partition(route, LIVE)


def roll_partition(route: str) -> str:
    return signal_partition(route, ROLL)


def heartbeat_partition(route: str) -> str:
    return signal_partition(route, HEARTBEATS)


def runs_partition(route: str) -> str:
    return signal_partition(route, RUNS)


def seen_partition(route: str, object_key: str) -> str:
    return f"{route}#{SEEN}/{shard(object_key, SEEN_SHARDS)}"


def events_partition(route: str, event_id: str) -> str:
    return events_shard_partition(route, shard(event_id, EVENT_SHARDS))


def events_shard_partition(route: str, n: int) -> str:
    """Shard ``n`` (< EVENT_SHARDS) of the route's kept events: readers query every shard."""
    return f"{route}#{EVENTS}/{n}"


def hour_sort_key(hour_start: float) -> str:
    """The hour item of the hour that starts at ``hour_start`` (UTC): ``h#2026-11-23T10``."""
    return HOUR_PREFIX + time.strftime("%Y-%m-%dT%H", time.gmtime(hour_start))


def inflight_sort_key(record_key: str) -> str:
    return INFLIGHT_PREFIX + record_key


def release_sort_key(at: float) -> str:
    """A lease ended by hand (``replmon fleet release``) at epoch ``at``: kept beside the skips."""
    return f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime(at))}.{int(at * 1000) % 1000:03d}Z#released"


def skip_sort_key(tick: str) -> str:
    """A skipped route-run of the tick ``tick`` (core/keys.py ``tick_id``)."""
    return f"{tick}#skipped"


def unmapped_partition(event_time: float) -> str:
    """``#unmapped/<UTC day>``: the replication events of a day that no registry route owns."""
    return UNMAPPED_PREFIX + time.strftime("%Y-%m-%d", time.gmtime(event_time))
