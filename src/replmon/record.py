"""One probe's outcome as kept in the latency store."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from replmon.interval import LatencyInterval

#: The TTL attribute; template.yaml's TimeToLiveSpecification names the same (a test checks).
TTL_ATTRIBUTE = "expires_at"
#: Partition and sort key of the latency store (template.yaml defines the table).
PARTITION_KEY = "route"
SORT_KEY = "at"


class ProbeStatus(StrEnum):
    COMPLETED = "COMPLETED"  # source reported COMPLETED and every replica was verified
    FAILED = "FAILED"  # source reported FAILED, or a replica did not match
    STUCK = "STUCK"  # still PENDING when the probe's timeout ran out
    ERROR = "ERROR"  # the probe itself failed (upload or polling error): replication not measured


def iso_ms(epoch_seconds: float) -> str:
    """Sortable UTC timestamp with milliseconds: '2026-11-21T23:50:01.123Z'."""
    return datetime.fromtimestamp(epoch_seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


@dataclass
class ProbeRecord:
    route: str
    probe_id: str
    run_id: str
    at: float  # epoch seconds of the PUT end (of the recording, when there was no PUT)
    size_bytes: int
    size_class: str
    trial: int
    status: ProbeStatus
    latency_lo: float | None = None
    latency_hi: float | None = None
    head_count: int = 0
    put_seconds: float | None = None
    upload_method: str | None = None
    target_seconds: float = 900.0
    bound_seconds: float | None = None  # the width the policy promised for this latency
    destinations: list[dict[str, Any]] = field(default_factory=list)
    failure_reason: str | None = None
    retention_days: int = 90

    @property
    def interval(self) -> LatencyInterval | None:
        return None if self.latency_lo is None else LatencyInterval(self.latency_lo, self.latency_hi)

    @property
    def latency_mid(self) -> float | None:
        return self.interval.mid if self.interval else None

    @property
    def width(self) -> float | None:
        return self.interval.width if self.interval else None

    @property
    def bound_met(self) -> bool | None:
        if self.width is None or self.bound_seconds is None:
            return None
        return self.width <= self.bound_seconds + 1e-9

    @property
    def within_target(self) -> bool:
        return self.status is ProbeStatus.COMPLETED and self.latency_hi is not None and self.latency_hi <= self.target_seconds

    @property
    def sort_key(self) -> str:
        return f"{iso_ms(self.at)}#{self.probe_id}"

    def to_item(self) -> dict[str, Any]:
        """Plain attributes for the store; derived values are stored too, for readers of the table."""
        item = asdict(self)
        item.pop("at")
        item.pop("retention_days")
        item[PARTITION_KEY] = self.route
        item[SORT_KEY] = self.sort_key
        item["at_epoch"] = self.at
        item["status"] = str(self.status)
        item["latency_mid"] = self.latency_mid
        item["bound_met"] = self.bound_met
        item[TTL_ATTRIBUTE] = int(self.at + self.retention_days * 86_400)
        return {k: v for k, v in item.items() if v is not None}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> ProbeRecord:
        def opt(name: str) -> float | None:
            return None if item.get(name) is None else float(item[name])

        return cls(
            route=item[PARTITION_KEY],
            probe_id=item["probe_id"],
            run_id=item["run_id"],
            at=float(item["at_epoch"]),
            size_bytes=int(item["size_bytes"]),
            size_class=item["size_class"],
            trial=int(item["trial"]),
            status=ProbeStatus(item["status"]),
            latency_lo=opt("latency_lo"),
            latency_hi=opt("latency_hi"),
            head_count=int(item.get("head_count", 0)),
            put_seconds=opt("put_seconds"),
            upload_method=item.get("upload_method"),
            target_seconds=float(item.get("target_seconds", 900.0)),
            bound_seconds=opt("bound_seconds"),
            destinations=list(item.get("destinations", [])),
            failure_reason=item.get("failure_reason"),
        )
