"""DynamoDB latency store (AWS or DynamoDB Local): conditional writes, key-range queries only."""

from __future__ import annotations

import itertools
import random
import time
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from replmon.core.errors import StoreUnavailable
from replmon.core.keys import iso_ms
from replmon.core.partitions import PERIOD, live_partition, roll_partition
from replmon.core.ports import MAX_TRANSACT_ACTIONS, RaiseTo, TransactAdd, TransactDelete, TransactItem, TransactOutcome, TransactPut
from replmon.core.record import PARTITION_KEY, SORT_KEY, ProbeRecord

#: The attribute that tells which put_once call wrote an item (see put_once).
WRITE_ID = "write_id"
_ser = TypeSerializer()
_de = TypeDeserializer()


def _to_ddb(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _to_ddb(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_to_ddb(v) for v in value]
    return value


def _from_ddb(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_ddb(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_ddb(v) for v in value]
    return value


class DynamoLatencyStore:
    """The latency table: probe records, passive-signal items and mount results
    (:class:`~replmon.core.ports.LatencyTable`). ``client`` comes from adapters/clients.py
    (``clients.dynamodb``): AWS, or DynamoDB Local with an ``endpoint_url``."""

    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def put_once(self, record: ProbeRecord) -> bool:
        """True if this call wrote the record, False if it was there; :class:`StoreUnavailable`
        for anything else (outage, throttling, timeouts), so the caller can spool it.

        Each call tags its item with a fresh ``write_id``. If an answer is lost and botocore's
        retry of the same call meets the conditional check, the item DynamoDB returns carries
        this call's own token: this call wrote it (and its caller still publishes the metrics).
        """
        token = uuid.uuid4().hex
        item = {k: _ser.serialize(_to_ddb(v)) for k, v in {**record.to_item(), WRITE_ID: token}.items()}
        try:
            self.client.put_item(
                TableName=self.table,
                Item=item,
                # The key comes from the plan: a retried or replayed write hits the same key.
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": PARTITION_KEY},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                existing: dict[str, Any] = dict(exc.response.get("Item") or {})  # type: ignore[call-overload]
                return bool(existing.get(WRITE_ID, {}).get("S") == token)
            raise StoreUnavailable(f"{self.table}: {exc.response['Error']['Code']}: {exc}") from exc
        except BotoCoreError as exc:  # connection refused, timeouts
            raise StoreUnavailable(f"{self.table}: {type(exc).__name__}: {exc}") from exc
        return True

    def query(
        self, route: str, start: float, end: float, *, newest_first: bool = False, limit: int | None = None
    ) -> list[ProbeRecord]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :r AND #sk BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":r": {"S": route}, ":a": {"S": iso_ms(start)}, ":b": {"S": iso_ms(end) + "~"}},
            "ScanIndexForward": not newest_first,
        }
        if limit is not None:  # each page reads at most this many (a page is otherwise up to 1 MB of items read)
            kwargs["Limit"] = limit
        out: list[ProbeRecord] = []
        for page in self.client.get_paginator("query").paginate(**kwargs):
            for raw in page["Items"]:
                out.append(ProbeRecord.from_item(_from_ddb({k: _de.deserialize(v) for k, v in raw.items()})))
                if limit is not None and len(out) >= limit:
                    return out
        return out

    # ------------------------------------------------------------------ passive signals (signals.py)
    def _items(self, pk: str, start: str, end: str, *, consistent: bool = False, limit: int | None = None) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :p AND #sk BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":p": {"S": pk}, ":a": {"S": start}, ":b": {"S": end}},
            "ConsistentRead": consistent,
        }
        if limit is not None:  # Limit bounds the items DynamoDB reads (and bills), not only those returned
            kwargs["Limit"] = limit
            page = self._call(lambda: self.client.query(**kwargs))
            return [_from_ddb({k: _de.deserialize(v) for k, v in raw.items()}) for raw in page["Items"]]
        out = []
        for page in self._call(lambda: list(self.client.get_paginator("query").paginate(**kwargs))):
            out += [_from_ddb({k: _de.deserialize(v) for k, v in raw.items()}) for raw in page["Items"]]
        return out

    def _call(self, fn: Any) -> Any:
        try:
            return fn()
        except ClientError as exc:
            raise StoreUnavailable(f"{self.table}: {exc.response['Error']['Code']}: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"{self.table}: {type(exc).__name__}: {exc}") from exc

    def _key(self, pk: str, sk: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": pk}, SORT_KEY: {"S": sk}}

    def _conditional(self, fn: Any) -> bool:
        """Run a conditional write: True if it wrote, False if its condition did not hold,
        StoreUnavailable for anything else."""
        try:
            self._call(fn)
        except StoreUnavailable as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and cause.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        return True

    @staticmethod
    def _item(item: dict[str, Any]) -> dict[str, Any]:
        return {k: _ser.serialize(_to_ddb(v)) for k, v in item.items() if v is not None}

    def put_item_once(self, item: dict[str, Any]) -> bool:
        """Conditional put of a signal item; False if an identical key was there (a redelivery)."""
        return self._conditional(lambda: self.client.put_item(
            TableName=self.table, Item=self._item(item), ConditionExpression="attribute_not_exists(#pk)",
            ExpressionAttributeNames={"#pk": PARTITION_KEY}))

    def put_item(self, item: dict[str, Any]) -> None:
        self._call(lambda: self.client.put_item(TableName=self.table, Item=self._item(item)))

    def delete_item(self, pk: str, sk: str) -> None:
        self._call(lambda: self.client.delete_item(TableName=self.table, Key=self._key(pk, sk)))

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None:
        got = self._call(lambda: self.client.get_item(TableName=self.table, Key=self._key(pk, sk), ConsistentRead=True))
        raw = got.get("Item")
        return None if raw is None else _from_ddb({k: _de.deserialize(v) for k, v in raw.items()})

    def partition_items(self, pk: str) -> list[dict[str, Any]]:
        """Every item of a signal partition (sort keys are times: they start with a digit)."""
        return self._items(pk, "0", "~")

    def items(self, pk: str, start: float, end: float) -> list[dict[str, Any]]:
        """A signal partition's items whose sort key (a time) is in [start, end]."""
        return self._items(pk, iso_ms(start), iso_ms(end) + "~")

    def add_arrival(self, pk: str, sk: str, attribute: str, created_at: float, expires_at: int) -> bool:
        """Keep the earliest creation time per replica; False if an earlier one was there."""
        return self._conditional(lambda: self.client.update_item(
            TableName=self.table, Key=self._key(pk, sk),
            UpdateExpression="SET #a = :t, expires_at = if_not_exists(expires_at, :e)",
            ConditionExpression="attribute_not_exists(#a) OR #a > :t",
            ExpressionAttributeNames={"#a": attribute},
            ExpressionAttributeValues={":t": {"N": repr(created_at)}, ":e": {"N": str(expires_at)}},
        ))

    def get_record(self, route: str, sort_key: str) -> ProbeRecord | None:
        item = self.get_item(route, sort_key)
        return None if item is None else ProbeRecord.from_item(item)

    def narrow_interval(self, record: ProbeRecord, lo: float, hi: float | None, replica_at: float,
                        counters: Sequence[TransactAdd] = (), mark_good: bool = False) -> bool:
        """Replace the record's interval with a narrower one, only if it is still the interval
        ``record`` was read with (optimistic: a concurrent narrowing wins, the caller re-reads);
        with ``counters`` (the hour item's moves, signals/rollup.py ``narrow_ops``) in one transaction."""
        names = {"#lo": "latency_lo", "#hi": "latency_hi"}
        values: dict[str, Any] = {":lo": _ser.serialize(_to_ddb(lo)), ":old_lo": _ser.serialize(_to_ddb(record.latency_lo)),
                                  ":r": _ser.serialize(_to_ddb(replica_at)), ":src": {"S": "poll+event"}}
        sets = ["#lo = :lo", "replica_at = :r", "interval_from = :src"]
        cond = "#lo = :old_lo"
        if hi is not None:
            mid = (lo + hi) / 2
            values.update({":hi": _ser.serialize(_to_ddb(hi)), ":mid": _ser.serialize(_to_ddb(mid))})
            sets += ["#hi = :hi", "latency_mid = :mid"]
            if record.bound_seconds is not None:
                values[":bm"] = {"BOOL": hi - lo <= record.bound_seconds + 1e-9}
                sets.append("bound_met = :bm")
        if record.latency_hi is None:
            cond += " AND attribute_not_exists(#hi)"
        else:
            values[":old_hi"] = _ser.serialize(_to_ddb(record.latency_hi))
            cond += " AND #hi = :old_hi"
        if mark_good:
            values[":good"] = {"BOOL": True}
            sets.append("counted_good = :good")
        update = {"TableName": self.table, "Key": self._key(record.route, record.sort_key), "UpdateExpression": "SET " + ", ".join(sets),
                  "ConditionExpression": cond, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}
        if not counters:
            return self._conditional(lambda: self.client.update_item(**update))
        # in one transaction with the hour item's moves (busy: records and events write it); only the
        # record's update has a condition, so a condition that failed is the interval's
        return not self._transact_write([{"Update": update}, *(self._transact_item(c) for c in counters)])

    # ------------------------------------------------------------------ rollups (core/ports.py RollupStore)
    #: TransactionConflict (another transaction on one of the items: in a backlog, up to
    #: EventsMaxConcurrency invocations ADD to one route's hour item at once) is retried with capped,
    #: fully jittered backoff for up to CONFLICT_BUDGET_SECONDS: the transaction is all-or-nothing,
    #: so a retry never counts twice. Past the budget the messages fail (SQS redelivers them; the
    #: markers make the redelivery count once). AWS: "Avoid using transactions for ingesting data in
    #: bulk" and concurrent transactions on one item conflict ("Amazon DynamoDB Transactions: How it
    #: works", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html):
    #: docs/SEMANTICS.md says what this bounds.
    CONFLICT_BUDGET_SECONDS = 8.0
    CONFLICT_BACKOFF_CAP_SECONDS = 1.0

    def _transact_item(self, w: TransactItem) -> dict[str, Any]:
        if isinstance(w, TransactPut):
            return {"Put": {"TableName": self.table, "Item": self._item(dict(w.item)),
                            "ConditionExpression": "attribute_not_exists(#pk)", "ExpressionAttributeNames": {"#pk": PARTITION_KEY}}}
        if isinstance(w, TransactDelete):
            return {"Delete": {"TableName": self.table, "Key": self._key(w.pk, w.sk)}}
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        adds, sets = [], []
        for i, (attr, n) in enumerate(sorted(w.add.items())):
            names[f"#a{i}"] = attr
            values[f":a{i}"] = {"N": str(n)}
            adds.append(f"#a{i} :a{i}")
        for i, (attr, v) in enumerate(sorted(w.set_once.items())):
            names[f"#s{i}"] = attr
            values[f":s{i}"] = _ser.serialize(_to_ddb(v))
            sets.append(f"#s{i} = if_not_exists(#s{i}, :s{i})")
        expr = " ".join(part for part in (("SET " + ", ".join(sets)) if sets else "", ("ADD " + ", ".join(adds)) if adds else "") if part)
        update: dict[str, Any] = {"TableName": self.table, "Key": self._key(w.pk, w.sk), "UpdateExpression": expr,
                                  "ExpressionAttributeNames": names}
        if values:
            update["ExpressionAttributeValues"] = values
        return {"Update": update}

    def transact(self, writes: Sequence[TransactItem], token: str | None = None) -> TransactOutcome:
        """One ``TransactWriteItems``. Cancelled with ``ConditionalCheckFailed`` reasons only
        -> the indices of those TransactPuts (nothing applied); anything else -> StoreUnavailable."""
        if not 1 <= len(writes) <= MAX_TRANSACT_ACTIONS:
            raise ValueError(f"a transaction holds 1..{MAX_TRANSACT_ACTIONS} actions, not {len(writes)}")
        codes = self._transact_write([self._transact_item(w) for w in writes], token)
        return TransactOutcome(not codes, tuple(i for i, c in enumerate(codes) if c == "ConditionalCheckFailed"))

    def _transact_write(self, items: list[dict[str, Any]], token: str | None = None) -> list[str]:
        """One ``TransactWriteItems``, a TransactionConflict retried with capped, fully jittered backoff
        for up to CONFLICT_BUDGET_SECONDS: [] when applied; the cancellation reasons' codes (in the
        order of ``items``) when only conditions failed (nothing applied); anything else ->
        StoreUnavailable."""
        kwargs: dict[str, Any] = {"TransactItems": items}
        if token:
            kwargs["ClientRequestToken"] = token
        deadline = time.monotonic() + self.CONFLICT_BUDGET_SECONDS
        for attempt in itertools.count():
            try:
                self.client.transact_write_items(**kwargs)
                return []
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "TransactionCanceledException":
                    raise StoreUnavailable(f"{self.table}: {exc.response['Error']['Code']}: {exc}") from exc
                codes = [r.get("Code", "None") for r in exc.response.get("CancellationReasons", [])]
                others = {c for c in codes if c not in ("None", "ConditionalCheckFailed")}
                if "ConditionalCheckFailed" in codes and not others:
                    return codes
                pause = min(self.CONFLICT_BACKOFF_CAP_SECONDS, 0.02 * 2 ** min(attempt, 10)) * random.random()
                if others <= {"TransactionConflict"} and others and time.monotonic() + pause < deadline:
                    time.sleep(pause)
                    continue
                raise StoreUnavailable(f"{self.table}: transaction cancelled: {', '.join(codes) or exc}") from exc
            except BotoCoreError as exc:
                raise StoreUnavailable(f"{self.table}: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")

    def raise_to(self, op: RaiseTo) -> bool:
        return self._conditional(lambda: self.client.update_item(
            TableName=self.table, Key=self._key(op.pk, op.sk), UpdateExpression="SET #a = :v",
            ConditionExpression="attribute_not_exists(#a) OR #a < :v", ExpressionAttributeNames={"#a": op.attribute},
            ExpressionAttributeValues={":v": _ser.serialize(_to_ddb(op.value))}))

    def roll_items(self, route: str, first_sk: str, last_sk: str, limit: int | None = None) -> list[dict[str, Any]]:
        # strongly consistent: the period cache's fold must see every transaction completed before it (slo_rollup.py)
        return self._items(roll_partition(route), first_sk, last_sk, consistent=True, limit=limit)

    def put_period(self, route: str, item: dict[str, Any], through_hour: str | None, gen: int | None) -> bool:
        full = self._item({**item, PARTITION_KEY: roll_partition(route), SORT_KEY: PERIOD})
        # gen 0 = never counted: the attribute is absent (late writes ADD it, creating the item)
        same_gen = "(attribute_not_exists(#g) OR #g = :g)" if not gen else "#g = :g"
        same_fold = "attribute_not_exists(#t)" if through_hour is None else "#t = :t"
        values: dict[str, Any] = {":g": {"N": str(gen or 0)}}
        if through_hour is not None:
            values[":t"] = {"S": through_hour}
        return self._conditional(lambda: self.client.put_item(
            TableName=self.table, Item=full, ConditionExpression=f"{same_fold} AND {same_gen}",
            ExpressionAttributeNames={"#g": "gen", "#t": "through_hour"}, ExpressionAttributeValues=values))

    def live_items(self, route: str) -> list[dict[str, Any]]:
        return self._items(live_partition(route), " ", "~")
