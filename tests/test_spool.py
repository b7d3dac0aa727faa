"""The spool is a queue that cannot jam: an entry replay can neither read nor store is quarantined
beside the spool with its reason, replay goes on past it, the run counts it (RecordQuarantined),
and `replmon spool list|retry|drop` shows and handles what waits. NaN is refused when a record is made."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from replmon.adapters.memtable import MemoryLatencyTable
from replmon.adapters.spool import DirectorySpool, SqsSpool
from replmon.core.errors import StoreUnavailable
from replmon.core.record import ProbeRecord, ProbeStatus
from replmon.probe.housekeeping import replay_spool
from replmon.wiring import Deps
from tests.test_cli import cli


def rec(probe: str, route: str = "r", **kw: Any) -> ProbeRecord:
    return ProbeRecord(route=route, probe_id=probe, run_id="20261126T000000Z-abc", planned_at=1_795_000_000.0, size_bytes=1,
                       size_class="1B", trial=1, status=ProbeStatus.COMPLETED, put_end=1_795_000_001.0, latency_lo=1.0,
                       latency_hi=2.0, **kw)


class Counted:
    def __init__(self) -> None:
        self.counts: list[tuple[str, float]] = []

    def publish(self, record: ProbeRecord) -> None: ...

    def count(self, metric: str, value: float = 1, dimensions: Any = None) -> None:
        self.counts.append((metric, value))


def deps(spool: Any, store: Any = None) -> tuple[Deps, Counted]:
    metrics = Counted()
    return Deps(stores=lambda e: None, store=store or MemoryLatencyTable(), metrics=metrics, spool=spool), metrics  # type: ignore[arg-type,return-value]


def plant_bad_entries(folder: Path) -> None:
    """Four entries sorted before every real record ('0...' < '20261126...'): the issue's jams."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "00-dir.json").mkdir()  # a directory named *.json
    nan = {"route": "r", "probe_id": "n", "run_id": "x", "planned_at": 1, "size_bytes": 1, "size_class": "1B", "trial": 1,
           "status": "COMPLETED", "latency_hi": float("nan")}
    (folder / "01-nan.json").write_text(json.dumps(nan))  # json writes NaN, which json reads back
    (folder / "02-list.json").write_text("[1, 2]")  # JSON, not a record
    (folder / "03-bytes.json").write_bytes(b"\xff\xfe{")  # not UTF-8


def test_bad_entries_are_quarantined_and_every_record_behind_them_is_replayed(tmp_path: Path) -> None:
    spool = DirectorySpool(tmp_path / "spool")
    for p in ("a", "b", "c"):
        spool.spool(rec(p))
    plant_bad_entries(tmp_path / "spool" / "r")
    d, metrics = deps(spool)
    out = replay_spool(d)
    assert (out["replayed"], out["left"], len(out["quarantined"])) == (3, 0, 4)
    assert ("RecordQuarantined", 4) in metrics.counts and ("SpoolReplayed", 3) in metrics.counts
    assert spool.pending() == 0
    reasons = {q.entry: q.reason for q in spool.quarantine_entries()}
    assert set(reasons) == {"r/00-dir.json", "r/01-nan.json", "r/02-list.json", "r/03-bytes.json"}
    assert "folder" in reasons["r/00-dir.json"] and "latency_hi" in reasons["r/01-nan.json"]
    assert "list" in reasons["r/02-list.json"] and "UTF-8" in reasons["r/03-bytes.json"]
    assert replay_spool(d)["quarantined"] == []  # the next run meets none of them again


def test_a_record_the_store_refuses_is_quarantined_one_it_cannot_reach_stays(tmp_path: Path) -> None:
    class Refusing(MemoryLatencyTable):
        def __init__(self, code: str | None) -> None:
            super().__init__()
            self.code = code

        def transact(self, writes: Any, token: str | None = None) -> Any:
            if self.code is None:
                raise StoreUnavailable("replmon-latency: EndpointConnectionError")
            err = ClientError({"Error": {"Code": self.code, "Message": "Item size has exceeded the maximum allowed size"}},
                              "TransactWriteItems")
            raise StoreUnavailable(f"replmon-latency: {self.code}: {err}") from err

    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("a"))
    out = replay_spool(deps(spool, Refusing(None))[0])
    assert (out["left"], out["quarantined"], spool.pending()) == (1, [], 1)  # down: it waits
    out = replay_spool(deps(spool, Refusing("ValidationException"))[0])
    assert out["left"] == 0 and len(out["quarantined"]) == 1 and "the store refused it" in out["quarantined"][0]
    assert spool.pending() == 0 and len(spool.quarantine_entries()) == 1


