"""Probes in flight: UploadProbe marks each probe once its PUT has ended; the transaction that
stores its record (RecordResult's, or the spool's replay: signals/rollup.py record_ops) deletes the
mark, so a stored record never leaves one. The RPO counts the oldest unfinished probe's age
(slo.py). A marker outlives a lost record only until its TTL (the probe's timeout plus an hour)."""

from __future__ import annotations

from replmon.core.partitions import IN_FLIGHT, signal_partition
from replmon.core.ports import SignalStore
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE


def mark_in_flight(store: SignalStore, route: str, record_key: str, put_end: float, expires_at: float) -> None:
    store.put_item({PARTITION_KEY: signal_partition(route, IN_FLIGHT), SORT_KEY: record_key, "put_end": put_end,
                    TTL_ATTRIBUTE: int(expires_at)})


def clear_in_flight(store: SignalStore, route: str, record_key: str) -> None:
    store.delete_item(signal_partition(route, IN_FLIGHT), record_key)


def in_flight_put_ends(store: SignalStore, route: str, now: float) -> list[float]:
    """PUT ends of the route's probes in flight (markers whose TTL has not passed: DynamoDB
    deletes expired items late, so they are filtered here)."""
    return [float(i["put_end"]) for i in store.partition_items(signal_partition(route, IN_FLIGHT))
            if float(i.get(TTL_ATTRIBUTE, now + 1)) > now]


def in_flight_probes(store: SignalStore, route: str, now: float) -> list[tuple[float, str]]:
    """(PUT end, size class label) of the route's probes in flight: the marker's key is the record's
    (``<time>#<run>-<route>-<class>-t<n>``, core/keys.py)."""
    out = []
    for i in store.partition_items(signal_partition(route, IN_FLIGHT)):
        if float(i.get(TTL_ATTRIBUTE, now + 1)) > now:
            probe_id = str(i[SORT_KEY]).split("#", 1)[-1]
            out.append((float(i["put_end"]), probe_id.rsplit("-", 2)[-2] if probe_id.count("-") >= 2 else "?"))
    return out
