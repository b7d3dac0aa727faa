"""S3 event notifications as delivered: one parser for the ingest Lambda and `replmon events parse`.

Accepted payloads (each as AWS documents it, docs/REFERENCES.md R9-R11):

- an SQS batch (Lambda's SQS event: ``Records[].body`` holds one S3 notification, an S3 test
  event or an EventBridge event);
- a bare S3 notification ``{"Records": [...]}`` (eventVersion 2.x: 2.1 for ObjectCreated, 2.2 for
  replication events with ``replicationEventData``, 2.4+ unified; MinIO sends 2.0 with ``s3:``
  prefixed names);
- an EventBridge "Object Created" event (``detail-type``, ``detail.object.key``);
- one record.

Each record becomes a :class:`ReplicationEvent`, an :class:`ObjectCreated`, an acknowledgement
(S3's ``s3:TestEvent``, sent when a notification is configured) or an error that says why. An SQS
message is the unit of failure: one bad record fails its message only, never the batch.

>>> [p.signal.kind for p in parse_payload({"Records": [{"eventVersion": "2.2", "eventSource": "aws:s3",
...     "eventTime": "2026-11-22T10:00:01.500Z", "eventName": "Replication:OperationMissedThreshold",
...     "s3": {"bucket": {"name": "src"}, "object": {"key": "a+b", "size": 5}},
...     "replicationEventData": {"replicationRuleId": "r1", "destinationBucket": "arn:aws:s3:::dst",
...         "s3Operation": "OBJECT_PUT", "requestTime": "2026-11-22T09:45:00.000Z", "threshold": "15"}}]})]
['OperationMissedThreshold']
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from pydantic import BaseModel, ConfigDict, ValidationError

#: S3's replication event names (without "s3:Replication:"); the last is MinIO's extension.
REPLICATION_KINDS = (
    "OperationFailedReplication",
    "OperationMissedThreshold",
    "OperationReplicatedAfterThreshold",
    "OperationNotTracked",
    "OperationCompletedReplication",
)
#: Replication failure reasons S3 documents (R10); another reason is stored as sent, and flagged.
FAILURE_REASONS = frozenset({
    "AssumeRoleNotPermitted", "DstBucketInvalidRegion", "DstBucketNotFound", "DstBucketObjectLockConfigMissing",
    "DstBucketUnversioned", "DstDelObjNotPermitted", "DstKmsKeyInvalidState", "DstKmsKeyNotFound",
    "DstMultipartCompleteNotPermitted", "DstMultipartInitNotPermitted", "DstMultipartPartUploadNotPermitted",
    "DstObjectHardDeleted", "DstPutAclNotPermitted", "DstPutLegalHoldNotPermitted", "DstPutObjectNotPermitted",
    "DstPutRetentionNotPermitted", "DstPutTaggingNotPermitted", "DstVersionNotFound", "SrcBucketInvalidRegion",
    "SrcBucketNotFound", "SrcBucketReplicationConfigMissing", "SrcGetAclNotPermitted", "SrcGetLegalHoldNotPermitted",
    "SrcGetObjectNotPermitted", "SrcGetRetentionNotPermitted", "SrcGetTaggingNotPermitted",
    "SrcHeadObjectNotPermitted", "SrcKeyNotFound", "SrcKmsKeyInvalidState", "SrcObjectNotEligible",
    "SrcObjectNotFound", "SrcReplicationNotPending", "SrcVersionNotFound",
})


def parse_time(value: str, field: str) -> float:
    """ISO-8601 UTC with any number of fractional digits (S3: ms; MinIO: ns) -> epoch seconds."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", value or "")
    if not m:
        raise ValueError(f"{field}: {value!r} is not an ISO-8601 time such as '2026-11-22T10:00:01.500Z'")
    base = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    return base.astimezone(UTC).timestamp() + float("0." + (m.group(2) or "0"))