def test_a_store_outage_ends_the_replay_with_every_record_left_spooled(tmp_path: Path) -> None:
    """The store down: the first record's write fails and the replay stops there, so the others are
    not even read (on SQS, each receive would count toward the redrive to quarantine)."""
    class Down(MemoryLatencyTable):
        writes = 0

        def transact(self, writes: Any, token: str | None = None) -> Any:
            Down.writes += 1
            raise StoreUnavailable("replmon-latency: EndpointConnectionError")

    spool = DirectorySpool(tmp_path / "spool")
    for name in ("a", "b", "c"):
        spool.spool(rec(name))
    out = replay_spool(deps(spool, Down())[0])
    assert (out["left"], out["replayed"], out["quarantined"], spool.pending(), Down.writes) == (1, 0, [], 3, 1)


@pytest.mark.parametrize("field", ["latency_hi", "latency_lo", "put_end", "bound_seconds", "planned_at"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_record_with_nan_or_an_infinity_is_refused_when_it_is_made(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: .* is not a finite number"):
        rec("p", **{field: value}) if field not in ("latency_hi", "latency_lo", "put_end", "planned_at") else \
            ProbeRecord(**{**rec("p").__dict__, field: value})


def test_the_spool_never_writes_nan(tmp_path: Path) -> None:
    r = rec("p")
    r.latency_hi = math.nan  # set after creation, bypassing the check: the spool still refuses to write it
    with pytest.raises(ValueError):
        DirectorySpool(tmp_path).spool(r)


def test_spool_list_retry_drop(tmp_path: Path) -> None:
    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("a"))
    plant_bad_entries(tmp_path / "spool" / "r")
    list(spool.drain(100))  # the good record is yielded (not acked: it waits); the four bad ones are quarantined
    flag = ["--spool-dir", str(tmp_path / "spool")]
    listed = cli("spool", "list", *flag, "--format", "json")
    doc = json.loads(listed.stdout)
    assert listed.returncode == 0 and len(doc["waiting"]) == 1 and len(doc["quarantined"]) == 4
    assert {q["entry"] for q in doc["quarantined"]} >= {"r/02-list.json"} and all(q["reason"] for q in doc["quarantined"])
    retried = cli("spool", "retry", "r/02-list.json", *flag)
    assert retried.returncode == 0 and "back in the spool" in retried.stderr
    assert (tmp_path / "spool" / "r" / "02-list.json").read_text() == "[1, 2]" and spool.pending() == 2
    unknown = cli("spool", "drop", "r/nope.json", *flag)
    assert unknown.returncode == 2 and "neither waiting nor quarantined" in unknown.stderr
    neither = cli("spool", "drop", *flag)
    assert neither.returncode == 2 and "ENTRY or --all" in neither.stderr
    dropped = cli("spool", "drop", "--all", *flag)
    assert dropped.returncode == 0 and spool.quarantine_entries() == []
    assert not any(p.name.endswith(".reason") for p in (tmp_path / "spool").rglob("*"))


def test_the_sqs_spool_quarantines_a_bad_message_with_its_reason_and_goes_on() -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        quarantine_url = sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"]
        spool = SqsSpool(spool_url, sqs, quarantine_url)
        sqs.send_message(QueueUrl=spool_url, MessageBody='{"latency_hi": NaN}')
        spool.spool(rec("a"))
        d, metrics = deps(spool)
        out = replay_spool(d)
        assert out["replayed"] == 1 and len(out["quarantined"]) == 1 and ("RecordQuarantined", 1) in metrics.counts
        [held] = sqs.receive_message(QueueUrl=quarantine_url, MessageAttributeNames=["All"])["Messages"]
        assert held["Body"] == '{"latency_hi": NaN}' and "missing field route" in held["MessageAttributes"]["reason"]["StringValue"]
        assert "Messages" not in sqs.receive_message(QueueUrl=spool_url)


def r_arn(getatt: dict[str, Any]) -> str:
    """The resource a ``Fn::GetAtt ... Arn`` names, in either of its forms."""
    v = getatt["Fn::GetAtt"]
    return str(v[0] if isinstance(v, list) else v.split(".")[0])


def test_the_deployed_spool_has_a_quarantine_the_housekeeping_role_can_write() -> None:
    """A message the Housekeeping function cannot handle is set aside: by the code (SendMessage to the
    quarantine queue) and, should the function itself fail on it, by SQS's redrive policy after
    maxReceiveCount receives. The quarantine keeps 14 days, the most SQS allows, longer than the spool's
    10: SQS counts a dead-lettered message's retention from its original enqueue time, so the
    dead-letter queue should keep longer than its source. The move must come before the spool's
    retention, or SQS deletes the message without a word: Housekeeping receives a message at most once
    a run, so maxReceiveCount runs at the slowest tick the template allows (ScheduleRateMinutes'
    MaxValue) must end well within it, and the quarantine must still hold the message a good while
    after, counted from its first enqueue. The runbook says the same count
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/setting-up-dead-letter-queue-retention.html,
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues)."""
    from tests.cfnutil import ACCOUNT, default_transformed, function_role_policies, resolver
    from tests.iam import simulate

    t = default_transformed()
    res = t["Resources"]
    spool, quarantine = res["RecordSpoolQueue"]["Properties"], res["RecordQuarantineQueue"]["Properties"]
    assert r_arn(spool["RedrivePolicy"]["deadLetterTargetArn"]) == "RecordQuarantineQueue"
    from replmon.core.defaults import DEFAULTS

    receives = int(spool["RedrivePolicy"]["maxReceiveCount"])
    slowest = float(t["Parameters"]["ScheduleRateMinutes"]["MaxValue"]) * 60
    moved_at = receives * slowest  # the latest a message Housekeeping keeps failing on is moved
    assert moved_at <= 0.8 * spool["MessageRetentionPeriod"], "the spool's retention would delete it before the move"
    assert quarantine["MessageRetentionPeriod"] - moved_at >= 5 * 86400, "the quarantine would keep it under 5 days"
    assert quarantine["SqsManagedSseEnabled"] is True and quarantine["MessageRetentionPeriod"] > spool["MessageRetentionPeriod"]
    assert quarantine["MessageRetentionPeriod"] <= 1_209_600  # SQS keeps 14 days at most
    causes = res["RecordQuarantineAlarm"]["Metadata"]["Runbook"]["Causes"]
    at_default = receives * DEFAULTS.schedule_rate_minutes
    assert f"in {receives} runs" in causes and f"{at_default // 60} h {at_default % 60} min at the default" in causes, causes
    r = resolver(t)
    policies = function_role_policies(t, "Housekeeping", r)
    queue = r.resolve({"Fn::GetAtt": ["RecordQuarantineQueue", "Arn"]})
    got = simulate([{"id": "send", "principal": f"arn:aws:iam::{ACCOUNT}:role/HousekeepingRole", "action": "sqs:SendMessage",
                     "resource": queue, "accountId": ACCOUNT, "context": {}, "identityPolicies": policies}])
    assert got["send"]["result"] == "Allowed"
    env = res["HousekeepingFunction"]["Properties"]["Environment"]["Variables"]
    assert env["REPLMON_SPOOL_QUARANTINE_URL"] == {"Ref": "RecordQuarantineQueue"}


def test_spool_list_retry_drop_on_a_deployed_stacks_queues(monkeypatch: pytest.MonkeyPatch) -> None:
    """`replmon spool --stack-name`: the stack's quarantine queue, each message with its reason."""
    import os

    import boto3
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        quarantine_url = sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"]
        monkeypatch.setattr("replmon.cli.spool.stack_outputs", lambda *a: {"RecordSpoolQueueUrl": spool_url,
                                                                            "RecordQuarantineQueueUrl": quarantine_url})
        spool = SqsSpool(spool_url, sqs, quarantine_url)
        for body in ('{"latency_hi": NaN}', "[1, 2]"):
            sqs.send_message(QueueUrl=spool_url, MessageBody=body)
        spool.spool(rec("a"))
        replay_spool(deps(spool, MemoryLatencyTable())[0])
        env = {**os.environ, "AWS_REGION": "us-east-1"}
        stack = ["--stack-name", "replmon"]
        listed = cli("spool", "list", *stack, "--format", "json", env=env)
        doc = json.loads(listed.stdout)
        assert listed.returncode == 0 and doc["waiting"] == 0 and len(doc["quarantined"]) == 2
        assert sorted(q["reason"].split(":")[0] for q in doc["quarantined"]) == ["not a record"] * 2
        first, second = (q["entry"] for q in doc["quarantined"])
        assert cli("spool", "retry", first, *stack, env=env).returncode == 0
        assert sqs.receive_message(QueueUrl=spool_url)["Messages"][0]["MessageId"] != first  # a new message, same body
        dropped = cli("spool", "drop", second, *stack, env=env)
        assert dropped.returncode == 0 and "deleted (not a record" in dropped.stderr
        assert json.loads(cli("spool", "list", *stack, "--format", "json", env=env).stdout)["quarantined"] == []
        gone = cli("spool", "drop", second, *stack, env=env)
        assert gone.returncode == 2 and "is not in the quarantine queue" in gone.stderr


@contextlib.contextmanager
def two_quarantined() -> Iterator[tuple[Any, str, str]]:
    """Under moto: a spool queue and its quarantine queue holding two records, ``[1]`` and ``[2]``:
    (the SQS client, the spool's URL, the quarantine's URL)."""
    import boto3
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        quarantine_url = sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"]
        for body in ("[1]", "[2]"):
            sqs.send_message(QueueUrl=quarantine_url, MessageBody=body)
        yield sqs, spool_url, quarantine_url


@pytest.mark.parametrize(("verb", "refused", "says", "then"), [
    ("drop", "DeleteMessage", "NOT removed from the quarantine queue", "drop"),
    ("retry", "SendMessage", "not sent back to the spool queue", "retry"),
    ("retry", "DeleteMessage", "sent back to the spool queue, but NOT removed from the quarantine queue", "drop"),
])
def test_one_entry_sqs_refuses_is_named_and_the_others_are_still_handled(monkeypatch: pytest.MonkeyPatch, verb: str, refused: str,
                                                                          says: str, then: str) -> None:
    """`spool drop|retry --all --stack-name`: SQS refuses the call for the first entry; that entry is
    named with what failed and what to do, and stays in quarantine, the other is handled, the exit
    is 3; the command it names handles the one left (after a retry whose delete failed: drop, since
    the record is already back in the spool queue; a second retry would send it twice)."""
    import os

    from replmon.adapters.spool import SqsQuarantine

    with two_quarantined() as (sqs, spool_url, quarantine_url):
        calls: list[str] = []

        def refuse_first(params: Any, **_: Any) -> None:
            calls.append(refused)
            if len(calls) == 1:
                raise ClientError({"Error": {"Code": "InternalError", "Message": "We encountered an internal error"}}, refused)

        sqs.meta.events.register(f"before-call.sqs.{refused}", refuse_first)
        monkeypatch.setattr("replmon.cli.spool._queues", lambda *a: SqsQuarantine(sqs, spool_url, quarantine_url))
        env = {**os.environ, "AWS_REGION": "us-east-1"}
        first = cli("spool", verb, "--all", "--stack-name", "replmon", env=env)
        assert first.returncode == 3, first.stderr
        failed = [line for line in first.stderr.splitlines() if says in line]
        handled = [line for line in first.stderr.splitlines() if "deleted (" in line or "back in the spool queue" in line]
        advice = f"replmon spool drop {failed[0].split(':')[0]}" if then != verb else "run the command again"
        assert len(failed) == 1 and "InternalError" in failed[0] and advice in failed[0] and len(handled) == 1, first.stderr
        sqs.meta.events.unregister(f"before-call.sqs.{refused}", refuse_first)
        [left] = [q.message_id for q in SqsQuarantine(sqs, spool_url, quarantine_url).entries()]
        assert failed[0].startswith(left)
        again = cli("spool", then, left, "--stack-name", "replmon", env=env)
        assert again.returncode == 0 and SqsQuarantine(sqs, spool_url, quarantine_url).entries() == []
        if verb == "retry":  # each record once in the spool queue
            assert sorted(m["Body"] for m in sqs.receive_message(QueueUrl=spool_url, MaxNumberOfMessages=10)["Messages"]) == ["[1]", "[2]"]


def test_retry_and_drop_hide_what_they_read_within_sqs_limits_and_show_the_rest_at_once() -> None:
    """ChangeMessageVisibility/ReceiveMessage take a VisibilityTimeout of 0 to 43,200 s, and 0 makes the
    message receivable again at once (SQS API reference, ChangeMessageVisibility:
    https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_ChangeMessageVisibility.html).
    `spool drop ID` reads every quarantined message hidden for HANDLE_HIDE_S, deletes the one named,
    and gives the other back with 0: it is listed again at once."""
    from replmon.adapters.spool import HANDLE_HIDE_S, SqsQuarantine

    assert 0 < HANDLE_HIDE_S <= 43_200
    with two_quarantined() as (sqs, spool_url, quarantine_url):
        hides: list[int] = []
        sqs.meta.events.register("provide-client-params.sqs.ReceiveMessage", lambda params, **_: hides.append(params["VisibilityTimeout"]))
        q = SqsQuarantine(sqs, spool_url, quarantine_url)
        first, other = (e.message_id for e in q.entries())
        hides.clear()
        done, failed = q.handle({first}, retry=False)
        assert [d.message_id for d in done] == [first] and failed == [] and set(hides) == {HANDLE_HIDE_S}
        assert [e.message_id for e in q.entries()] == [other]


def test_a_route_folder_that_cannot_be_listed_is_named_and_the_others_replayed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("a", route="locked"))
    spool.spool(rec("b", route="open"))
    real = Path.iterdir

    def iterdir(self: Path) -> Any:
        if self.name == "locked":
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    out = replay_spool(deps(spool)[0])
    assert out["replayed"] == 1 and out["quarantined"] == [f"locked/: cannot be listed (EACCES (Permission denied): "
                                                             f"{tmp_path / 'spool' / 'locked'}); its records wait there"]


def test_a_transaction_cancelled_for_what_the_record_holds_is_quarantined_throttling_is_not(tmp_path: Path) -> None:
    """TransactWriteItems reports a record the store can never hold as TransactionCanceledException
    with a ValidationError reason ("an item size becomes too large (larger than 400 KB) ... or a
    similar validation error", "a user error, such as an invalid data format"); a throttled or
    conflicting transaction is cancelled too, but for now only
    (https://docs.aws.amazon.com/botocore/latest/reference/services/dynamodb/client/exceptions/TransactionCanceledException.html).
    The first is quarantined and the replay goes on; the second waits for the next run."""
    class Cancelled(MemoryLatencyTable):
        def __init__(self, codes: dict[str, str]) -> None:
            super().__init__()
            self.codes = codes

        def transact(self, writes: Any, token: str | None = None) -> Any:
            probe = str(writes[0].item["probe_id"])
            if probe in self.codes:
                err = ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
                                   "CancellationReasons": [{"Code": self.codes[probe]}, {"Code": "None"}]}, "TransactWriteItems")
                raise StoreUnavailable(f"replmon-latency: transaction cancelled: {self.codes[probe]}, None") from err
            return super().transact(writes, token)

    spool = DirectorySpool(tmp_path / "spool")
    for p in ("a", "b", "c"):
        spool.spool(rec(p))
    out = replay_spool(deps(spool, Cancelled({rec("a").probe_id: "ValidationError"}))[0])
    assert out["replayed"] == 2 and len(out["quarantined"]) == 1 and "ValidationError" in out["quarantined"][0]
    spool.spool(rec("d"))
    spool.spool(rec("e"))
    out = replay_spool(deps(spool, Cancelled({rec("d").probe_id: "ThrottlingError"}))[0])
    assert (out["replayed"], out["left"], out["quarantined"], spool.pending()) == (0, 1, [], 2)


