"""The interfaces the domain needs from the outside world (adapters/ implements them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from replmon.config import Endpoint
from replmon.record import ProbeRecord


@dataclass(frozen=True)
class PutResult:
    version_id: str | None
    etag: str
    checksum: str | None = None  # e.g. "CRC32:AAAAAA==" when the server returned one


@dataclass(frozen=True)
class HeadResult:
    replication_status: str | None  # PENDING | COMPLETED | FAILED | REPLICA | None (no rule applies)
    size: int
    etag: str
    version_id: str | None


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
    def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult | None: ...
    def delete_all_versions(self, bucket: str, key: str) -> int: ...


class ObjectStores(Protocol):
    """Gives the store for an endpoint (source or destination: region, URL, role may differ)."""

    def __call__(self, endpoint: Endpoint) -> ObjectStore: ...


class LatencyStore(Protocol):
    def put_once(self, record: ProbeRecord) -> bool:
        """Write the record unless one with its key exists; True if this call wrote it."""
        ...

    def query(
        self, route: str, start: float, end: float, *, newest_first: bool = False, limit: int | None = None
    ) -> list[ProbeRecord]: ...


class MetricsSink(Protocol):
    def publish(self, record: ProbeRecord) -> None: ...