@dataclass(frozen=True)
class ReplicationEvent:
    kind: str  # one of REPLICATION_KINDS
    source_bucket: str
    key: str
    event_time: float  # epoch seconds, S3's clock (when it finished processing)
    version_id: str | None = None
    size: int | None = None
    rule_id: str | None = None
    destination_bucket: str | None = None  # a bucket name (S3 sends the ARN); None from MinIO
    s3_operation: str | None = None
    request_time: float | None = None
    failure_reason: str | None = None
    threshold: str | None = None
    replication_time: float | None = None
    origin: str = "aws"  # "aws" or "minio" (names prefixed "s3:", no replicationEventData)

    @property
    def failure_reason_documented(self) -> bool | None:
        """Is the failure reason one S3 documents (R10)? None without a reason."""
        return None if self.failure_reason is None else self.failure_reason in FAILURE_REASONS

    def to_json(self) -> dict[str, Any]:
        """The stored and printed form: the fields, and whether the reason is a documented one."""
        return {**asdict(self), "failure_reason_documented": self.failure_reason_documented}

    @property
    def event_id(self) -> str:
        """Stable across S3's at-least-once deliveries of the same event: duplicates collapse."""
        raw = "|".join(str(x) for x in (self.kind, self.source_bucket, self.key, self.version_id, self.destination_bucket, self.event_time))
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ObjectCreated:
    bucket: str
    key: str
    event_time: float  # epoch seconds, S3's clock: when the object (a replica, on a destination) was written
    event_name: str
    version_id: str | None = None
    size: int | None = None
    via: str = "s3-notification"  # or "eventbridge"


Signal = ReplicationEvent | ObjectCreated


@dataclass
class Parsed:
    """One record's fate. ``message_id`` is the SQS message it came in (the batch item to fail)."""

    position: str  # "message 2 record 1", for the log line and the CLI
    message_id: str | None = None
    signal: Signal | None = None
    acknowledged: str | None = None  # why it is consumed without being stored
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"position": self.position, "message_id": self.message_id}
        if self.signal is not None:
            body = self.signal.to_json() if isinstance(self.signal, ReplicationEvent) else asdict(self.signal)
            out["signal"] = {"type": type(self.signal).__name__, **body}
        if self.acknowledged:
            out["acknowledged"] = self.acknowledged
        if self.error:
            out["error"] = self.error
        return out


