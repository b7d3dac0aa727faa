"""Hourly rollups: what a record (probe or heartbeat) or an event adds to its route's hour item,
written in the same transaction as the record, so it is counted exactly once (signals/slo_rollup.py reads them).

The hour item ``<route>#roll`` / ``h#<YYYY-MM-DDTHH>`` (core/partitions.py) holds:

| attribute | meaning |
| --- | --- |
| ``j``, ``g`` | judged / good samples this hour (probes and heartbeats) |
| ``pj``, ``pg`` | the same, probes only (heartbeats = ``j - pj``) |
| ``j_MM``, ``g_MM``, ``f_MM`` | judged / good / FAILED per 5-minute sub-slot (MM = 00, 05, ... 55) |
| ``pj_MM``, ``pg_MM`` | judged / good probes per sub-slot (the SLO's burn windows, signals/slo_rollup.py) |
| ``hx_<MMSSmmm>`` | each heartbeat's polled bound by its PUT end (-1: FAILED), set with its record (the RPO, signals/heartbeat_rpo.py) |
| ``hs_<MMSSmmm>`` | 1 beside a STUCK heartbeat's ``hx_`` entry (its bound is ``lo``, not a latency: the expectation leaves it out, signals/expectation.py) |
| ``eF_MM``, ``eM_MM``, ``eA_MM``, ``eN_MM``, ``eC_MM`` | replication events per kind per sub-slot |
| ``eU_<name>_MM`` | events of a kind S3 does not document (stored as sent, flagged), per sub-slot |
| ``x_<class>_MM`` | the largest polled upper bound per class and sub-slot (``record_max_ops``; not written by the record path: probes' bounds are read from their records, a replica event may narrow them) |
| ``h_<class>_<b>`` | COMPLETED latencies per class, geometric buckets x1.25 from 0.25 s (46 buckets) |
| ``expires_at`` | the hour + SloPeriodDays + 2 days (TTL) |

Good is judged as the record lands, against the SLO threshold then in force (REPLMON_SLO); a
replica event that narrows a record's interval moves its counters in the same transaction
(``narrow_ops``). Counters are only ever added (``ADD``); an absent counter is 0. The period cache
(``<route>#roll`` / ``period``) counts ``gen`` up when a record lands in an hour older than
``LATE_AFTER_HOURS`` (the collector may have folded that hour), and with it ``dgen`` and the
record's own counts for that hour (``lj_<hour>``, ``lg_<hour>``: the hour's epoch seconds), so
the collector adds them to the hour it folded instead of re-reading the period (slo_rollup.py).

One record's operations (signals/event_ingest.py batches events; signals/slo_rollup.py folds the hours):

>>> from replmon.core.record import ProbeRecord, ProbeStatus
>>> r = ProbeRecord(route="dr-orders", probe_id="20261123T101500Z-a1b2c3-dr-orders-1MiB-t1", run_id="20261123T101500Z-a1b2c3",
...                 planned_at=1795428900.0, size_bytes=2**20, size_class="1MiB", trial=1, status=ProbeStatus.COMPLETED,
...                 put_end=1795428901.0, latency_lo=3.0, latency_hi=4.0)
>>> put, add, marker = record_ops(r, now=1795428910.0)
>>> (put.item["route"], add.pk, add.sk, dict(add.add))
('dr-orders', 'dr-orders#roll', 'h#2026-11-23T10', {'j': 1, 'g': 1, 'pj': 1, 'pg': 1, 'j_15': 1, 'g_15': 1, 'pj_15': 1, 'pg_15': 1, 'h_1MiB_13': 1})
>>> (marker.pk, marker.sk == r.sort_key)
('dr-orders#inflight', True)
>>> [(m.attribute, m.value) for m in record_max_ops(r)]
[('x_1MiB_15', 4.0)]
"""

from __future__ import annotations

import dataclasses
import math
import uuid
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from replmon.core.defaults import DEFAULTS
from replmon.core.keys import is_heartbeat
from replmon.core.partitions import IN_FLIGHT, PERIOD, heartbeat_partition, hour_sort_key, roll_partition, signal_partition
from replmon.core.ports import LatencyTable, RaiseTo, TransactAdd, TransactDelete, TransactItem, TransactPut
from replmon.core.record import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, ProbeRecord, ProbeStatus
from replmon.signals.slo import is_good
from replmon.signals.windows import HOUR_SECONDS, floor_hour, record_time, sub_slot

