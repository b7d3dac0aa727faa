"""DynamoDB latency store (AWS or DynamoDB Local): conditional writes, key-range queries only."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import BotoCoreError, ClientError

from replmon.core.errors import StoreUnavailable
from replmon.core.keys import iso_ms
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
        out: list[ProbeRecord] = []
        for page in self.client.get_paginator("query").paginate(**kwargs):
            for raw in page["Items"]:
                out.append(ProbeRecord.from_item(_from_ddb({k: _de.deserialize(v) for k, v in raw.items()})))
                if limit is not None and len(out) >= limit:
                    return out
        return out

    # ------------------------------------------------------------------ passive signals (signals.py)
    def _items(self, pk: str, start: str, end: str, *, consistent: bool = False) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "#pk = :p AND #sk BETWEEN :a AND :b",
            "ExpressionAttributeNames": {"#pk": PARTITION_KEY, "#sk": SORT_KEY},
            "ExpressionAttributeValues": {":p": {"S": pk}, ":a": {"S": start}, ":b": {"S": end}},
            "ConsistentRead": consistent,
        }
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

    def narrow_interval(self, record: ProbeRecord, lo: float, hi: float | None, replica_at: float) -> bool:
        """Replace the record's interval with a narrower one, only if it is still the interval
        ``record`` was read with (optimistic: a concurrent narrowing wins, the caller re-reads)."""
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
        return self._conditional(lambda: self.client.update_item(
            TableName=self.table, Key=self._key(record.route, record.sort_key), UpdateExpression="SET " + ", ".join(sets),
            ConditionExpression=cond, ExpressionAttributeNames=names, ExpressionAttributeValues=values))
