"""Run leases in the latency table (core/ports.py :class:`LeaseStore`): one run per route at a time.

A lease is the item ``<route>#live`` / ``lease``, taken and given back with conditional writes
(DynamoDB evaluates the condition and the update atomically, so two runs racing for a route get
exactly one lease). Neither execution names nor ListExecutions can do this: a STANDARD execution
name blocks reuse for 90 days and ListExecutions is "best effort" (Step Functions' StartExecution and ListExecutions).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from replmon.adapters.tablecalls import table_call
from replmon.core.errors import StoreUnavailable
from replmon.core.partitions import LEASE, live_partition, release_sort_key, runs_partition, skip_sort_key
from replmon.core.ports import Lease, LeaseRead
from replmon.core.record import PARTITION_KEY, SORT_KEY

#: A skip record outlives the lease it reports by this long (then TTL removes it).
SKIP_KEEP_SECONDS = 35 * 86_400
BATCH_GET_KEYS = 100  # BatchGetItem's limit per call
LAST_STARTED = "ls_"
#: The lease's string set of the route-run's probes that ended (their probe ids): the last one releases it.
DONE = "done"


def _num(value: Any) -> float | None:
    return None if value is None else float(value["N"])


def lease_from_item(route: str, item: Mapping[str, Any] | None) -> Lease:
    """A raw (client-level) lease item as a :class:`Lease`; a missing item is a free lease."""
    item = item or {}
    holder = item.get("holder", {}).get("S")
    owner = {k: v.get("S", "") for k, v in item.get("owner", {}).get("M", {}).items()} if holder else {}
    return Lease(route=route, holder=holder, until=_num(item.get("until")) if holder else None,
                 last_started={k[len(LAST_STARTED):]: float(v["N"]) for k, v in item.items() if k.startswith(LAST_STARTED)},
                 owner=owner)


class DynamoLeases:
    """:class:`~replmon.core.ports.LeaseStore` on the latency table (``client`` from adapters/clients.py)."""

    def __init__(self, table: str, client: Any) -> None:
        self.table = table
        self.client = client

    def _key(self, route: str) -> dict[str, Any]:
        return {PARTITION_KEY: {"S": live_partition(route)}, SORT_KEY: {"S": LEASE}}

    def _call(self, op: str, **kwargs: Any) -> Any:
        return table_call(self.client, self.table, op, **kwargs)

    def acquire(self, route: str, run_id: str, now: float, until: float, started: Mapping[str, float], *,
                run: str | None = None, probes: int | None = None, replacing: str | None = None,
                owner: Mapping[str, str] | None = None) -> Lease | None:
        names = {"#h": "holder", "#u": "until", "#a": "acquired", "#d": DONE}
        values: dict[str, Any] = {":run": {"S": run_id}, ":until": {"N": repr(until)}, ":now": {"N": repr(now)}}
        sets = ["#h = :run", "#u = :until", "#a = :now"]
        removes = ["#d"]  # a new route-run counts its ended probes from none
        for i, (cls, at) in enumerate(sorted(started.items())):
            names[f"#ls{i}"], values[f":ls{i}"] = f"{LAST_STARTED}{cls}", {"N": repr(at)}
            sets.append(f"#ls{i} = :ls{i}")
        for attr, value in (("run", run), ("probes", probes)):
            names[f"#x{attr}"] = attr
            if value is None:
                removes.append(f"#x{attr}")
            else:
                values[f":x{attr}"] = {"N": str(value)} if isinstance(value, int) else {"S": value}
                sets.append(f"#x{attr} = :x{attr}")
        names["#o"] = "owner"
        if owner:
            values[":o"] = {"M": {k: {"S": v} for k, v in owner.items()}}
            sets.append("#o = :o")
        else:
            removes.append("#o")
        condition = "attribute_not_exists(#h) OR #u < :now OR #h = :run"
        if replacing is not None:  # its holder is known to have ended: taken although its `until` has not passed
            values[":dead"] = {"S": replacing}
            condition += " OR #h = :dead"
        try:
            out = self._call(
                "update_item", Key=self._key(route), UpdateExpression="SET " + ", ".join(sets) + " REMOVE " + ", ".join(removes),
                ConditionExpression=condition, ExpressionAttributeNames=names, ExpressionAttributeValues=values,
                ReturnValues="ALL_NEW")
        except ClientError:  # ConditionalCheckFailed: another run's unexpired lease stands
            return None
        return lease_from_item(route, out.get("Attributes"))

    def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
        names = {"#h": "holder", "#u": "until", "#d": DONE, "#o": "owner"}
        values: dict[str, Any] = {":run": {"S": run_id}, ":now": {"N": repr(now)}}
        condition = "#h = :run"
        if run is not None:  # its route-run's last probe gave it back already: released all the same
            names["#r"], values[":r"] = "run", {"S": run}
            condition += " OR (attribute_not_exists(#h) AND #r = :r)"
        try:
            self._call("update_item", Key=self._key(route), UpdateExpression="REMOVE #h, #u, #d, #o SET finished = :now",
                       ConditionExpression=condition, ExpressionAttributeNames=names, ExpressionAttributeValues=values)
        except ClientError:  # not this run's lease (released already, or expired and taken)
            return False
        return True

    def end_probe(self, route: str, run: str, probe_id: str, now: float) -> bool | None:
        """One probe of route-run ``run`` ended: ``ADD done :probe_id`` (a string set: a retried call
        adds nothing), and the route's lease is released once every probe of the run has ended.
        True: released now; False: probes of the run still run; None: the lease is not the run's."""
        names = {"#h": "holder", "#r": "run", "#d": DONE}
        try:
            out = self._call("update_item", Key=self._key(route), UpdateExpression="ADD #d :p",
                             ConditionExpression="attribute_exists(#h) AND #r = :r", ExpressionAttributeNames=names,
                             ExpressionAttributeValues={":p": {"SS": [probe_id]}, ":r": {"S": run}}, ReturnValues="ALL_NEW")
        except ClientError:
            return None
        item = out.get("Attributes") or {}
        expected = _num(item.get("probes"))
        if expected is None or len(item.get(DONE, {}).get("SS", [])) < expected:
            return False
        try:
            self._call("update_item", Key=self._key(route), UpdateExpression="REMOVE #h, #u, #d, #o SET finished = :now",
                       ConditionExpression="attribute_exists(#h) AND #r = :r",
                       ExpressionAttributeNames={**names, "#u": "until", "#o": "owner"},
                       ExpressionAttributeValues={":r": {"S": run}, ":now": {"N": repr(now)}})
        except ClientError:  # a concurrent last probe (a retry) released it first
            return None
        return True

    def leases(self, routes: Sequence[str]) -> dict[str, Lease]:
        read = self.read_leases(routes)
        if read.unread:
            raise StoreUnavailable(f"{self.table}: BatchGetItem left {len(read.unread)} keys unread: "
                                   + next(iter(read.unread.values())))
        return read.leases

    def read_leases(self, routes: Sequence[str]) -> LeaseRead:
        """BatchGetItem "returns a partial result if ... the table's provisioned throughput is exceeded"
        with the unread keys in ``UnprocessedKeys``, retried here with exponential backoff; a call raises
        ProvisionedThroughputExceededException only when none of its keys could be read. What was read is
        kept; the keys still unread (or of a call that failed) are named, so one hot route's key costs only itself."""
        out: dict[str, Lease] = {}
        unread: dict[str, str] = {}
        first: StoreUnavailable | None = None
        unique = sorted(set(routes))
        for i in range(0, len(unique), BATCH_GET_KEYS):
            chunk = unique[i:i + BATCH_GET_KEYS]
            request: dict[str, Any] = {self.table: {"Keys": [self._key(r) for r in chunk]}}
            answered: set[str] = set()
            try:
                for attempt in range(8):
                    resp = self._batch_get(request)
                    for item in resp.get("Responses", {}).get(self.table, []):
                        route = item[PARTITION_KEY]["S"].rsplit("#", 1)[0]
                        out[route] = lease_from_item(route, item)
                    request = resp.get("UnprocessedKeys") or {}
                    left = {k[PARTITION_KEY]["S"].rsplit("#", 1)[0] for k in request.get(self.table, {}).get("Keys", [])}
                    answered = set(chunk) - left
                    if not request:
                        break
                    time.sleep(min(0.05 * 2**attempt, 2.0))
                else:
                    unread.update({r: "BatchGetItem left the key unprocessed after 8 attempts" for r in chunk if r not in answered})
            except StoreUnavailable as exc:  # none of the call's keys read (throttled, denied): this call's keys only
                first = first or exc
                unread.update({r: f"{type(exc).__name__}: {exc}" for r in chunk if r not in answered})
        if first is not None and len(unread) == len(unique):
            raise first  # nothing read: the table, not a route
        return LeaseRead(out, unread)

    def _batch_get(self, request: dict[str, Any]) -> Any:
        try:
            return self.client.batch_get_item(RequestItems=request)
        except ClientError as exc:
            raise StoreUnavailable(f"{self.table}: {exc.response['Error']['Code']}: {exc}") from exc
        except BotoCoreError as exc:
            raise StoreUnavailable(f"{self.table}: {type(exc).__name__}: {exc}") from exc

    def record_release(self, route: str, holder: str, until: float | None, by: str, at: float) -> None:
        item: dict[str, Any] = {PARTITION_KEY: {"S": runs_partition(route)}, SORT_KEY: {"S": release_sort_key(at)},
                                "holder": {"S": holder}, "released_by": {"S": by}, "released_at": {"N": repr(at)},
                                "expires_at": {"N": str(int(at) + SKIP_KEEP_SECONDS)}}
        if until is not None:
            item["until"] = {"N": repr(until)}
        self._call("put_item", Item=item)

    def record_skip(self, route: str, tick: str, holder: str, until: float, classes: Sequence[str]) -> bool:
        item: dict[str, Any] = {PARTITION_KEY: {"S": runs_partition(route)}, SORT_KEY: {"S": skip_sort_key(tick)},
                "holder": {"S": holder}, "until": {"N": repr(until)},
                "expires_at": {"N": str(int(Decimal(repr(until))) + SKIP_KEEP_SECONDS)}}
        if classes:
            item["classes"] = {"L": [{"S": c} for c in classes]}
        try:
            self._call("put_item", Item=item, ConditionExpression="attribute_not_exists(#pk)",
                       ExpressionAttributeNames={"#pk": PARTITION_KEY})
        except ClientError:  # a retried step: counted once already
            return False
        return True