class _Bucket(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str


class _Object(BaseModel):
    model_config = ConfigDict(extra="ignore")
    key: str
    size: int | None = None
    versionId: str | None = None


class _S3(BaseModel):
    model_config = ConfigDict(extra="ignore")
    bucket: _Bucket
    object: _Object


class _ReplicationData(BaseModel):
    model_config = ConfigDict(extra="ignore")
    replicationRuleId: str | None = None
    destinationBucket: str | None = None
    s3Operation: str | None = None
    requestTime: str | None = None
    failureReason: str | None = None
    threshold: str | None = None
    replicationTime: str | None = None


class _Record(BaseModel):
    """The fields replmon reads from an S3 event record; others (2.3+ additions) are ignored."""

    model_config = ConfigDict(extra="ignore")
    eventVersion: str
    eventSource: str
    eventTime: str
    eventName: str
    s3: _S3
    replicationEventData: _ReplicationData | None = None


def _bucket_name(arn_or_name: str | None) -> str | None:
    if not arn_or_name:
        return None
    return arn_or_name.rsplit(":", 1)[-1] if arn_or_name.startswith("arn:") else arn_or_name


def _pydantic_reason(exc: ValidationError) -> str:
    e = exc.errors()[0]
    return f"{'.'.join(str(p) for p in e['loc'])}: {e['msg'].lower()}"


def parse_record(raw: object) -> Signal:
    """One S3 event record -> a signal; ValueError says which field is wrong."""
    if not isinstance(raw, dict):
        raise ValueError(f"a record must be a JSON object, got {type(raw).__name__}")
    try:
        rec = _Record.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(_pydantic_reason(exc)) from None
    if rec.eventSource not in ("aws:s3", "minio:s3"):
        raise ValueError(f"eventSource: {rec.eventSource!r} is not an S3 event source ('aws:s3')")
    if not rec.eventVersion.startswith("2."):
        raise ValueError(f"eventVersion: {rec.eventVersion!r} is not a 2.x S3 event (S3 sends 2.1-2.5)")
    origin = "minio" if rec.eventName.startswith("s3:") else "aws"
    name = rec.eventName.removeprefix("s3:")
    when = parse_time(rec.eventTime, "eventTime")
    key = unquote_plus(rec.s3.object.key)  # S3 URL-encodes keys in notifications ("a b" -> "a+b")
    version = rec.s3.object.versionId if rec.s3.object.versionId not in (None, "", "null") else None
    if name.startswith("ObjectCreated:"):
        return ObjectCreated(rec.s3.bucket.name, key, when, name, version, rec.s3.object.size)
    if not name.startswith("Replication:"):
        raise ValueError(f"eventName: {rec.eventName!r} is neither s3:Replication:* nor s3:ObjectCreated:* (configure only those)")
    kind = name.removeprefix("Replication:")
    if kind not in REPLICATION_KINDS:
        raise ValueError(f"eventName: unknown replication event {kind!r}; known: {', '.join(REPLICATION_KINDS)}")
    data = rec.replicationEventData
    if data is None and origin == "aws":
        raise ValueError("replicationEventData: missing (S3 sends it with every replication event, eventVersion 2.2+)")
    data = data or _ReplicationData()
    reason = data.failureReason or None
    return ReplicationEvent(
        kind=kind, source_bucket=rec.s3.bucket.name, key=key, event_time=when, version_id=version, size=rec.s3.object.size,
        rule_id=data.replicationRuleId, destination_bucket=_bucket_name(data.destinationBucket), s3_operation=data.s3Operation,
        request_time=parse_time(data.requestTime, "replicationEventData.requestTime") if data.requestTime else None,
        failure_reason=reason,
        threshold=data.threshold,
        replication_time=parse_time(data.replicationTime, "replicationEventData.replicationTime") if data.replicationTime else None,
        origin=origin,
    )


def _is_test_event(body: object) -> bool:
    return isinstance(body, dict) and body.get("Event") == "s3:TestEvent"


def _eventbridge(raw: dict[str, Any]) -> Signal:
    from aws_lambda_powertools.utilities.parser.models import S3EventNotificationEventBridgeModel

    try:
        ev = S3EventNotificationEventBridgeModel.model_validate(raw)
    except ValidationError as exc:
        raise ValueError(f"EventBridge event: {_pydantic_reason(exc)}") from None
    if ev.detail_type != "Object Created":
        raise ValueError(f"detail-type: {ev.detail_type!r}; replmon reads only 'Object Created' from EventBridge "
                         "(S3 sends no replication events there)")
    obj = ev.detail.object
    version = obj.version_id if obj.version_id not in (None, "", "null") else None
    size = int(obj.size) if obj.size is not None else None
    return ObjectCreated(ev.detail.bucket.name, obj.key, ev.time.timestamp(), f"ObjectCreated:{ev.detail.reason or 'Unknown'}",
                         version, size, via="eventbridge")


def _records_of(body: object, position: str, message_id: str | None) -> list[Parsed]:
    """The records one delivery unit (an SQS body, or the whole payload) carries."""
    if _is_test_event(body):
        return [Parsed(position, message_id, acknowledged="s3:TestEvent (sent when a notification is configured)")]
    if isinstance(body, dict) and body.get("source") == "aws.s3" and "detail-type" in body:
        try:
            return [Parsed(position, message_id, signal=_eventbridge(body))]
        except ValueError as exc:
            return [Parsed(position, message_id, error=str(exc))]
    if isinstance(body, dict) and isinstance(body.get("Records"), list):
        if not body["Records"]:
            return [Parsed(position, message_id, error="Records: empty list")]
        out = []
        for i, raw in enumerate(body["Records"], 1):
            where = f"{position} record {i}"
            try:
                out.append(Parsed(where, message_id, signal=parse_record(raw)))
            except ValueError as exc:
                out.append(Parsed(where, message_id, error=str(exc)))
        return out
    if isinstance(body, dict) and "eventSource" in body:
        try:
            return [Parsed(position, message_id, signal=parse_record(body))]
        except ValueError as exc:
            return [Parsed(position, message_id, error=str(exc))]
    if isinstance(body, dict) and body.get("Type") == "Notification" and "TopicArn" in body:
        return [Parsed(position, message_id, error="an SNS envelope: subscribe the queue with RawMessageDelivery=true")]
    return [Parsed(position, message_id, error="not an S3 notification, S3 test event or EventBridge S3 event")]


def is_sqs_batch(payload: object) -> bool:
    recs = payload.get("Records") if isinstance(payload, dict) else None
    return bool(recs) and isinstance(recs, list) and isinstance(recs[0], dict) and recs[0].get("eventSource") == "aws:sqs"


def parse_sqs_message(message: dict[str, Any], position: str) -> list[Parsed]:
    """One SQS message (Lambda's record shape): its body is JSON text."""
    mid = message.get("messageId")
    if not isinstance(message.get("body"), str):
        return [Parsed(position, mid, error="body: missing or not a string")]
    try:
        body = json.loads(message["body"])
    except json.JSONDecodeError as exc:
        return [Parsed(position, mid, error=f"body: not JSON ({exc.msg} at char {exc.pos})")]
    return _records_of(body, position, mid)


def parse_payload(payload: object) -> list[Parsed]:
    """Every record of any accepted payload shape (see the module's docstring)."""
    if isinstance(payload, dict) and is_sqs_batch(payload):
        out: list[Parsed] = []
        for i, msg in enumerate(payload["Records"], 1):
            out += parse_sqs_message(msg, f"message {i}")
        return out
    return _records_of(payload, "payload", None)
