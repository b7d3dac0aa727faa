"""Report: latency statistics per route and size class over a time window, from the store."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from replmon.core.keys import iso_ms
from replmon.core.names import check_route_name
from replmon.core.ports import LatencyStore
from replmon.core.record import ProbeRecord
from replmon.core.stats import summarize


class ReportRequest(BaseModel):
    """``routes`` default to the deployment's configured routes; the window to the last ``hours``."""

    model_config = ConfigDict(extra="forbid")
    routes: list[str] = Field(default_factory=list)
    hours: float = Field(24.0, gt=0, le=24 * 400)
    end: str | None = None  # ISO 8601; default now

    @field_validator("routes")
    @classmethod
    def _routes(cls, value: list[str]) -> list[str]:
        return [check_route_name(r) for r in value]

    @field_validator("end")
    @classmethod
    def _end(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                raise ValueError("must be an ISO 8601 time such as '2026-11-21T12:00:00Z'") from None
        return value


def window(req: ReportRequest, now: float) -> tuple[float, float]:
    end = datetime.fromisoformat(req.end.replace("Z", "+00:00")).timestamp() if req.end else now
    return end - req.hours * 3600, end


def records_in(store: LatencyStore, routes: list[str], start: float, end: float) -> list[ProbeRecord]:
    """Key-range queries per route: the table is never scanned."""
    return [rec for route in routes for rec in store.query(route, start, end)]


def build_report(store: LatencyStore, req: ReportRequest, now: float) -> dict[str, Any]:
    if not req.routes:
        raise ValueError("routes: no route given and none configured; pass {\"routes\": [\"<route name>\"]}")
    start, end = window(req, now)
    records = records_in(store, req.routes, start, end)
    return {
        "window": {"start": iso_ms(start), "end": iso_ms(end)},
        "probes": len(records),
        "summaries": [s.as_dict() for s in summarize(records)],
    }