class MemoryLeases:
    """:class:`~replmon.core.ports.LeaseStore` in this process (an ad-hoc run without a table):
    the same conditions as :class:`DynamoLeases`, under a lock."""

    def __init__(self) -> None:
        import threading

        self._lock = threading.Lock()
        self._leases: dict[str, Lease] = {}
        self._runs: dict[str, tuple[str | None, int | None, set[str]]] = {}  # route -> (run, probes, ended probe ids)
        self.skips: dict[tuple[str, str], tuple[str, float]] = {}
        self.released: list[tuple[str, str, float | None, str, float]] = []

    def acquire(self, route: str, run_id: str, now: float, until: float, started: Mapping[str, float], *,
                run: str | None = None, probes: int | None = None, replacing: str | None = None,
                owner: Mapping[str, str] | None = None) -> Lease | None:
        with self._lock:
            old = self._leases.get(route)
            if (old and old.holder and old.until is not None and old.until >= now and old.holder != run_id
                    and (replacing is None or old.holder != replacing)):
                return None
            self._leases[route] = Lease(route, run_id, until, {**(old.last_started if old else {}), **started}, dict(owner or {}))
            self._runs[route] = (run, probes, set())
            return self._leases[route]

    def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
        with self._lock:
            old = self._leases.get(route)
            if not old or (old.holder != run_id and not (old.holder is None and run is not None
                                                           and self._runs.get(route, (None,))[0] == run)):
                return False
            self._leases[route] = Lease(route, None, None, old.last_started)
            return True

    def end_probe(self, route: str, run: str, probe_id: str, now: float) -> bool | None:
        with self._lock:
            old = self._leases.get(route)
            mine, expected, done = self._runs.get(route, (None, None, set()))
            if not old or not old.holder or mine != run:
                return None
            done.add(probe_id)
            if expected is None or len(done) < expected:
                return False
            self._leases[route] = Lease(route, None, None, old.last_started)
            return True

    def leases(self, routes: Sequence[str]) -> dict[str, Lease]:
        with self._lock:
            return {r: self._leases[r] for r in routes if r in self._leases}

    def read_leases(self, routes: Sequence[str]) -> LeaseRead:
        return LeaseRead(self.leases(routes))

    def record_release(self, route: str, holder: str, until: float | None, by: str, at: float) -> None:
        with self._lock:
            self.released.append((route, holder, until, by, at))

    def record_skip(self, route: str, tick: str, holder: str, until: float, classes: Sequence[str]) -> bool:
        with self._lock:
            if (route, tick) in self.skips:
                return False
            self.skips[(route, tick)] = (holder, until)
            return True
