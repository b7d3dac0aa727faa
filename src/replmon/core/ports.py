"""The outside world as the domain sees it: one typed Protocol per outside thing.

| port | what it is | adapter (replmon/adapters/) |
| --- | --- | --- |
| :class:`ObjectStore` (:class:`ObjectStores` per endpoint) | an S3 or S3-compatible bucket | ``s3.S3ObjectStore`` |
| :class:`LatencyStore` | probe records in the latency table | ``dynamodb.DynamoLatencyStore`` |
| :class:`SignalStore` | passive-signal items beside the records | ``dynamodb.DynamoLatencyStore`` |
| :class:`FioStore` | mount-baseline results beside them | ``dynamodb.DynamoLatencyStore`` |
| :class:`RecordSpool` | where a record waits while the store is down | ``spool.SqsSpool``, ``spool.DirectorySpool`` |
| :class:`MetricsSink` | the metrics replmon emits (EMF) | ``metrics.EmfMetrics``, ``metrics.NullMetrics`` |
| :class:`MetricReader` | metrics S3 publishes (GetMetricData) | ``cloudwatch.CloudWatchReader`` |
| :class:`MetricReaders` | a :class:`MetricReader` per (account, Region) | ``cloudwatch.CloudWatchReaders`` |
| :class:`RegistryStore` | the route registry (``#routes/<group>`` items) | ``registry_table.DynamoRegistry`` |
| :class:`LeaseStore` | per-route run leases and skip records | ``leases.DynamoLeases`` |
| :class:`RollupStore` | hourly rollups, the period cache, exactly-once transactions | ``dynamodb.DynamoLatencyStore`` |
| :class:`PlanStore` | the fleet plan file the state machine's ItemReader reads (S3) | ``plans.S3Plans`` |

The fleet's ports (docs/design/fleet.md) are
declared here with their semantics; their adapters are named above.

The table ports are one DynamoDB table (template.yaml's LatencyTable): :class:`LatencyTable`
is all three, what the composition root (:mod:`replmon.wiring`) hands out; domain code asks for
the narrowest one it uses. The domain never imports boto3: only adapters do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from replmon.core.record import ProbeRecord
from replmon.core.registry import GroupRead, InvalidRoute, InventoryObservation, RouteSpec, RouteVerdict
from replmon.core.route import Endpoint

__all__ = [
    "MAX_TRANSACT_ACTIONS", "AccessDenied", "BucketPage", "BucketReader",
    "FioStore", "HeadResult", "InventoryStore", "Item", "LatencyStore", "LatencyTable", "Lease", "LeaseRead", "LeaseStore", "MemberAccounts",
    "MetricQuery", "MetricReader",
    "MetricReaders", "MetricSeries", "MetricsSink", "ObjectStore", "ObjectStores", "PlanRef", "PlanStore", "PutResult",
    "RaiseTo", "ReaderKey", "RecordSpool", "RegistryStore", "RollupStore", "SignalStore", "TransactAdd", "TransactItem",
    "TransactOutcome", "TransactPut", "UploadInfo", "VersionInfo",
]

#: A table item as plain attributes (str, int, float, bool, list, dict): the stores convert to and from DynamoDB's types.
Item = dict[str, Any]


# ------------------------------------------------------------------------------ the object store (S3)
@dataclass(frozen=True)
class PutResult:
    version_id: str | None
    etag: str
    checksum: str | None = None  # e.g. "CRC64NVME/FULL_OBJECT:AAAA..." when the server returned one


@dataclass(frozen=True)
class HeadResult:
    replication_status: str | None  # S3's: PENDING | COMPLETED | FAILED | REPLICA | None (no rule applies)
    size: int
    etag: str
    version_id: str | None
    checksum: str | None = None  # with ChecksumMode=ENABLED, where the server keeps one


@dataclass(frozen=True)
class VersionInfo:
    key: str
    version_id: str
    last_modified: float  # epoch seconds


@dataclass(frozen=True)
class UploadInfo:
    key: str
    upload_id: str
    initiated: float  # epoch seconds


class ObjectStore(Protocol):
    """One S3 (or S3-compatible) endpoint."""

    def put(self, bucket: str, key: str, body: bytes, metadata: dict[str, str]) -> PutResult: ...
    def create_multipart(self, bucket: str, key: str, metadata: dict[str, str], checksum: bool = True) -> str: ...
    def upload_part(self, bucket: str, key: str, upload_id: str, part_number: int, body: bytes) -> str: ...
    def upload_part_copy(
        self, bucket: str, key: str, upload_id: str, part_number: int, source_key: str, first: int, last: int
    ) -> str: ...
    def complete_multipart(self, bucket: str, key: str, upload_id: str, etags: Sequence[str]) -> PutResult: ...
    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None: ...
    def check_bucket(self, bucket: str) -> None: ...
    def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult | None:
        """None when the object (version) does not exist, whether S3 said 404 or 403."""
        ...

    def read(self, bucket: str, key: str) -> bytes:
        """The current version's bytes (a mount run's result files)."""
        ...

    def object_size(self, bucket: str, key: str) -> int | None: ...
    def list_versions(self, bucket: str, prefix: str) -> list[VersionInfo]: ...
    def list_uploads(self, bucket: str, prefix: str) -> list[UploadInfo]: ...
    def delete_versions(self, bucket: str, versions: Sequence[VersionInfo]) -> int: ...
    def delete_all_versions(self, bucket: str, key: str) -> int: ...
    def abort_uploads(self, bucket: str, key: str) -> int: ...


class ObjectStores(Protocol):
    """Gives the store for an endpoint (source or destination: region, URL, role may differ)."""

    def __call__(self, endpoint: Endpoint, /) -> ObjectStore: ...


# ------------------------------------------------------------------------------ the latency table (DynamoDB)
class LatencyStore(Protocol):
    """Probe records, one per probe, keyed by the plan (:mod:`replmon.core.keys`)."""

    def put_once(self, record: ProbeRecord) -> bool:
        """Write the record unless one with its key exists; True if this call wrote it;
        :class:`StoreUnavailable` for anything else (then the record goes to the spool)."""
        ...

    def query(
        self, route: str, start: float, end: float, *, newest_first: bool = False, limit: int | None = None
    ) -> list[ProbeRecord]:
        """Records of ``route`` whose *planned* time lies in [start, end]."""
        ...

    def get_record(self, route: str, sort_key: str) -> ProbeRecord | None: ...

    def narrow_interval(self, record: ProbeRecord, lo: float, hi: float | None, replica_at: float,
                        counters: Sequence[TransactAdd] = (), mark_good: bool = False) -> bool:
        """Replace the record's interval with a narrower one if it is still the one ``record`` was
        read with (False: a concurrent change won; re-read and retry); ``counters`` (the hour
        item's moves) are applied in the same transaction, or not at all; ``mark_good`` sets the
        record's ``counted_good`` (the moves counted it good)."""
        ...


class SignalStore(Protocol):
    """Passive-signal items (events, replica arrivals, RTC collections, in-flight markers) in
    partitions beside the records (:mod:`replmon.core.partitions`)."""

    def put_item_once(self, item: Item) -> bool:
        """Conditional put; False if an item with its key was there (a redelivery)."""
        ...

    def put_item(self, item: Item) -> None: ...
    def delete_item(self, pk: str, sk: str) -> None: ...
    def get_item(self, pk: str, sk: str) -> Item | None: ...
    def partition_items(self, pk: str) -> list[Item]:
        """Every item of a partition whose sort keys are times."""
        ...

    def items(self, pk: str, start: float, end: float) -> list[Item]:
        """A partition's items whose sort key (a time) is in [start, end]."""
        ...

    def add_arrival(self, pk: str, sk: str, attribute: str, created_at: float, expires_at: int) -> bool:
        """Keep the earliest creation time per replica; False if an earlier one was there."""
        ...


class FioStore(Protocol):
    """Mount-baseline rows and runs (:mod:`replmon.mounts.ingest`)."""

    def put_item_once(self, item: Item) -> bool: ...
    def items(self, pk: str, start: float, end: float) -> list[Item]: ...


# ------------------------------------------------------------------------------ the spool
class RecordSpool(Protocol):
    """Durable holding place for records the store could not take (SQS in AWS, a directory locally)."""

    def spool(self, record: ProbeRecord) -> None: ...
    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        """Up to ``limit`` spooled records with a handle for :meth:`ack`."""
        ...

    def ack(self, handle: str) -> None: ...
    def quarantine(self, handle: str, reason: str) -> None:
        """Set the entry aside with ``reason`` (it can be neither read nor stored): never replayed
        again until a person retries it, and never in the way of the entries behind it."""
        ...


# ------------------------------------------------------------------------------ notifications
class Notifier(Protocol):
    """The evidence topic (SNS, the ticket topic): a message with the evidence when a route stalls and
    when it recovers; RouteStalled's contributor notification is the page."""

    def publish(self, subject: str, message: str) -> None: ...


# ------------------------------------------------------------------------------ metrics out and in
class MetricsSink(Protocol):
    def publish(self, record: ProbeRecord) -> None:
        """The probe's latency and status metrics (once per probe)."""
        ...

    def count(self, metric: str, value: float = 1, dimensions: Mapping[str, str] | None = None) -> None:
        """One of telemetry.METRICS with its own dimensions (``service`` is added by Powertools)."""
        ...


@dataclass(frozen=True)
class MetricQuery:
    """One series to read: a metric with its dimensions, a period and a statistic."""

    id: str  # GetMetricData ids: lowercase start, letters, digits, '_'
    namespace: str
    metric: str
    dimensions: tuple[tuple[str, str], ...]
    period: int
    stat: str


@dataclass(frozen=True)
class MetricSeries:
    """What came back for one query: (epoch seconds, value) points, any order."""

    id: str
    points: tuple[tuple[float, float], ...]


class MetricReader(Protocol):
    def read(self, queries: Sequence[MetricQuery], start: float, end: float) -> list[MetricSeries]:
        """Every point of each query in [start, end] (all pages); a series without points is empty."""
        ...



@dataclass(frozen=True)
class ReaderKey:
    """Where a metric is read: the account whose ``<MemberRolePrefix>-reader`` role reads it (None:
    the hub's own credentials) and the Region AWS publishes it in (signals/rtc.py ``reader_key``)."""

    account: str | None
    region: str | None


class MetricReaders(Protocol):
    """A :class:`MetricReader` per (account, Region): CloudWatch in that Region as the account's
    reader role (assumed with the deployment's ExternalId), built once per execution environment.
    Reading a key whose role cannot be assumed raises :class:`~replmon.core.errors.StoreUnavailable`
    from ``read`` (the collector marks only that key's routes ``RtcReadFailed``)."""

    def __call__(self, key: ReaderKey, /) -> MetricReader: ...


# ------------------------------------------------------------------------------ the fleet's table ports
class RegistryStore(Protocol):
    """The route registry: :class:`~replmon.core.registry.RouteSpec` items in ``#routes/<group>``
    (core/partitions.py). Every write is conditional; none is a read-modify-write of the registry."""

    def routes(self, group: str) -> list[RouteSpec]:
        """Every *valid* route of a group (a paged Query of ``#routes/<group>``), in name order. An
        item that is not a valid :class:`RouteSpec` is left out, never raised: :meth:`read` names it."""
        ...

    def read(self, group: str) -> GroupRead:
        """The group's valid routes and its invalid items (:class:`InvalidRoute`: item, field, fix),
        from one read: what the planner counts (``InvalidRoute{Reason}``) and ``replmon fleet`` prints."""
        ...

    def invalid(self, group: str) -> list[InvalidRoute]:
        """The group's items that are not valid routes (``read(group).invalid``)."""
        ...

    def get_route(self, group: str, name: str) -> RouteSpec | None: ...

    def put_explicit(self, spec: RouteSpec, expected_version: int | None) -> bool:
        """Write an explicit route as ``version = expected_version + 1`` (1 for a new one) if the item
        is absent or still has ``expected_version`` (``None``: only if absent). False when another
        edit won (re-read, retry). An explicit route replaces a discovered one of the same name."""
        ...

    def put_discovered(self, spec: RouteSpec) -> bool:
        """Write a discovered route if the item is absent or discovered too (ConditionExpression
        ``attribute_not_exists(at) OR origin = :discovered``). False when an explicit route holds the
        name: then call :meth:`observe`, which keeps the user's configuration."""
        ...

    def observe(self, group: str, name: str, inventory: InventoryObservation, verdict: RouteVerdict) -> None:
        """On an existing item, set only ``inventory`` and ``verdict_observed`` (what the inventory
        saw of an explicit route: drift is shown, never applied). Idempotent."""
        ...

    def delete_route(self, group: str, name: str, origin: str | None = None) -> bool:
        """Delete if present (and, with ``origin``, only if its origin is that: an inventory moving or
        dropping a discovered route never deletes an explicit one). False if nothing was deleted."""
        ...


class InventoryStore(Protocol):
    """The inventory's own items (core/partitions.py): one row per account it read
    (``#inventory/accounts``) and the resume point of a run the deadline cut (``#inventory/checkpoint``)."""

    def put_account(self, account: str, row: Mapping[str, Any]) -> None: ...

    def accounts(self) -> dict[str, dict[str, Any]]: ...

    def checkpoint(self) -> dict[str, Any] | None: ...

    def put_checkpoint(self, state: Mapping[str, Any] | None) -> None:
        """Write the resume point; ``None`` removes it (the run completed)."""
        ...

    def take_run(self, holder: str, now: float, until: float) -> dict[str, Any] | None:
        """Take the inventory's one-run lease until ``until``: None when taken (free, expired, or
        already ``holder``'s), else the standing lease (``holder``, ``until``). One conditional write."""
        ...

    def end_run(self, holder: str) -> None:
        """Give the lease back if ``holder`` still has it."""
        ...


class BucketMissing(Exception):
    """A bucket the inventory looked up does not exist (HeadBucket 404: S3 names no Region for it)."""

    def __init__(self, bucket: str, detail: str = "") -> None:
        super().__init__(f"bucket {bucket} does not exist{': ' + detail if detail else ''}")
        self.bucket = bucket


class AccessDenied(Exception):
    """A member-account read was refused; ``action`` is the IAM action (``s3:GetReplicationConfiguration``)."""

    def __init__(self, action: str, detail: str = "") -> None:
        super().__init__(f"{action} denied{': ' + detail if detail else ''}")
        self.action = action
        self.detail = detail


@dataclass(frozen=True)
class BucketPage:
    """One ListBuckets page: (name, BucketRegion or None) per bucket, and the next page's token."""

    buckets: Sequence[tuple[str, str | None]]
    next_token: str | None


class BucketReader(Protocol):
    """The inventory's reads of one account's buckets, through that account's inventory role.
    Each raises :class:`AccessDenied` naming the action when the role or a bucket policy refuses it."""

    account: str

    def list_buckets(self, token: str | None) -> BucketPage: ...

    def bucket_region(self, bucket: str) -> str:
        """HeadBucket's ``x-amz-bucket-region`` (present on a 403 too): for buckets listed without
        a Region and for destination buckets of other accounts."""
        ...

    def replication(self, bucket: str, region: str) -> Mapping[str, Any] | None:
        """GetBucketReplication's ``ReplicationConfiguration``; None: the bucket has none."""
        ...

    def tags(self, bucket: str, region: str) -> dict[str, str]:
        """GetBucketTagging; ``{}`` when the bucket has no tag set."""
        ...

    def default_kms_key(self, bucket: str, region: str) -> str | None:
        """The default encryption's KMS key ARN when it is SSE-KMS (or DSSE-KMS); None otherwise
        (``"aws/s3"`` when SSE-KMS names no key: the AWS managed key)."""
        ...


class MemberAccounts(Protocol):
    """How the hub reaches the accounts it inventories."""

    def organization_accounts(self) -> list[str]:
        """ACTIVE accounts of the organization (Organizations ListAccounts, paged to the end)."""
        ...

    def open(self, account: str) -> BucketReader:
        """A reader through ``<MemberRolePrefix>-inventory`` in ``account``; :class:`AccessDenied`
        (action ``sts:AssumeRole``) when the role cannot be assumed."""
        ...


@dataclass(frozen=True)
class Lease:
    """A route's ``<route>#live`` / ``lease`` item."""

    route: str
    holder: str | None  # the run id holding it; None when free
    until: float | None  # epoch seconds after which anyone may take it
    last_started: Mapping[str, float]  # ls_<class>: the tick start each size class last ran at (core/cadence.py)
    owner: Mapping[str, str] = field(default_factory=dict)  # a local run's host and pid (fleet/lease.py holder_ended)


@dataclass(frozen=True)
class LeaseRead:
    """The lease items a batch read got (a route that never ran has none), and the routes whose item
    it could not read after its retries, each with why (BatchGetItem's ``UnprocessedKeys`` left over,
    or a call of the batch that failed): the caller reads those again or leaves them out, alone."""

    leases: dict[str, Lease]
    unread: dict[str, str] = field(default_factory=dict)


class LeaseStore(Protocol):
    """One run per route at a time (docs/design/fleet.md 5). Route-runs are named by their run id."""

    def acquire(self, route: str, run_id: str, now: float, until: float, started: Mapping[str, float], *,
                run: str | None = None, probes: int | None = None, replacing: str | None = None,
                owner: Mapping[str, str] | None = None) -> Lease | None:
        """``UpdateItem SET holder = :run, until, acquired = :now, ls_<class> = started[class]`` with
        ``ConditionExpression attribute_not_exists(holder) OR until < :now OR holder = :run``: the lease
        if this run holds it now - a retried acquire by the same run succeeds again (idempotent) -,
        None if another run's unexpired lease stands.

        ``run`` (the plan's run id) and ``probes`` (the route's probe count in it) let the route's
        last probe release the lease (:meth:`end_probe`); ``replacing``: a holder known to have ended
        (``OR holder = :dead``: its unexpired lease is taken); ``owner``: a local run's host and pid."""
        ...

    def release(self, route: str, run_id: str, now: float, run: str | None = None) -> bool:
        """``REMOVE holder, until SET finished = :now`` if ``holder = :run``; False if the lease is not
        this run's (already released, or expired and taken): never frees another run's lease. With
        ``run``: True too when the route-run ``run``'s last probe released it already."""
        ...

    def end_probe(self, route: str, run: str, probe_id: str, now: float) -> bool | None:
        """Probe ``probe_id`` of route-run ``run`` ended (idempotent: a string set of ended probes);
        the lease is released when the last one ends. True: released now; False: probes still run;
        None: the lease is not the run's (released, expired and taken)."""
        ...

    def leases(self, routes: Sequence[str]) -> dict[str, Lease]:
        """The lease items of ``routes`` (BatchGetItem, <= 100 keys a call, UnprocessedKeys retried);
        a route that never ran has none."""
        ...

    def read_leases(self, routes: Sequence[str]) -> LeaseRead:
        """:meth:`leases` keeping what was read when some keys were not: the routes left unread after
        the retries are in ``unread``. Raises StoreUnavailable only when no key could be read."""
        ...

    def record_release(self, route: str, holder: str, until: float | None, by: str, at: float) -> None:
        """Put ``<route>#runs`` / ``<time>#released``: a lease ended by hand, who ended it and whose it was."""
        ...

    def record_skip(self, route: str, tick: str, holder: str, until: float, classes: Sequence[str]) -> bool:
        """Put ``<route>#runs`` / ``<tick>#skipped`` if absent; True only if this call wrote it (so a
        retried step counts ``RunSkipped`` once)."""
        ...


class ExecutionStatus(Protocol):
    """Whether the run holding a lease still runs (a run may outlast its lease's ``until``)."""

    def running(self, holder: str) -> bool | None:
        """True while the execution ``holder`` (an execution ARN) runs, False once it can never run
        again (SUCCEEDED, or failed and not redrivable), None when it cannot be told (failed but
        redrivable, not an ARN, not known yet, access denied, the service down)."""
        ...


@dataclass(frozen=True)
class TransactPut:
    """Put ``item`` only if no item has its key (``attribute_not_exists``): a record or a dedupe marker."""

    item: Item


@dataclass(frozen=True)
class TransactAdd:
    """``UpdateItem ADD`` each counter of ``add`` and ``SET a = if_not_exists(a, v)`` for each of
    ``set_once`` (creating the item if needed): an hour item's counters."""

    pk: str
    sk: str
    add: Mapping[str, int]
    set_once: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TransactDelete:
    """``Delete`` the item, unconditionally: "Unless you specify conditions, the DeleteItem is an
    idempotent operation" with no error for an item that is not there (DynamoDB API reference,
    DeleteItem; a transaction's Delete "initiates a DeleteItem operation", TransactWriteItems;
    tests/test_store.py stores a record that has no marker). A probe's in-flight marker, removed in
    the transaction that stores its record, so a stored record never leaves one."""

    pk: str
    sk: str


TransactItem = TransactPut | TransactAdd | TransactDelete
#: TransactWriteItems' limit: "groups up to 100 write actions in a single all-or-nothing operation".
MAX_TRANSACT_ACTIONS = 100


@dataclass(frozen=True)
class RaiseTo:
    """``SET attribute = :v`` if ``attribute_not_exists(attribute) OR attribute < :v``: a maximum,
    idempotent by itself, so it is written outside the transaction."""

    pk: str
    sk: str
    attribute: str
    value: float


@dataclass(frozen=True)
class TransactOutcome:
    applied: bool  # every action applied
    duplicates: tuple[int, ...] = ()  # indices of TransactPuts whose item existed (nothing was applied)


@dataclass(frozen=True)
class PlanRef:
    """Where a fleet plan is: the ItemReader's ``Bucket``/``Key`` and its item count."""

    bucket: str
    key: str
    items: int


class RollupStore(Protocol):
    """Rollups written exactly once with their record (docs/design/fleet.md 8)."""

    def transact(self, writes: Sequence[TransactItem], token: str | None = None) -> TransactOutcome:
        """One ``TransactWriteItems`` (<= 100 actions; ``token`` = ClientRequestToken). Cancelled only
        because TransactPuts' items existed -> ``TransactOutcome(False, those indices)``: nothing was
        applied, so nothing is counted twice (a record's duplicate is index 0). Any other failure
        raises :class:`~replmon.core.errors.StoreUnavailable` (the record goes to the spool)."""
        ...

    def raise_to(self, op: RaiseTo) -> bool:
        """Apply a :class:`RaiseTo`; False when the stored value was already >= (not an error)."""
        ...

    def roll_items(self, route: str, first_sk: str, last_sk: str, limit: int | None = None) -> list[Item]:
        """``<route>#roll`` items with ``first_sk <= at <= last_sk`` (all pages; ``limit``: the first
        that many), in key order: ``roll_items(r, hour_sort_key(H - 6h), PERIOD)`` is 7 hour items and the period cache."""
        ...

    def put_period(self, route: str, item: Item, through_hour: str | None, gen: int | None) -> bool:
        """Replace ``<route>#roll`` / ``period`` if its ``through_hour`` and ``gen`` are still the ones
        read (None: only if absent); False when another writer won (re-read)."""
        ...

    def live_items(self, route: str) -> list[Item]:
        """The whole ``<route>#live`` partition: lease, heartbeat state, in-flight markers."""
        ...


class LatencyTable(LatencyStore, SignalStore, FioStore, RollupStore, Protocol):
    """The one table that holds records, signal items, rollups and mount results (template.yaml's LatencyTable)."""


class PlanStore(Protocol):
    """The plan bucket (S3): PlanFleet writes each tick's plan as one JSON array (the ItemReader's
    ``InputType JSON``; moto reads JSON and CSV only)."""

    def put_plan(self, key: str, items: Sequence[Mapping[str, Any]]) -> PlanRef:
        """Write the plan at ``key`` (core/keys.py ``plan_object_key``); writing the same key again
        replaces it with the same content (a retried PlanFleet is harmless)."""
        ...

    def get_plan(self, key: str) -> list[dict[str, Any]]: ...
