"""The route registry in the latency table (core/ports.py :class:`RegistryStore` and :class:`InventoryStore`).

Items: ``#routes/<group>`` / route name (:meth:`RouteSpec.to_item`), ``#inventory/accounts`` / account
id, ``#inventory/checkpoint`` / ``checkpoint`` and ``lease`` (core/partitions.py). Every registry write is one
conditional PutItem, UpdateItem or DeleteItem: DynamoDB evaluates the condition and the write
atomically, so an explicit route is never overwritten by the inventory, and two edits of one
explicit route cannot both win (docs/design/fleet.md 1).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from replmon.adapters.tablecalls import table_call
from replmon.core.partitions import INVENTORY_ACCOUNTS, INVENTORY_CHECKPOINT, registry_partition
from replmon.core.record import PARTITION_KEY, SORT_KEY
from replmon.core.registry import GroupRead, InvalidRoute, InventoryObservation, Origin, RouteSpec, RouteVerdict, parse_item

CHECKPOINT = "checkpoint"
RUN_LEASE = "lease"  # one inventory run at a time: a scheduled run and `replmon fleet inventory` never share a checkpoint
_ser = TypeSerializer()
_de = TypeDeserializer()


def to_attrs(data: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-shaped data as DynamoDB attribute values (floats as exact decimals: boto3 refuses floats)."""
    plain = json.loads(json.dumps(dict(data)), parse_float=Decimal)
    return {k: _ser.serialize(v) for k, v in plain.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def from_attrs(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(_de.deserialize(v)) for k, v in item.items()}


class DynamoRegistry:
    """:class:`~replmon.core.ports.RegistryStore` (+ the inventory's account rows and checkpoint)
    on the latency table; ``client`` from adapters/clients.py."""

    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def _call(self, op: str, **kwargs: Any) -> Any:
        return table_call(self.client, self.table, op, **kwargs)

    def _conditional(self, op: str, **kwargs: Any) -> bool:
        try:
            self._call(op, **kwargs)
        except ClientError:  # ConditionalCheckFailedException: the condition decided, nothing written
            return False
        return True

    @staticmethod
    def _key(pk: str, sk: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": pk}, SORT_KEY: {"S": sk}}

    # -- routes --------------------------------------------------------------------------------
    def read(self, group: str) -> GroupRead:
        """The group's valid routes and the items skipped with their reason (one bad item never
        hides the others: each item is validated on its own)."""
        out = GroupRead()
        kwargs: dict[str, Any] = {"KeyConditionExpression": "#pk = :pk", "ExpressionAttributeNames": {"#pk": PARTITION_KEY},
                                  "ExpressionAttributeValues": {":pk": {"S": registry_partition(group)}}}
        while True:  # a Query page holds at most 1 MB: follow LastEvaluatedKey to the end (DynamoDB's Query)
            page = self._call("query", **kwargs)
            for raw in page.get("Items", []):
                parsed = parse_item(group, from_attrs(raw))
                (out.invalid if isinstance(parsed, InvalidRoute) else out.routes).append(parsed)  # type: ignore[arg-type]
            if not page.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def routes(self, group: str) -> list[RouteSpec]:
        return self.read(group).routes

    def invalid(self, group: str) -> list[InvalidRoute]:
        return self.read(group).invalid

    def get_route(self, group: str, name: str) -> RouteSpec | None:
        item = self._call("get_item", Key=self._key(registry_partition(group), name), ConsistentRead=True).get("Item")
        return RouteSpec.from_item(from_attrs(item)) if item else None

    def item_version(self, group: str, name: str) -> int | None:
        """The stored ``version`` of an item, valid or not (``fleet put`` replaces an invalid item
        conditionally on it); None when there is no item."""
        item = self._call("get_item", Key=self._key(registry_partition(group), name), ConsistentRead=True,
                          ProjectionExpression="#v, #sk", ExpressionAttributeNames={"#v": "version", "#sk": SORT_KEY}).get("Item")
        if not item:
            return None
        version = from_attrs(item).get("version")
        return int(version) if isinstance(version, (int, float)) else 0

    def put_explicit(self, spec: RouteSpec, expected_version: int | None) -> bool:
        if spec.origin is not Origin.EXPLICIT:
            raise ValueError(f"put_explicit: route {spec.name} has origin {spec.origin.value}, not explicit")
        item = spec.model_copy(update={"version": (expected_version or 0) + 1}).to_item()
        if expected_version is None:
            return self._conditional("put_item", Item=to_attrs(item), ConditionExpression="attribute_not_exists(#sk)",
                                     ExpressionAttributeNames={"#sk": SORT_KEY})
        # version 0: an item written without one (by hand, an older version, an invalid item fleet put replaces)
        unversioned = " OR attribute_not_exists(#v)" if expected_version == 0 else ""
        return self._conditional("put_item", Item=to_attrs(item), ConditionExpression="attribute_not_exists(#sk) OR #v = :expected" + unversioned,
                                 ExpressionAttributeNames={"#sk": SORT_KEY, "#v": "version"},
                                 ExpressionAttributeValues={":expected": {"N": str(expected_version)}})

    def put_discovered(self, spec: RouteSpec) -> bool:
        if spec.origin is not Origin.DISCOVERED:
            raise ValueError(f"put_discovered: route {spec.name} has origin {spec.origin.value}, not discovered")
        return self._conditional("put_item", Item=to_attrs(spec.to_item()),
                                 ConditionExpression="attribute_not_exists(#sk) OR #o = :discovered",
                                 ExpressionAttributeNames={"#sk": SORT_KEY, "#o": "origin"},
                                 ExpressionAttributeValues={":discovered": {"S": Origin.DISCOVERED.value}})

    def observe(self, group: str, name: str, inventory: InventoryObservation, verdict: RouteVerdict) -> None:
        values = to_attrs({":obs": inventory.model_dump(mode="json"), ":v": verdict.model_dump(mode="json")})
        # attribute_exists: an observation never creates a half item (the route was deleted meanwhile)
        self._conditional("update_item", Key=self._key(registry_partition(group), name),
                          UpdateExpression="SET inventory = :obs, verdict_observed = :v",
                          ConditionExpression="attribute_exists(#sk)", ExpressionAttributeNames={"#sk": SORT_KEY},
                          ExpressionAttributeValues=values)

    def delete_route(self, group: str, name: str, origin: str | None = None) -> bool:
        if origin is None:
            return self._conditional("delete_item", Key=self._key(registry_partition(group), name),
                                     ConditionExpression="attribute_exists(#sk)", ExpressionAttributeNames={"#sk": SORT_KEY})
        return self._conditional("delete_item", Key=self._key(registry_partition(group), name),
                                 ConditionExpression="attribute_exists(#sk) AND #o = :origin",
                                 ExpressionAttributeNames={"#sk": SORT_KEY, "#o": "origin"},
                                 ExpressionAttributeValues={":origin": {"S": str(origin)}})

    # -- the inventory's own items ---------------------------------------------------------------
    def put_account(self, account: str, row: Mapping[str, Any]) -> None:
        item = {**row, PARTITION_KEY: INVENTORY_ACCOUNTS, SORT_KEY: account}
        self._call("put_item", Item=to_attrs(item))

    def accounts(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        kwargs: dict[str, Any] = {"KeyConditionExpression": "#pk = :pk", "ExpressionAttributeNames": {"#pk": PARTITION_KEY},
                                  "ExpressionAttributeValues": {":pk": {"S": INVENTORY_ACCOUNTS}}}
        while True:
            page = self._call("query", **kwargs)
            for raw in page.get("Items", []):
                row = from_attrs(raw)
                out[str(row[SORT_KEY])] = {k: v for k, v in row.items() if k not in (PARTITION_KEY, SORT_KEY)}
            if not page.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def checkpoint(self) -> dict[str, Any] | None:
        item = self._call("get_item", Key=self._key(INVENTORY_CHECKPOINT, CHECKPOINT), ConsistentRead=True).get("Item")
        if not item:
            return None
        return {k: v for k, v in from_attrs(item).items() if k not in (PARTITION_KEY, SORT_KEY)}

    def put_checkpoint(self, state: Mapping[str, Any] | None) -> None:
        if state is None:
            self._call("delete_item", Key=self._key(INVENTORY_CHECKPOINT, CHECKPOINT))
        else:
            self._call("put_item", Item=to_attrs({**state, PARTITION_KEY: INVENTORY_CHECKPOINT, SORT_KEY: CHECKPOINT}))

    def take_run(self, holder: str, now: float, until: float) -> dict[str, Any] | None:
        try:
            self._call("update_item", Key=self._key(INVENTORY_CHECKPOINT, RUN_LEASE), UpdateExpression="SET #h = :h, #u = :u",
                       ConditionExpression="attribute_not_exists(#h) OR #u < :now OR #h = :h",
                       ExpressionAttributeNames={"#h": "holder", "#u": "until"},
                       ExpressionAttributeValues={":h": {"S": holder}, ":u": {"N": repr(until)}, ":now": {"N": repr(now)}})
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            item = self._call("get_item", Key=self._key(INVENTORY_CHECKPOINT, RUN_LEASE), ConsistentRead=True).get("Item") or {}
            row = from_attrs(item)
            return {"holder": row.get("holder", "?"), "until": row.get("until")}
        return None

    def end_run(self, holder: str) -> None:
        try:
            self._call("delete_item", Key=self._key(INVENTORY_CHECKPOINT, RUN_LEASE), ConditionExpression="#h = :h",
                       ExpressionAttributeNames={"#h": "holder"}, ExpressionAttributeValues={":h": {"S": holder}})
        except ClientError as exc:  # expired and taken by the next run: its lease now
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
