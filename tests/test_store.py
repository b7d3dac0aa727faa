"""The latency store: schema from template.yaml, TTL really named, idempotent writes, key-range queries."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws

from replmon.adapters import clients
from replmon.adapters.dynamodb import DynamoLatencyStore
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, ProbeRecord, ProbeStatus
from replmon.core.route import Route
from replmon.local.tables import ensure_table
from replmon.local.template import load_template
from replmon.probe.results import to_record
from replmon.probe.state import Poll, ProbeState, Upload
from replmon.probe.steps import record_step
from replmon.wiring import Deps, from_env
from tests.conftest import TABLE, TEMPLATE, route


@pytest.fixture
def ddb() -> Any:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(client, TABLE, TEMPLATE)
        yield client


def run_at(at: float) -> str:
    """A run id stamped with ``at`` (record keys sort by the stamp)."""
    import time

    from replmon.core.keys import RUN_STAMP

    return time.strftime(RUN_STAMP, time.gmtime(at)) + "-test"


def rec(at: float, probe: str = "p", status: ProbeStatus = ProbeStatus.COMPLETED, route_name: str = "primary") -> ProbeRecord:
    return ProbeRecord(route=route_name, probe_id=probe, run_id=run_at(at), planned_at=at, put_end=at + 0.5, size_bytes=2**20, size_class="1MiB", trial=1,
                       status=status, latency_lo=1.0, latency_hi=2.0, head_count=3, bound_seconds=1.0)


def test_template_ttl_names_the_attribute_records_carry(ddb: Any) -> None:
    props = load_template(TEMPLATE)["Resources"]["LatencyTable"]["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": TTL_ATTRIBUTE, "Enabled": True}
    assert [k["AttributeName"] for k in props["KeySchema"]] == [PARTITION_KEY, SORT_KEY]
    # The table made from the template has that TTL, and a stored record carries it as a number.
    ttl = ddb.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == TTL_ATTRIBUTE and ttl["TimeToLiveStatus"] == "ENABLED"
    DynamoLatencyStore(TABLE, ddb).put_once(rec(1_790_000_000.0))
    item = ddb.scan(TableName=TABLE)["Items"][0]  # a test may scan; the code never does
    assert int(item[TTL_ATTRIBUTE]["N"]) == 1_790_000_000 + 90 * 86_400  # from the planned time


def test_put_once_is_idempotent(ddb: Any) -> None:
    store = DynamoLatencyStore(TABLE, ddb)
    assert store.put_once(rec(1_790_000_000.0)) is True
    assert store.put_once(rec(1_790_000_000.0)) is False
    assert ddb.scan(TableName=TABLE)["Count"] == 1


class Capture:
    """A metrics sink that keeps what RecordResult publishes."""

    def __init__(self) -> None:
        self.published: list[ProbeRecord] = []

    def publish(self, r: ProbeRecord) -> None:
        self.published.append(r)

    def count(self, *a: Any, **k: Any) -> None:
        return None


def completed_state() -> dict[str, Any]:
    """A COMPLETED probe's state as PollReplication hands it to RecordResult."""
    return ProbeState(
        probe_id="p1", run_id="19700101T000139Z-r1", planned_at=99.0, route=Route(**route()), size_bytes=2**20, size_class="1MiB", trial=1,
        timeout_seconds=60, target_seconds=900,
        upload=Upload(key="k", version_id="v", etag="e", method="put", put_start=100.0, put_end=101.0),
        poll=Poll(status="COMPLETED", head_count=4, last_pending=2.5, first_final=3.4),
    ).dump()


def test_retried_record_step_writes_one_record_and_one_metric(ddb: Any) -> None:
    metrics = Capture()
    published = metrics.published
    deps = Deps(stores=lambda e: None, store=DynamoLatencyStore(TABLE, ddb), metrics=metrics)  # type: ignore[arg-type,return-value]
    st = completed_state()
    first, second = record_step(json.loads(json.dumps(st)), deps), record_step(st, deps)
    assert first["recorded"] == "stored" and second["recorded"] == "duplicate"
    items = {(i["route"]["S"], i["at"]["S"]): i for i in ddb.scan(TableName=TABLE)["Items"]}
    # the record once, its hour item counting it once, and (a write in a long-past hour: 1970, by
    # the real clock) the period cache's late-write generation bumped once
    assert sorted(items) == [("primary", "1970-01-01T00:01:39.000Z#p1"), ("primary#roll", "h#1970-01-01T00"), ("primary#roll", "period")]
    hour = items[("primary#roll", "h#1970-01-01T00")]
    assert (hour["pj"]["N"], hour["pg"]["N"], items[("primary#roll", "period")]["gen"]["N"]) == ("1", "1", "1")
    assert len(published) == 1


