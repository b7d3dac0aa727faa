"""Events are counted per (route, hour, 5-minute slot, kind) behind dedupe markers, in
transactions of at most 100 actions, exactly once; the collector reads the counters and reports
the numbers the one-item-per-event layout gave; no partition key exceeds DynamoDB's write ceiling.

AWS contracts encoded here:
- "With an atomic counter, the updates are not idempotent" and "Every partition in a
  DynamoDB table is designed to deliver a maximum capacity of ... 1,000 write units per second"
  ("Working with items and attributes", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/WorkingWithItems.html;
  "Best practices for designing and using partition keys effectively",
  https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/bp-partition-key-design.html;
  "Burst and adaptive capacity", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/burst-adaptive-capacity.html).
- TransactWriteItems "groups up to 100 write actions in a single all-or-nothing operation";
  "DynamoDB performs two underlying reads or writes of every item in the transaction"
  ("Amazon DynamoDB Transactions: How it works", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html);
  a cancelled transaction names each action's reason (``CancellationReasons``, ``ConditionalCheckFailed``).
- "Permissions for Put, Update, Delete, and Get actions are governed by the permissions used for the
  underlying PutItem, UpdateItem, DeleteItem, and GetItem operations" ("Using IAM with DynamoDB
  transactions", https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html).
"""

from __future__ import annotations

import json
import random
from typing import Any

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.adapters.metrics import NullMetrics
from replmon.core.errors import StoreUnavailable
from replmon.core.keys import iso_ms
from replmon.core.partitions import EVENTS, signal_partition
from replmon.core.ports import MAX_TRANSACT_ACTIONS, TransactAdd, TransactOutcome, TransactPut
from replmon.core.route import Route
from replmon.signals.event_ingest import EventItem, IngestDeps, count_events, ingest, plan_ingest, transactions
from replmon.signals.health import event_counts, route_health
from replmon.signals.ingest_budget import PARTITION_WCU, first_throttle, key_rates
from replmon.signals.s3events import ReplicationEvent, parse_payload
from replmon.signals.slo import SloSpec
from replmon.signals.windows import floor_5min
from tests.conftest import ROOT, registry_of, route

T0 = 1_795_428_000.0  # 2026-11-23T10:00:00Z
KINDS = ["OperationFailedReplication", "OperationMissedThreshold", "OperationReplicatedAfterThreshold",
         "OperationNotTracked", "OperationCompletedReplication", "OperationExploded"]
ROUTES = [Route.model_validate(route())]


def event(i: int, kind: str, t: float, bucket: str = "probe-source") -> ReplicationEvent:
    return ReplicationEvent(kind, bucket, f"data/{i:06d}.bin", t, version_id=f"v{i}", destination_bucket="probe-replica")


def deps(store: MemoryLatencyTable) -> IngestDeps:
    return IngestDeps(store, NullMetrics(), ROUTES, retention_days=30, skew_seconds=0.5)


def counters(store: MemoryLatencyTable, name: str = "primary") -> dict[str, dict[str, int]]:
    return {h["at"]: {k: v for k, v in h.items() if k.startswith("e") and k != "expires_at"} for h in store.roll_items(name, "h#", "h#~")}


# ------------------------------------------------------------------------------ exactly once
def test_the_same_batch_twice_leaves_the_counters_unchanged() -> None:
    """The real handler, the same SQS batch delivered twice (S3 and SQS deliver at least once)."""
    from replmon.entry.ingest_events import handler
    from replmon.local.aslrun import LambdaContext
    from replmon.wiring import Deps, injected

    docs = [{"Records": [json.loads((ROOT / "events" / "s3" / n).read_text())["Records"][0]]}
            for n in ("replication_failed.json", "replication_missed_threshold.json", "replication_after_threshold.json")]
    batch = {"Records": [{"messageId": f"m{i}", "body": json.dumps(d)} for i, d in enumerate(docs * 2)]}  # each twice already
    store = MemoryLatencyTable()
    with injected(Deps(stores=None, store=store, metrics=NullMetrics(), registry=registry_of(route()))):  # type: ignore[arg-type]
        assert handler(batch, LambdaContext("IngestEvents")) == {"batchItemFailures": []}
        first = counters(store)
        assert sum(n for h in first.values() for n in h.values()) == 3
        assert handler(batch, LambdaContext("IngestEvents")) == {"batchItemFailures": []}
    assert counters(store) == first


