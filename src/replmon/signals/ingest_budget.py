"""The write budget of event ingestion per partition key (docs/design/fleet.md 7), modelled
from the real batch builder (signals/event_ingest.py ``transactions``) and sharding functions
(core/partitions.py), because DynamoDB Local never throttles.

DynamoDB gives one partition key at most 1,000 write units a second ("Best practices for
designing and using partition keys effectively"). A write unit is one write of up to 1 KB, and a
transaction "performs two underlying reads or writes of every item in the transaction" (TransactWriteItems), so
each action of a ``TransactWriteItems`` costs 2 x ceil(size / 1 KB) units. An ``ADD`` costs by the
*larger* of the item before and after, i.e. the hour item's full size, modelled here at its fullest.

:func:`key_rates` replays one second of a backlog at ``events_per_second`` on one route through the
batch builder and returns the write units each partition key receives; :func:`first_throttle`
is the smallest rate at which some key reaches the limit.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from replmon.core.ports import TransactPut
from replmon.core.record import PARTITION_KEY
from replmon.signals.event_ingest import EventItem, transactions
from replmon.signals.rollup import EVENT_ATTRS, HIST_BUCKETS, hist_attr, max_attr
from replmon.signals.s3events import ReplicationEvent
from replmon.signals.windows import HOUR_SECONDS, SUB_SLOT_SECONDS

__all__ = ["BATCH_SIZE", "PARTITION_WCU", "KeyRates", "first_throttle", "full_hour_item", "item_bytes", "key_rates", "write_units"]

#: DynamoDB's ceiling per partition key: "1,000 write units per second".
PARTITION_WCU = 1000
#: The IngestEvents mapping's BatchSize (template.yaml): the events one invocation groups.
BATCH_SIZE = 100
#: A backlog's mix of kinds (the bench's: 60 % missed threshold, 30 % replicated after threshold,
#: 10 % failed); ``worst`` = every event a failure (kept as an item: 2 actions per event).
MIXES: Mapping[str, Mapping[str, float]] = {
    "backlog": {"OperationMissedThreshold": 0.6, "OperationReplicatedAfterThreshold": 0.3, "OperationFailedReplication": 0.1},
    "worst": {"OperationFailedReplication": 1.0},
}


def item_bytes(item: Mapping[str, Any]) -> int:
    """DynamoDB's item size, conservatively: attribute names' UTF-8 length plus each value's (a
    number as its decimal text + 1, a bool 1)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        if isinstance(value, str):
            size += len(value.encode())
        elif isinstance(value, bool):
            size += 1
        elif isinstance(value, int | float):
            size += len(repr(value)) + 1
        elif isinstance(value, list | tuple):
            size += sum(len(str(v)) + 1 for v in value) + 3
        elif isinstance(value, dict):
            size += item_bytes(value) + 3
        elif value is not None:
            size += len(str(value))
    return size


def write_units(size_bytes: int, transactional: bool = True) -> int:
    return (2 if transactional else 1) * max(1, math.ceil(size_bytes / 1024))


def full_hour_item(route: str, classes: tuple[str, ...] = ("1MiB", "64MiB", "1GiB", "1KiB")) -> dict[str, Any]:
    """An hour item with every attribute signals/rollup.py can write (large counters), for its size."""
    item: dict[str, Any] = {PARTITION_KEY: f"{route}#roll", "at": "h#2026-11-23T10", "expires_at": 1_800_000_000}
    big = 99_999
    item.update({a: big for a in ("j", "g", "pj", "pg")})
    for mm in range(0, HOUR_SECONDS // 60, SUB_SLOT_SECONDS // 60):
        t = mm * 60.0
        item.update({f"{p}_{mm:02d}": big for p in ("j", "g", "f", *EVENT_ATTRS.values())})
        item.update({max_attr(c, t): 12345.678 for c in classes})
    item.update({hist_attr(c, b): big for c in classes for b in range(HIST_BUCKETS)})
    return item


@dataclass(frozen=True)
class KeyRates:
    events_per_second: float
    mix: str
    units: Mapping[str, int]  # partition key -> write units in the modelled second
    transactions: int

    @property
    def hottest(self) -> tuple[str, int]:
        return max(self.units.items(), key=lambda kv: kv[1])


def _event(route: str, i: int, kinds: list[str], t0: float) -> EventItem:
    """The ``i``-th event of a modelled backlog: distinct keys, all in one 5-minute slot."""
    return EventItem(route, ReplicationEvent(kinds[i % len(kinds)], "src-bucket", f"backlog/{i:08d}.bin", t0 + i * 1e-4,
                                             version_id=f"v{i}", destination_bucket="dst-bucket"))


@lru_cache(maxsize=1)
def _hour_units(route: str) -> int:
    return write_units(item_bytes(full_hour_item(route)))


def _replay(route: str, mix: str, n: int, batch_size: int, t0: float) -> Iterator[tuple[int, dict[str, int], int]]:
    """After each batch of the first ``n`` events: (events so far, write units per key so far,
    transactions so far). The first k events are the same whatever ``n``."""
    kinds = [k for k, share in MIXES[mix].items() for _ in range(round(share * 100))]
    units: dict[str, int] = {}
    count = 0
    for i in range(0, n, batch_size):
        batch = [_event(route, j, kinds, t0 + 60) for j in range(i, min(i + batch_size, n))]
        for tx in transactions(batch, t0 + 120, retention_days=30):
            count += 1
            for w in tx.writes:
                if isinstance(w, TransactPut):
                    pk, cost = str(w.item[PARTITION_KEY]), write_units(item_bytes(w.item))
                else:
                    pk, cost = w.pk, _hour_units(route)
                units[pk] = units.get(pk, 0) + cost
        yield min(i + batch_size, n), units, count


def key_rates(events_per_second: float, mix: str = "backlog", route: str = "orders-dr", batch_size: int = BATCH_SIZE,
              t0: float = 1_795_428_000.0) -> KeyRates:
    """Write units per partition key in one second of ``events_per_second`` events on one route,
    ingested in batches of ``batch_size`` through the real batch builder."""
    last: tuple[int, dict[str, int], int] = (0, {}, 0)
    for last in _replay(route, mix, int(events_per_second), batch_size, t0):  # noqa: B007 - the replay's final state
        pass
    return KeyRates(events_per_second, mix, dict(last[1]), last[2])


def first_throttle(mix: str = "backlog", batch_size: int = BATCH_SIZE, ceiling: int = 100_000, route: str = "orders-dr",
                   t0: float = 1_795_428_000.0) -> int:
    """The smallest events/s on one route (in whole batches) at which some partition key would need
    >= PARTITION_WCU write units in that second (modelled); ``ceiling`` if none up to it."""
    for n, units, _ in _replay(route, mix, ceiling, batch_size, t0):
        if max(units.values()) >= PARTITION_WCU:
            return n
    return ceiling