__all__ = [
    "COUNTED_GOOD",
    "DGEN",
    "EVENT_ATTRS",
    "FAILED_MARK",
    "GEN",
    "GOOD",
    "HEARTBEAT_PREFIX",
    "HEARTBEAT_RETENTION_DAYS",
    "HIST_BASE_SECONDS",
    "HIST_BUCKETS",
    "HIST_RATIO",
    "JUDGED",
    "LATE_AFTER_HOURS",
    "NO_BOUND",
    "PROBE_GOOD",
    "PROBE_JUDGED",
    "STUCK_PREFIX",
    "bucket_upper",
    "event_add",
    "event_attr",
    "event_counts",
    "heartbeat_attr",
    "heartbeat_entry_time",
    "hist_attr",
    "late_attr",
    "latency_bucket",
    "max_attr",
    "narrow_ops",
    "record_max_ops",
    "record_ops",
    "slot_attr",
    "store_record",
]

JUDGED, GOOD, PROBE_JUDGED, PROBE_GOOD = "j", "g", "pj", "pg"
SLOT_JUDGED, SLOT_GOOD, SLOT_FAILED = "j", "g", "f"
#: A heartbeat's entry (``heartbeat_attr``): its polled bound; FAILED_MARK for a FAILED one, NO_BOUND
#: for one judged without a bound (the RPO counts neither as a latency).
HEARTBEAT_PREFIX, FAILED_MARK, NO_BOUND = "hx_", -1, -2
#: Set (to 1) beside a STUCK heartbeat's entry: its bound is a lower one (``lo``), not a latency.
STUCK_PREFIX = "hs_"
#: S3's replication event names (signals/s3events.py REPLICATION_KINDS) -> their counter prefix.
EVENT_ATTRS: Mapping[str, str] = {
    "OperationFailedReplication": "eF",
    "OperationMissedThreshold": "eM",
    "OperationReplicatedAfterThreshold": "eA",
    "OperationNotTracked": "eN",
    "OperationCompletedReplication": "eC",  # MinIO's extension
}
#: Counter prefix of an event kind S3 does not document (``eU_<name>_MM``): counted all the same.
UNKNOWN_EVENT_PREFIX = "eU"
_KIND_OF = {v: k for k, v in EVENT_ATTRS.items()}
HIST_BASE_SECONDS = 0.25
HIST_RATIO = 1.25
HIST_BUCKETS = 46
GEN = "gen"  # the period cache's late-write generation
#: Late writes that carry their counts (``late_attr``): the collector adds those to a folded hour.
DGEN = "dgen"
LATE_JUDGED, LATE_GOOD = "lj", "lg"
COUNTED_GOOD = "counted_good"  # on a record: the verdict its hour item counted
#: A write into an hour older than this (by the writer's clock) may land after the collector folded it.
LATE_AFTER_HOURS = 5
HEARTBEAT_RETENTION_DAYS = 7


def slot_attr(prefix: str, t: float) -> str:
    """``j_MM``-style attribute of the sub-slot holding ``t``."""
    return f"{prefix}_{sub_slot(t)}"


def max_attr(size_class: str, t: float) -> str:
    return f"x_{size_class}_{sub_slot(t)}"


def hist_attr(size_class: str, bucket: int) -> str:
    return f"h_{size_class}_{bucket}"


def late_attr(prefix: str, hour: float) -> str:
    """A late write's count on the period item: ``lj_<hour start, epoch seconds>`` (``lg_`` for good).

    >>> late_attr(LATE_JUDGED, 1795428000.0)
    'lj_1795428000'
    """
    return f"{prefix}_{int(hour)}"


def late_period_add(hour: float, judged: int, good: int) -> dict[str, int]:
    """What a write into a folded hour adds to the period item: the generations and its counts."""
    return {k: v for k, v in {GEN: 1, DGEN: 1, late_attr(LATE_JUDGED, hour): judged, late_attr(LATE_GOOD, hour): good}.items() if v}


def latency_bucket(seconds: float) -> int:
    """Bucket b holds latencies in (upper(b-1), upper(b)]; the last one is open-ended.

    >>> [latency_bucket(s) for s in (0.1, 0.25, 0.26, 4.0, 900.0, 1e9)]
    [0, 0, 1, 13, 37, 45]
    """
    if seconds <= HIST_BASE_SECONDS:
        return 0
    return min(HIST_BUCKETS - 1, math.ceil(math.log(seconds / HIST_BASE_SECONDS, HIST_RATIO) - 1e-9))


def bucket_upper(bucket: int) -> float:
    """The upper edge of a bucket (a quantile read from the histogram is this edge: <= 25 % high)."""
    return math.inf if bucket >= HIST_BUCKETS - 1 else HIST_BASE_SECONDS * HIST_RATIO**bucket