def test_a_transaction_cancelled_for_the_shared_hour_item_keeps_the_record_and_names_the_item(tmp_path: Path) -> None:
    """The cancellation reasons are per action, in the order of the actions
    (https://docs.aws.amazon.com/botocore/latest/reference/services/dynamodb/client/exceptions/TransactionCanceledException.html:
    "an item size becomes too large (larger than 400 KB) ... because of changes made by the
    transaction"). A record's transaction is its own put (action 0), then its hour item's counters: a
    ValidationError at the hour item (grown past 400 KB) says nothing against the record, so it is
    not quarantined - kept in the spool for replay, the hour item named - and the other hours' records replay."""
    from replmon.core.partitions import hour_sort_key, roll_partition
    from replmon.signals.windows import floor_hour, record_time

    class HourFull(MemoryLatencyTable):
        def transact(self, writes: Any, token: str | None = None) -> Any:
            if str(writes[0].item["probe_id"]).startswith("full"):
                err = ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled"},
                                   "CancellationReasons": [{"Code": "None"}, {"Code": "ValidationError",
                                                                              "Message": "Item size has exceeded the maximum allowed size"}]},
                                  "TransactWriteItems")
                raise StoreUnavailable("replmon-latency: transaction cancelled: None, ValidationError") from err
            return super().transact(writes, token)

    spool = DirectorySpool(tmp_path / "spool")
    for p in ("full-a", "full-b", "ok"):
        spool.spool(rec(p))
    out = replay_spool(deps(spool, HourFull())[0])
    assert out["replayed"] == 1 and out["quarantined"] == [] and spool.quarantine_entries() == []
    hour_item = f"{roll_partition('r')} {hour_sort_key(floor_hour(record_time(rec('ok'))))}"
    assert len(out["kept"]) == 2 and all(hour_item in line and "kept in the spool" in line for line in out["kept"]), out["kept"]
    assert spool.pending() == 2  # both wait for the next run
    assert replay_spool(deps(spool)[0])["replayed"] == 2  # the hour item trimmed: replayed


