"""Where passive signals live: partitions of the latency table beside each route's records.

One table (template.yaml's LatencyTable); a route name never contains '#' (core/names.py), so a
signal partition never collides with a route's records:

| partition | sort key | item |
| --- | --- | --- |
| ``<route>`` | record key | a probe's record (core/record.py) |
| ``<route>#events`` | ``<event time>#<event id>`` | one S3 replication event (ingest.py) |
| ``<route>#arrivals`` | record key | replica creation times of a probe, one attribute per destination (arrivals.py) |
| ``<route>#rtc`` | ``<collection time>#<destination>#<rule>`` | one collection of the route's RTC metrics (rtc.py) |
| ``<route>#inflight`` | record key | a probe uploaded and not yet recorded (inflight.py) |

>>> signal_partition("primary", EVENTS)
'primary#events'
"""

from __future__ import annotations

EVENTS = "events"
ARRIVALS = "arrivals"
RTC = "rtc"
IN_FLIGHT = "inflight"
#: Attribute of an arrivals item holding one destination's replica creation time.
ARRIVAL_ATTR = "replica@"


def signal_partition(route: str, kind: str) -> str:
    return f"{route}#{kind}"