def _polled_bound(record: ProbeRecord) -> float | None:
    if record.status is ProbeStatus.COMPLETED:
        return record.latency_hi
    if record.status is ProbeStatus.STUCK:
        return record.latency_lo
    return None


def record_ops(record: ProbeRecord, now: float, *, period_days: int = DEFAULTS.slo_period_days,
               threshold_seconds: float | None = None) -> list[TransactItem]:
    """The transaction that stores ``record`` once and counts it once: the record's conditional put
    (always first: a cancelled transaction whose reason is index 0 is a duplicate), then the hour
    item's counters, then - for a late write - the period cache's ``gen``, then (always last) the
    delete of the probe's in-flight marker: a stored record and a marker left behind, which would
    age the RPO's oldest unfinished probe until its TTL, cannot both be (signals/inflight.py). Every
    probe's record deletes it, even one without a PUT end (UploadProbe can fail after marking; an
    absent item's delete is no error). Heartbeat records
    (core/keys.py ``is_heartbeat``) go to ``<route>#hb`` and are kept 7 days. ``threshold_seconds``
    (default the record's target) decides good; only judged records are counted."""
    item = record.to_item()
    heartbeat = is_heartbeat(record.run_id)
    if heartbeat:
        item[PARTITION_KEY] = heartbeat_partition(record.route)
        item[TTL_ATTRIBUTE] = int(record.planned_at + HEARTBEAT_RETENTION_DAYS * 86400)
    ops: list[TransactItem] = [TransactPut(item)]
    marker = [] if heartbeat else [TransactDelete(signal_partition(record.route, IN_FLIGHT), record.sort_key)]
    if not record.status.judged:
        return ops + marker
    when = record_time(record)
    hour = floor_hour(when)
    threshold = record.target_seconds if threshold_seconds is None else threshold_seconds
    good = int(is_good(record, threshold))
    item[COUNTED_GOOD] = bool(good)  # the verdict counted: a narrowing moves the counters from it (narrow_ops)
    failed = int(record.status is ProbeStatus.FAILED)
    add = {JUDGED: 1, GOOD: good}
    if not heartbeat:
        add |= {PROBE_JUDGED: 1, PROBE_GOOD: good}
    add |= {slot_attr(SLOT_JUDGED, when): 1, slot_attr(SLOT_GOOD, when): good, slot_attr(SLOT_FAILED, when): failed}
    if not heartbeat:
        add |= {slot_attr(PROBE_JUDGED, when): 1, slot_attr(PROBE_GOOD, when): good}
    if record.status is ProbeStatus.COMPLETED and record.latency_hi is not None:
        add[hist_attr(record.size_class, latency_bucket(record.latency_hi))] = 1
    expires = int(hour + HOUR_SECONDS + (period_days + 2) * 86400)
    once: dict[str, Any] = {TTL_ATTRIBUTE: expires}
    if heartbeat:  # the RPO's heartbeat input (signals/heartbeat_rpo.py): each heartbeat's bound, in this transaction
        bound = _polled_bound(record)
        once[heartbeat_attr(when)] = FAILED_MARK if record.status is ProbeStatus.FAILED else bound if bound is not None else NO_BOUND
        if record.status is ProbeStatus.STUCK:
            once[STUCK_PREFIX + heartbeat_attr(when)[len(HEARTBEAT_PREFIX):]] = 1
    ops.append(TransactAdd(roll_partition(record.route), hour_sort_key(hour), {k: v for k, v in add.items() if v}, once))
    if not heartbeat and hour < floor_hour(now) - LATE_AFTER_HOURS * HOUR_SECONDS:  # the period cache folds probes only
        ops.append(TransactAdd(roll_partition(record.route), PERIOD, late_period_add(hour, 1, good)))
    return ops + marker


def heartbeat_attr(t: float) -> str:
    """A heartbeat's entry in its hour item: ``hx_<MMSSmmm>``, its PUT end to the millisecond.

    >>> heartbeat_attr(1795428000.0 + 37 * 60 + 12.3456)
    'hx_3712346'
    """
    ms = round((t - floor_hour(t)) * 1000)
    return f"{HEARTBEAT_PREFIX}{ms // 60000:02d}{ms % 60000 // 1000:02d}{ms % 1000:03d}"