def test_entries_that_stay_where_they_are_do_not_count_toward_the_replay_limit(tmp_path: Path) -> None:
    """201 bad entries that cannot be moved to quarantine (its folder cannot be made) sort before the
    one good record: they stay, named each run, but do not fill the run's REPLAY_LIMIT (200), so the
    record behind them is replayed; an entry stored but not removed does not count either."""
    from replmon.probe.housekeeping import REPLAY_LIMIT

    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("good"))
    folder = tmp_path / "spool" / "r"
    for i in range(REPLAY_LIMIT + 1):
        (folder / f"00-{i:03d}.json").write_text("[1, 2]")
    (tmp_path / "spool" / "_quarantine").write_text("a file where the quarantine folder should be")
    out = replay_spool(deps(spool)[0])
    assert out["replayed"] == 1 and len(out["quarantined"]) == REPLAY_LIMIT + 1
    assert all("NOT moved to quarantine" in line for line in out["quarantined"])
    assert spool.pending() == REPLAY_LIMIT + 1

    class Unremovable(DirectorySpool):
        def ack(self, handle: str) -> None:
            self.quarantined.append(f"{handle}: stored, but NOT removed from the spool")

    stuck = Unremovable(tmp_path / "other")
    for p in ("a", "b", "c"):
        stuck.spool(rec(p))
    assert [r.probe_id for _, r in stuck.drain(1)] == ["a", "b", "c"]  # none removed: none counted


