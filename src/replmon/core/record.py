"""One probe's outcome as kept in the latency store.

The store's key is derived from the *plan* (the run id's stamped time and the probe id, see
:mod:`replmon.core.keys`), never from the time of recording, so a retried or replayed write always
lands on the same key and a conditional put keeps exactly one record per probe.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from replmon.core.interval import LatencyInterval
from replmon.core.keys import record_sort_key

__all__ = ["JUDGED", "PARTITION_KEY", "SORT_KEY", "TTL_ATTRIBUTE", "ProbeRecord", "ProbeStatus"]

#: The TTL attribute; template.yaml's TimeToLiveSpecification names the same (a test checks).
TTL_ATTRIBUTE = "expires_at"
#: Partition and sort key of the latency store (template.yaml defines the table).
PARTITION_KEY = "route"
SORT_KEY = "at"


class ProbeStatus(StrEnum):
    """A probe's status: the one vocabulary of the state machine's poll state, the record in the
    store, the CLI's table and JSON, and the EMF status metrics (telemetry.STATUS_METRICS)."""

    PENDING = "PENDING"  # still being polled (the state machine's Choice waits on it); never a record's status
    COMPLETED = "COMPLETED"  # source reported COMPLETED and every replica was verified
    FAILED = "FAILED"  # source reported FAILED, or a replica did not match
    STUCK = "STUCK"  # still PENDING when the probe's timeout ran out
    ERROR = "ERROR"  # the probe itself failed (upload or polling error): replication not measured
    INTERRUPTED = "INTERRUPTED"  # an operator stopped a local run (SIGINT/SIGTERM) before the probe settled

    @property
    def judged(self) -> bool:
        """Did the probe measure replication (COMPLETED, FAILED, STUCK)? These are also the
        statuses that end polling."""
        return self in JUDGED


JUDGED = frozenset({ProbeStatus.COMPLETED, ProbeStatus.FAILED, ProbeStatus.STUCK})
#: The record's numbers that must be finite (NaN and infinities are refused when a record is made).
FINITE_FIELDS = ("planned_at", "put_end", "latency_lo", "latency_hi", "put_seconds", "target_seconds", "bound_seconds")


@dataclass
class ProbeRecord:
    route: str
    probe_id: str
    run_id: str
    planned_at: float  # epoch seconds when PlanProbes planned the run (part of the key)
    size_bytes: int
    size_class: str
    trial: int
    status: ProbeStatus
    put_end: float | None = None  # epoch seconds of the PUT end: latencies count from here
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

    def __post_init__(self) -> None:
        """A record holds finite numbers only: NaN or an infinity is refused here, where the record is
        made, naming the field (never later, when the store or a replay of the spool meets it)."""
        for name in FINITE_FIELDS:
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
                raise ValueError(f"{name}: {value!r} is not a finite number; a probe record holds finite seconds "
                                 f"(probe {self.probe_id}, route {self.route})")

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
        return record_sort_key(self.run_id, self.probe_id)

    def to_item(self) -> dict[str, Any]:
        """Plain attributes for the store; derived values are stored too, for readers of the table."""
        item = asdict(self)
        item.pop("retention_days")
        item[PARTITION_KEY] = self.route
        item[SORT_KEY] = self.sort_key
        item["status"] = str(self.status)
        item["latency_mid"] = self.latency_mid
        item["bound_met"] = self.bound_met
        item[TTL_ATTRIBUTE] = int(self.planned_at + self.retention_days * 86_400)
        return {k: v for k, v in item.items() if v is not None}

    @classmethod
    def from_item(cls, item: dict[str, Any]) -> ProbeRecord:
        def opt(name: str) -> float | None:
            return None if item.get(name) is None else float(item[name])

        return cls(
            route=item[PARTITION_KEY],
            probe_id=item["probe_id"],
            run_id=item["run_id"],
            planned_at=float(item["planned_at"]),
            size_bytes=int(item["size_bytes"]),
            size_class=item["size_class"],
            trial=int(item["trial"]),
            status=ProbeStatus(item["status"]),
            put_end=opt("put_end"),
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
