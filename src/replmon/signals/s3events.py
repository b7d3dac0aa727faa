"""S3 event notifications as delivered: one parser for the ingest Lambda and `replmon events parse`.

Accepted payloads (each as AWS documents it, docs/REFERENCES.md R9-R11):

- an SQS batch (Lambda's SQS event: ``Records[].body`` holds one S3 notification, an S3 test
  event, an EventBridge event, or an SNS notification wrapping one of them);
- a bare S3 notification ``{"Records": [...]}`` (eventVersion 2.x: 2.1 for ObjectCreated, 2.2 for
  replication events with ``replicationEventData``, 2.4+ unified; MinIO sends 2.0 with ``s3:``
  prefixed names);
- an SNS notification (``Type: Notification``, ``Message`` = one of these as JSON text): what an
  SQS queue subscribed to a topic without raw message delivery receives;
- an EventBridge "Object Created" event (``detail-type``, ``detail.object.key``);
- one record.

**Strict where it matters, liberal where AWS is vague** (docs/SEMANTICS.md, "What an event
needs"). A record is rejected (:class:`EventParseError`, its SQS message fails and is retried,
then waits in the DLQ) only when a field needed to *store* it is missing or unusable: the event
name, the bucket, the key, the event time. Every other field that is absent, of another type or
in another format (``replicationEventData.replicationTime`` has no documented format at all) is
kept as sent in ``raw`` and named in ``flags``; it never rejects the record. An event name
replmon does not read (``ObjectRemoved:*``) is acknowledged, not rejected.

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
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from functools import cached_property
from typing import Any
from urllib.parse import unquote_plus

#: S3's replication event names (without "s3:Replication:"); the last is MinIO's extension. Another
#: ``Replication:*`` name is stored as sent and flagged (AWS adds event types over time).
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
#: Bucket names as S3 has allowed them (legacy us-east-1 names: up to 255 characters, capitals and
#: underscores); a name outside this cannot become a storage key (no '#', '/', '>' or NUL).
EVENT_BUCKET_RE = re.compile(r"^[A-Za-z0-9._-]{1,255}$")
#: S3's object key limit: 1,024 bytes of UTF-8.
MAX_KEY_BYTES = 1024
#: A raw value kept for a flagged field is cut to this many characters (the stored item stays small).
MAX_RAW_CHARS = 512
#: Event times outside these years are not times S3 sent (and cannot be sort keys or TTLs).
FIRST_YEAR, LAST_YEAR = 2006, 9998
#: How deep envelopes may nest (SQS -> SNS -> S3 notification is 2).
MAX_ENVELOPES = 3

_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,12}))?(Z|[+-]\d\d:\d\d)$")


class EventParseError(ValueError):
    """A record replmon cannot store: the message names the field and why. The only exception the
    parser raises (and only from :func:`parse_record`; :func:`parse_payload` returns it as text)."""


def parse_time(value: object, field: str) -> float:
    """ISO-8601 UTC with any number of fractional digits (S3: ms; MinIO: ns) -> epoch seconds.

    >>> parse_time("2026-11-22T10:00:01.5Z", "eventTime") - parse_time("2026-11-22T10:00:01Z", "eventTime")
    0.5
    """
    m = _ISO.match(value) if isinstance(value, str) else None
    if not m:
        raise EventParseError(f"{field}: {_show(value)} is not an ISO-8601 time such as '2026-11-22T10:00:01.500Z'")
    try:
        base = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    except ValueError:
        raise EventParseError(f"{field}: {_show(value)} is not a calendar time") from None
    if not FIRST_YEAR <= base.year <= LAST_YEAR:
        raise EventParseError(f"{field}: {_show(value)} is outside {FIRST_YEAR}-{LAST_YEAR}")
    return base.astimezone(UTC).timestamp() + float("0." + (m.group(2) or "0"))


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _utf8(text: str) -> bool:
    """Can this be stored as text? (JSON may carry lone surrogates, which no UTF-8 store takes.)"""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _raw(value: object) -> str:
    """A value as sent, as text (a stored item holds strings only), cut to MAX_RAW_CHARS."""
    text = value if isinstance(value, str) and _utf8(value) and "\x00" not in value else json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= MAX_RAW_CHARS else text[:MAX_RAW_CHARS] + "...(cut)"


@dataclass
class _Reader:
    """Reads optional fields liberally: a value of another type or format is kept raw and flagged."""

    raw: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)

    def flag(self, name: str, value: object, why: str) -> None:
        self.raw[name] = _raw(value)
        self.flags.append(f"{name}: {why}; kept as sent")

    def text(self, obj: Mapping[str, Any], key: str, name: str) -> str | None:
        value = obj.get(key)
        if value is None or value == "":
            return None
        if isinstance(value, str) and _utf8(value) and "\x00" not in value:
            return value
        if isinstance(value, str):
            self.flag(name, value, "not storable text (NUL or invalid UTF-8)")
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):  # "threshold": 15 instead of "15"
            return str(value)
        self.flag(name, value, f"a {type(value).__name__}, not a string")
        return None

    def size(self, obj: Mapping[str, Any], key: str, name: str) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            self.flag(name, value, "not a byte count")
            return None
        if isinstance(value, int) and value >= 0:
            return value
        if isinstance(value, float) and value.is_integer() and value >= 0:
            return int(value)
        if isinstance(value, str) and value.isdigit() and len(value) < 20:
            return int(value)
        self.flag(name, value, "not a byte count")
        return None

    def time(self, obj: Mapping[str, Any], key: str, name: str) -> float | None:
        value = obj.get(key)
        if value is None or value == "":
            return None
        try:
            return parse_time(value, name)
        except EventParseError:
            self.flag(name, value, "not an ISO-8601 time")
            return None

    def mapping(self, obj: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any]:
        value = obj.get(key)
        if value is None:
            return {}
        if isinstance(value, Mapping):
            return value
        self.flag(name, value, "not a JSON object")
        return {}


def _required_mapping(obj: Mapping[str, Any], key: str, name: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise EventParseError(f"{name}: {'field required' if value is None else 'must be a JSON object'}")
    return value


def _required_text(obj: Mapping[str, Any], key: str, name: str) -> str:
    value = obj.get(key)
    if value is None or value == "":
        raise EventParseError(f"{name}: field required")
    if not isinstance(value, str):
        raise EventParseError(f"{name}: must be a string, got {type(value).__name__}")
    if "\x00" in value or not _utf8(value):
        raise EventParseError(f"{name}: not storable text (a NUL character or invalid UTF-8)")
    return value


def _bucket(value: str, name: str) -> str:
    if not EVENT_BUCKET_RE.fullmatch(value):
        raise EventParseError(f"{name}: {_show(value)} is not a bucket name (letters, digits, '.', '_', '-'; at most 255)")
    return value


def _key(value: str, name: str, decode: bool) -> str:
    key = unquote_plus(value) if decode else value  # S3 URL-encodes keys in notifications ("a b" -> "a+b")
    if "\x00" in key or not _utf8(key):
        raise EventParseError(f"{name}: not storable text (a NUL character or invalid UTF-8)")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise EventParseError(f"{name}: longer than S3's {MAX_KEY_BYTES}-byte key limit")
    return key


def _version_id(reader: _Reader, obj: Mapping[str, Any], key: str, name: str) -> str | None:
    version = reader.text(obj, key, name)
    return None if version in (None, "null") else version  # "null": an unversioned bucket


@dataclass(frozen=True)
class ReplicationEvent:
    kind: str  # one of REPLICATION_KINDS, or another Replication:* name S3 sent (flagged)
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
    flags: tuple[str, ...] = ()  # fields kept as sent (see ``raw``), and why
    raw: tuple[tuple[str, str], ...] = ()  # field -> its value as sent (text), for each flagged field

    @property
    def failure_reason_documented(self) -> bool | None:
        """Is the failure reason one S3 documents (R10)? None without a reason."""
        return None if self.failure_reason is None else self.failure_reason in FAILURE_REASONS

    def to_json(self) -> dict[str, Any]:
        """The stored and printed form: the fields, and whether the reason is a documented one."""
        # Every other field is a scalar: a shallow read (asdict's deep copy cost most of a backlog's ingest time).
        body = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("flags", "raw")}
        return {**body, "failure_reason_documented": self.failure_reason_documented, **_flagged(self.flags, self.raw)}

    @cached_property
    def event_id(self) -> str:
        """Stable across S3's at-least-once deliveries of the same event: duplicates collapse."""
        raw = "|".join(str(x) for x in (self.kind, self.source_bucket, self.key, self.version_id, self.destination_bucket, self.event_time))
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class ObjectCreated:
    bucket: str
    key: str
    event_time: float  # epoch seconds, S3's clock: when the object (a replica, on a destination) was written
    event_name: str
    version_id: str | None = None
    size: int | None = None
    via: str = "s3-notification"  # or "eventbridge"
    flags: tuple[str, ...] = ()
    raw: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        body = {k: v for k, v in asdict(self).items() if k not in ("flags", "raw")}
        return {**body, **_flagged(self.flags, self.raw)}