def test_a_transaction_cancelled_by_a_duplicate_is_retried_without_it() -> None:
    store = MemoryLatencyTable()
    events = [EventItem("primary", event(i, KINDS[i % 5], T0 + 60 + i)) for i in range(30)]
    assert set(count_events(events[10:13], store, T0, 30).values()) == {"counted"}  # an earlier, partial delivery
    before = store.roll_items("primary", "h#", "h#~")[0]
    seen: list[TransactOutcome] = []
    transact = store.transact

    def spy(writes: Any, token: str | None = None) -> TransactOutcome:
        seen.append(out := transact(writes, token))
        return out

    store.transact = spy  # type: ignore[method-assign]
    result = count_events(events, store, T0, 30)
    assert [r for i, r in sorted(result.items()) if r == "duplicate"] == ["duplicate"] * 3
    assert {i for i, r in result.items() if r == "duplicate"} == {10, 11, 12}
    # One cancelled transaction naming exactly the duplicates' markers, then one that applied.
    assert [o.applied for o in seen] == [False, True] and len(seen[0].duplicates) >= 3
    after = store.roll_items("primary", "h#", "h#~")[0]
    total = sum(v for k, v in after.items() if k.startswith("e") and k != "expires_at")
    assert total == 30 and total - sum(v for k, v in before.items() if k.startswith("e") and k != "expires_at") == 27


def test_a_failing_store_fails_only_the_messages_of_its_transaction() -> None:
    class Flaky(MemoryLatencyTable):
        def transact(self, writes: Any, token: str | None = None) -> TransactOutcome:
            if any(isinstance(w, TransactAdd) and w.sk.endswith("T11") for w in writes):
                raise StoreUnavailable("throttled")
            return super().transact(writes, token)

    store = Flaky()
    plans = [plan_ingest(p, ROUTES, ["replmon-probes/"]) for p in parse_payload({"Records": [
        _record(event(1, "OperationFailedReplication", T0 + 10)), _record(event(2, "OperationFailedReplication", T0 + 3700))]})]
    result = ingest(plans, deps(store), T0 + 4000)
    assert result.failed == {1} and result.notes[0] == "counted" and "throttled" in result.notes[1]


def test_one_oddly_named_event_fails_nothing_in_its_batch_of_100() -> None:
    """Review s26 M2: a Replication:* name the parser accepts but no counter was named for (here
    with a '-') is counted under its letters and digits and kept as an item with the name S3 sent;
    it never fails the other 99 messages of its SQS batch."""
    from replmon.entry.ingest_events import handler
    from replmon.local.aslrun import LambdaContext
    from replmon.wiring import Deps, injected

    kinds = ["Operation-X"] + [KINDS[i % 4] for i in range(99)]
    batch = {"Records": [{"messageId": f"m{i}", "body": json.dumps({"Records": [_record(event(i, k, T0 + 60 + i))]})}
                         for i, k in enumerate(kinds)]}
    store = MemoryLatencyTable()
    with injected(Deps(stores=None, store=store, metrics=NullMetrics(), registry=registry_of(route()))):  # type: ignore[arg-type]
        assert handler(batch, LambdaContext("IngestEvents")) == {"batchItemFailures": []}
    [hour] = counters(store).values()
    assert sum(hour.values()) == 100 and hour.get("eU_OperationX_00") == 1


