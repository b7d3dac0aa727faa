"""An in-memory table with the fleet ports' write semantics (core/ports.py), for unit tests that
need no DynamoDB: conditional puts, ADD counters, if_not_exists, all-or-nothing transactions.

The DynamoDB adapters (registry_table, leases, dynamodb) must pass the same tests against DynamoDB Local; this is
the reference the domain is tested against, not a replacement for those tests.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from replmon.adapters.memtable import apply_transaction
from replmon.core.partitions import PERIOD, live_partition, roll_partition
from replmon.core.ports import Item, RaiseTo, TransactItem, TransactOutcome
from replmon.core.record import PARTITION_KEY, SORT_KEY


@dataclass
class MemTable:
    items: dict[tuple[str, str], Item] = field(default_factory=dict)
    transactions: int = 0

    def get(self, pk: str, sk: str) -> Item | None:
        return self.items.get((pk, sk))

    def transact(self, writes: Sequence[TransactItem], token: str | None = None) -> TransactOutcome:
        out = apply_transaction(self.items, writes)  # the adapter's own in-memory semantics
        self.transactions += out.applied
        return out

    def raise_to(self, op: RaiseTo) -> bool:
        item = self.items.setdefault((op.pk, op.sk), {PARTITION_KEY: op.pk, SORT_KEY: op.sk})
        if op.attribute in item and item[op.attribute] >= op.value:
            return False
        item[op.attribute] = op.value
        return True

    def roll_items(self, route: str, first_sk: str, last_sk: str, limit: int | None = None) -> list[Item]:
        pk = roll_partition(route)
        return [copy.deepcopy(v) for (p, s), v in sorted(self.items.items()) if p == pk and first_sk <= s <= last_sk][:limit]

    def put_period(self, route: str, item: Item, through_hour: str | None, gen: int | None) -> bool:
        key = (roll_partition(route), PERIOD)
        old = self.items.get(key) or {}
        if old.get("through_hour") != through_hour or old.get("gen", 0) != (gen or 0):
            return False
        self.items[key] = {**copy.deepcopy(item), PARTITION_KEY: key[0], SORT_KEY: key[1]}
        return True

    def live_items(self, route: str) -> list[Item]:
        pk = live_partition(route)
        return [copy.deepcopy(v) for (p, _), v in sorted(self.items.items()) if p == pk]

    def partition(self, pk: str) -> list[dict[str, Any]]:
        return [v for (p, _), v in sorted(self.items.items()) if p == pk]