def test_query_reads_a_time_window_of_one_route_newest_first(ddb: Any) -> None:
    store = DynamoLatencyStore(TABLE, ddb)
    for i in range(5):
        store.put_once(rec(1_790_000_000.0 + i * 60, probe=f"p{i}"))
    store.put_once(rec(1_790_000_000.0, probe="other", route_name="other"))
    got = store.query("primary", 1_790_000_060.0, 1_790_000_180.0)
    assert [r.probe_id for r in got] == ["p1", "p2", "p3"]
    newest = store.query("primary", 0, 2e9, newest_first=True, limit=2)
    assert [r.probe_id for r in newest] == ["p4", "p3"]
    assert got[0].latency_mid == 1.5 and got[0].status is ProbeStatus.COMPLETED


def test_to_record_maps_each_final_state() -> None:
    base = dict(probe_id="p", run_id="19700101T000000Z-r", planned_at=0.5, route=Route(**route()), size_bytes=1, size_class="1B", trial=1, timeout_seconds=60, target_seconds=10)
    up = Upload(key="k", version_id="v", etag="e", method="put", put_start=1.0, put_end=2.0)
    done = to_record(ProbeState(**base, upload=up, poll=Poll(status="COMPLETED", last_pending=4.0, first_final=5.0, head_count=6)))
    assert (done.status, done.latency_lo, done.latency_hi, done.put_end, done.put_seconds) == (ProbeStatus.COMPLETED, 4.0, 5.0, 2.0, 1.0)
    assert done.within_target and done.bound_met
    stuck = to_record(ProbeState(**base, upload=up, poll=Poll(status="STUCK", last_pending=60.0)))
    assert stuck.status is ProbeStatus.STUCK and stuck.latency_hi is None and not stuck.within_target
    err = to_record(ProbeState(**base, error={"Error": "ClientError", "Cause": "AccessDenied"}))
    # An ERROR probe's key is the plan's too: a retry of its write is the same key.
    assert err.status is ProbeStatus.ERROR and err.failure_reason == "ClientError: AccessDenied"
    assert err.sort_key == to_record(ProbeState(**base, error={"Error": "X"})).sort_key == "1970-01-01T00:00:00.000Z#p"
    intr = to_record(ProbeState(**base, upload=up, poll=Poll(status="PENDING", last_pending=3.0)), interrupted="SIGTERM")
    assert intr.status is ProbeStatus.INTERRUPTED and intr.latency_lo == 3.0 and "SIGTERM" in intr.failure_reason


def test_lambda_wiring_reads_what_the_template_sets(ddb: Any) -> None:
    """wiring.from_env reads the variables template.yaml's Globals define (and nothing else is needed)."""
    from replmon.adapters.metrics import EmfMetrics, NullMetrics
    from replmon.adapters.s3 import S3Stores

    variables = load_template(TEMPLATE)["Globals"]["Function"]["Environment"]["Variables"]
    assert {"REPLMON_TABLE", "REPLMON_DEFAULTS", "REPLMON_EXPERT"} <= set(variables)  # retention: ExpertSettings retention_days
    env = {"REPLMON_TABLE": TABLE, "REPLMON_EXPERT": json.dumps({"retention_days": 30}), "REPLMON_COMPOSE_THRESHOLD": "1GiB",
           "REPLMON_DEFAULTS": json.dumps({"routes": [route()], "trials": 2})}
    deps = from_env(env)
    assert isinstance(deps.stores, S3Stores) and isinstance(deps.metrics, EmfMetrics)
    assert deps.retention_days == 30 and deps.upload.compose_threshold == 2**30
    assert deps.defaults["trials"] == 2
    assert deps.store.put_once(rec(1_790_000_000.0)) is True  # reaches the table it names
    assert isinstance(from_env({**env, "REPLMON_METRICS": "none"}).metrics, NullMetrics)


def test_local_endpoint_without_credentials_gets_placeholder_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """DynamoDB Local needs *some* key; a real chain's credentials are kept when there are any."""
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    local = DynamoLatencyStore(TABLE, clients.dynamodb(endpoint_url="http://127.0.0.1:8000"))
    assert local.client._request_signer._credentials.access_key == "local"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "mine")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    kept = DynamoLatencyStore(TABLE, clients.dynamodb(endpoint_url="http://127.0.0.1:8000"))
    assert kept.client._request_signer._credentials.access_key == "mine"


