"""Property-based tests of the S3 event parser: mutations of AWS's documented shapes.

Seeds, each as AWS documents it (events/s3/*.json; docs/REFERENCES.md R9-R11):
- the S3 notification records, eventVersion 2.1 (ObjectCreated) and 2.2 (replication events with
  ``replicationEventData``): "Event message structure",
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html
  ("The minor version is incremented if Amazon S3 adds new fields"; no documented format for
  ``replicationTime``; AWS's OperationFailedReplication example has none), and "Receiving replication
  failure events with Amazon S3 Event Notifications",
  https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-metrics-events.html;
- the ``s3:TestEvent`` ("uses a different format than regular S3 event notifications");
- the EventBridge "Object Created" event, https://docs.aws.amazon.com/AmazonS3/latest/userguide/ev-events.html;
- an SNS notification wrapping a notification (``Type: Notification``, ``Message`` = the JSON text):
  "HTTP/HTTPS notification JSON format", https://docs.aws.amazon.com/sns/latest/dg/http-notification-json.html
  (what an SQS queue subscribed without raw message delivery receives);
- Lambda's SQS event (``Records[].body``, ``messageId``), as in events/s3/sqs_batch_mixed.json.

Properties: the parser never raises anything but its own error type; a record whose required fields
(event name, bucket, key, event time) are intact is stored, whatever else was changed, removed or
added; a bad record fails only its own SQS message.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.adapters.metrics import NullMetrics
from replmon.core.ports import TransactOutcome, TransactPut
from replmon.core.route import Route
from replmon.signals.event_ingest import KEPT_KINDS, IngestDeps, ingest, plan_ingest
from replmon.signals.rollup import EVENT_ATTRS, event_attr
from replmon.signals.s3events import EventParseError, ObjectCreated, ReplicationEvent, parse_payload, parse_record
from tests.conftest import ROOT, route

S3_EVENTS = ROOT / "events" / "s3"
ROUTES = [Route.model_validate(route())]
PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Path = tuple[Any, ...]


def load(name: str) -> Any:
    return json.loads((S3_EVENTS / name).read_text())


#: (name, record, required paths) - a record is rejected only if one of these is broken.
RECORD_REQUIRED: list[Path] = [("eventName",), ("eventTime",), ("s3",), ("s3", "bucket"), ("s3", "bucket", "name"),
                               ("s3", "object"), ("s3", "object", "key")]
#: What storing also reads: a replication event finds its registry route by source bucket, destination
#: and rule (signals/event_ingest.py); with another destination or rule it is an UnmappedEvent, kept, not counted.
STORE_REQUIRED: list[Path] = [*RECORD_REQUIRED, ("replicationEventData",), ("replicationEventData", "destinationBucket"),
                              ("replicationEventData", "replicationRuleId")]
EVENTBRIDGE_REQUIRED: list[Path] = [("source",), ("detail-type",), ("time",), ("detail",), ("detail", "bucket"),
                                    ("detail", "bucket", "name"), ("detail", "object"), ("detail", "object", "key")]
RECORD_SEEDS = [load(n)["Records"][0] for n in ("replication_failed.json", "replication_missed_threshold.json",
                                                 "replication_after_threshold.json", "replication_not_tracked.json",
                                                 "replica_created.json")]
EVENTBRIDGE_SEED = load("eventbridge_object_created.json")
TEST_EVENT = load("test_event.json")


def sns(message: Any) -> dict[str, Any]:
    """An SNS notification as an SQS subscriber without raw message delivery receives it."""
    return {"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
            "TopicArn": "arn:aws:sns:us-east-1:123456789012:replmon-events", "Subject": "Amazon S3 Notification",
            "Message": json.dumps(message), "Timestamp": "2026-11-22T10:00:02.000Z", "SignatureVersion": "1",
            "Signature": "EXAMPLE", "SigningCertURL": "https://sns.us-east-1.amazonaws.com/cert.pem",
            "UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe"}


def sqs(n: int, body: Any) -> dict[str, Any]:
    return {"messageId": f"m{n}", "receiptHandle": f"h{n}", "body": body if isinstance(body, str) else json.dumps(body),
            "attributes": {"ApproximateReceiveCount": "1"}, "messageAttributes": {}, "md5OfBody": "",
            "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:events", "awsRegion": "us-east-1"}


# ------------------------------------------------------------------------------ mutations
odd_text = st.sampled_from(["", " ", "\x00", "\ud800", "..", "a/b", "2026-11-22 10:00", "null", "15", "NaN", "é" * 300])
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20) | odd_text
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                           max_leaves=6)


def paths(doc: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every path into a JSON document (keys of objects, indexes of lists), the document's own too."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths(v, (*prefix, i))


def touches(path: Path, required: list[Path]) -> bool:
    """Would changing ``path`` change a required field (it is one, or holds one)?"""
    return any(req[: len(path)] == path for req in required)


def apply(doc: Any, path: Path, op: str, value: Any) -> Any:
    if not path:
        return value if op == "replace" else doc
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if op == "delete" and isinstance(parent, dict):
        del parent[last]
    elif op == "add" and isinstance(parent[last], dict):
        parent[last][f"new-{len(parent[last])}"] = value  # a field AWS adds in a later minor version
    else:
        parent[last] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn, seed: Any, required: list[Path], *, keep_required: bool) -> Any:
    """``seed`` with 1-4 mutations: a field deleted, replaced by any JSON value, or a new field
    added; with ``keep_required`` only paths that neither are nor hold a required field."""
    doc = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 4))):
        candidates = [p for p in paths(doc) if p and not (keep_required and touches(p, required))]
        if keep_required:  # adding a field inside a required object keeps it intact
            candidates += [p for p in paths(doc) if isinstance(_at(doc, p), dict)]
        if not candidates:
            break
        path = draw(st.sampled_from(sorted(set(candidates), key=repr)))
        ops = ["add"] if keep_required and touches(path, required) else ["delete", "replace", "add"]
        doc = apply(doc, path, draw(st.sampled_from(ops)), draw(json_values))
    return doc


def _at(doc: Any, path: Path) -> Any:
    for p in path:
        doc = doc[p]
    return doc


# ------------------------------------------------------------------------------ a table that checks what it is given
class Table:
    """In memory, but every item goes through the DynamoDB adapter's serializer (a value DynamoDB
    could not take fails here as it would there)."""

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.counters: dict[str, int] = {}
        self.arrivals: dict[tuple[str, str], set[str]] = {}

    def put_item_once(self, item: dict[str, Any]) -> bool:
        DynamoLatencyStore._item(item)
        key = (item["route"], item["at"])
        if key in self.items:
            return False
        self.items[key] = item
        return True

    def transact(self, writes: Any, token: str | None = None) -> TransactOutcome:
        """Each put and each counter through the adapter's own request builder (a value or an
        attribute name DynamoDB could not take fails here as it would there)."""
        adapter = DynamoLatencyStore("t", None)
        for w in writes:
            adapter._transact_item(w)
            if isinstance(w, TransactPut):
                self.items[(w.item["route"], w.item["at"])] = dict(w.item)
            else:
                for k, n in w.add.items():
                    self.counters[k] = self.counters.get(k, 0) + n
        return TransactOutcome(True)

    def add_arrival(self, pk: str, sk: str, attribute: str, created_at: float, expires_at: int) -> bool:
        first = attribute not in self.arrivals.setdefault((pk, sk), set())
        self.arrivals[(pk, sk)].add(attribute)
        return first

    def get_record(self, route: str, sort_key: str) -> None:
        return None


def store(record: dict[str, Any]) -> Table:
    """Parse one record and ingest it as IngestEvents does; the table it went to."""
    [p] = parse_payload({"Records": [record]})
    assert p.error is None, p.error
    table = Table()
    deps = IngestDeps(table, NullMetrics(), ROUTES, retention_days=30, skew_seconds=0.5)  # type: ignore[arg-type]
    ingest([plan_ingest(p, deps.routes, deps.prefixes)], deps)
    return table


# ------------------------------------------------------------------------------ properties
@PROPERTY
@given(st.data())
def test_the_parser_raises_only_its_own_error_on_any_mutation(data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from([*RECORD_SEEDS, EVENTBRIDGE_SEED]))
    doc = data.draw(mutated(seed, [], keep_required=False))
    with contextlib.suppress(EventParseError):  # anything else raised fails the test
        parse_record(doc)
    for shape in ({"Records": [doc]}, doc, sns({"Records": [doc]}), {"Records": [sqs(1, {"Records": [doc]}), sqs(2, sns(doc))]}):
        for p in parse_payload(shape):  # never raises: each record's fate is one of three
            assert [p.signal is not None, p.acknowledged is not None, p.error is not None].count(True) == 1, p


@PROPERTY
@given(st.data())
def test_any_payload_at_all_is_answered_never_raised(data: st.DataObject) -> None:
    payload = data.draw(json_values | st.builds(lambda v: {"Records": [v]}, json_values)
                        | st.builds(lambda v: {"Records": [sqs(1, v)]}, json_values | st.text(max_size=30)))
    for p in parse_payload(payload):
        assert [p.signal is not None, p.acknowledged is not None, p.error is not None].count(True) == 1


@PROPERTY
@given(st.data())
def test_a_record_with_its_required_fields_intact_is_stored_whatever_else_changed(data: st.DataObject) -> None:
    seed = data.draw(st.sampled_from(RECORD_SEEDS))
    doc = data.draw(mutated(seed, STORE_REQUIRED, keep_required=True))
    table = store(doc)
    sig = parse_record(doc)
    if isinstance(sig, ReplicationEvent):  # counted once; kept as an item too when a person needs it
        assert table.counters == {event_attr(sig.kind, sig.event_time): 1}
        kept = [i for i in table.items.values() if "#events/" in i["route"]]
        assert len(kept) == (sig.kind in KEPT_KINDS or sig.kind not in EVENT_ATTRS)
        assert all(item["kind"] == sig.kind and item["key"] == sig.key for item in kept)
    else:  # the documented replica ObjectCreated of a probe key: an arrival
        assert isinstance(sig, ObjectCreated) and len(table.arrivals) == 1


@PROPERTY
@given(st.data())
def test_an_eventbridge_object_created_with_its_required_fields_intact_is_read(data: st.DataObject) -> None:
    doc = data.draw(mutated(EVENTBRIDGE_SEED, EVENTBRIDGE_REQUIRED, keep_required=True))
    [p] = parse_payload(doc)
    assert p.error is None and isinstance(p.signal, ObjectCreated), p
    assert p.signal.key == EVENTBRIDGE_SEED["detail"]["object"]["key"] and p.signal.via == "eventbridge"


@PROPERTY
@given(st.data())
def test_the_same_record_reads_the_same_raw_in_sqs_or_through_sns(data: st.DataObject) -> None:
    doc = data.draw(mutated(data.draw(st.sampled_from(RECORD_SEEDS)), RECORD_REQUIRED, keep_required=True))
    raw, = parse_payload({"Records": [doc]})
    via_sqs, = parse_payload({"Records": [sqs(1, {"Records": [doc]})]})
    via_sns, = parse_payload({"Records": [sqs(1, sns({"Records": [doc]}))]})
    assert raw.signal == via_sqs.signal == via_sns.signal is not None
    assert via_sns.message_id == "m1"


@PROPERTY
@given(data=st.data())
def test_a_broken_required_field_fails_only_its_own_message(data: st.DataObject) -> None:
    """A batch of good messages (each mutated only where storing does not look) and one whose
    required field is removed or replaced by a value of another type: the bad one is the only
    failure, it names the field, and every good one is read."""
    broken = data.draw(st.sampled_from([("eventName",), ("eventTime",), ("s3", "bucket", "name"), ("s3", "object", "key")]))
    goods = [data.draw(mutated(data.draw(st.sampled_from(RECORD_SEEDS)), RECORD_REQUIRED, keep_required=True)) for _ in range(2)]
    bad = copy.deepcopy(data.draw(st.sampled_from(RECORD_SEEDS)))
    op = data.draw(st.sampled_from(["delete", "replace"]))
    value = data.draw(st.none() | st.integers() | st.lists(st.integers(), max_size=2) | st.just(""))
    apply(bad, broken, op, value)
    position = data.draw(st.integers(0, len(goods)))
    bodies: list[Any] = [{"Records": [g]} for g in goods]
    bodies.insert(position, {"Records": [bad]})
    bodies = [sns(b) if data.draw(st.booleans()) else b for b in bodies]  # some through SNS
    parsed = parse_payload({"Records": [sqs(i, b) for i, b in enumerate(bodies)]})
    failed = {p.message_id for p in parsed if p.error}
    assert failed == {f"m{position}"}
    [err] = [p.error for p in parsed if p.error]
    assert err is not None and err.startswith(".".join(broken)), err
    assert sum(1 for p in parsed if p.signal is not None) == len(goods)


def test_the_documented_test_event_is_acknowledged_in_every_envelope() -> None:
    for shape in (TEST_EVENT, sns(TEST_EVENT), {"Records": [sqs(1, TEST_EVENT), sqs(2, sns(TEST_EVENT))]}):
        assert all(p.acknowledged and "TestEvent" in p.acknowledged for p in parse_payload(shape))