def test_transaction_conflicts_are_retried_within_a_budget_and_never_count_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Review s26 M3: concurrent transactions on one hour item conflict ("Amazon DynamoDB
    Transactions: How it works", TransactionConflict in CancellationReasons,
    https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html).
    The adapter retries a conflict with jittered backoff within CONFLICT_BUDGET_SECONDS; the
    transaction is all-or-nothing, so the count is applied once; past the budget the messages fail
    (SQS redelivers them) rather than being dropped."""
    from botocore.exceptions import ClientError

    from replmon.adapters import dynamodb as ddb_adapter
    from replmon.adapters.dynamodb import DynamoLatencyStore

    monkeypatch.setattr(ddb_adapter.time, "sleep", lambda s: None)

    class Client:
        def __init__(self, conflicts: int) -> None:
            self.conflicts, self.calls, self.applied = conflicts, 0, 0

        def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
            self.calls += 1
            if self.calls <= self.conflicts:
                reasons = [{"Code": "None"}] * (len(kwargs["TransactItems"]) - 1) + [{"Code": "TransactionConflict"}]
                raise ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                                   "CancellationReasons": reasons}, "TransactWriteItems")
            self.applied += 1
            return {}

    writes = [TransactPut({"route": "primary#seen/0", "at": "k"}), TransactAdd("primary#roll", "h#2026-11-23T10", {"eF_00": 1}, {})]
    busy = Client(conflicts=12)  # more than the old fixed 6 retries
    assert DynamoLatencyStore("t", busy).transact(writes).applied and (busy.calls, busy.applied) == (13, 1)

    clock = iter(float(i) for i in range(1000))  # each attempt a second later: the budget runs out
    monkeypatch.setattr(ddb_adapter.time, "monotonic", lambda: next(clock))
    stuck = Client(conflicts=10**6)
    with pytest.raises(StoreUnavailable, match="TransactionConflict"):
        DynamoLatencyStore("t", stuck).transact(writes)
    assert stuck.applied == 0 and stuck.calls <= DynamoLatencyStore.CONFLICT_BUDGET_SECONDS + 2


def _record(e: ReplicationEvent) -> dict[str, Any]:

    return {"eventVersion": "2.2", "eventSource": "aws:s3", "eventTime": iso_ms(e.event_time), "eventName": f"Replication:{e.kind}",
            "s3": {"bucket": {"name": e.source_bucket}, "object": {"key": e.key, "versionId": e.version_id}},
            "replicationEventData": {"destinationBucket": f"arn:aws:s3:::{e.destination_bucket}"}}


# ------------------------------------------------------------------------------ transaction shape
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3 * 3600 - 1), st.sampled_from(["primary", "other"])), max_size=400))
def test_transactions_hold_at_most_100_actions_and_one_add_per_route_and_hour(spec: list[tuple[int, int, str]]) -> None:
    events = [EventItem(r, event(i, KINDS[k], T0 + s)) for i, (k, s, r) in enumerate(spec)]
    txs = transactions(events, T0, 30)
    assert all(1 < len(tx.writes) <= MAX_TRANSACT_ACTIONS for tx in txs)
    assert all(isinstance(tx.writes[-1], TransactAdd) and all(isinstance(w, TransactPut) for w in tx.writes[:-1]) for tx in txs)
    assert sorted(e.event.key for tx in txs for e in tx.events) == sorted(e.event.key for e in events)  # each once
    assert sum(n for tx in txs for n in tx.writes[-1].add.values()) == len(events)  # type: ignore[union-attr]
    groups = {(e.route, int(e.event.event_time // 3600)) for e in events}
    # One ADD per (route, hour) unless the group needs more than one transaction of 100 actions.
    for g in groups:
        actions = sum(1 + e.kept for e in events if (e.route, int(e.event.event_time // 3600)) == g)
        n = sum(1 for tx in txs if (tx.events[0].route, int(tx.events[0].event.event_time // 3600)) == g)
        assert n == 1 if actions + 1 <= MAX_TRANSACT_ACTIONS else n <= -(-actions // (MAX_TRANSACT_ACTIONS - 2)) + 1


# ------------------------------------------------------------------------------ old numbers == new numbers
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_collector_reports_the_same_numbers_from_counters_as_from_one_item_per_event(data: st.DataObject) -> None:
    """The same events - duplicated, shuffled, delivered in random batches - ingested by the new
    code (counters) and written as the old layout stored them (one item per event id in
    ``<route>#events``): every health figure the collector emits is equal at random times."""
    n = data.draw(st.integers(1, 160))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    base = [event(i, rng.choice(KINDS), T0 + rng.uniform(0, 3 * 3600)) for i in range(n)]
    deliveries = base + [rng.choice(base) for _ in range(data.draw(st.integers(0, n)))]
    rng.shuffle(deliveries)
    new, old = MemoryLatencyTable(), MemoryLatencyTable()
    i = 0
    while i < len(deliveries):
        size = rng.randint(1, 120)
        plans = [plan_ingest(p, ROUTES, ["replmon-probes/"]) for p in parse_payload({"Records": [_record(e) for e in deliveries[i:i + size]]})]
        assert ingest(plans, deps(new), T0 + 4 * 3600).failed == set()
        for p in plans:  # the layout before counters: one conditional put per event id
            assert p.event is not None
            old.put_item_once({**p.event.to_item(30), "route": signal_partition(p.event.route, EVENTS)})
        i += size
    name = "primary"
    for _ in range(8):
        now = T0 + rng.uniform(0, 4 * 3600)
        window = rng.choice([300.0, 900.0, 3600.0, 4000.0, 3 * 3600.0])
        got, want = event_counts(new, name, now, window), event_counts(old, name, now, window)
        assert got == want
        assert route_health(new, name, now, SloSpec(), window) == route_health(old, name, now, SloSpec(), window)
        # and both are the distinct events whose 5-minute slot is in the window
        start = floor_5min(now) - -(-window // 300) * 300
        ref: dict[str, int] = {}
        for e in {e.event_id: e for e in base}.values():
            if start <= floor_5min(e.event_time) <= floor_5min(now):
                ref[e.kind] = ref.get(e.kind, 0) + 1
        assert got == ref


def test_a_backlog_of_missed_thresholds_is_never_read_item_by_item() -> None:
    """Review s26 S1: S3 sends OperationMissedThreshold for every late object, so a backlog keeps
    many items; the collector reads the kept items only when the counters hold a failure."""
    store = MemoryLatencyTable()
    now = T0 + 3000
    count_events([EventItem("primary", event(i, "OperationMissedThreshold", T0 + 60 + i)) for i in range(300)], store, T0, 30)
    read: list[str] = []
    items = store.items

    def spy(pk: str, lo: float, hi: float) -> Any:
        read.append(pk)
        return items(pk, lo, hi)

    store.items = spy  # type: ignore[method-assign]
    h = route_health(store, "primary", now, SloSpec(), 3600)
    assert h.events.get("OperationMissedThreshold") == 300 and not h.rpo.unbounded
    assert not [pk for pk in read if "#events/" in pk]
    count_events([EventItem("primary", event(999, "OperationFailedReplication", now - 10))], store, T0, 30)
    read.clear()
    assert route_health(store, "primary", now, SloSpec(), 3600).rpo.unbounded
    assert [pk for pk in read if "#events/" in pk]  # now the failure is read exactly


# ------------------------------------------------------------------------------ the DynamoDB adapter
def test_the_dynamodb_adapter_names_the_duplicates_a_cancelled_transaction_had(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's TransactWriteItems returns CancellationReasons as DynamoDB does (one per action)."""
    from moto import mock_aws

    from replmon.adapters.dynamodb import DynamoLatencyStore
    from replmon.local.tables import ensure_table
    from tests.conftest import TABLE, TEMPLATE

    for k, v in {"AWS_ACCESS_KEY_ID": "t", "AWS_SECRET_ACCESS_KEY": "t", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ensure_table(ddb, TABLE, TEMPLATE)
        store = DynamoLatencyStore(TABLE, ddb)
        events = [EventItem("primary", event(i, KINDS[i % 6], T0 + 60 * i)) for i in range(20)]
        assert set(count_events(events[:5], store, T0, 30).values()) == {"counted"}
        result = count_events(events + events[3:8], store, T0, 30)
        assert {i for i, r in result.items() if r == "duplicate"} == {0, 1, 2, 3, 4, 20, 21, 22, 23, 24}
        assert {i for i, r in result.items() if r == "counted"} == set(range(5, 20))
        [hour] = store.roll_items("primary", "h#", "h#~")
        assert sum(v for k, v in hour.items() if k.startswith("e") and k != "expires_at") == 20
        assert event_counts(store, "primary", T0 + 3599, 3600) == {k: sum(1 for i in range(20) if KINDS[i % 6] == k) for k in KINDS}


# ------------------------------------------------------------------------------ hot keys
#: The rate the sharding must carry on ONE route without a throttle: 2x the old layout's ceiling
#: (every event one write to one key: 1,000 events/s), far above the bench's measured rate.
PEAK_EVENTS_PER_SECOND = 2000


@pytest.mark.parametrize("mix", ["backlog", "worst"])
def test_no_partition_key_exceeds_1000_write_units_at_the_peak_rate(mix: str) -> None:
    rates = key_rates(PEAK_EVENTS_PER_SECOND, mix)
    key, units = rates.hottest
    assert units < PARTITION_WCU, (key, units)
    assert sum(1 for k in rates.units if "#seen/" in k) == 16
    assert "#roll" in "".join(rates.units)  # the hour item is modelled at its fullest size


def test_the_modelled_first_throttle_is_well_above_the_old_layouts() -> None:
    worst = first_throttle("worst", ceiling=20_000)
    assert key_rates(worst, "worst").hottest[1] >= PARTITION_WCU  # and the replay found no key at the limit one batch earlier
    assert worst > 2 * PARTITION_WCU  # the old layout: one ~1 KB write per event to one key = 1,000 events/s


def test_a_dedupe_marker_outlives_every_message_the_events_queues_keep() -> None:
    """Review s26 S5: a DLQ redriven within its retention must not count a record twice, so the
    marker lives at least as long as the events queue and its DLQ keep a message (SQS
    MessageRetentionPeriod, seconds; "Amazon SQS message quotas",
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-messages.html)."""
    from replmon.local.template import load_template
    from replmon.signals.event_ingest import MARKER_TTL_SECONDS

    res = load_template(ROOT / "template.yaml")["Resources"]
    kept = [res[q]["Properties"]["MessageRetentionPeriod"] for q in ("EventsQueue", "EventsDeadLetterQueue")]
    assert max(kept) <= MARKER_TTL_SECONDS, (MARKER_TTL_SECONDS, kept)