def test_a_lost_answer_is_retried_into_one_record_and_one_metric(ddb: Any) -> None:
    """The first TransactWriteItems is applied but its answer never arrives (connection closed):
    botocore retries the same request, ClientRequestToken and all, and DynamoDB answers it as the
    first call was (idempotent for 10 minutes): stored once, counted once, one metric."""
    from botocore.exceptions import ConnectionClosedError
    from moto.core.models import botocore_stubber

    dropped: list[str] = []

    def write_then_drop(request: Any, **kwargs: Any) -> Any:
        if not dropped:
            botocore_stubber(kwargs.get("event_name", "before-send.dynamodb.TransactWriteItems"), request)  # moto performs the write
            dropped.append("answer")
            raise ConnectionClosedError(endpoint_url=request.url)
        return None  # moto answers the retry

    ddb.meta.events.register_first("before-send.dynamodb.TransactWriteItems", write_then_drop)
    metrics = Capture()
    published = metrics.published
    deps = Deps(stores=lambda e: None, store=DynamoLatencyStore(TABLE, ddb), metrics=metrics)  # type: ignore[arg-type,return-value]
    st = completed_state()
    assert record_step(st, deps)["recorded"] == "stored"
    items = {(i["route"]["S"], i["at"]["S"]): i for i in ddb.scan(TableName=TABLE)["Items"]}
    assert dropped == ["answer"] and items[("primary#roll", "h#1970-01-01T00")]["pj"]["N"] == "1" and len(published) == 1
    # A later retry of the step (a new call, another token) is a duplicate: no second metric.
    assert record_step(st, deps)["recorded"] == "duplicate" and len(published) == 1


def test_a_failed_history_lookup_polls_from_the_start_and_changes_nothing(ddb: Any) -> None:
    """The route-history query is optional: a store outage makes the probe poll from 0, never ERROR."""
    from replmon.core.clock import ManualClock
    from replmon.core.errors import StoreUnavailable
    from replmon.core.ports import HeadResult
    from replmon.probe.steps import poll_step

    class DownStore:
        def query(self, *a: Any, **k: Any) -> list[ProbeRecord]:
            raise StoreUnavailable("replmon-latency: ServiceUnavailable")

        def put_once(self, r: ProbeRecord) -> bool:
            raise StoreUnavailable("down")

    clock = ManualClock(200.0)

    class Source:
        def head(self, bucket: str, key: str, version_id: str | None = None) -> HeadResult:
            return HeadResult("COMPLETED" if bucket == "probe-source" else "REPLICA", 2**20, '"e"', version_id, "CRC32/FULL_OBJECT:x")

    deps = Deps(stores=lambda e: Source(), store=DownStore(), metrics=None, clock=clock)  # type: ignore[arg-type,return-value]
    st = ProbeState(probe_id="p1", run_id="19700101T000139Z-r1", planned_at=99.0, route=Route(**route()), size_bytes=2**20, size_class="1MiB", trial=1,
                    timeout_seconds=60, target_seconds=900,
                    upload=Upload(key="k", version_id="v", etag='"e"', method="put", put_start=199.0, put_end=200.0)).dump()
    out = poll_step(st, deps)
    assert out["poll"]["status"] == "COMPLETED" and out["poll"]["not_before"] == 0.0
    assert "history unavailable (StoreUnavailable)" in out["poll"]["history_note"]