def test_an_entry_that_fails_in_a_way_no_one_foresaw_is_quarantined_not_met_again_every_run(tmp_path: Path) -> None:
    class Odd(MemoryLatencyTable):
        def transact(self, writes: Any, token: str | None = None) -> Any:
            if writes[0].item["probe_id"] == "a":
                raise AssertionError("a record's transaction can only be cancelled by its own put")
            return super().transact(writes, token)

    spool = DirectorySpool(tmp_path / "spool")
    for p in ("a", "b"):
        spool.spool(rec(p))
    d, metrics = deps(spool, Odd())
    out = replay_spool(d)
    assert out["replayed"] == 1 and ("RecordQuarantined", 1) in metrics.counts
    [line] = out["quarantined"]
    assert line.startswith("r/") and line.endswith(": not storable: AssertionError: a record's transaction can only be cancelled by its own put")
    assert [q.entry.split("/")[0] for q in spool.quarantine_entries()] == ["r"] and spool.pending() == 0


def test_a_stored_record_that_cannot_be_removed_from_the_spool_is_named_and_the_rest_replayed(tmp_path: Path,
                                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    spool = DirectorySpool(tmp_path / "spool")
    for p in ("a", "b"):
        spool.spool(rec(p))
    first = spool.entries()[0]
    real = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self == first:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        real(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    out = replay_spool(deps(spool)[0])
    assert out["replayed"] == 2 and spool.entries() == [first]
    assert len(out["quarantined"]) == 1 and "NOT removed from the spool (EACCES" in out["quarantined"][0]


def test_a_quarantine_queue_that_refuses_a_message_is_named_and_the_replay_goes_on() -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        gone = sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"]
        sqs.delete_queue(QueueUrl=gone)  # the quarantine queue is gone (or its policy denies the send)
        spool = SqsSpool(spool_url, sqs, gone)
        sqs.send_message(QueueUrl=spool_url, MessageBody="[1, 2]")
        spool.spool(rec("a"))
        out = replay_spool(deps(spool)[0])
        assert out["replayed"] == 1 and len(out["quarantined"]) == 1
        assert "not a record" in out["quarantined"][0] and "NOT moved to the quarantine queue" in out["quarantined"][0]


def test_the_sqs_spool_names_a_quarantined_message_by_its_id_in_the_quarantine_queue() -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        quarantine_url = sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"]
        sqs.send_message(QueueUrl=spool_url, MessageBody="[1, 2]")
        out = replay_spool(deps(SqsSpool(spool_url, sqs, quarantine_url))[0])
        [held] = sqs.receive_message(QueueUrl=quarantine_url)["Messages"]
        assert out["quarantined"][0].startswith(f"{held['MessageId']}: not a record")


def test_a_run_replays_past_the_reported_jams_and_says_so(env: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reported failure, through a whole local run (the real ASL's Housekeeping step): a folder
    named `*.json` and a NaN record sorted before an earlier run's good records. Every good record is
    stored, each bad entry is quarantined with its reason, and the run's lines say so (the CLI
    exits 5 on them: cli/probe.py, cli/labcmd.py)."""
    import dataclasses

    from replmon.cli.runend import spool_faults
    from replmon.local.execution import run_request
    from tests.fakes import Scenario
    from tests.test_lease_end import on_test_clock, request

    on_test_clock(env, monkeypatch)
    env.fake.default = Scenario(latency=2.0)
    spool = DirectorySpool(tmp_path / "spool")
    earlier = [rec(p, route="primary") for p in ("a", "b", "c")]
    for r in earlier:
        spool.spool(r)
    plant_bad_entries(tmp_path / "spool" / "primary")
    run = run_request(request(), dataclasses.replace(env.deps, spool=spool))
    assert run.execution.status == "SUCCEEDED", run.execution.cause
    stored = {r.probe_id for r in env.store.query("primary", 0, 4e9)}
    assert {"a", "b", "c"} <= stored and spool.pending() == 0
    assert len(spool.quarantine_entries()) == 4
    lines = spool_faults(run.execution, tmp_path / "spool")
    assert len(lines) == 5 and lines[-1].startswith("spool: 4 entries quarantined in ") and "(RecordQuarantined)" in lines[-1]
    assert any("primary/00-dir.json" in line and "folder" in line for line in lines)
    assert any("primary/01-nan.json" in line and "latency_hi" in line for line in lines)
    assert ("RecordQuarantined", 4, {}) in env.counted


def test_files_an_earlier_replmon_set_aside_as_unreadable_are_taken_up_again(tmp_path: Path) -> None:
    """replmon before the quarantine renamed a file that was no record to ``*.json.unreadable`` and
    said nothing: replay now stores such a file that is a record and quarantines the rest, with a reason."""
    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("a"))
    [good] = spool.entries()
    good.rename(good.with_name(good.name + ".unreadable"))
    (tmp_path / "spool" / "r" / "junk.json.unreadable").write_text("[1, 2]")
    d, _ = deps(spool)
    out = replay_spool(d)
    assert out["replayed"] == 1 and spool.pending() == 0
    [q] = spool.quarantine_entries()
    assert q.entry == "r/junk.json.unreadable" and q.reason.endswith("(set aside as *.unreadable by an earlier replmon)")


def test_spool_drop_and_retry_handle_a_waiting_record_named_one_by_one(tmp_path: Path) -> None:
    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("a"))
    spool.spool(rec("b"))
    first, second = (f"r/{p.name}" for p in spool.entries())
    flag = ["--spool-dir", str(tmp_path / "spool")]
    retried = cli("spool", "retry", first, *flag)
    assert retried.returncode == 0 and "already waiting in the spool" in retried.stderr and spool.pending() == 2
    assert cli("spool", "drop", "--all", *flag).returncode == 0 and spool.pending() == 2  # --all: the quarantine only
    dropped = cli("spool", "drop", first, *flag)
    assert dropped.returncode == 0 and "its record is given up" in dropped.stderr
    assert [f"r/{p.name}" for p in spool.entries()] == [second]


def test_spool_drop_and_retry_go_on_past_an_entry_the_filesystem_refuses_and_exit_3(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry that cannot be deleted or put back (a read-only folder) is not a wrong flag (exit 2,
    cli/exitcodes.py): it is named, every other entry named is still handled, and the command exits 3."""
    import errno

    spool = DirectorySpool(tmp_path / "spool")
    plant_bad_entries(tmp_path / "spool" / "r")
    list(spool.drain(100))  # the four bad entries quarantined
    names = sorted(q.entry for q in spool.quarantine_entries())
    assert len(names) == 4
    flag = ["--spool-dir", str(tmp_path / "spool")]
    real_drop, real_retry = DirectorySpool.drop, DirectorySpool.retry

    def drop(self: DirectorySpool, q: Any) -> None:
        if q.entry == names[0]:
            raise OSError(errno.EROFS, "Read-only file system")
        real_drop(self, q)

    def retry(self: DirectorySpool, q: Any) -> Path:
        if q.entry == names[1]:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_retry(self, q)

    monkeypatch.setattr(DirectorySpool, "retry", retry)
    retried = cli("spool", "retry", names[1], names[2], *flag)
    assert retried.returncode == 3, retried.stderr
    assert f"{names[1]}: not put back" in retried.stderr and f"{names[2]}: back in the spool" in retried.stderr
    monkeypatch.setattr(DirectorySpool, "drop", drop)
    dropped = cli("spool", "drop", "--all", *flag)
    assert dropped.returncode == 3, dropped.stderr
    assert f"{names[0]}: not deleted: Read-only file system" in dropped.stderr and "1 entry not deleted" in dropped.stderr
    assert [q.entry for q in spool.quarantine_entries()] == [names[0]]  # the others deleted all the same


def test_a_store_outage_adds_a_receive_to_one_spooled_message_per_run() -> None:
    """Every message received counts toward the spool queue's maxReceiveCount (its redrive policy moves
    it to the quarantine after that many): replay receives one message first, so a run that meets the
    store down leaves the others' counts alone
    (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues)."""
    import boto3
    from moto import mock_aws

    class Down(MemoryLatencyTable):
        def transact(self, writes: Any, token: str | None = None) -> Any:
            raise StoreUnavailable("replmon-latency: ServiceUnavailable")

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        spool = SqsSpool(spool_url, sqs, sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"])
        for p in "abcde":
            spool.spool(rec(p))
        out = replay_spool(deps(spool, Down())[0])
        assert out["left"] == 1 and out["replayed"] == 0
        got = sqs.receive_message(QueueUrl=spool_url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"],
                                  VisibilityTimeout=0).get("Messages", [])
        # the one replay received is hidden for its visibility timeout; the other four were never received before
        assert [int(m["Attributes"]["ApproximateReceiveCount"]) for m in got] == [1, 1, 1, 1]


def test_a_message_copied_to_quarantine_but_not_deleted_from_the_spool_is_one_entry_not_a_failed_move() -> None:
    """SendMessage to the quarantine queue succeeds, DeleteMessage on the spool queue fails: the line
    says it is in quarantine and not removed (no "NOT moved"); the next run copies it again under the
    same spool message id, and `spool list`/`drop` see one entry and remove every copy."""
    import boto3
    from moto import mock_aws

    from replmon.adapters.spool import SqsQuarantine

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        spool_url = sqs.create_queue(QueueName="spool")["QueueUrl"]
        quarantine_url = sqs.create_queue(QueueName="spool-quarantine")["QueueUrl"]
        sqs.send_message(QueueUrl=spool_url, MessageBody="[1, 2]")

        def refuse_delete(params: Any, **_: Any) -> None:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "We encountered an internal error"}}, "DeleteMessage")

        sqs.meta.events.register("before-call.sqs.DeleteMessage", refuse_delete)
        earlier = SqsSpool(spool_url, sqs, quarantine_url)
        first = replay_spool(deps(earlier)[0])
        sqs.meta.events.unregister("before-call.sqs.DeleteMessage", refuse_delete)
        [line] = first["quarantined"]
        assert "NOT moved" not in line and "in the quarantine queue, but NOT removed from the spool queue" in line, line
        [(receipt, spooled_id)] = earlier._ids.items()  # it comes back after its visibility timeout: now, here
        sqs.change_message_visibility(QueueUrl=spool_url, ReceiptHandle=receipt, VisibilityTimeout=0)
        again = replay_spool(deps(SqsSpool(spool_url, sqs, quarantine_url))[0])
        assert len(again["quarantined"]) == 1 and "NOT" not in again["quarantined"][0]
        assert "Messages" not in sqs.receive_message(QueueUrl=spool_url)
        q = SqsQuarantine(sqs, spool_url, quarantine_url)
        [entry] = q.entries()  # two copies, one entry
        assert entry.spool_id == spooled_id and line.startswith(entry.message_id)
        done, failed = q.handle({entry.message_id}, retry=False)
        assert [d.message_id for d in done] == [entry.message_id] and failed == []
        assert "Messages" not in sqs.receive_message(QueueUrl=quarantine_url, WaitTimeSeconds=0)


def test_spool_list_names_a_waiting_entry_that_is_not_a_record_before_any_replay(tmp_path: Path) -> None:
    """What waits is shown as it is: a record waits for the store; a folder named *.json or a JSON list
    says now why the next replay will quarantine it, and how to delete it."""
    spool = DirectorySpool(tmp_path / "spool")
    spool.spool(rec("a"))
    plant_bad_entries(tmp_path / "spool" / "r")
    doc = json.loads(cli("spool", "list", "--spool-dir", str(tmp_path / "spool"), "--format", "json").stdout)
    reasons = {w["entry"]: w["reason"] for w in doc["waiting"]}
    assert reasons.pop("r/02-list.json").startswith("not a record: a JSON list") and len(reasons) == 4
    records = [r for r in reasons.values() if r.startswith("the store could not take it")]
    assert len(records) == 1 and all("the next replay quarantines it" in r for r in reasons.values() if r not in records)
