"""The probe's state as it travels through the state machine (each step adds its part).

Handlers parse it with Powertools Parser and return it, extended, as the next step's input.
Times are epoch seconds (client clocks); latencies are seconds after the PUT ended.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from replmon.core.record import ProbeStatus
from replmon.core.route import Route
from replmon.probe.request import PollSettings


class Upload(BaseModel):
    key: str
    version_id: str | None = None  # None on an unversioned bucket (dump() drops None fields: every optional field has a default)
    etag: str
    checksum: str | None = None  # "CRC64NVME/FULL_OBJECT:<base64>" when the server returned one
    method: str  # put | multipart | compose
    parts: int = 1
    put_start: float
    put_end: float


class DestinationCheck(BaseModel):
    bucket: str
    status: str | None = None  # REPLICA when verified; None when no replica was found
    size_match: bool
    content_match: bool  # same full-object checksum (or, without checksums, the same ETag)
    verified_by: str  # "checksum:CRC64NVME/FULL_OBJECT", or "etag" where no checksum exists


class Poll(BaseModel):
    status: ProbeStatus = ProbeStatus.PENDING  # PENDING until polling settles: COMPLETED, FAILED or STUCK
    head_count: int = 0
    last_pending: float | None = None  # interval lower bound
    first_final: float | None = None  # interval upper bound (first COMPLETED/FAILED answer)
    not_before: float = 0.0
    last_rtt: float = 0.0  # recent HEAD duration (decaying max): the next HEAD is sent earlier by twice it
    wait_seconds: int = 0  # for the state machine's Wait state
    source_checksum: str | None = None  # from the final HEAD (ChecksumMode=ENABLED)
    destinations: list[DestinationCheck] = Field(default_factory=list)
    failure_reason: str | None = None
    history_note: str | None = None  # why polling started at 0 when history was wanted


class ProbeState(BaseModel):
    model_config = ConfigDict(extra="ignore")
    probe_id: str
    run_id: str
    planned_at: float  # the run's planned time: with probe_id, the record's key
    route: Route
    size_bytes: int
    size_class: str
    trial: int
    timeout_seconds: int
    target_seconds: float
    poll_settings: PollSettings = PollSettings()
    started_at: float | None = None  # when UploadProbe began: the probe's deadline counts from here
    upload: Upload | None = None
    poll: Poll | None = None
    error: dict[str, str] | None = None  # set by the state machine's Catch (Error, Cause)
    record_error: dict[str, str] | None = None  # RecordResult's Catch: neither stored nor spooled
    recorded: str | None = None  # "stored" | "duplicate" | "spooled"
    spooled_because: str | None = None  # the store's error when the record was spooled (its table and endpoint)
    cleaned: dict[str, int] | None = None

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    @property
    def deadline(self) -> float | None:
        """Epoch seconds by which the probe must settle (``timeout_seconds`` after its start)."""
        return None if self.started_at is None else self.started_at + self.timeout_seconds