def test_spooled_records_are_private_files_replayed_once(tmp_path: Any, ddb: Any) -> None:
    import os
    import stat

    from replmon.adapters.spool import DirectorySpool
    from replmon.probe.housekeeping import replay_spool

    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec(1_790_000_000.0, probe="s1"))
    [path] = list((tmp_path / "spool").rglob("*.json"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    counted: list[str] = []

    class Metrics:
        def publish(self, r: ProbeRecord) -> None:
            counted.append("publish")

        def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
            counted.append(metric)

    deps = Deps(stores=lambda e: None, store=DynamoLatencyStore(TABLE, ddb), metrics=Metrics(), spool=spool)  # type: ignore[arg-type,return-value]
    assert replay_spool(deps) == {"replayed": 1, "duplicates": 0, "left": 0, "quarantined": []}
    spool.spool(rec(1_790_000_000.0, probe="s1"))  # the same probe spooled twice (a retried RecordResult)
    assert replay_spool(deps) == {"replayed": 0, "duplicates": 1, "left": 0, "quarantined": []}
    items = {(i["route"]["S"], i["at"]["S"]): i for i in ddb.scan(TableName=TABLE)["Items"]}
    records = [k for k in items if "#" not in k[0]]
    hours = [i for k, i in items.items() if k[1].startswith("h#")]
    assert spool.pending() == 0 and len(records) == 1 and [h["pj"]["N"] for h in hours] == ["1"]  # stored and counted once
    assert counted == ["SpoolReplayed"]  # replay counts itself; the probe's own metrics went out when it was spooled


@pytest.mark.parametrize("table", ["dynamodb", "memory"])
def test_the_transaction_that_stores_a_record_deletes_its_in_flight_marker(ddb: Any, table: str) -> None:
    """A stored record and its probe's in-flight marker never both exist: the marker's Delete is in
    the record's TransactWriteItems (a DeleteItem after it could fail alone - the store dying in
    between - and the marker would age the RPO's oldest unfinished probe until its TTL). A marker
    left by a duplicate's first write is cleared by the step; heartbeats and probes that never PUT
    have no marker and send no Delete."""
    from replmon.adapters.memtable import MemoryLatencyTable
    from replmon.core.keys import heartbeat_run_id
    from replmon.core.ports import TransactDelete
    from replmon.signals.inflight import in_flight_probes, mark_in_flight
    from replmon.signals.rollup import record_ops, store_record

    store: Any = DynamoLatencyStore(TABLE, ddb) if table == "dynamodb" else MemoryLatencyTable()
    sent: list[str] = []
    if table == "dynamodb":
        ddb.meta.events.register("before-call.dynamodb.*", lambda model, **_: sent.append(model.name))
    at = 1_790_000_000.0
    record = rec(at, probe=f"{run_at(at)}-primary-1MiB-t1")
    mark_in_flight(store, "primary", record.sort_key, record.put_end or 0.0, at + 7200)
    assert len(in_flight_probes(store, "primary", at + 10)) == 1
    sent.clear()
    assert store_record(store, record, at + 10, threshold_seconds=900) is True
    assert sent == (["TransactWriteItems"] if table == "dynamodb" else [])  # one call
    assert in_flight_probes(store, "primary", at + 10) == []  # gone with the record's write
    assert store.get_record("primary", record.sort_key) is not None
    # A second write of the same record is a duplicate: cancelled whole, nothing counted twice.
    assert store_record(store, record, at + 20, threshold_seconds=900) is False
    # A probe whose UploadProbe marked it and then failed records without a PUT end: its marker goes too.
    unput = dataclasses.replace(rec(at, probe=f"{run_at(at)}-primary-1MiB-t2", status=ProbeStatus.ERROR), put_end=None, latency_lo=None,
                                latency_hi=None)
    mark_in_flight(store, "primary", unput.sort_key, at, at + 7200)
    assert store_record(store, unput, at + 30, threshold_seconds=900) is True
    assert in_flight_probes(store, "primary", at + 30) == []
    # A record with no marker (mark_in_flight failed) stores all the same: the Delete is unconditional.
    unmarked = rec(at, probe=f"{run_at(at)}-primary-1MiB-t3")
    assert store_record(store, unmarked, at + 40, threshold_seconds=900) is True
    # The marker's delete is the last action: CancellationReasons' index 1 stays the hour item.
    ops = record_ops(record, at)
    assert ops[-1] == TransactDelete("primary#inflight", record.sort_key) and not any(isinstance(op, TransactDelete) for op in ops[:-1])
    # A heartbeat has no marker and its role no DeleteItem: no Delete in its transaction.
    beat = dataclasses.replace(rec(at, probe="hb"), run_id=heartbeat_run_id(at))
    assert not [op for op in record_ops(beat, at) if isinstance(op, TransactDelete)]


def test_a_duplicate_record_step_clears_a_marker_its_first_write_left(ddb: Any) -> None:
    """A retried RecordResult whose record is already there (its transaction cancelled whole) still
    leaves no marker: the step deletes it (a first write from before markers went with the record)."""
    from replmon.signals.inflight import in_flight_probes, mark_in_flight

    store = DynamoLatencyStore(TABLE, ddb)
    deps = Deps(stores=lambda e: None, store=store, metrics=Capture())  # type: ignore[arg-type,return-value]
    state = completed_state()
    assert record_step(json.loads(json.dumps(state)), deps)["recorded"] == "stored"
    key = store.query("primary", 0, 10_000)[0].sort_key
    mark_in_flight(store, "primary", key, 101.0, time.time() + 7200)  # as if the first write had left it
    assert in_flight_probes(store, "primary", time.time()) != []
    assert record_step(state, deps)["recorded"] == "duplicate"
    assert in_flight_probes(store, "primary", time.time()) == []
