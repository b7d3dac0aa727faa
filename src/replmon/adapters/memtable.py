"""A latency table in memory: what an ad-hoc `replmon probe` (no --table) runs with. The same
conditional-write and key-range semantics as the DynamoDB adapter, kept for one process only:
the run's records reach stdout and are then gone.

>>> from replmon.core.record import ProbeRecord, ProbeStatus
>>> t = MemoryLatencyTable()
>>> r = ProbeRecord(route="r", probe_id="p", run_id="20260101T000000Z-x", planned_at=1.7e9, size_bytes=1, size_class="1B",
...                 trial=1, status=ProbeStatus.COMPLETED)
>>> t.put_once(r), t.put_once(r), len(t.query("r", 0, 2e9))
(True, False, 1)
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from typing import Any

from replmon.core.keys import iso_ms
from replmon.core.partitions import PERIOD, live_partition, roll_partition
from replmon.core.ports import MAX_TRANSACT_ACTIONS, RaiseTo, TransactAdd, TransactDelete, TransactItem, TransactOutcome, TransactPut
from replmon.core.record import PARTITION_KEY, SORT_KEY, ProbeRecord


class MemoryLatencyTable:
    """:class:`~replmon.core.ports.LatencyTable` in a dict (thread-safe: the local runner's
    functions run concurrently)."""

    def __init__(self) -> None:
        self._items: dict[tuple[str, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ records
    def put_once(self, record: ProbeRecord) -> bool:
        return self.put_item_once(record.to_item())

    def query(self, route: str, start: float, end: float, *, newest_first: bool = False, limit: int | None = None) -> list[ProbeRecord]:
        items = self._range(route, iso_ms(start), iso_ms(end) + "~")
        records = [ProbeRecord.from_item(i) for i in (reversed(items) if newest_first else items)]
        return records[:limit] if limit is not None else records

    def get_record(self, route: str, sort_key: str) -> ProbeRecord | None:
        item = self.get_item(route, sort_key)
        return None if item is None else ProbeRecord.from_item(item)

    def narrow_interval(self, record: ProbeRecord, lo: float, hi: float | None, replica_at: float,
                        counters: Sequence[TransactAdd] = (), mark_good: bool = False) -> bool:
        with self._lock:
            item = self._items.get((record.route, record.sort_key))
            if item is None or item.get("latency_lo") != record.latency_lo or item.get("latency_hi") != record.latency_hi:
                return False
            if counters:
                apply_transaction(self._items, counters)
            if mark_good:
                item["counted_good"] = True
            item.update({"latency_lo": lo, "replica_at": replica_at, "interval_from": "poll+event"})
            if hi is not None:
                item.update({"latency_hi": hi, "latency_mid": (lo + hi) / 2})
                if record.bound_seconds is not None:
                    item["bound_met"] = hi - lo <= record.bound_seconds + 1e-9
            return True

    # ------------------------------------------------------------------ signal items
    def put_item_once(self, item: dict[str, Any]) -> bool:
        key = (item[PARTITION_KEY], item[SORT_KEY])
        with self._lock:
            if key in self._items:
                return False
            self._items[key] = copy.deepcopy({k: v for k, v in item.items() if v is not None})
            return True

    def put_item(self, item: dict[str, Any]) -> None:
        with self._lock:
            self._items[(item[PARTITION_KEY], item[SORT_KEY])] = copy.deepcopy({k: v for k, v in item.items() if v is not None})

    def delete_item(self, pk: str, sk: str) -> None:
        with self._lock:
            self._items.pop((pk, sk), None)

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None:
        with self._lock:
            item = self._items.get((pk, sk))
            return None if item is None else copy.deepcopy(item)

    def partition_items(self, pk: str) -> list[dict[str, Any]]:
        return self._range(pk, "0", "~")

    def items(self, pk: str, start: float, end: float) -> list[dict[str, Any]]:
        return self._range(pk, iso_ms(start), iso_ms(end) + "~")

    def add_arrival(self, pk: str, sk: str, attribute: str, created_at: float, expires_at: int) -> bool:
        with self._lock:
            item = self._items.setdefault((pk, sk), {PARTITION_KEY: pk, SORT_KEY: sk})
            if attribute in item and item[attribute] <= created_at:
                return False
            item[attribute] = created_at
            item.setdefault("expires_at", expires_at)
            return True

    # ------------------------------------------------------------------ rollups (core/ports.py RollupStore)
    def transact(self, writes: Sequence[TransactItem], token: str | None = None) -> TransactOutcome:
        with self._lock:
            return apply_transaction(self._items, writes)

    def raise_to(self, op: RaiseTo) -> bool:
        with self._lock:
            item = self._items.setdefault((op.pk, op.sk), {PARTITION_KEY: op.pk, SORT_KEY: op.sk})
            if op.attribute in item and item[op.attribute] >= op.value:
                return False
            item[op.attribute] = op.value
            return True

    def roll_items(self, route: str, first_sk: str, last_sk: str, limit: int | None = None) -> list[dict[str, Any]]:
        return self._range(roll_partition(route), first_sk, last_sk)[:limit]

    def put_period(self, route: str, item: dict[str, Any], through_hour: str | None, gen: int | None) -> bool:
        key = (roll_partition(route), PERIOD)
        with self._lock:
            old = self._items.get(key) or {}
            if old.get("through_hour") != through_hour or old.get("gen", 0) != (gen or 0):
                return False
            self._items[key] = {**copy.deepcopy(item), PARTITION_KEY: key[0], SORT_KEY: key[1]}
            return True

    def live_items(self, route: str) -> list[dict[str, Any]]:
        return self._range(live_partition(route), " ", "~")

    def _range(self, pk: str, start: str, end: str) -> list[dict[str, Any]]:
        with self._lock:
            return [copy.deepcopy(v) for (p, s), v in sorted(self._items.items()) if p == pk and start <= s <= end]


def apply_transaction(items: dict[tuple[str, str], dict[str, Any]], writes: Sequence[TransactItem]) -> TransactOutcome:
    """``TransactWriteItems`` on an in-memory table, all or nothing: a TransactPut whose key exists
    cancels it (the indices come back, nothing applied), as DynamoDB's ConditionalCheckFailed does."""
    if not 1 <= len(writes) <= MAX_TRANSACT_ACTIONS:
        raise ValueError(f"a transaction holds 1..{MAX_TRANSACT_ACTIONS} actions, not {len(writes)}")
    keys = [(w.item[PARTITION_KEY], w.item[SORT_KEY]) if isinstance(w, TransactPut) else (w.pk, w.sk) for w in writes]
    if len(set(keys)) != len(keys):
        raise ValueError("a transaction may not touch one item twice (DynamoDB: ValidationException)")
    duplicates = tuple(i for i, w in enumerate(writes) if isinstance(w, TransactPut) and keys[i] in items)
    if duplicates:
        return TransactOutcome(False, duplicates)
    for key, w in zip(keys, writes, strict=True):
        if isinstance(w, TransactPut):
            items[key] = copy.deepcopy({k: v for k, v in w.item.items() if v is not None})
        elif isinstance(w, TransactDelete):
            items.pop(key, None)
        else:
            item = items.setdefault(key, {PARTITION_KEY: w.pk, SORT_KEY: w.sk})
            for name, n in w.add.items():
                item[name] = item.get(name, 0) + n
            for name, value in w.set_once.items():
                item.setdefault(name, value)
    return TransactOutcome(True)