def heartbeat_entry_time(hour: float, attr: str) -> float | None:
    """The PUT end a ``hx_<MMSSmmm>`` entry stands for (None: not a heartbeat entry)."""
    digits = attr[len(HEARTBEAT_PREFIX):]
    if not attr.startswith(HEARTBEAT_PREFIX) or len(digits) != 7 or not digits.isdigit():
        return None
    return hour + int(digits[:2]) * 60 + int(digits[2:4]) + int(digits[4:]) / 1000


def narrow_ops(record: ProbeRecord, new_hi: float | None, threshold_seconds: float, now: float, counted_good: bool | None, *,
               period_days: int = DEFAULTS.slo_period_days) -> list[TransactAdd]:
    """The counter moves a narrowing of ``record`` (as stored) to ``new_hi`` makes, for the
    narrowing's own transaction: a sample that becomes good (``hi`` fell within the threshold)
    adds 1 to the good counters (in an hour older than LATE_AFTER_HOURS, the period cache's ``gen``
    too, as a late record does), and a COMPLETED sample's histogram bucket follows its ``hi``.
    Narrowing only lowers ``hi``: a good sample stays good. ``counted_good`` is the verdict the
    record was counted with (its ``counted_good`` attribute); None (a record stored before the
    rollups) was never counted: nothing moves.

    >>> from replmon.core.record import ProbeRecord, ProbeStatus
    >>> r = ProbeRecord(route="r", probe_id="20261123T101500Z-a1b2c3-r-1MiB-t1", run_id="20261123T101500Z-a1b2c3",
    ...                 planned_at=1795428900.0, size_bytes=2**20, size_class="1MiB", trial=1, status=ProbeStatus.COMPLETED,
    ...                 put_end=1795428901.0, latency_lo=850.0, latency_hi=960.0)
    >>> [dict(a.add) for a in narrow_ops(r, 880.0, 900.0, 1795428960.0, False)]
    [{'g': 1, 'g_15': 1, 'pg': 1, 'pg_15': 1}]
    >>> [(a.sk, dict(a.add)) for a in narrow_ops(r, 880.0, 900.0, 1795428960.0 + 86400, False)][1]
    ('period', {'gen': 1, 'dgen': 1, 'lg_1795428000': 1})
    """
    if record.status is not ProbeStatus.COMPLETED or new_hi is None or counted_good is None:
        return []
    narrowed = dataclasses.replace(record, latency_hi=new_hi)
    add: dict[str, int] = {}
    when = record_time(record)
    if is_good(narrowed, threshold_seconds) and not counted_good:
        add |= {GOOD: 1, slot_attr(SLOT_GOOD, when): 1}
        if not is_heartbeat(record.run_id):
            add |= {PROBE_GOOD: 1, slot_attr(PROBE_GOOD, when): 1}
    old_b = None if record.latency_hi is None else latency_bucket(record.latency_hi)
    new_b = latency_bucket(new_hi)
    if old_b != new_b:
        add[hist_attr(record.size_class, new_b)] = 1
        if old_b is not None:
            add[hist_attr(record.size_class, old_b)] = -1
    if not add:
        return []
    hour = floor_hour(when)
    ops = [TransactAdd(roll_partition(record.route), hour_sort_key(hour), dict(sorted(add.items())),
                       {TTL_ATTRIBUTE: int(hour + HOUR_SECONDS + (period_days + 2) * 86400)})]
    if PROBE_GOOD in add and hour < floor_hour(now) - LATE_AFTER_HOURS * HOUR_SECONDS:
        ops.append(TransactAdd(roll_partition(record.route), PERIOD, late_period_add(hour, 0, 1)))
    return ops


#: The attribute that tells which call stored a record (``store_record``).
WRITE_ID = "write_id"


def store_record(store: LatencyTable, record: ProbeRecord, now: float, *, threshold_seconds: float,
                 period_days: int = DEFAULTS.slo_period_days, extra: Mapping[str, Any] | None = None) -> bool:
    """Store ``record`` and count it in its hour item, exactly once: one ``TransactWriteItems``
    (``record_ops``). True if this call stored it, False if the record was there (a retried step,
    a replayed spool); :class:`~replmon.core.errors.StoreUnavailable` for anything else (spool it).

    A call whose answer is lost is retried by botocore with the same ``ClientRequestToken``: for 10
    minutes after the first call completed, DynamoDB returns success for it without applying
    anything again (the response may differ from the first one's).
    The record also carries this call's token (``write_id``): a retry that is cancelled as a
    duplicate all the same (the token expired, or an emulator that keeps no tokens) reads the
    record back and still knows the write was its own, so its metrics are published once."""
    token = uuid.uuid4().hex
    ops = record_ops(record, now, period_days=period_days, threshold_seconds=threshold_seconds)
    first = ops[0]
    assert isinstance(first, TransactPut)
    ops[0] = TransactPut({**first.item, **(extra or {}), WRITE_ID: token})
    outcome = store.transact(ops, token=token)
    if outcome.applied:
        return True
    if outcome.duplicates != (0,):
        raise AssertionError(f"a record's transaction can only be cancelled by its own put, not {outcome.duplicates}")
    held = store.get_item(str(first.item[PARTITION_KEY]), str(first.item[SORT_KEY]))
    return bool(held and held.get(WRITE_ID) == token)


