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

The three table ports are one DynamoDB table (template.yaml's LatencyTable): :class:`LatencyTable`
is all three, what the composition root (:mod:`replmon.wiring`) hands out; domain code asks for
the narrowest one it uses. The domain never imports boto3: only adapters do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from replmon.core.record import ProbeRecord
from replmon.core.route import Endpoint

__all__ = [
    "FioStore", "HeadResult", "Item", "LatencyStore", "LatencyTable", "MetricQuery", "MetricReader", "MetricSeries", "MetricsSink",
    "ObjectStore", "ObjectStores", "PutResult", "RecordSpool", "SignalStore", "UploadInfo", "VersionInfo",
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
    def create_multipart(self, bucket: str, key: str, metadata: dict[str, str]) -> str: ...
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

    def narrow_interval(self, record: ProbeRecord, lo: float, hi: float | None, replica_at: float) -> bool:
        """Replace the record's interval with a narrower one if it is still the one ``record`` was
        read with (False: a concurrent change won; re-read and retry)."""
        ...


class SignalStore(Protocol):
    """Passive-signal items (events, replica arrivals, RTC collections, in-flight markers) in
    partitions beside the records (:mod:`replmon.signals.partitions`)."""

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


class LatencyTable(LatencyStore, SignalStore, FioStore, Protocol):
    """The one table that holds records, signal items and mount results (template.yaml's LatencyTable)."""


# ------------------------------------------------------------------------------ the spool
class RecordSpool(Protocol):
    """Durable holding place for records the store could not take (SQS in AWS, a directory locally)."""

    def spool(self, record: ProbeRecord) -> None: ...
    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        """Up to ``limit`` spooled records with a handle for :meth:`ack`."""
        ...

    def ack(self, handle: str) -> None: ...


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