def _flagged(flags: tuple[str, ...], raw: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    return {"flags": list(flags), "raw": dict(raw)} if flags else {}


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
            out["signal"] = {"type": type(self.signal).__name__, **self.signal.to_json()}
        if self.acknowledged:
            out["acknowledged"] = self.acknowledged
        if self.error:
            out["error"] = self.error
        return out


class _Ignored(Exception):
    """A well-formed record of a kind replmon does not read: acknowledged, never a failure."""


def _bucket_name(arn_or_name: str | None) -> str | None:
    if not arn_or_name:
        return None
    name = arn_or_name.rsplit(":", 1)[-1] if arn_or_name.startswith("arn:") else arn_or_name
    return name if EVENT_BUCKET_RE.fullmatch(name) else None


def _record(raw: object) -> Signal:
    """One S3 event record -> a signal; EventParseError names the required field that is unusable;
    _Ignored for an event name replmon does not read."""
    if not isinstance(raw, Mapping):
        raise EventParseError(f"a record must be a JSON object, got {type(raw).__name__}")
    r = _Reader()
    event_name = _required_text(raw, "eventName", "eventName")
    s3 = _required_mapping(raw, "s3", "s3")
    bucket = _bucket(_required_text(_required_mapping(s3, "bucket", "s3.bucket"), "name", "s3.bucket.name"), "s3.bucket.name")
    obj = _required_mapping(s3, "object", "s3.object")
    key = _key(_required_text(obj, "key", "s3.object.key"), "s3.object.key", decode=True)
    if "eventTime" not in raw:
        raise EventParseError("eventTime: field required")
    when = parse_time(raw["eventTime"], "eventTime")
    # Not needed to store the record: flagged, never a rejection.
    source = r.text(raw, "eventSource", "eventSource")
    if source not in ("aws:s3", "minio:s3"):
        r.flag("eventSource", raw.get("eventSource"), "not 'aws:s3'")
    version = r.text(raw, "eventVersion", "eventVersion")
    if version is None or not re.match(r"^2\.\d+$", version):
        r.flag("eventVersion", raw.get("eventVersion"), "not a 2.x S3 event (S3 sends 2.1-2.3 and later 2.x); read as 2.x")
    origin = "minio" if event_name.startswith("s3:") else "aws"
    name = event_name.removeprefix("s3:")
    version_id = _version_id(r, obj, "versionId", "s3.object.versionId")
    size = r.size(obj, "size", "s3.object.size")
    if name.startswith("ObjectCreated:"):
        return ObjectCreated(bucket, key, when, name, version_id, size, flags=tuple(r.flags), raw=tuple(r.raw.items()))
    if not name.startswith("Replication:"):
        raise _Ignored(f"{event_name}: not a replication signal (replmon reads s3:Replication:* and s3:ObjectCreated:*)")
    kind = name.removeprefix("Replication:")
    if kind not in REPLICATION_KINDS:
        r.flags.append(f"eventName: {kind!r} is not a replication event S3 documents ({', '.join(REPLICATION_KINDS[:4])}); stored as sent")
    data = r.mapping(raw, "replicationEventData", "replicationEventData")
    if "replicationEventData" not in raw and origin == "aws":
        r.flags.append("replicationEventData: missing (S3 sends it with every replication event, eventVersion 2.2+)")
    dest_text = r.text(data, "destinationBucket", "replicationEventData.destinationBucket")
    dest = _bucket_name(dest_text)
    if dest_text and dest is None:
        r.flag("replicationEventData.destinationBucket", dest_text, "not a bucket ARN or name")
    return ReplicationEvent(
        kind=kind, source_bucket=bucket, key=key, event_time=when, version_id=version_id, size=size,
        rule_id=r.text(data, "replicationRuleId", "replicationEventData.replicationRuleId"), destination_bucket=dest,
        s3_operation=r.text(data, "s3Operation", "replicationEventData.s3Operation"),
        request_time=r.time(data, "requestTime", "replicationEventData.requestTime"),
        failure_reason=r.text(data, "failureReason", "replicationEventData.failureReason"),
        threshold=r.text(data, "threshold", "replicationEventData.threshold"),
        # AWS documents no format for replicationTime: an ISO-8601 time is read, anything else kept as sent.
        replication_time=r.time(data, "replicationTime", "replicationEventData.replicationTime"),
        origin=origin, flags=tuple(r.flags), raw=tuple(r.raw.items()),
    )


def parse_record(raw: object) -> Signal:
    """One S3 event record -> a signal. Raises :class:`EventParseError` (naming the field) when a
    field needed to store it is missing or unusable, or when its event name is not one replmon reads."""
    try:
        return _record(raw)
    except _Ignored as exc:
        raise EventParseError(f"eventName: {exc}") from None


def _is_test_event(body: object) -> bool:
    return isinstance(body, Mapping) and body.get("Event") == "s3:TestEvent"


def _eventbridge(raw: Mapping[str, Any]) -> Signal:
    """An EventBridge "Object Created" event (R11); required: detail-type, time, bucket, key."""
    r = _Reader()
    detail_type = _required_text(raw, "detail-type", "detail-type")
    if detail_type != "Object Created":
        raise _Ignored(f"detail-type {detail_type!r}: replmon reads only 'Object Created' from EventBridge "
                       "(S3 sends no replication events there)")
    detail = _required_mapping(raw, "detail", "detail")
    bucket = _bucket(_required_text(_required_mapping(detail, "bucket", "detail.bucket"), "name", "detail.bucket.name"),
                     "detail.bucket.name")
    obj = _required_mapping(detail, "object", "detail.object")
    key = _key(_required_text(obj, "key", "detail.object.key"), "detail.object.key", decode=False)
    if "time" not in raw:
        raise EventParseError("time: field required")
    when = parse_time(raw["time"], "time")
    reason = r.text(detail, "reason", "detail.reason") or "Unknown"
    return ObjectCreated(bucket, key, when, f"ObjectCreated:{reason}", _version_id(r, obj, "version-id", "detail.object.version-id"),
                         r.size(obj, "size", "detail.object.size"), via="eventbridge", flags=tuple(r.flags), raw=tuple(r.raw.items()))


def _one(position: str, message_id: str | None, read: Any, raw: object) -> Parsed:
    try:
        return Parsed(position, message_id, signal=read(raw))
    except _Ignored as exc:
        return Parsed(position, message_id, acknowledged=str(exc))
    except EventParseError as exc:
        return Parsed(position, message_id, error=str(exc))
    except RecursionError:  # a pathologically nested document
        return Parsed(position, message_id, error="nested too deeply to be an S3 event")


def _records_of(body: object, position: str, message_id: str | None, depth: int = 0) -> list[Parsed]:
    """The records one delivery unit (an SQS body, an SNS message, or the whole payload) carries."""
    if _is_test_event(body):
        return [Parsed(position, message_id, acknowledged="s3:TestEvent (sent when a notification is configured)")]
    if not isinstance(body, Mapping):
        return [Parsed(position, message_id, error=f"not an S3 notification: a {type(body).__name__}, not a JSON object")]
    if body.get("source") == "aws.s3" and "detail-type" in body:
        return [_one(position, message_id, _eventbridge, body)]
    if "Records" in body:
        records = body["Records"]
        if not isinstance(records, list) or not records:
            return [Parsed(position, message_id, error="Records: must be a non-empty list")]
        return [_one(f"{position} record {i}", message_id, _record, raw) for i, raw in enumerate(records, 1)]
    if body.get("Type") == "Notification" and "Message" in body:
        # SNS -> SQS without raw message delivery: the S3 notification is the Message, as JSON text.
        message = body["Message"]
        if depth >= MAX_ENVELOPES or not isinstance(message, str):
            return [Parsed(position, message_id, error="Message: an SNS notification's Message must be JSON text")]
        try:
            inner = json.loads(message)
        except (json.JSONDecodeError, RecursionError):
            return [Parsed(position, message_id, error="Message: the SNS notification's Message is not JSON")]
        return _records_of(inner, position, message_id, depth + 1)
    if "eventName" in body or "eventSource" in body:
        return [_one(position, message_id, _record, body)]
    return [Parsed(position, message_id, error="not an S3 notification, S3 test event, SNS notification or EventBridge S3 event")]


def is_sqs_batch(payload: object) -> bool:
    recs = payload.get("Records") if isinstance(payload, Mapping) else None
    return bool(recs) and isinstance(recs, list) and isinstance(recs[0], Mapping) and recs[0].get("eventSource") == "aws:sqs"


def parse_sqs_message(message: object, position: str) -> list[Parsed]:
    """One SQS message (Lambda's record shape): its body is JSON text."""
    if not isinstance(message, Mapping):
        return [Parsed(position, None, error="an SQS message must be a JSON object")]
    mid = message.get("messageId") if isinstance(message.get("messageId"), str) else None
    body_text = message.get("body")
    if not isinstance(body_text, str):
        return [Parsed(position, mid, error="body: missing or not a string")]
    try:
        body = json.loads(body_text)
    except json.JSONDecodeError as exc:
        return [Parsed(position, mid, error=f"body: not JSON ({exc.msg} at char {exc.pos})")]
    except RecursionError:
        return [Parsed(position, mid, error="body: nested too deeply to be an S3 event")]
    return _records_of(body, position, mid)


def parse_payload(payload: object) -> list[Parsed]:
    """Every record of any accepted payload shape (see the module's docstring). Never raises: a
    record that cannot be stored is a :class:`Parsed` with its ``error``."""
    if isinstance(payload, Mapping) and is_sqs_batch(payload):
        out: list[Parsed] = []
        for i, msg in enumerate(payload["Records"], 1):
            out += parse_sqs_message(msg, f"message {i}")
        return out
    return _records_of(payload, "payload", None)
