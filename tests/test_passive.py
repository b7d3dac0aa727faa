"""Passive signals: S3 event shapes as AWS documents them, the ingest Lambda's partial batch
failures, replica events narrowing intervals, RTC metrics (idle = missing), burn rates, discovery.

Shapes (events/s3/*.json) follow the S3 user guide: "Event message structure" (eventVersion 2.1
for ObjectCreated, 2.2 for replication events with replicationEventData; eventName without the
"s3:" prefix; object keys URL-encoded), "Receiving replication failure events with Amazon S3
Event Notifications", "Amazon S3 replication failure reasons", the s3:TestEvent S3 sends when a
notification is configured, and the EventBridge "Object Created" event.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.core.route import Route
from replmon.fleet.discovery import discover
from replmon.signals.arrivals import ClockDisagreement, tighten
from replmon.signals.s3events import ObjectCreated, ReplicationEvent, parse_payload, parse_record
from replmon.signals.slo import BurnPair, SloSpec, slo_status
from tests.conftest import ROOT
from tests.contract import ContractRun

S3_EVENTS = ROOT / "events" / "s3"


def load(name: str) -> Any:
    return json.loads((S3_EVENTS / name).read_text())


# ------------------------------------------------------------------------------ shapes
def test_a_documented_replication_failure_event_is_read_field_by_field() -> None:
    [p] = parse_payload(load("replication_failed.json"))
    e = p.signal
    assert isinstance(e, ReplicationEvent)
    assert (e.kind, e.source_bucket, e.destination_bucket, e.rule_id) == (
        "OperationFailedReplication", "probe-source", "probe-replica", "replmon-probes")
    assert e.key == "orders/2026/11/22/a b.parquet"  # URL-decoded: S3 sends '+' for a space
    assert (e.failure_reason, e.failure_reason_documented, e.s3_operation) == ("AssumeRoleNotPermitted", True, "OBJECT_PUT")
    assert e.event_time == datetime(2026, 11, 22, 9, 45, 2, 527000, tzinfo=UTC).timestamp()
    assert e.request_time == datetime(2026, 11, 22, 9, 44, 58, 120000, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(("name", "kind"), [("replication_missed_threshold.json", "OperationMissedThreshold"),
                                            ("replication_after_threshold.json", "OperationReplicatedAfterThreshold"),
                                            ("replication_not_tracked.json", "OperationNotTracked")])
def test_each_replication_event_kind(name: str, kind: str) -> None:
    [p] = parse_payload(load(name))
    assert isinstance(p.signal, ReplicationEvent) and p.signal.kind == kind and p.error is None


def test_after_threshold_carries_the_replication_time() -> None:
    [p] = parse_payload(load("replication_after_threshold.json"))
    assert isinstance(p.signal, ReplicationEvent) and p.signal.threshold == "15"
    assert p.signal.replication_time == datetime(2026, 11, 22, 10, 3, 10, 512000, tzinfo=UTC).timestamp()


def test_replica_object_created_2_1_and_eventbridge_give_the_same_signal() -> None:
    [a] = parse_payload(load("replica_created.json"))
    [b] = parse_payload(load("eventbridge_object_created.json"))
    assert isinstance(a.signal, ObjectCreated) and isinstance(b.signal, ObjectCreated)
    assert (a.signal.bucket, a.signal.key, a.signal.size) == (b.signal.bucket, b.signal.key, b.signal.size)
    assert a.signal.event_time == datetime(2026, 11, 22, 9, 45, 3, 250000, tzinfo=UTC).timestamp()
    assert b.signal.via == "eventbridge" and b.signal.event_name == "ObjectCreated:PutObject"


def test_the_s3_test_event_is_acknowledged_not_stored() -> None:
    [p] = parse_payload(load("test_event.json"))
    assert p.signal is None and p.error is None and "TestEvent" in (p.acknowledged or "")


def test_newer_unified_event_versions_are_read_and_minio_names_too() -> None:
    rec = load("replication_failed.json")["Records"][0]
    assert isinstance(parse_record({**rec, "eventVersion": "2.5"}), ReplicationEvent)
    minio = {**rec, "eventVersion": "2.0", "eventName": "s3:Replication:OperationCompletedReplication",
             "eventTime": "2026-11-22T10:00:00.123456789Z"}
    minio.pop("replicationEventData")
    e = parse_record(minio)
    assert isinstance(e, ReplicationEvent) and e.origin == "minio" and e.destination_bucket is None
    assert e.event_time == pytest.approx(datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=UTC).timestamp())


@pytest.mark.parametrize(("mutate", "needle"), [
    (lambda r: r.pop("eventTime"), "eventTime: field required"),
    (lambda r: r.update(eventTime="yesterday"), "eventTime: 'yesterday' is not an ISO-8601"),
    (lambda r: r.pop("eventName"), "eventName: field required"),
    (lambda r: r["s3"]["bucket"].update(name="a/b"), "s3.bucket.name: 'a/b' is not a bucket name"),
    (lambda r: r["s3"].pop("object"), "s3.object: field required"),
    (lambda r: r["s3"]["object"].update(key=7), "s3.object.key: must be a string"),
])
def test_a_record_missing_what_storing_needs_says_which_field_and_why(mutate: Any, needle: str) -> None:
    """Rejected only for the four fields a stored event needs: event name, bucket, key, event time."""
    rec = load("replication_failed.json")["Records"][0]
    mutate(rec)
    [p] = parse_payload({"Records": [rec]})
    assert p.signal is None and p.error and needle in p.error, p.error


@pytest.mark.parametrize(("mutate", "flag"), [
    (lambda r: r.update(eventVersion="1.0"), "eventVersion"),
    (lambda r: r.update(eventSource="aws:ec2"), "eventSource"),
    (lambda r: r.update(eventName="Replication:OperationExploded"), "eventName"),
    (lambda r: r.pop("replicationEventData"), "replicationEventData: missing"),
    (lambda r: r["replicationEventData"].update(replicationTime="2026-11-22 10:03"), "replicationEventData.replicationTime"),
    (lambda r: r["replicationEventData"].update(replicationTime=1795340702), "replicationEventData.replicationTime"),
    (lambda r: r["replicationEventData"].update(requestTime={"at": "noon"}), "replicationEventData.requestTime"),
    (lambda r: r["s3"]["object"].update(size="big"), "s3.object.size"),
])
def test_a_field_storing_does_not_need_is_kept_as_sent_and_flagged_never_rejected(mutate: Any, flag: str) -> None:
    """AWS documents no format for replicationEventData.replicationTime ("Event message
    structure", https://docs.aws.amazon.com/AmazonS3/latest/userguide/notification-content-structure.html):
    a real OperationMissedThreshold must not wait in the DLQ because of a field replmon only displays."""
    rec = load("replication_failed.json")["Records"][0]
    mutate(rec)
    [p] = parse_payload({"Records": [rec]})
    assert p.error is None and isinstance(p.signal, ReplicationEvent), p
    assert any(f.startswith(flag) for f in p.signal.flags), p.signal.flags
    doc = p.signal.to_json()
    assert doc["flags"] and all(isinstance(v, str) for v in doc["raw"].values())


def test_an_event_replmon_does_not_read_is_acknowledged_not_failed() -> None:
    rec = load("replication_failed.json")["Records"][0]
    rec["eventName"] = "ObjectRemoved:Delete"
    [p] = parse_payload({"Records": [rec]})
    assert p.error is None and p.signal is None and "not a replication signal" in (p.acknowledged or "")


def test_an_undocumented_failure_reason_is_stored_and_flagged() -> None:
    rec = load("replication_failed.json")["Records"][0]
    rec["replicationEventData"]["failureReason"] = "SomethingNew"
    e = parse_record(rec)
    assert isinstance(e, ReplicationEvent) and e.failure_reason == "SomethingNew" and e.failure_reason_documented is False


# ------------------------------------------------------------------------------ the ingest Lambda
def test_a_mixed_batch_fails_exactly_its_poison_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real handler (Powertools BatchProcessor) on moto's DynamoDB: the partial batch response
    names the malformed message and the unknown event, nothing else; the rest is stored once."""
    from moto import mock_aws

    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.adapters.metrics import NullMetrics
    from replmon.core.clock import ManualClock
    from replmon.entry.ingest_events import handler
    from replmon.local.aslrun import LambdaContext
    from replmon.local.tables import ensure_table
    from replmon.wiring import Deps, injected
    from tests.conftest import TABLE, TEMPLATE, route

    for k, v in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        store = DynamoLatencyStore(TABLE, ddb)
        from replmon.adapters.memregistry import MemoryRegistry
        from replmon.core.route import Route
        from replmon.fleet.stack_route import spec_of_route

        registry = MemoryRegistry([spec_of_route(Route.model_validate(route()), groups=1)])  # events map to registry routes
        with injected(Deps(stores=None, store=store, metrics=NullMetrics(), clock=ManualClock(), registry=registry)):  # type: ignore[arg-type]
            batch = load("sqs_batch_mixed.json")
            out = handler(batch, LambdaContext("IngestEvents"))
            again = handler(batch, LambdaContext("IngestEvents"))  # SQS delivers at least once
        # msg-2 is not JSON; msg-5's event kind is one S3 does not document: stored as sent, flagged.
        assert out == again == {"batchItemFailures": [{"itemIdentifier": "msg-2"}]}
        # Counted once each on the hour items, though delivered twice; failures and undocumented kinds are kept too.
        hours = store.roll_items("primary", "h#", "h#~")
        assert sorted((h["at"], k, v) for h in hours for k, v in h.items() if k.startswith("e") and k != "expires_at") == [
            ("h#2026-11-22T09", "eF_45", 1), ("h#2026-11-22T10", "eU_OperationExploded_00", 1)]
        events = [i for n in range(8) for i in store.partition_items(f"primary#events/{n}")]
        assert sorted(e["kind"] for e in events) == ["OperationExploded", "OperationFailedReplication"]
        assert next(e for e in events if e["kind"] == "OperationExploded")["flags"]
        assert store.partition_items("primary#events") == []  # the layout before counters is no longer written
        assert [i["at"] for i in store.partition_items("primary#arrivals")] == [
            "2026-11-22T09:45:00.000Z#20261122T094500Z-a1b2c3-primary-1MiB-t1"]


def test_a_replica_event_narrows_a_stored_interval_and_never_widens_it(contract: ContractRun) -> None:
    assert contract.narrowed is not None
    before, after = contract.narrowed
    assert before.latency_lo is not None and before.latency_hi is not None
    assert after.latency_lo is not None and after.latency_hi is not None
    assert before.latency_lo <= after.latency_lo < after.latency_hi <= before.latency_hi
    assert after.width is not None and before.width is not None and after.width <= 0.0021 < before.width
    assert contract.ingest_response == {"batchItemFailures": [{"itemIdentifier": "m2"}]}


@pytest.mark.parametrize(("scenario", "narrower"), [("event-first", "RecordResult"), ("event-first-spooled", "Housekeeping")])
def test_a_replica_event_before_the_record_narrows_it_when_it_is_stored(contract: ContractRun, scenario: str, narrower: str) -> None:
    probe = next(r for r in contract.records if r.run_id == contract.event_first_run_ids[scenario])
    assert probe.status is ProbeStatus.COMPLETED and probe.width is not None and probe.width <= 0.1 + 1e-6
    recorded = [i.result for i in contract.outputs[scenario].invocations if i.function == "Cleanup" and i.result]
    assert recorded[0]["recorded"] == ("spooled" if narrower == "Housekeeping" else "stored")
    # (the event came before the record existed: only the function that stored it could narrow it)


def test_a_contradicting_event_leaves_the_poll_interval() -> None:
    with pytest.raises(ClockDisagreement):
        tighten(1.0, 2.0, 100.0, ["dst"], {"dst": 110.0}, 0.25)
    assert tighten(1.0, 2.0, 100.0, ["dst"], {"dst": 101.5}, 1.0) is None  # the allowance is wider than the poll
    assert tighten(1.0, 9.0, 100.0, ["dst"], {"other": 103.0}, 0.25) is None  # not this probe's destination


# ------------------------------------------------------------------------------ RTC collector
def test_the_collector_stores_rtc_metrics_and_an_idle_route_is_missing_not_zero(contract: ContractRun) -> None:
    [h] = contract.health["routes"]
    assert h["rpo"]["inputs"]["rtc_replication_latency"] == 42.0 and h["rpo"]["inputs"]["rtc_bytes_pending"] == 2 * 2**30
    [sample] = h["rtc"]
    assert sample["missing"] == ["OperationsFailedReplication"]  # nothing was put: missing, not 0
    assert h["rpo"]["seconds"] == 42.0 and not h["rpo"]["unbounded"]
    # CloudWatch down: the route is still evaluated, from the probes and the collections already
    # stored in the window (the first one's 42 s); the failed read is counted.
    [h2] = contract.health_without_rtc["routes"]
    assert h2["rpo"]["inputs"]["rtc_replication_latency"] == 42.0 and len(h2["rtc"]) == 1
    assert h2["slo"]["total"] == h["slo"]["total"]
    assert any(fn == "CollectSignals" and "RtcReadFailed" in json.dumps(b) for fn, b in contract.emf)


def test_an_idle_route_under_moto_cloudwatch_has_no_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws

    from replmon.adapters.cloudwatch import CloudWatchReader
    from replmon.signals.rtc import collect_rtc

    for k, v in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        r = Route.model_validate({"name": "idle", "source": {"bucket": "src-a"}, "destinations": [{"bucket": "dst-b", "rule_id": "r1"}, {"bucket": "dst-c"}]})
        [sample] = collect_rtc(lambda key: CloudWatchReader(cw), r, datetime.now(UTC).timestamp())
    assert (sample.destination, sample.rule_id) == ("dst-b", "r1")  # "dst-c" names no rule: RTC not read for it
    assert sorted(sample.missing) == sorted(["ReplicationLatency", "BytesPendingReplication", "OperationsPendingReplication",
                                             "OperationsFailedReplication"])


# ------------------------------------------------------------------------------ burn rates
def rec(at: float, good: bool, n: int) -> ProbeRecord:
    return ProbeRecord(route="r", probe_id=f"p{n}", run_id="20261122T000000Z-x", planned_at=at, size_bytes=1, size_class="1MiB",
                       trial=1, status=ProbeStatus.COMPLETED if good else ProbeStatus.FAILED, put_end=at,
                       latency_lo=1.0, latency_hi=2.0 if good else None)


def history(now: float, bad_every: int, hours: float, per_hour: int = 12) -> list[ProbeRecord]:
    n = int(hours * per_hour)
    # probe i is i+0.5 intervals old; every bad_every-th one fails, the newest ones succeed
    return [rec(now - (i + 0.5) * 3600 / per_hour, bad_every == 0 or i % bad_every != bad_every // 2, i) for i in range(n)]


SPEC = SloSpec(target=0.99, probe_interval_seconds=300, pairs=(BurnPair("page", 3600, 300, 14.4), BurnPair("ticket", 21600, 1800, 6.0)))


def test_no_burn_is_silent() -> None:
    s = slo_status(history(1e9, 0, 24), 1e9, SPEC)
    assert s.alerts == {"page": False, "ticket": False} and s.burn["1h"] == 0.0 and s.budget_left == 1.0


def test_a_fast_burn_pages_and_tickets() -> None:
    now = 1e9
    recs = history(now, 0, 24) + [rec(now - 60 * i - 30, False, 1000 + i) for i in range(30)]  # the last 30 min all fail
    s = slo_status(recs, now, SPEC)
    assert s.alerts == {"page": True, "ticket": True}, s.burn


def test_a_slow_burn_tickets_later_and_never_pages() -> None:
    """~10 % bad (burn ~10x at 99 %): above the ticket's 6x, below the page's 14.4x."""
    now = 1e9
    s = slo_status(history(now, 10, 24), now, SPEC)
    assert 6 < s.burn["6h"] < 14.4 and s.burn["1h"] < 14.4 and s.alerts == {"page": False, "ticket": True}, s.burn
    young = slo_status(history(now, 10, 24)[:2], now, SPEC)  # two probes so far, both good: nothing yet
    assert young.alerts == {"page": False, "ticket": False}


def test_a_window_without_probes_is_no_data_not_zero() -> None:
    s = slo_status([rec(1e9 - 7200, True, 1)], 1e9, SPEC)
    assert s.burn["1h"] is None and s.burn["5m"] is None and s.burn["6h"] == 0.0


# ------------------------------------------------------------------------------ discovery
def test_discovery_multi_rule_multi_destination_cross_account_and_priority() -> None:
    cfg = {"Role": "arn:aws:iam::111122223333:role/rep", "Rules": [
        {"ID": "everything-to-dr", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": ""},
         "Destination": {"Bucket": "arn:aws:s3:::dr-west", "ReplicationTime": {"Status": "Enabled", "Time": {"Minutes": 15}},
                         "Metrics": {"Status": "Enabled", "EventThreshold": {"Minutes": 15}}}, "DeleteMarkerReplication": {"Status": "Disabled"}},
        {"ID": "probes-to-dr", "Priority": 5, "Status": "Enabled", "Filter": {"Prefix": "replmon-"},
         "Destination": {"Bucket": "arn:aws:s3:::dr-west", "Metrics": {"Status": "Enabled"}}, "DeleteMarkerReplication": {"Status": "Disabled"}},
        {"ID": "to-vault", "Priority": 2, "Status": "Enabled", "Filter": {"And": {"Prefix": "replmon-probes/", "Tags": []}},
         "Destination": {"Bucket": "arn:aws:s3:::vault", "Account": "444455556666"}, "DeleteMarkerReplication": {"Status": "Disabled"}},
        {"ID": "tagged", "Priority": 3, "Status": "Enabled", "Filter": {"Tag": {"Key": "tier", "Value": "gold"}},
         "Destination": {"Bucket": "arn:aws:s3:::gold"}, "DeleteMarkerReplication": {"Status": "Disabled"}},
        {"ID": "off", "Priority": 4, "Status": "Disabled", "Filter": {"Prefix": ""}, "Destination": {"Bucket": "arn:aws:s3:::old"},
         "DeleteMarkerReplication": {"Status": "Disabled"}},
    ]}
    d = discover("prod", cfg, "replmon-probes/", roles={"444455556666": "arn:aws:iam::444455556666:role/replmon-reader"})
    assert [(r.rule_id, r.covers_probes, r.chosen) for r in d.rules] == [
        ("everything-to-dr", True, False), ("probes-to-dr", True, True), ("to-vault", True, True), ("tagged", False, False), ("off", True, False)]
    assert d.route is not None
    dests = {x.bucket: x for x in d.route.destinations}
    assert set(dests) == {"dr-west", "vault"}  # every destination: COMPLETED only when all have the replica
    assert dests["dr-west"].rule_id == "probes-to-dr"  # the higher priority wins for one destination
    assert dests["vault"].account == "444455556666" and dests["vault"].role_arn == "arn:aws:iam::444455556666:role/replmon-reader"
    assert any("tags" in n for n in d.notes)


def test_discovery_names_a_prefix_no_rule_covers() -> None:
    cfg = {"Rules": [{"ID": "logs", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": "logs/"}, "Destination": {"Bucket": "arn:aws:s3:::dr"}}]}
    d = discover("prod", cfg, "replmon-probes/")
    assert d.route is None and "no enabled rule replicates" in d.notes[-1]


def test_replmon_routes_reads_a_real_get_bucket_replication_answer(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from moto import mock_aws

    from replmon.cli import main

    for k, v in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        for b in ("prod", "dr-a", "dr-b"):
            s3.create_bucket(Bucket=b)
            s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Enabled"})
        s3.put_bucket_replication(Bucket="prod", ReplicationConfiguration={"Role": "arn:aws:iam::123456789012:role/r", "Rules": [
            {"ID": "a", "Priority": 1, "Status": "Enabled", "Filter": {"Prefix": ""}, "Destination": {"Bucket": "arn:aws:s3:::dr-a"},
             "DeleteMarkerReplication": {"Status": "Disabled"}},
            {"ID": "b", "Priority": 2, "Status": "Enabled", "Filter": {"Prefix": "replmon-probes/"}, "Destination": {"Bucket": "arn:aws:s3:::dr-b"},
             "DeleteMarkerReplication": {"Status": "Disabled"}}]})
        with pytest.raises(SystemExit) as exc:
            main(["routes", "--source-bucket", "prod", "--source-region", "us-east-1", "--format", "json"])
    assert exc.value.code == 0
    doc = json.loads(capsys.readouterr().out)
    [r] = doc["routes"]
    assert [(d["bucket"], d["rule_id"]) for d in r["destinations"]] == [("dr-a", "a"), ("dr-b", "b")]
    Route.model_validate(r)  # usable as a probe request's route as printed


# ------------------------------------------------------------------------------ the CLI parser
def test_events_parse_exits_1_and_names_each_failure(capsys: pytest.CaptureFixture[str]) -> None:
    from replmon.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["events", "parse", str(S3_EVENTS / "sqs_batch_mixed.json"), "--format", "json"])
    assert exc.value.code == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(f["message_id"], f["error"].split(":")[0]) for f in doc["failures"]] == [("msg-2", "body")]
    stored = [(r["store"]["partition"], r["store"].get("counter"), (r["store"].get("kept") or "")[:-1]) for r in doc["records"] if "store" in r]
    assert stored == [("primary#arrivals", None, "")]  # a probe's replica names its route in its key
    # No routes given: the replication events map to none, and say why; no route name is invented.
    assert [r["unmapped"]["reason"] for r in doc["records"] if "unmapped" in r] == ["source_bucket", "source_bucket"]


def test_events_parse_exits_0_for_a_clean_payload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from replmon.cli import main

    routes = tmp_path / "routes.json"
    routes.write_text(json.dumps({"routes": [{"name": "orders", "source": {"bucket": "probe-source"}, "destinations": [{"bucket": "probe-replica"}]}]}))
    with pytest.raises(SystemExit) as exc:
        main(["events", "parse", str(S3_EVENTS / "replication_failed.json"), "--routes-file", str(routes), "--format", "json"])
    assert exc.value.code == 0
    assert json.loads(capsys.readouterr().out)["records"][0]["store"]["route"] == "orders"


def test_two_way_replication_a_probe_replica_on_another_routes_source_still_counts() -> None:
    """east -> west and west -> east: west is the second route's source and the first's destination."""
    from replmon.signals.event_ingest import plan_ingest

    routes = [Route.model_validate({"name": n, "source": {"bucket": s}, "destinations": [{"bucket": d}]})
              for n, s, d in (("e2w", "east-data", "west-data"), ("w2e", "west-data", "east-data"))]
    rec = load("replica_created.json")
    key = "replmon-probes/20261122T094500Z-a1b2c3/e2w/20261122T094500Z-a1b2c3-e2w-1MiB-t1"
    for bucket, expect in (("west-data", "arrival"), ("east-data", "ignored")):
        rec["Records"][0]["s3"]["bucket"]["name"] = bucket
        rec["Records"][0]["s3"]["object"]["key"] = key
        [p] = parse_payload(rec)
        out = plan_ingest(p, routes, ["replmon-probes/"])
        assert (out.arrival is not None, out.ignored is not None) == (expect == "arrival", expect == "ignored"), (bucket, out)
