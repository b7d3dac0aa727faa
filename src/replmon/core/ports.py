"""The interfaces the domain needs from the outside world (adapters/ implements them)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from replmon.core.record import ProbeRecord
from replmon.probe.request import Endpoint


@dataclass(frozen=True)
class PutResult:
    version_id: str | None
    etag: str
    checksum: str | None = None  # e.g. "CRC64NVME/FULL_OBJECT:AAAA..." when the server returned one


@dataclass(frozen=True)
class HeadResult:
    replication_status: str | None  # PENDING | COMPLETED | FAILED | REPLICA | None (no rule applies)
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

    def object_size(self, bucket: str, key: str) -> int | None: ...
    def list_versions(self, bucket: str, prefix: str) -> list[VersionInfo]: ...
    def list_uploads(self, bucket: str, prefix: str) -> list[UploadInfo]: ...
    def delete_versions(self, bucket: str, versions: Sequence[VersionInfo]) -> int: ...
    def delete_all_versions(self, bucket: str, key: str) -> int: ...
    def abort_uploads(self, bucket: str, key: str) -> int: ...


class ObjectStores(Protocol):
    """Gives the store for an endpoint (source or destination: region, URL, role may differ)."""

    def __call__(self, endpoint: Endpoint) -> ObjectStore: ...


class LatencyStore(Protocol):
    def put_once(self, record: ProbeRecord) -> bool:
        """Write the record unless one with its key exists; True if this call wrote it."""
        ...

    def query(
        self, route: str, start: float, end: float, *, newest_first: bool = False, limit: int | None = None
    ) -> list[ProbeRecord]:
        """Records of ``route`` whose *planned* time lies in [start, end]."""
        ...


class StoreUnavailable(RuntimeError):
    """The latency store could not be reached or refused the write for a reason other than the
    record already existing (throttling, outage, network): the record must go to the spool."""


class RecordSpool(Protocol):
    """Durable holding place for records the store could not take (SQS in AWS, a directory locally)."""

    def spool(self, record: ProbeRecord) -> None: ...
    def drain(self, limit: int) -> Iterator[tuple[str, ProbeRecord]]:
        """Up to ``limit`` spooled records with a handle for :meth:`ack`."""
        ...

    def ack(self, handle: str) -> None: ...


class MetricsSink(Protocol):
    def publish(self, record: ProbeRecord) -> None:
        """The probe's latency and status metrics (once per probe)."""
        ...

    def count(self, metric: str, value: float = 1, dimensions: Mapping[str, str] | None = None) -> None:
        """One of telemetry.METRICS with its own dimensions (``service`` is added by Powertools)."""
        ...