def record_max_ops(record: ProbeRecord) -> list[RaiseTo]:
    """The polled upper bound as the sub-slot's max per class (written after the transaction; a max
    is idempotent by itself). Heartbeats use class ``1KiB``."""
    bound = _polled_bound(record)
    if bound is None:
        return []
    when = record_time(record)
    return [RaiseTo(roll_partition(record.route), hour_sort_key(floor_hour(when)), max_attr(record.size_class, when), bound)]


def event_attr(name: str, t: float) -> str:
    """The counter of a replication event named ``name`` (without ``s3:Replication:``) at ``t``:
    ``eF_MM``-style for the kinds S3 documents, ``eU_<name>_MM`` for any other (never dropped).

    >>> event_attr("OperationFailedReplication", 1795428000.0 + 61), event_attr("OperationExploded", 1795428000.0 + 600)
    ('eF_00', 'eU_OperationExploded_10')
    >>> event_attr("Operation-X", 1795428000.0), event_attr("-", 1795428000.0)
    ('eU_OperationX_00', 'eU_Unnamed_00')
    """
    prefix = EVENT_ATTRS.get(name)
    if prefix is None:
        # Counted under its letters and digits (at most 64), so one odd name never fails its batch;
        # the event itself is kept as an item with the name S3 sent (signals/event_ingest.py).
        safe = "".join(ch for ch in name if ch.isascii() and ch.isalnum())[:64] or "Unnamed"
        prefix = f"{UNKNOWN_EVENT_PREFIX}_{safe}"
    return slot_attr(prefix, t)


def event_counts(hour_items: Iterable[Mapping[str, Any]], slots: Collection[tuple[float, str]]) -> dict[str, int]:
    """Events per kind counted in the hour items' sub-slots ``slots`` ((hour start, ``MM``), as
    signals/windows.py ``sub_slots`` gives them); kinds with no event are absent.

    >>> hour = {"at": "h#2026-11-23T10", "eF_00": 2, "eF_05": 1, "eU_OperationExploded_05": 1, "j_05": 3}
    >>> event_counts([hour], [(1795428000.0, "05")])
    {'OperationFailedReplication': 1, 'OperationExploded': 1}
    """
    wanted = {(hour_sort_key(h), mm) for h, mm in slots}
    out: dict[str, int] = {}
    for item in hour_items:
        sk = str(item.get(SORT_KEY, ""))
        for attr, n in item.items():
            head, _, mm = attr.rpartition("_")
            if (sk, mm) not in wanted or not n:
                continue
            if head in _KIND_OF:
                kind = _KIND_OF[head]
            elif head.startswith(UNKNOWN_EVENT_PREFIX + "_"):
                kind = head[len(UNKNOWN_EVENT_PREFIX) + 1:]
            else:
                continue
            out[kind] = out.get(kind, 0) + int(n)
    return out


def event_add(route: str, counts: Mapping[tuple[str, float], int], *, period_days: int = DEFAULTS.slo_period_days) -> list[TransactAdd]:
    """Counter updates for events counted behind their dedupe markers: ``counts`` maps (event name
    without ``s3:Replication:``, event time) -> how many; one :class:`TransactAdd` per hour item.

    >>> [(a.sk, dict(a.add)) for a in event_add("r", {("OperationMissedThreshold", 1795428000.0 + 61): 2})]
    [('h#2026-11-23T10', {'eM_00': 2})]
    """
    by_hour: dict[float, dict[str, int]] = {}
    for (name, when), n in counts.items():
        attrs = by_hour.setdefault(floor_hour(when), {})
        attr = event_attr(name, when)
        attrs[attr] = attrs.get(attr, 0) + n
    return [TransactAdd(roll_partition(route), hour_sort_key(h), attrs,
                        {TTL_ATTRIBUTE: int(h + HOUR_SECONDS + (period_days + 2) * 86400)})
            for h, attrs in sorted(by_hour.items())]
